"""The mapper's choice against the engine: on chips without a kernel library the estimate
ranks the candidates, the distinct tiles it cannot tell apart (within RANK_TIE of the best
estimate) are simulated and the fastest kept.  The truth is the engine itself: the best of
the twelve best-ranked mappings, each simulated in full (no extrapolation)."""
from __future__ import annotations

import pytest

from sim.ir.ops import Gemm
from sim.model.engine.extrapolate import extrapolation_plan
from sim.model.engine.kernel_run import run_kernel
from sim.model.engine.lower import FIDELITY, Options, lower_op, memory_budget
from sim.model.engine.run import _candidates, distinct_k_tiles_first, diverse_band, simulate_op_at_clock
from sim.model.mapper.search import RANK_TIE, search_top
from sim.spec.registry import load_chip

CHIPS = ["tpu_v1", "npu_128x128", "edge_npu", "scalesim_32x32"]
SHAPES = [(1, 4096, 4096), (8, 4096, 4096), (128, 1024, 256), (1024, 1024, 1024)]
#: measured on this grid (ratios to the best of the 12): within 0.1 % except tpu_v1
#: 128 x 1024 x 256, 1.7 % (its best tile is estimated 4 % slower than the pick, outside the
#: band) and the miss below.  The pick alone, without simulating the band, is up to 14 % off
#: (the miss below; 10 % npu_128x128 8 x 4096 x 4096); before the DRAM-pattern estimate it
#: was up to 75 % off (scalesim_32x32 1 x 8192 x 8192, 11.9 ms picked, 6.8 ms possible).
TOLERANCE = RANK_TIE


def _dtype(chip) -> str:
    return "bf16" if "bf16" in chip.cores.arrays[0].macs_per_pe_per_cycle else "int8"


#: measured misses, not fixed (strict: the test fails once they are).  tpu_v1 1024^3: with
#: its derived fold overlap the op is DRAM-bound, and the pick (1024, 64, 1024) writes
#: 256-byte C rows between its B reads; the combined stream reaches a row-hit rate of 0.66
#: (0.82 with the 512-byte rows of (1024, 128, 1024), the best: 26.7 against 30.4 GB/s).
#: The estimate charges each operand as a stream of its own and prefers the pick for its
#: smaller last output tile (an 8 us shorter drain).
#: edge_npu 1024^3 (since the estimate charges a k tile that does not divide k for its short
#: last step, session 33): the 192-deep k tiles (1,065k cycles simulated) left the 12 best
#: estimates and 256x64x512 (889k) entered them, ranked 12th, 0.4 % from the best estimate;
#: the simulated band's best is 957k, as before (it was the best of the 12 then)
_XFAIL = {("tpu_v1", (1024, 1024, 1024)): "pick x1.138 slower than the best (C writes between B reads)",
          ("edge_npu", (1024, 1024, 1024)): "pick x1.076 slower than the best (256x64x512, ranked 12th)"}


def _grid():
    return [pytest.param(n, s, id=f"{n}-{'x'.join(map(str, s))}",
                         marks=[pytest.mark.xfail(strict=True, reason=_XFAIL[(n, s)])] if (n, s) in _XFAIL else [])
            for n in CHIPS for s in SHAPES]


@pytest.mark.parametrize("name,shape", _grid())
def test_pick_is_within_tolerance_of_the_best_simulated_candidate(name, shape):
    chip = load_chip(name)
    cores = chip.cores.count
    low = lower_op(chip, Gemm("g", *shape, dtype=_dtype(chip)), Options(), cores)
    budget = memory_budget(chip, False)
    ranked = search_top(low.problem, cores, budget, 12)
    assert all(extrapolation_plan(chip, low.problem, m, False, "high") is None for m in ranked)
    best = min(run_kernel(chip, low.problem, m, False).makespan for m in ranked)
    chosen = _candidates(chip, low, cores, budget, FIDELITY["high"]["refine"], False, None, RANK_TIE)
    got = min(run_kernel(chip, p, m, False).makespan for _, p, m, _ in chosen)
    assert got <= best * TOLERANCE, (got / best, [(m.tile_m, m.tile_n, m.tile_k) for _, _, m, _ in chosen])


