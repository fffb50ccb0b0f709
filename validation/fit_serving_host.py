#!/usr/bin/env python3
"""The eager host rule of stacks/eager_pytorch.yaml from the drift-cancelled microbenchmark
(validation/gpu/micro_serving_host_calls.py -> validation/measurements/serving/run3/host/).

Each composition's host time (median of its rounds, every round a shuffled pass over all
compositions, so each sees the same host) is fitted by least squares as

    host = kernels x per_kernel + prefill calls x per_call + masked calls x per_masked_call
           + decode calls x per_decode_call

where a *call* is one attention call of one layer: a prompt chunk's SDPA call (``masked``
when tokens are cached before the chunk: SDPA with a ``causal_lower_right`` bias, whose
Python dispatch costs more), or the decoding sequences' attention (the loop's Triton
launcher, its scratch allocations and the cache writes' advanced indexing).  Prints the
four numbers in ns (``host:`` block keys) and each composition's residual.  CALIBRATION:
a fit of host time on one lease's host; another lease's host is up to ~20 % faster or
slower (validation/measurements/README.md).

    python validation/fit_serving_host.py [--dir validation/measurements/serving/run3/host]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DIR = ROOT / "validation" / "measurements" / "serving" / "run3" / "host"
LAYERS = 32   # the loop's model (Llama-3-8B shapes): one attention call per layer
KEYS = ("eager_ns_per_kernel", "eager_ns_per_attention_call", "eager_ns_per_masked_attention_call",
        "eager_ns_per_decode_attention_call")


def design(directory: Path) -> pd.DataFrame:
    """One row per composition: its regressors and its median host time (s)."""
    rows = pd.read_csv(directory / "micro_serving_host_calls.csv")
    meta = json.loads((directory / "micro_serving_host_calls_env.json").read_text())["compositions"]
    med = rows.groupby("label")["host_s"].median()
    out = []
    for label, m in meta.items():
        chunks = [c for c in str(m["chunks"]).split(";") if c]
        masked = sum(1 for c in chunks if int(c.split("@")[1]) > 0)
        out.append({"label": label, "kernels": m["kernels"], "calls": len(chunks) * LAYERS,
                    "masked": masked * LAYERS, "decode": LAYERS if m["decode_seqs"] else 0,
                    "host_s": float(med[label])})
    return pd.DataFrame(out)


def fit(directory: Path = DEFAULT_DIR) -> tuple[dict[str, float], pd.DataFrame]:
    d = design(directory)
    X = d[["kernels", "calls", "masked", "decode"]].to_numpy(float)
    coef, *_ = np.linalg.lstsq(X, d["host_s"].to_numpy(), rcond=None)
    d["fit_s"] = X @ coef
    return {k: float(c * 1e9) for k, c in zip(KEYS, coef)}, d


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", type=Path, default=DEFAULT_DIR)
    args = ap.parse_args(argv)
    params, d = fit(args.dir)
    for k, v in params.items():
        print(f"{k}: {v:.0f}")
    for r in d.itertuples(index=False):
        print(f"  {r.label:16s} {r.kernels:5d} kernels  measured {r.host_s * 1e3:6.2f} ms  "
              f"fit {r.fit_s * 1e3:6.2f} ms ({r.fit_s / r.host_s - 1:+.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
