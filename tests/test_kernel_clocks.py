"""The H200's kernels at their own clocks (validation/h200_kernel_clocks.py; README "Power and
clocks", *The clocks inside kernels*).  Independent truth: Nsight Compute's in-kernel SM clock
and duration of each kernel, and the same kernels timed back to back with nvidia-smi beside them
(validation/measurements/h200_micro_clock_kinds*.csv, h200_micro_clock_bf16_sizes*.csv,
h200_micro_l2_counters_gemms.csv; session 27)."""
from __future__ import annotations

import csv
import statistics
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
MEAS = ROOT / "validation" / "measurements"
sys.path.insert(0, str(ROOT / "validation"))

import h200_kernel_clocks as K  # noqa: E402



def _ncu(name: str) -> dict:
    out: dict = {}
    for row in csv.DictReader(open(MEAS / name)):
        # the first metric group's run holds the clocks (ncu repeats the kernel time in the
        # next group's run, another process): keep the first, as validation/h200_kernel_clocks.py does
        out.setdefault(row["workload"], {}).setdefault(row["metric"], float(row["value"].replace(",", "")))
    return out


def test_nvidia_smi_reads_above_the_clock_tensor_kernels_run_at():
    """Tensor-core kernels nvidia-smi read at 1,980 MHz back to back took the time Nsight Compute
    timed them at, at an in-kernel clock at least 9 % lower; the fp32 SIMT kernels ran at the
    boost clock both ways."""
    seen = 0
    for stem in ("h200_micro_clock_kinds", "h200_micro_clock_bf16_sizes"):
        ncu = _ncu(f"{stem}.csv")
        for row in csv.DictReader(open(MEAS / f"{stem}_timed.csv")):
            if float(row["sm_clock_mhz_median_second_half"]) < 1980:
                continue  # throttled back to back: another question
            c = ncu[row["workload"]]
            in_kernel = c["sm__cycles_elapsed.avg.per_second"] / 1e6
            loop_over_ncu = float(row["ms_per_call_median_second_half"]) * 1e6 / c["gpu__time_duration.sum"]
            assert 0.96 < loop_over_ncu < 1.04, (row["workload"], loop_over_ncu)
            if row["workload"].startswith("fp32"):
                assert in_kernel > 1940, (row["workload"], in_kernel)
            else:
                assert in_kernel < 0.91 * 1980, (row["workload"], in_kernel)
                seen += 1
    assert seen >= 4


@pytest.mark.slow
def test_gemms_at_their_own_clock_with_the_l2_as_measured():
    """Priced at each kernel's in-kernel clock, cuBLAS's bf16 GEMMs of 512 rows and up come out
    within 2 % per cycle with the L2 as its counters measured it and the tensor pipe's 0.937 busy
    share.  With the shipped, tighter L2 the 512-row one is 13 % slow (the mid-size GEMM gap of
    the per-kernel sets and of the serving loop); the 1,024-row one was 12-21 % slow until
    session 40 and is within 5 % on the library's larger tiles (256x152, where cuBLAS ran
    144x128).  (The 256-row one, memory-bound, comes out 17 % fast with the measured L2;
    `python validation/h200_kernel_clocks.py --measured ...` prints all 23.)"""
    files = ("h200_micro_clock_bf16_sizes.csv",)
    mid = ("bf16_512x4096x11008", "bf16_1024x4544x4672")
    shipped = K.rows("h200_sxm", files, nominal=False, only=mid).set_index("workload")
    measured = K.rows("h200_sxm", files, K.measured_overrides(), nominal=False).set_index("workload")
    big = [w for w in measured.index if int(w.split("_")[1].split("x")[0]) >= 512]
    assert len(big) == 5
    for w in big:
        assert abs(measured.loc[w, "error_own_clock_pct"]) < 2.0, (w, measured.loc[w, "error_own_clock_pct"])
    assert shipped.loc["bf16_512x4096x11008", "error_own_clock_pct"] > 10.0
    assert abs(shipped.loc["bf16_1024x4544x4672", "error_own_clock_pct"]) < 5.0
