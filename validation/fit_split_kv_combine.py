#!/usr/bin/env python3
"""Derive the eager profile's floor for cuDNN's split-KV combine kernel (lean_reduction_kernel)
from validation/measurements/h200_micro_cudnn_decode_kernels.csv
(validation/gpu/micro_cudnn_decode_kernels.py: per call, CUPTI's duration of the decode SDPA
kernel, of the combine kernel that follows it where cuDNN splits the keys, and the gap
between the two):

    python validation/fit_split_kv_combine.py

The combine adds ``gap + kernel`` to a call.  The model prices a kernel as the chip's launch
overhead (``runtime.op_launch_overhead_ns``) plus its body, so the body's floor is
``median(gap + kernel) - op_launch_overhead_ns`` over every call that split.  A CALIBRATION
(the residual of this microbenchmark), printed with the model's combine per call before and
after it: the floor applies to every split-KV decode on the eager stack, on any chip.
"""
from __future__ import annotations

import csv
import dataclasses
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.ir.ops import Attention  # noqa: E402
from sim.model.engine.lower import Options  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.model.stacks import chip_stack, launched  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

CSV = ROOT / "validation" / "measurements" / "h200_micro_cudnn_decode_kernels.csv"


def split_calls(path: Path = CSV) -> list[dict]:
    """The measured calls cuDNN split: shape, combine kernel and gap (us)."""
    out = []
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if int(r["combined_calls"] or 0) > 0:
                out.append({k: int(r[k]) for k in ("batch", "heads", "kv_heads", "head_dim", "kv_len")}
                           | {"combine_us": float(r["combine_us_median"]), "gap_us": float(r["gap_us_median"])})
    return out


def decode_op(c: dict) -> Attention:
    return Attention("sdpa", batch=c["batch"], heads=c["heads"], kv_heads=c["kv_heads"], head_dim=c["head_dim"],
                     q_len=1, kv_len=c["kv_len"], causal=False, dtype="bf16", fused=True)


def model_combine_us(chip, op: Attention, with_rule: bool = True) -> float:
    """The second kernel (launch included) the model adds to ``op``'s decode call on the eager
    stack; 0 where it does not split the keys."""
    ((kop, opts),) = launched(op, chip_stack(chip, "eager_pytorch"), Options())
    if not with_rule:
        opts = dataclasses.replace(opts, combine_stream=None)
    second = simulate_op(chip, kop, opts).details.get("second_kernel")
    return second["seconds"] * 1e6 if second else 0.0


def main() -> int:
    chip = load_chip("h200_sxm")
    launch_ns = chip.runtime.op_launch_overhead_ns
    calls = split_calls()
    per_kernel = np.array([c["combine_us"] + c["gap_us"] for c in calls])
    floor_ns = float(np.median(per_kernel)) * 1e3 - launch_ns
    print(f"{len(calls)} split calls: gap + combine kernel {per_kernel.min():.2f}-{per_kernel.max():.2f} us, "
          f"median {np.median(per_kernel):.3f} us")
    print(f"floor_ns = {floor_ns:.0f}  (median - op_launch_overhead_ns {launch_ns:.0f})")
    print("batch heads kv_heads kv_len  measured  model_without  model_with")
    for c, m in zip(calls, per_kernel):
        op = decode_op(c)
        print(f"{c['batch']:5d} {c['heads']:5d} {c['kv_heads']:8d} {c['kv_len']:6d}  {m:8.2f}  "
              f"{model_combine_us(chip, op, False):13.2f}  {model_combine_us(chip, op):10.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
