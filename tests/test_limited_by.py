"""`limited_by`: what an op's simulated time is made of (the "array-bound" class the first-hour
review asked for: a GEMM at 9 % MBU whose time is fill and drain is not memory-bound)."""
from __future__ import annotations

import pytest

import sim


def test_the_split_adds_up_to_the_cycles():
    for chip, (m, k, n) in (("npu_128x128", (64, 64, 64)), ("h200_sxm", (1, 8192, 8192)),
                            ("npu_128x128", (4096, 4096, 4096))):
        r = sim.simulate_gemm(chip, m=m, k=k, n=n, dtype="bf16")
        split = r.time_split_cycles
        assert all(v >= 0 for v in split.values())
        assert sum(split.values()) == pytest.approx(r.cycles, rel=1e-9)
        assert r.to_dict()["limited_by"] == r.limited_by


def test_small_gemm_on_a_big_array_is_array_bound():
    """64^3 on a 128x128 weight-stationary array under ideal memory: the array needs
    ~128 + 128 + 64 cycles of fill and drain per fold against 64^3/128^2 = 16 cycles of MACs
    at its peak (closed form), so most of the time is the array's, and the roofline class
    ('memory' at this intensity) does not say why."""
    r = sim.simulate_gemm("npu_128x128", m=64, k=64, n=64, dtype="bf16", memory="ideal")
    assert r.limited_by == "array"
    assert r.time_split_cycles["compute"] == pytest.approx(64 ** 3 / (128 * 128 * 4), rel=0.02)


def test_large_gemm_is_compute_and_decode_gemv_on_a_gpu_is_memory():
    assert sim.simulate_gemm("npu_128x128", m=4096, k=4096, n=4096, dtype="bf16").limited_by == "compute"
    gemv = sim.simulate_gemm("h200_sxm", m=1, k=8192, n=8192, dtype="bf16")
    assert gemv.limited_by == "memory"
    assert gemv.time_split_cycles["memory"] > 0.5 * gemv.cycles
