#!/usr/bin/env python3
"""Derive the int4 weight-only GEMM (tinygemm) calibrations of stacks/eager_pytorch.yaml
from validation/measurements/h200_micro_int4mm.csv, and show how the model then fits
every microbenchmark row.

    python validation/fit_int4mm.py

The kernel's time grows linearly with the rows of A at every size measured (m = 1..2048,
eight weight shapes): past the weight stream, each (row, weight) pair costs a fixed time,
at a CUDA-core-class rate.  So:

* ``fraction``: the per-row slope, median over the shapes of (t(m2) - t(m1)) / ((m2 - m1) k n)
  between the two largest row counts measured, as a fraction of the chip's ``cuda_cores``
  peak MAC rate;
* a check that one or two rows need no floor of their own: the rows the per-row term would
  have to count for the model's body to equal the measured body at m = 1 and 2 (median),
  where body = per-call time - the in-graph per-kernel cost of a tiny kernel
  (h200_micro_graph_kernels.csv tiny_add) and the model's body = its time without the
  launch overhead and without the per-row term.  It comes out at about one row (0.93 when
  this was written): the engine's weight stream plus one row's work already is the kernel.
``fraction`` is a CALIBRATION (a residual of this microbenchmark), used only by the eager profile.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.ir.ops import Gemm  # noqa: E402
from sim.model.engine.lower import Options  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.model.stacks import kernels, load_stack  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

MEAS = ROOT / "validation" / "measurements"


def rows():
    with open(MEAS / "h200_micro_int4mm.csv") as f:
        return [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]


def tiny_kernel_us() -> float:
    with open(MEAS / "h200_micro_graph_kernels.csv") as f:
        return next(float(r["per_kernel_us"]) for r in csv.DictReader(f) if r["op"] == "tiny_add")


def main() -> int:
    chip = load_chip("h200_sxm")
    stack = load_stack("eager_pytorch")
    data = rows()
    arr = next(a for a in chip.cores.arrays if a.name == "cuda_cores")
    per_pe, _ = arr.rate_for("fp32")
    peak = arr.rows * arr.cols * arr.count * per_pe * chip.cores.count * chip.clock_hz
    slopes = []
    for shape in sorted({(r["k"], r["n"]) for r in data}):
        rs = sorted((r for r in data if (r["k"], r["n"]) == shape), key=lambda r: r["m"])
        a, b = rs[-2], rs[-1]
        slopes.append((b["int4_us"] - a["int4_us"]) * 1e-6 / ((b["m"] - a["m"]) * shape[0] * shape[1]))
    fraction = 1.0 / float(np.median(slopes)) / peak
    tiny = tiny_kernel_us()
    launch_s = chip.runtime.op_launch_overhead_ns * 1e-9
    need = []
    for r in data:
        if r["m"] > 2:
            continue
        op = Gemm("w4", int(r["m"]), int(r["k"]), int(r["n"]), dtype="bf16", weight_dtype="int4")
        (kop, lib), = [(o, lib) for o, lib in kernels(op, stack) if isinstance(o, Gemm)]
        lib = {k: v for k, v in lib.items() if k != "row_work"}
        body = simulate_op(chip, kop, Options(**lib)).seconds - launch_s
        meas = r["int4_us"] * 1e-6 - tiny * 1e-6
        need.append((meas - body) * fraction * peak / (r["k"] * r["n"]))
    rows_needed = float(np.median(need))
    print(f"cuda_cores peak {peak / 1e12:.2f} TMAC/s at {chip.clock_hz / 1e6:.0f} MHz")
    print(f"per-row slope median {np.median(slopes) * 1e15:.2f} ps per MAC -> fraction {fraction:.3f}")
    print(f"rows the per-row term must count at m = 1, 2 (median of {len(need)}): {rows_needed:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
