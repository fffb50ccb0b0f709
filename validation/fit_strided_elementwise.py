#!/usr/bin/env python3
"""Derive the eager profile's rates for PyTorch's non-vectorized and strided memory-bound
kernels from in-graph per-kernel times:

    python validation/fit_strided_elementwise.py

validation/measurements/h200_micro_strided_elementwise.csv: F.silu(g) and g * u on the two
halves of a fused gate_up output (strided views), and RoPE's x * cos with a broadcast table,
run TensorIterator's elementwise_kernel<128, 4> instead of the vectorized kernel: at every size
from 128 rows to 8,192 (beyond L2 from ~1k rows) they stream 1.5 (SiLU, broadcast multiply)
and 2.3 TB/s (multiply), against 3.9 and 4.4 TB/s for the contiguous kernels of the same sizes.

validation/measurements/h200_micro_rope_kernels.csv (micro_rope_kernels.py): the rest of
RoPE's kernels as measure_models.py lays them out (neg of a strided half: 1.5-1.8 TB/s;
CatArrayBatchedCopy: 1.3 TB/s), the KV-cache write (a transposing copy: 1.9 TB/s) and the fp8
activation cast (float8_copy_kernel: 3.2-3.3 TB/s), 512 to 8,192 tokens.

For each profile op:

* ``bandwidth_fraction`` = the model's ideal-stream body / the measured body, median over the
  rows with at least 2,048 rows (tokens);
* ``floor_ns`` = the measured body at 8 rows (median), printed for every op (the profile keeps
  the floors of h200_micro_graph_kernels.csv where it has them).

Measured body = per_kernel_us - the same run's tiny_add per-kernel cost + the body this chip's
model gives a tiny kernel (the convention of the other stream_kernels floors).  All are
CALIBRATIONS (residuals of these microbenchmarks).
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

MEAS = ROOT / "validation" / "measurements"
#: measured op -> (csv, profile op, vector ops per element, share of ``bytes`` read,
#: elements per byte of ``bytes``)
OPS = {
    "strided_silu": ("h200_micro_strided_elementwise.csv", "strided_silu", 4.0, 0.5, 1 / 4),
    "strided_mul": ("h200_micro_strided_elementwise.csv", "strided_mul", 1.0, 2 / 3, 1 / 6),
    "bcast_mul": ("h200_micro_strided_elementwise.csv", "bcast_mul", 1.0, None, None),
    "neg_q": ("h200_micro_rope_kernels.csv", "neg", 1.0, 0.5, 1 / 4),
    "neg_k": ("h200_micro_rope_kernels.csv", "neg", 1.0, 0.5, 1 / 4),
    "cat_q": ("h200_micro_rope_kernels.csv", "strided_cat", 0.0, 0.5, 1 / 4),
    "cat_k": ("h200_micro_rope_kernels.csv", "strided_cat", 0.0, 0.5, 1 / 4),
    "kv_copy_k": ("h200_micro_rope_kernels.csv", "kv_append", 0.0, 0.5, 1 / 4),
    "kv_copy_v": ("h200_micro_rope_kernels.csv", "kv_append", 0.0, 0.5, 1 / 4),
    "fp8_cast": ("h200_micro_rope_kernels.csv", "quant_act", 3.0, 2 / 3, 1 / 3),
}


def ideal_body_us(chip, name: str, rows: int, cols: int, nbytes: int) -> float:
    _csv, op_name, ops, read_share, el_per_byte = OPS[name]
    if read_share is None:  # bcast_mul: writes rows x cols bf16, reads that plus the table
        n = rows * cols
        write = 2 * n
        read = nbytes - write
    else:
        read = round(nbytes * read_share)
        write = nbytes - read
        n = max(1, round(nbytes * el_per_byte))
    op = VectorOp(name, op_name, n, ops, read, write)
    return simulate_op(chip, op).seconds * 1e6 - chip.runtime.op_launch_overhead_ns * 1e-3


def fit(chip) -> dict[str, dict[str, float]]:
    tables = {}
    for csv_name in sorted({v[0] for v in OPS.values()}):
        with open(MEAS / csv_name) as f:
            rows = list(csv.DictReader(f))
        tiny = next(float(r["per_kernel_us"]) for r in rows if r["op"] == "tiny_add")
        tables[csv_name] = (rows, tiny)
    tiny_body = simulate_op(chip, VectorOp("t", "add", 1, 1.0, 4, 2)).seconds * 1e6 \
        - chip.runtime.op_launch_overhead_ns * 1e-3
    frac: dict[str, list[float]] = {}
    floor: dict[str, list[float]] = {}
    for name, (csv_name, op_name, *_rest) in OPS.items():
        rows, tiny = tables[csv_name]
        for r in rows:
            if r["op"] != name:
                continue
            rws, cols, nb = int(r["rows"]), int(r["cols"]), int(r["bytes"])
            body = float(r["per_kernel_us"]) - tiny + tiny_body
            if rws >= 2048:
                frac.setdefault(op_name, []).append(ideal_body_us(chip, name, rws, cols, nb) / body)
            if rws == 8:
                floor.setdefault(op_name, []).append(body * 1e3)
    return {op: {"bandwidth_fraction": float(np.median(v)),
                 "floor_ns": float(np.median(floor[op])) if op in floor else float("nan"), "rows_used": len(v)}
            for op, v in frac.items()}


def main() -> int:
    chip = load_chip("h200_sxm")
    for name, v in fit(chip).items():
        print(f"{name}: bandwidth_fraction {v['bandwidth_fraction']:.3f} (median of {v['rows_used']} rows), "
              f"floor_ns {v['floor_ns']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
