#!/usr/bin/env python3
"""What a cuBLAS sm90 output tile costs beyond its MMAs: a fit of the H100 tensor-pipe series
over k against the engine.

    python validation/fit_tile_epilogue.py [--chip h100_sxm]

validation/measurements/h100_micro_tensor_pipe_kdepth.csv (Nsight Compute,
``validation/gpu/micro_tensor_pipe.py --set kdepth``) holds cuBLAS GEMMs of one output shape
over a growing k (4096 x k x 4096, k = 256 .. 8,192) and a few others, each with its kernel
(persistent: a grid of 132 CTAs walking the output tiles; cooperative 256x128 / 320x128
tiles), its duration and the SM clock it ran at.  Their tensor pipe is busy 43 % of the time
at k = 256 and 93 % at 8,192: a tile's fixed cost (the epilogue of a cooperative kernel,
whose two consumer warpgroups share one set of accumulators, and the ramps around it) weighs
less as the tile's k loop grows.

For each compute-bound case (the kernels with ``coop`` tiles) this script runs the engine at
the kernel's own clock with the library's menu held to the kernel's tile (the faster of its
two orientations), and fits, by least squares over the cases,

    measured cycles = a x engine cycles + F x (output tiles of the busiest SM)

``a`` is what remains of a per-cycle rate (the tensor pipe's steady share and the
calibrated clock), ``F`` the cycles per tile the engine does not charge (beyond the drain of
a one-accumulator tile at the SM's port, which it does).  It prints both and every case's
residual; nothing in a chip file is set from it.
"""
from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.ir.ops import Gemm  # noqa: E402
from sim.model.cost.power import at_clock  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

MEAS = ROOT / "validation" / "measurements" / "h100_micro_tensor_pipe_kdepth.csv"


def measured() -> pd.DataFrame:
    d = pd.read_csv(MEAS)
    d["value"] = pd.to_numeric(d["value"].astype(str).str.replace(",", ""), errors="coerce")
    pv = d.pivot_table(index=["workload", "kernel"], columns="metric", values="value", aggfunc="first").reset_index()
    rows = []
    for _, r in pv.iterrows():
        if "coop" not in r["kernel"]:
            continue   # ping-pong kernels (two sets of accumulators) and the memory-bound weight GEMMs
        m, k, n = map(int, re.search(r"(\d+)x(\d+)x(\d+)", r["workload"]).groups())
        a, b = map(int, re.search(r"_tst_(\d+)x(\d+)_", r["kernel"]).groups())
        grid = int(r["launch__grid_size"])
        tiles = math.ceil(m / a) * math.ceil(n / b)
        rows.append({"workload": r["workload"], "kernel_tile": f"{a}x{b}", "m": m, "k": k, "n": n, "tile": (a, b),
                     "sm_mhz": r["sm__cycles_elapsed.avg.per_second"] / 1e6,
                     "measured_cycles": r["gpu__time_duration.sum"] * 1e-9 * r["sm__cycles_elapsed.avg.per_second"],
                     "tiles_per_sm": math.ceil(tiles / grid),
                     "tensor_busy": r["sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"] / 100})
    return pd.DataFrame(rows)


def engine_cycles(chip_name: str, row) -> float:
    """The engine's cycles for the case at its measured clock, on the kernel's tile."""
    best = math.inf
    base = at_clock(load_chip(chip_name), row["sm_mhz"])
    for tm, tn in {row["tile"], row["tile"][::-1]}:
        chip = base.model_copy(update={"mapping": base.mapping.model_copy(
            update={"tile_m": (tm,), "tile_n": (tn,), "split_k": (1,)})})
        r = simulate_op(chip, Gemm(name=row["workload"], m=row["m"], k=row["k"], n=row["n"]))
        launch = chip.runtime.op_launch_overhead_ns * 1e-9 * chip.clock_hz if chip.runtime is not None else 0.0
        best = min(best, r.cycles - launch)
    return best


def fit(chip_name: str = "h100_sxm") -> dict:
    d = measured()
    d["engine_cycles"] = [engine_cycles(chip_name, r) for _, r in d.iterrows()]
    X = np.column_stack([d["engine_cycles"], d["tiles_per_sm"]])
    (a, f), *_ = np.linalg.lstsq(X, d["measured_cycles"].to_numpy(), rcond=None)
    d["fitted_cycles"] = a * d["engine_cycles"] + f * d["tiles_per_sm"]
    return {"a": float(a), "F": float(f), "cases": d}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--chip", default="h100_sxm")
    args = ap.parse_args(argv)
    res = fit(args.chip)
    d = res["cases"]
    pd.set_option("display.width", 200)
    d = d.assign(engine_over_measured=d["engine_cycles"] / d["measured_cycles"],
                 fitted_error=d["fitted_cycles"] / d["measured_cycles"] - 1)
    print(d[["workload", "kernel_tile", "sm_mhz", "tiles_per_sm", "tensor_busy", "measured_cycles", "engine_cycles",
             "engine_over_measured", "fitted_error"]].round(3).to_string(index=False))
    print(f"a = {res['a']:.3f} (engine cycles -> measured), F = {res['F']:.0f} cycles per output tile "
          f"of the busiest SM ({len(d)} cases)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
