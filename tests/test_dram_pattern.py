"""The mapper's DRAM rate for a tile's transfer pattern (sim.model.memory.dram.stream_efficiency)
against independent measurements: long streams through the DRAM kernel with refresh on and
plenty of requests in flight, and the whole event engine reading a GEMV's weight tiles with
its own window of requests.

The probe runs the pattern through the same DRAM kernel, but short, without refresh and in a
separate, idle device (refresh charged afterwards), so it can differ from a long stream by
where refreshes and the hash's bank collisions fall; the tolerances below are what was
measured on the shipped chips (worst 12 % here; 17 % for 64-byte rows 1 MiB apart on the edge
NPU's LPDDR5, whose per-bank refresh the probe does not charge)."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from sim.ir.ops import Gemm
from sim.model.engine.kernel_run import run_kernel
from sim.model.engine.lower import Options, lower_op, memory_budget
from sim.model.mapper.search import operand_pattern, search_top
from sim.model.memory.dram import DramModel, DramParams, stream_efficiency
from sim.spec.registry import load_chip

PLENTY = 1 << 16


def _params(chip: str) -> DramParams:
    return DramParams.from_spec(load_chip(chip).memory.dram)


def _long_stream(p: DramParams, seg: int, stride: int) -> float:
    """Efficiency of >= 20 us (at the pin rate) of ``seg``-byte reads ``stride`` apart,
    refresh on, 65,536 requests in flight."""
    n = int(min(400_000, max(20_000, 2 * p.peak_bytes_per_s * 20e-6 / seg)))
    addrs = (np.arange(n, dtype=np.int64) * stride) % (p.capacity_bytes // 2)
    return DramModel(p).stream(addrs, seg, max_outstanding=PLENTY, in_order=False)["efficiency"]


CASES = [("tpu_v1", seg, stride) for seg in (32, 64, 128, 256, 2048) for stride in (8192, 16384)] + \
        [(chip, seg, 8192) for chip in ("npu_128x128", "edge_npu", "scalesim_32x32") for seg in (64, 128, 256)]


@pytest.mark.parametrize("chip,seg,stride", CASES, ids=[f"{c}-{s}B-every-{t}B" for c, s, t in CASES])
def test_pattern_rate_matches_a_long_kernel_stream(chip, seg, stride):
    p = _params(chip)
    measured = _long_stream(p, seg, stride)
    assert stream_efficiency(p, seg, stride) == pytest.approx(measured, rel=0.12)


@pytest.mark.parametrize("chip", ["tpu_v1", "npu_128x128", "edge_npu", "scalesim_32x32"])
def test_contiguous_rate_matches_a_long_kernel_stream(chip):
    p = _params(chip)
    measured = _long_stream(p, 1 << 16, 1 << 16)
    got = stream_efficiency(p, 1 << 16, 0)
    assert got == stream_efficiency(p, 4096, 4096)   # any stride <= the segment is one contiguous stream
    assert got == pytest.approx(measured, rel=0.06)


def test_short_rows_far_apart_are_slow_and_the_probe_sees_it():
    """On tpu_v1's DDR3 every 64-byte row of a tile 8 KiB apart opens a DRAM row: an ACT per
    burst, limited by max(tRRD, tFAW/4) = 6.3 ns against a 3.75 ns burst, about half the
    128-byte rate (two bursts per ACT, bus-bound)."""
    p = _params("tpu_v1")
    e64, e128 = stream_efficiency(p, 64, 8192), stream_efficiency(p, 128, 8192)
    assert e64 < 0.6 < 0.9 < e128
    slot, act = p.slot_ns, p.act_slot_ns
    assert e64 / e128 == pytest.approx(slot / act, rel=0.1)


@pytest.mark.parametrize("k", [8192, 1024])
@pytest.mark.parametrize("tile_k", [64, 128, 256, 1024])
def test_pattern_rate_matches_the_engine_on_a_dram_bound_gemv(tile_k, k):
    """The event engine, reading the weight tiles of a 1 x k x (64 Mi / k) int8 GEMV on
    tpu_v1 (64 MiB of weights in 128 KiB tiles of rows tile_k bytes long, k bytes apart),
    reaches the probe's rate with the engine's own window - 64 requests of 64 B, which the
    engine counts as 16 interleave-block chunks - within 5 % (measured 1.0-4.6 % below).
    The clock is 4x TPU v1's so that the array's fill and drain stay well below the DRAM time
    at every tile_k (the DRAM runs in ns)."""
    chip = load_chip("tpu_v1", ["clock_mhz=2800"])
    prob = lower_op(chip, Gemm("g", 1, k, (64 << 20) // k, dtype="int8"), Options(), 1).problem
    budget = memory_budget(chip, False)
    mp = search_top(prob, 1, budget, 1)[0]
    mp = dataclasses.replace(mp, tile_m=1, tile_n=(128 << 10) // tile_k, tile_k=tile_k, loop_order="mnk")
    run = run_kernel(chip, prob, mp, False)
    seconds = run.makespan / chip.clock_hz
    achieved = float(run.stats[:, 3].sum() + run.stats[:, 4].sum()) / seconds
    seg, stride = operand_pattern(prob, "b", mp.tile_m, mp.tile_n, mp.tile_k)
    assert (int(seg), int(stride)) == (tile_k, 0 if tile_k == k else k)   # whole rows: one contiguous run
    window = budget.window_chunks(prob, 1)
    assert window == 16
    p = _params("tpu_v1")
    assert achieved == pytest.approx(stream_efficiency(p, int(seg), int(stride), window) * p.peak_bytes_per_s, rel=0.05)
    # a window of 16 chunks of 64 bytes holds a quarter of the bytes of 16 full blocks
    if tile_k == 64 and k == 1024:
        assert stream_efficiency(p, 64, 1024, window) < 0.8 * stream_efficiency(p, 64, 1024)


def test_operand_pattern_follows_the_engine_layout():
    chip = load_chip("tpu_v1")
    prob = lower_op(chip, Gemm("g", 64, 1024, 512, dtype="int8"), Options(), 1).problem
    # A (m, k): rows of tile_k bytes, K apart; a tile spanning all of k is contiguous
    assert [int(x) for x in operand_pattern(prob, "a", 64, 128, 256)] == [256, 1024]
    assert int(operand_pattern(prob, "a", 64, 128, 1024)[1]) == 0
    # B (n, k): the same along k; C (m, n): rows of tile_n x 4-byte accumulators, N apart
    assert [int(x) for x in operand_pattern(prob, "b", 64, 128, 256)] == [256, 1024]
    assert [int(x) for x in operand_pattern(prob, "c", 64, 128, 256)] == [128 * 4, 512 * 4]
