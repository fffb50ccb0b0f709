#!/usr/bin/env python3
"""Derive the eager profile's rates for PyTorch's non-vectorized elementwise kernels from
validation/measurements/h200_micro_strided_elementwise.csv (in-graph per-kernel times).

    python validation/fit_strided_elementwise.py

F.silu(g) and g * u on the two halves of a fused gate_up output (strided views), and RoPE's
x * cos with a broadcast table, run TensorIterator's elementwise_kernel<128, 4> instead of the
vectorized kernel: at every size from 128 rows to 8,192 (beyond L2 from ~1k rows) they stream
1.5 (SiLU, broadcast multiply) and 2.3 TB/s (multiply), against 3.9 and 4.4 TB/s for the
contiguous kernels of the same sizes.  For each op:

* ``bandwidth_fraction`` = the model's ideal-stream body / the measured body, median over the
  rows with at least 2,048 rows (both FFN widths; hidden 4096 and 8192 for bcast_mul);
* ``floor_ns`` = the measured body at 8 rows (median of the two widths), for the strided ops.

Measured body = per_kernel_us - the same run's tiny_add per-kernel cost + the body this chip's
model gives a tiny kernel (the convention of the other stream_kernels floors).  All are
CALIBRATIONS (residuals of this microbenchmark).
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.ir.ops import VectorOp  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

CSV = ROOT / "validation" / "measurements" / "h200_micro_strided_elementwise.csv"
OPS = {"strided_silu": (4.0, 1, 1), "strided_mul": (1.0, 2, 1), "bcast_mul": (1.0, 1, 1)}


def ideal_body_us(chip, name: str, rows: int, cols: int, nbytes: int) -> float:
    ops, reads, writes = OPS[name]
    n = rows * cols
    write = 2 * n
    op = VectorOp(name, name, n, ops, nbytes - write, write)
    return simulate_op(chip, op).seconds * 1e6 - chip.runtime.op_launch_overhead_ns * 1e-3


def fit(chip) -> dict[str, dict[str, float]]:
    with open(CSV) as f:
        rows = list(csv.DictReader(f))
    tiny = next(float(r["per_kernel_us"]) for r in rows if r["op"] == "tiny_add")
    tiny_body = simulate_op(chip, VectorOp("t", "add", 1, 1.0, 4, 2)).seconds * 1e6 \
        - chip.runtime.op_launch_overhead_ns * 1e-3
    out = {}
    for name in OPS:
        mine = [r for r in rows if r["op"] == name]
        frac, floor = [], []
        for r in mine:
            rws, cols, nb = int(r["rows"]), int(r["cols"]), int(r["bytes"])
            body = float(r["per_kernel_us"]) - tiny + tiny_body
            if rws >= 2048:
                frac.append(ideal_body_us(chip, name, rws, cols, nb) / body)
            if rws == 8:
                floor.append(body * 1e3)
        out[name] = {"bandwidth_fraction": float(np.median(frac)),
                     "floor_ns": float(np.median(floor)) if floor else float("nan"), "rows_used": len(frac)}
    return out


def main() -> int:
    chip = load_chip("h200_sxm")
    for name, v in fit(chip).items():
        print(f"{name}: bandwidth_fraction {v['bandwidth_fraction']:.3f} (median of {v['rows_used']} rows), "
              f"floor_ns {v['floor_ns']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