def test_tie_band_candidates_are_distinct_tiles_within_the_band_pick_first():
    chip = load_chip("npu_128x128")
    low = lower_op(chip, Gemm("g", 1, 4096, 4096, dtype="bf16"), Options(), chip.cores.count)
    budget = memory_budget(chip, False)
    chosen = _candidates(chip, low, chip.cores.count, budget, 4, False, None, RANK_TIE)
    pick = search_top(low.problem, chip.cores.count, budget, 1)[0]
    assert 1 < len(chosen) <= 4
    m0 = chosen[0][2]
    assert (m0.tile_m, m0.tile_n, m0.tile_k, m0.loop_order) == (pick.tile_m, pick.tile_n, pick.tile_k, pick.loop_order)
    tiles = [(m.distribution, m.partition, m.tile_m, m.tile_n, m.tile_k) for _, _, m, _ in chosen]
    assert len(set(tiles)) == len(tiles)
    lo = min(est for est, *_ in chosen)
    assert all(est <= lo * RANK_TIE for est, *_ in chosen)
    # fast fidelity simulates one
    assert len(_candidates(chip, low, chip.cores.count, budget, FIDELITY["fast"]["refine"], False, None,
                           RANK_TIE)) == 1


def test_large_problems_simulate_the_bands_best_two():
    """A problem extrapolated from samples costs several runs per candidate, so the band
    is cut to ``refine_large`` (2) candidates there - but not to the pick alone, which the
    estimate cannot tell from the next one (issue 12: "simulate the top few candidates on
    every chip").  edge_npu 2048^3 int8: the pick runs 7,544 us, the band's second tile
    7,002 us (measured 2026-12-04); the answer is never slower than the pick's own run."""
    from sim.apps.single_op import simulate

    chip = load_chip("edge_npu")
    op = Gemm("g", 2048, 2048, 2048, dtype="int8")
    low = lower_op(chip, op, Options(), chip.cores.count)
    band = _candidates(chip, low, chip.cores.count, memory_budget(chip, False), 4, False, None, RANK_TIE)
    _, prob, pick, _ = band[0]
    assert len(band) >= 2 and extrapolation_plan(chip, prob, pick, False) is not None   # a large problem
    big = simulate(chip, op)
    assert big.mapping["compute"]["candidates_simulated"] == FIDELITY["high"]["refine_large"] == 2
    alone = simulate_op_at_clock(chip, op, Options(tiles=(pick.tile_m, pick.tile_n, pick.tile_k)))
    assert big.seconds <= alone.seconds
    small = simulate(load_chip("npu_128x128"), Gemm("g", 1, 4096, 4096, dtype="bf16"))
    assert small.mapping["compute"]["candidates_simulated"] == 4

def test_candidates_of_a_kernel_list_with_two_k_tiles_lead_with_one_of_each():
    """A library with 32- and 64-element k tiles (the sm80 lists) simulates one of each
    first when its best-ranked candidates hold both: the estimate sees the DRAM row length
    a k tile reads in only where DRAM bounds the estimate, and a large problem simulates
    only its first two candidates.  (On 8192x4096x14336 the estimate ranked three 32-deep
    tiles first, within 0.002 % of each other, and the best 64-deep one fourth; since its
    first step arrives at the DRAM's rate, session 33, a 64-deep and a 32-deep tile lead
    within 0.0002 %.)"""
    chip = load_chip("a100_sxm4_80gb")
    op = Gemm("g", m=8192, k=4096, n=14336, dtype="bf16")
    lowered = lower_op(chip, op, Options(), chip.cores.count)
    cands = _candidates(chip, lowered, chip.cores.count, memory_budget(chip, False), 4, False)
    assert {c[2].tile_k for c in cands[:2]} == {32, 64}
    # the reordering itself, on the order the estimate gave before: three 32-deep first
    from types import SimpleNamespace as NS
    ranked = [(est, None, NS(tile_k=kt), 1) for est, kt in ((1.0, 32), (1.1, 32), (1.2, 32), (1.3, 64))]
    assert [c[2].tile_k for c in distinct_k_tiles_first(ranked)] == [32, 64, 32, 32]
    # one k tile (h200_sxm's wgmma list): the band in the estimate's order, untouched, then
    # the extra kinds it lacks (diverse_band)
    h200 = load_chip("h200_sxm")
    lw = lower_op(h200, op, Options(), h200.cores.count)
    budget = memory_budget(h200, False)
    got = _candidates(h200, lw, h200.cores.count, budget, 4, False)
    assert [c[0] for c in got[:4]] == sorted(c[0] for c in got[:4])


