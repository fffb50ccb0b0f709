#!/usr/bin/env python3
"""Derive the int8 weight-only GEMM kernel's numbers in stacks/eager_pytorch.yaml
(``weight_only.int8.thread_per_output``) from Nsight Compute's counters of PyTorch's
int8mm.cu kernel (validation/measurements/h100_micro_int8mm_ncu.csv), and show how the model
then fits every timed row (h100_micro_int8mm.csv: the call in a CUDA graph, its casts included).

    python validation/fit_int8mm.py

The kernel runs one thread per output element in 16 x 16 blocks; each thread walks its weight
row one byte per iteration, so a warp's iteration loads 16 sectors of 16 weight rows and one
sector per row of A (the counters: l1tex global-load sectors = ceil(m/2) x n x k x 18/16 for
m >= 2; 17/16 at m = 1).  Two numbers, both measured, not fitted to a time:

* ``l1_sectors_per_cycle``: sectors / (SM cycles x SMs) in the cases where Nsight Compute says
  the L1 is the bound (``l1tex__throughput`` at least 90 % of peak), median;
* ``iteration_latency_cycles``: SM cycles / k in the cases with at most 2 live warps per SM
  (m <= 2 with 256 blocks: the L1 is under half busy, each warp waits on its own loads), median.

Both are cycles of the in-kernel clock, which Nsight Compute read at 1.94-1.99 GHz (the boost
clock: the kernel draws little power).  The model's fit to the timed rows is printed per row:
within a few per cent from 12 rows up, but 20-50 % fast at 1-8 rows for the shapes whose
weights stream from DRAM with many warps (4096 x 28672, 14336 x 4096), where the kernel's time
per warp iteration stays ~2x the L1's with the L1 under half busy - not modelled (README).
"""
from __future__ import annotations

import csv
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.model.engine.assemble import thread_per_output_cycles  # noqa: E402
from sim.spec.stack_spec import ThreadPerOutputRule  # noqa: E402

MEAS = ROOT / "validation" / "measurements"
SMS = 132  # the H100 SXM the microbenchmark ran on ([WP])


def counters() -> dict[tuple[int, int, int], dict[str, float]]:
    out: dict = defaultdict(dict)
    with open(MEAS / "h100_micro_int8mm_ncu.csv") as f:
        for r in csv.DictReader(f):
            try:
                out[(int(r["m"]), int(r["k"]), int(r["n"]))][r["metric"]] = float(r["value"].replace(",", ""))
            except ValueError:
                pass
    return dict(out)


def _rule(**kw) -> ThreadPerOutputRule:
    return ThreadPerOutputRule(**{"l1_wavefronts_per_cycle": 1.0, "l1_sectors_per_cycle": 1e3,
                                  "iteration_latency_cycles": 0.0, **kw})


def fit() -> tuple[float, float, float, float]:
    """(l1_wavefronts_per_cycle, l1_sectors_per_cycle, iteration_latency_cycles, median in-kernel
    clock in MHz)."""
    c = counters()
    shape = _rule()
    waves, lats, clocks = [], [], []
    for (m, k, n), d in c.items():
        cycles = d["sm__cycles_elapsed.avg"]
        clocks.append(d["sm__cycles_elapsed.avg.per_second"] / 1e6)
        got = thread_per_output_cycles(m, k, n, 1, SMS, shape)
        if d["l1tex__throughput.avg.pct_of_peak_sustained_elapsed"] >= 90:
            waves.append(got["live_warps"] * k * got["wavefronts_per_iteration"] / (cycles * SMS))
        if m <= 2 and d["launch__grid_size"] <= 2 * SMS:
            lats.append(cycles / k)
    mhz = float(np.median(clocks))
    # the sector lookups bind only where the banks do not: the odd row pitches at full occupancy
    # (16 rows, 8 live warps a block), timed at the kernel's boost clock
    sectors = []
    with open(MEAS / "h100_micro_int8mm_strides.csv") as f:
        for r in csv.DictReader(f):
            m, k, n, us = int(r["m"]), int(r["k"]), int(r["n"]), float(r["call_us"])
            if m == 16 and k % 1024:
                got = thread_per_output_cycles(m, k, n, 1, SMS, shape)
                sectors.append(got["live_warps"] * k * got["sectors_per_iteration"] / (us * 1e-6 * mhz * 1e6 * SMS))
    return float(np.median(waves)), float(max(sectors)), float(np.median(lats)), mhz


def main() -> int:
    waves, sectors, lat, mhz = fit()
    print(f"l1_wavefronts_per_cycle: {waves:.3f}   l1_sectors_per_cycle: {sectors:.2f}   "
          f"iteration_latency_cycles: {lat:.1f}   (in-kernel clock, median {mhz:.0f} MHz)")
    rule = _rule(l1_wavefronts_per_cycle=round(waves, 3), l1_sectors_per_cycle=round(sectors, 2),
                 iteration_latency_cycles=round(lat, 1))
    print(f"{'m':>4} {'k':>6} {'n':>6} {'measured us':>12} {'model us':>9} {'error':>7}")
    errs: dict[str, list[float]] = {"m >= 12": [], "m < 12": []}
    for name in ("h100_micro_int8mm.csv", "h100_micro_int8mm_strides.csv"):
        with open(MEAS / name) as f:
            for r in csv.DictReader(f):
                m, k, n, t = int(r["m"]), int(r["k"]), int(r["n"]), float(r["call_us"])
                us = thread_per_output_cycles(m, k, n, 1, SMS, rule)["boost_cycles"] / (mhz * 1e6) * 1e6
                e = (us / t - 1) * 100
                errs["m >= 12" if m >= 12 else "m < 12"].append(e)
                print(f"{m:4d} {k:6d} {n:6d} {t:12.1f} {us:9.1f} {e:+6.1f}%")
    for key, es in errs.items():
        es = np.asarray(es)
        print(f"{key}: {len(es)} calls, median |error| {np.median(np.abs(es)):.1f} %, "
              f"signed mean {es.mean():+.1f} %, range {es.min():+.1f} .. {es.max():+.1f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main())
