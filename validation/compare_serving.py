"""Compare `sim serve` with the real serving loop measured on the H200.

    python validation/compare_serving.py [--measured validation/measurements/serving] [--chip h200_sxm]

For each arrival rate the loop ran (validation/gpu/serving_loop.py), the same requests
(arrival time, prompt and output tokens) are replayed through ``serve`` with the loop's
policy (chunked prefill, 512-token budget, decodes first, at most 128 sequences), and
TTFT / TPOT p50 and p99 are compared.  Every measured iteration is also predicted from its
own composition (prompt chunks with their cached tokens, decoding sequences and their
context) with the serving latency model, decode-only (CUDA-graph) and mixed (eager)
iterations separately.  Writes validation/results/serving_h200.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: the real loop's policy (validation/gpu/serving_loop.py defaults)
LOOP = {"scheduler": "chunked_prefill", "token_budget": 512, "max_batch": 128}


def _chunks(text) -> list[tuple[int, int]]:
    if not isinstance(text, str) or not text:
        return []
    return [tuple(int(x) for x in c.split("@")) for c in text.split(";")]


def predict_iterations(lm, its: pd.DataFrame) -> np.ndarray:
    out = np.empty(len(its))
    for i, r in enumerate(its.itertuples(index=False)):
        out[i] = lm.iteration(_chunks(r.chunks), int(r.decode_seqs), int(r.decode_context_tokens)).seconds
    return out


def compare(measured: Path, chip_name: str = "h200_sxm", model: str = "llama3-8b") -> dict:
    from sim.apps.serving import Request, serve
    from sim.apps.serving.latency import LatencyModel
    from sim.spec.registry import load_chip
    from sim.model.workload.models import load_model_spec

    chip = load_chip(chip_name)
    req = pd.read_csv(measured / "requests.csv")
    its = pd.read_csv(measured / "iterations.csv")
    env = json.loads((measured / "env.json").read_text())
    lm = LatencyModel(chip, load_model_spec(model))
    out = {"chip": chip_name, "model": model, "measured_on": env.get("gpu"), "torch": env.get("torch"),
           "decode_attention": env.get("decode_attention"), "policy": LOOP, "rates": {}}
    its = its.assign(measured_s=its["end_s"] - its["start_s"])
    its["predicted_s"] = predict_iterations(lm, its)
    lm.flush()
    its["rel_error"] = its["predicted_s"] / its["measured_s"] - 1.0
    for kind, sel in (("decode_only_graph", its["graph"] == 1), ("mixed_eager", its["graph"] == 0)):
        e = its.loc[sel, "rel_error"]
        out[f"iterations_{kind}"] = {
            "count": int(sel.sum()), "median_rel_error": float(e.median()),
            "p10_rel_error": float(e.quantile(0.1)), "p90_rel_error": float(e.quantile(0.9)),
            "measured_median_s": float(its.loc[sel, "measured_s"].median()),
            "predicted_median_s": float(its.loc[sel, "predicted_s"].median())}
    g = its[its["graph"] == 1]
    buckets = pd.cut(g["decode_seqs"], [0, 1, 4, 8, 16, 32, 64, 128])
    out["decode_only_by_batch"] = [
        {"batch": str(k), "count": int(len(v)), "measured_median_s": float(v["measured_s"].median()),
         "predicted_median_s": float(v["predicted_s"].median()),
         "median_rel_error": float(v["rel_error"].median())}
        for k, v in g.groupby(buckets, observed=True)]
    for rate, rq in req.groupby("rate"):
        rq = rq.sort_values("arrival_s")
        reqs = [Request(i, float(r.arrival_s), int(r.prompt_tokens), int(r.output_tokens))
                for i, r in enumerate(rq.itertuples(index=False))]
        res = serve(chip, model, reqs, **LOOP)
        s = res.summary
        fin = rq[rq["status"] == "finished"]
        mi = its[its["rate"] == rate]
        row = {"requests": len(rq), "measured_finished": int(len(fin)),
               # the policy side: how many iterations, how full, how often prompts were chunked in
               "iterations_measured": int(len(mi)), "iterations_sim": int(len(res.iterations)),
               "mean_decode_seqs_measured": float(mi["decode_seqs"].mean()),
               "mean_decode_seqs_sim": float(res.iterations["decode_seqs"].mean()),
               "mixed_share_measured": float((mi["prefill_tokens"] > 0).mean()),
               "mixed_share_sim": float((res.iterations["prefill_tokens"] > 0).mean())}
        for m in ("ttft", "tpot"):
            for p in (50, 99):
                meas = float(np.nanpercentile(fin[f"{m}_s"], p))
                sim = s[f"{m}_p{p}_s"]
                row[f"{m}_p{p}_measured_s"] = meas
                row[f"{m}_p{p}_sim_s"] = sim
                row[f"{m}_p{p}_rel_error"] = sim / meas - 1.0
        out["rates"][str(rate)] = row
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", default=str(ROOT / "validation" / "measurements" / "serving"))
    ap.add_argument("--chip", default="h200_sxm")
    ap.add_argument("--out", default=str(ROOT / "validation" / "results" / "serving_h200.json"))
    args = ap.parse_args(argv)
    res = compare(Path(args.measured), args.chip)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    print(json.dumps(res, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
