#!/usr/bin/env python3
"""Where the time of a whole-model step goes: measured kernels against predicted ops, by class.

    .venv/bin/python validation/results/model_breakdown.py [CASES.csv ...] --out FILE.csv

For every measured ``model`` case (validation/measurements/h200_models_{dev,holdout}.csv) the
measured side comes from the kernel profile of one CUDA-graph replay
(h200_models_stats.csv, column kernel_breakdown: device time per kernel name) and the
predicted side from the op list ``sim validate`` prices (sim.apps.validation.predict_model, the
``sim run`` path).  Both are split into the same classes:

    gemm       weight and LM-head GEMMs (nvjet / cutlass / xmma / tinygemm / int8pack kernels,
               cuBLASLt's split-K reduction); predicted: Gemm ops
    attention  cuDNN SDPA kernels and its split-KV combine; predicted: Attention ops
    norm       RMSNorm / LayerNorm kernels; predicted: rmsnorm / layernorm VectorOps
    other      every other kernel: RoPE's elementwise kernels (mul, neg, cat, add), residual adds,
               SiLU and multiply, KV-cache copies, attention-output copies, MoE gathers /
               index_add, fp8 casts, memsets; predicted: every other VectorOp and Copy
    gap        measured only: step time minus the summed kernel time (the GPU idle between the
               graph's kernels)

Times in ms.  The predicted classes include the chip's per-kernel launch overhead as
simulate_op charges it; the measured kernel times do not (that is in the gap).
"""
from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from sim.spec.registry import load_chip  # noqa: E402
from sim.apps.validation import predict_model, read_cases  # noqa: E402

CLASSES = ("gemm", "attention", "norm", "other")
_GEMM = re.compile(r"nvjet|cutlass|xmma_gemm|gemm|splitKreduce|tinygemm|int4|int8|_mm_|Gemm|gemv", re.I)
_ATTN = re.compile(r"sdpa|fmha|flash|lean_reduction|attention", re.I)
_NORM = re.compile(r"layer_norm|rms_norm|RowwiseMoments|LayerNorm", re.I)


def kernel_class(name: str) -> str:
    if _ATTN.search(name):
        return "attention"
    if _NORM.search(name):
        return "norm"
    if _GEMM.search(name) and "elementwise" not in name:
        return "gemm"
    return "other"


def op_class(op: dict) -> str:
    if op["kind"] == "gemm":
        return "gemm"
    if op["kind"] == "attention":
        return "attention"
    if op["kind"] == "vector" and op["op"].split(".")[-1] in ("attn_norm", "mlp_norm", "final_norm"):
        return "norm"
    return "other"


def case_key(c) -> tuple:
    v = c.values
    return (c.attrs["model"], int(v.get("num_layers", 0)), c.attrs["phase"], c.dtype, c.attrs["weight_dtype"],
            int(v["batch"]), int(v.get("prompt_len", 0) or 0), int(v.get("context_len", 0) or 0),
            int(v.get("decode_seqs", 0) or 0), int(v.get("decode_ctx", 0) or 0))


def stats_key(r) -> tuple:
    z = lambda x: 0 if pd.isna(x) else int(x)  # noqa: E731
    return (r.model, z(r.num_layers), r.phase, "fp8" if r.weight_dtype == "fp8" else "bf16", r.weight_dtype,
            z(r.batch), z(r.prompt_len), z(r.context_len), z(r.decode_seqs), z(r.decode_ctx))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("cases", nargs="*", default=[str(ROOT / "validation/measurements/h200_models_dev.csv"),
                                                  str(ROOT / "validation/measurements/h200_models_holdout.csv")])
    ap.add_argument("--stats", default=str(ROOT / "validation/measurements/h200_models_stats.csv"))
    ap.add_argument("--chip", default="h200_sxm")
    ap.add_argument("--out", default=str(ROOT / "validation/results/h200_models_breakdown.csv"))
    ap.add_argument("--every", type=int, default=1, help="only every N-th case of each file (a quicker look)")
    args = ap.parse_args(argv)
    chip = load_chip(args.chip)
    st = pd.read_csv(args.stats)
    st = st[st.status == "ok"]
    by_key = {stats_key(r): r for r in st.itertuples()}
    rows = []
    for path in args.cases:
        split = "holdout" if "holdout" in Path(path).name else "dev"
        for i, c in enumerate(read_cases(path)):
            if i % args.every:
                continue
            r = by_key.get(case_key(c))
            row = {"split": split, "line": c.line, "model": c.attrs["model"], "phase": c.attrs["phase"],
                   "weight_dtype": c.attrs["weight_dtype"], "batch": int(c.values["batch"]),
                   "prompt_len": int(c.values.get("prompt_len", 0) or 0),
                   "context_len": int(c.values.get("context_len", 0) or 0),
                   "decode_seqs": int(c.values.get("decode_seqs", 0) or 0),
                   "decode_ctx": int(c.values.get("decode_ctx", 0) or 0), "measured_ms": c.measured_ms}
            try:
                p = predict_model(chip, c, with_ops=True)
            except Exception as exc:  # noqa: BLE001
                row["error"] = str(exc)
                rows.append(row)
                continue
            row["predicted_ms"] = p["predicted_ms"]
            pred = {k: 0.0 for k in CLASSES}
            for op in p["ops"]:
                pred[op_class(op)] += op["total_seconds"] * 1e3
            meas = {k: 0.0 for k in CLASSES}
            if r is not None and isinstance(r.kernel_breakdown, str) and r.kernel_breakdown.startswith("{"):
                for name, (_n, us) in json.loads(r.kernel_breakdown).items():
                    meas[kernel_class(name)] += us / 1e3
                row["measured_kernels"] = int(r.n_kernels)
                row["measured_kernel_sum_ms"] = float(r.kernel_sum_ms)
                row["gap_ms"] = c.measured_ms - float(r.kernel_sum_ms)
            row["predicted_ops"] = p["kernels"]
            for k in CLASSES:
                row[f"meas_{k}_ms"] = meas[k]
                row[f"pred_{k}_ms"] = pred[k]
            rows.append(row)
            pd.DataFrame(rows).to_csv(args.out, index=False)  # incremental: a stopped run keeps its rows
    df = pd.DataFrame(rows)
    df.to_csv(args.out, index=False)
    ok = df.dropna(subset=["predicted_ms", "measured_kernel_sum_ms"])
    tot = {k: (ok[f"meas_{k}_ms"].sum(), ok[f"pred_{k}_ms"].sum()) for k in CLASSES}
    print(f"{len(ok)} cases; summed over them (ms): measured / predicted")
    for k, (m, p) in tot.items():
        print(f"  {k:9s} {m:10.1f} {p:10.1f}  ({100 * (p - m) / m:+.1f} %)")
    print(f"  {'gap':9s} {ok['gap_ms'].sum():10.1f}")
    print(f"  {'step':9s} {ok['measured_ms'].sum():10.1f} {ok['predicted_ms'].sum():10.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
