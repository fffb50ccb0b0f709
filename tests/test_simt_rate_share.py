"""A library kernel's rate share (the fifth value of a SIMT kernel entry): the share of its
array's rate the kernel's loop sustains.  Checked against a closed form (a compute-bound GEMM
on one kernel takes 1 / share as long) and against the measurement the shipped shares come
from (validation/measurements/h100_micro_simt_shapes.csv: Nsight Compute's FMA-pipe share of
cuBLAS's fp32 kernels on an H100)."""
from __future__ import annotations

import csv
import re
import statistics
from collections import defaultdict
from pathlib import Path

import pytest

from sim.apps.single_op import simulate_gemm
from sim.spec.chip import kernel_entry
from sim.spec.registry import load_chip

ROOT = Path(__file__).resolve().parents[1]


def _one_kernel(entry: str):
    return load_chip("h200_sxm", overrides=[f'mapping.array_kernels={{"cuda_cores": [{entry}]}}', "power.dvfs=false"])


@pytest.mark.parametrize("share", [0.5, 0.77])
def test_a_kernel_at_a_share_of_the_rate_computes_that_much_slower(share):
    """Ideal memory, one 128x128 kernel: the array time is the compute, so it scales by 1 / share
    (the launch and prologue, fixed in time, are taken out as the difference of two sizes)."""
    def array_cycles(entry, m):
        r = simulate_gemm(_one_kernel(entry), m=m, k=2048, n=4096, dtype="fp32", memory="ideal")
        return r.cycles
    full = array_cycles("[128, 128, 3, 128]", 8192) - array_cycles("[128, 128, 3, 128]", 4096)
    part = array_cycles(f"[128, 128, 3, 128, {share}]", 8192) - array_cycles(f"[128, 128, 3, 128, {share}]", 4096)
    assert part / full == pytest.approx(1.0 / share, rel=1e-6)


def test_the_shipped_shares_are_the_measured_fma_pipe_ratios():
    """cublas_sm90's fp32 kernels: each measured kernel's share is its FMA-pipe share over the 128x128
    kernel's (the one the array's rate was measured on), medians over the measured shapes of grids
    of at least 512 blocks, to 0.01."""
    rows = list(csv.DictReader(open(ROOT / "validation/measurements/h100_micro_simt_shapes.csv")))
    threads = {r["workload"]: int(r["value"]) for r in rows if r["metric"] == "launch__block_size"}
    grid = {r["workload"]: int(r["value"].replace(",", "")) for r in rows if r["metric"] == "launch__grid_size"}
    pipe: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for r in rows:
        tile = re.search(r"tilesize(\d+)x(\d+)x8", r["kernel"])
        if r["metric"] != "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed" or not tile:
            continue
        if grid[r["workload"]] < 512:   # full grids only: a few waves add their tail
            continue
        key = (int(tile.group(1)), int(tile.group(2)), threads[r["workload"]])
        # the reference kernel on long k only: a short k adds each tile's prologue and epilogue
        if key != (128, 128, 128) or int(r["workload"].split("x")[1]) >= 1024:
            pipe[key].append(float(r["value"]))
    ref = statistics.median(pipe[(128, 128, 128)])
    shipped = {(e[0], e[1], e[3]): e[5]
               for e in map(kernel_entry, load_chip("h200_sxm").mapping.array_kernels["cuda_cores"])}
    measured = {key: statistics.median(v) / ref for key, v in pipe.items() if key in shipped and key[:2] != (128, 128)}
    assert set(measured) == {(64, 64, 128), (128, 64, 128), (64, 256, 128)}
    for (m, n, thr), ratio in measured.items():
        assert shipped[(m, n, thr)] == pytest.approx(ratio, abs=0.01), ((m, n, thr), ratio)
        assert shipped[(n, m, thr)] == shipped[(m, n, thr)]   # cuBLAS swaps operands: a transpose runs alike
    assert shipped[(128, 128, 128)] == 1.0
