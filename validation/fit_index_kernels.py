#!/usr/bin/env python3
"""Derive the eager profile's rates for the MoE index kernels from
validation/measurements/h200_micro_moe_kernels.csv (micro_moe_kernels.py: in-graph per-kernel
times of hn.index_select(0, tok) and out.index_add_(0, tok, y) for n routed tokens, hidden
4096 and 8192):

    python validation/fit_index_kernels.py

PyTorch picks the kernel by the number of indices: up to 16 its small-index kernels
(indexSelectSmallIndex, indexFuncSmallIndex) walk the indices one after another, so their time
grows by ~0.4-0.5 us per index whatever the row length (the same at hidden 4096 and 8192);
from 17 indices the large-index kernels run in parallel over rows.  index_select then streams
at the ideal rate (no rule), index_add_ (bf16 adds into out) at ~0.8 TB/s.  For each op:

* up to 16 rows: ``floor_ns`` + ``floor_ns_per_row`` x rows = a least-squares line through the
  measured bodies at 1-16 rows (both widths);
* from 17 rows (index_add only): ``bandwidth_fraction`` = the model's ideal-stream body / the
  measured body, median over 512 rows and more; ``floor_ns`` = the measured body at 32 rows.

Measured body = per_kernel_us - the run's tiny_add per-kernel cost + the body this chip's model
gives a tiny kernel, as in fit_strided_elementwise.py.  All CALIBRATIONS (residuals of this
microbenchmark).
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

CSV = ROOT / "validation" / "measurements" / "h200_micro_moe_kernels.csv"
#: measured op -> (profile op, bytes read per byte of ``bytes`` less the indices)
OPS = {"index_select": ("gather", 0.5), "index_add": ("index_add", 2 / 3)}
SMALL_MAX_ROWS = 16  # PyTorch: numIndices <= 16 takes the small-index kernels


def op_for(name: str, rows: int, cols: int, nbytes: int) -> VectorOp:
    """The VectorOp the eager profile prices for one row of the file."""
    prof, read_share = OPS[name]
    data = nbytes - 8 * rows
    read = round(data * read_share) + 8 * rows
    return VectorOp(name, prof, rows * cols, 0.0, read, nbytes - read, row_elements=cols)


def _body_us(chip, op) -> float:
    return simulate_op(chip, op).seconds * 1e6 - chip.runtime.op_launch_overhead_ns * 1e-3


def fit(chip) -> dict[str, dict[str, float]]:
    with open(CSV) as f:
        rows = list(csv.DictReader(f))
    tiny = next(float(r["per_kernel_us"]) for r in rows if r["op"] == "tiny_add")
    tiny_body = _body_us(chip, VectorOp("t", "add", 1, 1.0, 4, 2))
    out = {}
    for name, (prof, _share) in OPS.items():
        small_n, small_b, frac, floor32 = [], [], [], []
        for r in rows:
            if r["op"] != name:
                continue
            n, cols, nb = int(r["rows"]), int(r["cols"]), int(r["bytes"])
            body = float(r["per_kernel_us"]) - tiny + tiny_body
            if n <= SMALL_MAX_ROWS:
                small_n.append(n)
                small_b.append(body)
            elif n >= 512:
                frac.append(min(1.0, _body_us(chip, op_for(name, n, cols, nb)) / body))
            elif n == 32:
                floor32.append(body)
        slope, icept = np.polyfit(small_n, small_b, 1)
        out[prof] = {"small_floor_ns": float(icept * 1e3), "small_floor_ns_per_row": float(slope * 1e3),
                     "large_bandwidth_fraction": float(np.median(frac)),
                     "large_floor_ns": float(np.median(floor32) * 1e3)}
    return out


def main() -> int:
    chip = load_chip("h200_sxm")
    for prof, v in fit(chip).items():
        print(f"{prof}: rows <= {SMALL_MAX_ROWS}: floor_ns {v['small_floor_ns']:.0f} + {v['small_floor_ns_per_row']:.0f} "
              f"per row; rows > {SMALL_MAX_ROWS}: bandwidth_fraction {v['large_bandwidth_fraction']:.3f}, "
              f"floor_ns {v['large_floor_ns']:.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