def test_a_library_band_adds_the_kinds_it_lacks():
    """On a chip with a kernel library the band is the four best estimates (each k tile's
    best first), as before, plus the best tile of up to two kinds - (count of SMs used,
    orientation) - it lacks: four near-equal estimates are often four tiles of one kind, and
    the estimate tells least exactly how those compare with a tile that fills every SM, or
    with their transposes.  The band itself is unchanged, so at a given clock no op gets slower."""
    from types import SimpleNamespace as NS

    def ranked(rows):
        return [(1.0 + i / 100, None, NS(tile_k=k, cores_used=u, tile_m=tm, tile_n=tn), 1)
                for i, (k, u, tm, tn) in enumerate(rows)]
    # h100_sxm 64x512x2048 at 1980 MHz, as the estimate ranked it
    near = ranked([(64, 64, 32, 64), (64, 64, 40, 64), (64, 64, 48, 64), (64, 43, 64, 48),
                   (64, 52, 64, 40), (64, 64, 64, 32), (64, 86, 64, 24)])
    band = diverse_band(near, near, 4, 2)
    assert [(c[2].tile_m, c[2].tile_n) for c in band] == [(32, 64), (40, 64), (48, 64), (64, 48), (64, 40), (64, 32)]
    assert diverse_band(near, near, 4, 0) == distinct_k_tiles_first(near[:4])
    # the band comes from each split's best (head); the extra kinds from every near mapping
    assert [c[2].tile_n for c in diverse_band(near[:2], near, 2, 1)] == [64, 64, 48]


def test_one_candidate_stays_the_pick_alone_on_a_library_chip():
    """`fidelity: fast` (one candidate) simulates the estimate's pick alone: the extra kinds
    are for a band of several."""
    chip = load_chip("h100_sxm")
    op = Gemm("g", 64, 512, 2048, dtype="bf16")
    lowered = lower_op(chip, op, Options(), chip.cores.count)
    budget = memory_budget(chip, False)
    one = _candidates(chip, lowered, chip.cores.count, budget, 1, False)
    four = _candidates(chip, lowered, chip.cores.count, budget, 4, False)
    assert len(one) == 1 and one[0][0] == four[0][0]
    assert len(four) > 4   # (its band of 64- and 52-SM tiles gains a 43- and an 86-SM one)


@pytest.mark.parametrize("name,shape,knob", [
    # the band held only 64-SM tiles once the channels doubled; 64x64 on 108 SMs is faster
    ("a100_sxm4_80gb", (1024, 512, 1024), "memory.levels.hbm2e.channels=80"),
    # at its boost-capped clock the band held three 64-SM tiles wider than tall and a 43-SM
    # one; 64x32 on 64 SMs (a kind of its own: taller than wide) is faster
    ("h100_sxm", (64, 512, 2048), "clock_mhz=3300"),
])
def test_more_bandwidth_or_clock_never_slows_a_library_gemm(name, shape, knob):
    """Issue 12's invariant where the knob search (validation/knob_monotonicity.py) found
    the library band missing the tile that fills the chip: doubling the HBM channels or the
    clock (capped by the boost clock on h100_sxm) leaves the op no slower."""
    from sim.apps.single_op import simulate
    op = Gemm("g", *shape, dtype="bf16")
    base = simulate(load_chip(name), op).seconds
    more = simulate(load_chip(name, [knob]), op).seconds
    assert more <= base * 1.001


def test_an_unsteady_winner_runs_in_full_before_it_may_win(monkeypatch):
    """A candidate whose unsteady samples looked fastest is simulated in full and the race
    re-run: the full run of another candidate beats its full run, so the other wins (the
    old rule re-ran the unsteady winner and kept it, however slow it was in full)."""
    import types

    import sim.model.engine.run as R

    def res(s):
        return types.SimpleNamespace(seconds=s)

    unsteady = types.SimpleNamespace(extrapolated={"steady": False})
    steady_full = types.SimpleNamespace(extrapolated=None)
    plan = types.SimpleNamespace(work=1.0)
    m1, m2 = (types.SimpleNamespace(name=n, tile_m=128, tile_n=128, tile_k=64) for n in ("m1", "m2"))
    ran = [(res(1.0), ("fast-looking", unsteady), ("p1", m1, 1, plan)),
           (res(1.1), ("full", steady_full), ("p2", m2, 1, None))]
    full_runs = []
    monkeypatch.setattr(R, "run_kernel", lambda chip, p, m, ideal: full_runs.append(m.name) or "full run")
    monkeypatch.setattr(R, "_candidate_result",
                        lambda chip, op, options, lowered, p, m, split, run, plan=None: (res(1.3), steady_full))
    op = types.SimpleNamespace(name="g")
    best, (key, kernel) = R._best_in_full(None, op, Options(), None, ran)
    assert key == "full" and best.seconds == 1.1 and full_runs == ["m1"]
    # when the full run still wins, it is the answer
    monkeypatch.setattr(R, "_candidate_result",
                        lambda chip, op, options, lowered, p, m, split, run, plan=None: (res(1.05), steady_full))
    best, (key, _) = R._best_in_full(None, op, Options(), None, ran)
    assert key == "fast-looking" and best.seconds == 1.05


