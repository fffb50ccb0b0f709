"""The H200 -> H100 what-if against a real H100 (issue 12: every knob moves the answer the way
physics says).  ``h100_sxm`` is the calibrated ``h200_sxm`` with the H100 datasheet's memory
(HBM3 at 3.35 TB/s, 80 GB, 50 MB L2); no H100 measurement went into it.  The same holdout
shapes were measured on both GPUs with one harness (validation/measurements/h200_holdout.csv,
h100_holdout.csv; session 20), so the measured H100/H200 time ratio of a case is how the real
hardware answered the what-if, and the model's ratio must follow it.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from sim.apps.validation import predict
from sim.apps.validation_cases import read_cases
from sim.spec.registry import load_chip

MEAS = Path(__file__).resolve().parents[1] / "validation" / "measurements"

#: holdout lines (the CSV's line numbers) bound by HBM bandwidth on both GPUs: measured
#: H100/H200 1.26-1.48 (decode attention over long KV, large copies, a weight-streaming GEMV)
MEMORY_BOUND = (115, 103, 122, 176, 170, 64)
#: compute-bound GEMMs measured within 3 % of each other on the two GPUs, which the model
#: also keeps within 8 % (it gives 1.00-1.05), among them the int8 weight-streaming
#: 128x6144x24576 (line 73: measured 1.003; the model gave 1.20 while the sm80 path kept a
#: fixed 32 KiB in flight per SM, now 1.02 with its stages in flight) and 128x28672x8192
#: (line 78: measured 0.97; the model gave 1.32 because its mapper took 128x64 tiles on the
#: H200 and 128x128 on the H100, whose estimate charged each tile of a wave its own copy of the
#: shared A panel once the wave's panels outgrew the L2; both now take 128x64, 1.00.  At the
#: tile both GPUs ran, cutlass_80_*_s8_128x128_128x5, the model gives 1.00 too, each +18/+22 %
#: slow in absolute terms)
#: and two long GEMMs the harness's bursts run unthrottled on both GPUs (line 11: bf16
#: 8192x13824x5120, measured 0.98; line 72: fp8 2320x4096x22016, 1.00), which the model gave
#: 1.11 and 1.22 while h100_sxm lacked the H200's power-averaging window and so priced the
#: H100's repeats at each GEMM's own throttled clock (now 1.00 and 0.99)
COMPUTE_BOUND = (76, 81, 23, 73, 78, 11, 72)


def _ratios(lines):
    cases = {}
    for gpu in ("h200", "h100"):
        cases[gpu] = {c.line: c for c in read_cases(MEAS / f"{gpu}_holdout.csv")}
    chips = {"h200": load_chip("h200_sxm"), "h100": load_chip("h100_sxm")}
    out = []
    for line in lines:
        a, b = cases["h200"][line], cases["h100"][line]
        assert (a.kind, a.dtype, a.values) == (b.kind, b.dtype, b.values), line   # the same shape
        pred = predict(chips["h100"], b)["predicted_ms"] / predict(chips["h200"], a)["predicted_ms"]
        out.append((line, b.measured_ms / a.measured_ms, pred))
    return out


def test_memory_bound_cases_slow_down_on_the_h100_as_measured():
    for line, measured, predicted in _ratios(MEMORY_BOUND):
        assert measured > 1.2, line
        assert predicted == pytest.approx(measured, rel=0.10), (line, measured, predicted)


def test_compute_bound_gemms_keep_their_time_on_the_h100():
    for line, measured, predicted in _ratios(COMPUTE_BOUND):
        assert predicted == pytest.approx(measured, rel=0.08), (line, measured, predicted)
