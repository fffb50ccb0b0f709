"""Error of the serving latency model's grid interpolation against exact iterations.

    python validation/serving_interpolation.py [--chip h200_sxm] [--model llama3-8b] [--cases 24] [--seed 0]

Draws random mixed batches (1-128 decoding sequences at a shared context of 16-2,048 tokens,
0-3 prompt chunks of 16-1,024 tokens behind 0-1,024 cached ones), costs each with
:meth:`LatencyModel.iteration` (grid + interpolation) and with :meth:`LatencyModel.exact`
(``build_iteration`` + every op simulated), and writes the relative errors to
validation/results/serving_interpolation_<chip>_<model>.json.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cases(n: int, seed: int, max_batch: int = 128):
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        b = int(rng.integers(0, max_batch + 1)) if rng.random() < 0.8 else 0
        ctx = int(np.exp(rng.uniform(np.log(16), np.log(2048))))
        k = int(rng.integers(0, 4)) if b else int(rng.integers(1, 4))
        chunks = [(int(np.exp(rng.uniform(np.log(16), np.log(1024)))), int(rng.choice([0, 0, int(rng.integers(1, 1024))])))
                  for _ in range(k)]
        if b == 0 and not chunks:
            b = 1
        out.append((chunks, b, ctx))
    return out


def measure(chip_name: str, model_name: str, n: int, seed: int, cache_dir=None) -> dict:
    from sim.apps.serving.latency import LatencyModel
    from sim.spec.registry import load_chip
    from sim.model.workload.models import load_model_spec

    chip = load_chip(chip_name)
    lm = LatencyModel(chip, load_model_spec(model_name), cache_dir=cache_dir)
    rows = []
    for chunks, b, ctx in cases(n, seed):
        t = time.perf_counter()
        a = lm.iteration(chunks, b, b * ctx)
        e = lm.exact(chunks, b, ctx)
        rows.append({"prefill": chunks, "decode_seqs": b, "decode_context": ctx, "interpolated_s": a.seconds,
                     "exact_s": e.seconds, "rel_error": a.seconds / e.seconds - 1.0,
                     "energy_rel_error": a.energy_j / e.energy_j - 1.0 if e.energy_j else 0.0,
                     "wall_s": time.perf_counter() - t})
    lm.flush()
    err = np.array([abs(r["rel_error"]) for r in rows])
    return {"chip": chip_name, "model": model_name, "cases": rows, "max_abs_rel_error": float(err.max()),
            "mean_abs_rel_error": float(err.mean()), "p90_abs_rel_error": float(np.percentile(err, 90))}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="h200_sxm")
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--cases", type=int, default=24)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    res = measure(args.chip, args.model, args.cases, args.seed)
    out = ROOT / "validation" / "results" / f"serving_interpolation_{args.chip}_{args.model}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps({k: v for k, v in res.items() if k != "cases"}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