def test_the_estimate_charges_a_short_last_k_step_as_the_engine_runs_it():
    """A k tile that does not divide k leaves each output tile a short last step, during
    which the core loads the next tile's first, full step: a compute-bound core waits for
    it (the engine's stall).  The estimate charges that wait, so 768-deep tiles of a 4096-deep
    GEMV are estimated within 5 % of their engine runs (7 % under before, and ranked first
    under ``fidelity: fast``), and a tile whose k divides k is estimated faster."""
    chip = load_chip("npu_128x128", overrides=["memory.levels.vmem.capacity_kib=4096",
                                               "memory.levels.hbm.data_rate_gbps_per_pin=3.2"])
    low = lower_op(chip, Gemm("lm", 16, 4096, 32768, dtype="fp8"), Options(), chip.cores.count)
    cands = _candidates(chip, low, chip.cores.count, memory_budget(chip, False), 60, False, None, 1.2)
    by_tile = {(m.distribution, m.tile_m, m.tile_n, m.tile_k): (est, p, m) for est, p, m, _ in cands}
    short = by_tile[("cyclic", 16, 128, 768)]
    whole = by_tile[("cyclic", 16, 128, 1024)]
    sim_short = run_kernel(chip, short[1], short[2], False).makespan
    sim_whole = run_kernel(chip, whole[1], whole[2], False).makespan
    assert sim_short > sim_whole * 1.05  # the engine's stall (independent of the estimate)
    assert abs(short[0] / sim_short - 1) <= 0.05
    assert short[0] > whole[0]


def test_the_estimate_charges_the_loads_a_tiles_drain_cannot_hide():
    """While an output tile drains (its array's fill/drain tail, no step computed) no buffer
    stage frees, so a memory-bound core can load at most ``buffers - 1`` steps ahead and then
    waits.  On tpu_v1 with 512 array rows a 64x256x512 int8 GEMM in 64x171x64 tiles pays a
    745-cycle drain after every 4 load-bound steps: it was estimated at 3.3k cycles and ran
    4.7k, ranked first ahead of 64x512x64 (estimated 3.8k, runs 3.7k), so twice the rows made
    the GEMM 0.83x as fast.  Now the one-tile mapping's estimate is within 10 % of its engine
    run, the many-drain one is no longer estimated the fastest, and the doubled chip is not
    slower than the shipped one."""
    chip = load_chip("tpu_v1", overrides=["cores.arrays.mxu.rows=512"])
    op = Gemm("g", 64, 256, 512, dtype="int8")
    low = lower_op(chip, op, Options(), chip.cores.count)
    cands = _candidates(chip, low, chip.cores.count, memory_budget(chip, False), 60, False, None, 2.0)
    by_tile = {(m.tile_m, m.tile_n, m.tile_k): (est, p, m) for est, p, m, _ in cands}
    drains = by_tile[(64, 171, 64)]
    one = by_tile[(64, 512, 64)]
    sim_drains = run_kernel(chip, drains[1], drains[2], False).makespan
    sim_one = run_kernel(chip, one[1], one[2], False).makespan
    assert sim_drains > 1.2 * sim_one   # the engine's waits (independent of the estimate)
    assert abs(drains[0] / sim_drains - 1) <= 0.10
    assert drains[0] > min(est for est, *_ in cands)
    shipped = simulate_op_at_clock(load_chip("tpu_v1"), op).seconds
    assert simulate_op_at_clock(chip, op).seconds <= shipped * 1.01


def test_a_large_problems_two_places_go_to_two_tile_shapes():
    """A large problem simulates only the band's first two candidates; the same tile on
    another split reads its operands in the same pattern, so a second shape comes first.  On
    eyeriss with two cores a 512x512x4096 bf16 GEMM's 64x28x256 tile on one and on two cores
    filled both places and 8x64x256, which the one-core chip ran and won with, was not run: twice
    the cores made the GEMM 0.88x as fast.  Now both chips run both shapes and agree."""
    op = Gemm("g", 512, 512, 4096, dtype="bf16")
    one = simulate_op_at_clock(load_chip("eyeriss"), op)
    two = simulate_op_at_clock(load_chip("eyeriss", ["cores.count=2"]), op)
    assert two.seconds <= one.seconds * 1.01
    assert (two.mapping["tile_m"], two.mapping["tile_n"], two.mapping["tile_k"]) == (8, 64, 256)
