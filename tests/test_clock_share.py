"""Two ways the engine runs less without changing what it answers (#15):

* a compute-bound engine run at the chip's top clock stands for the same mapping's run at the
  lower clocks DVFS tries (``sim.model.engine.run.CLOCK_SHARE_TOLERANCE``), and
* a candidate mapping whose array work alone outlasts the best simulated candidate is not
  simulated (``compute_floor_cycles``, ``PRUNE_MARGIN``).

Each is checked against the simulator with the shortcut turned off, and the floor against
full (never extrapolated) engine runs."""
from __future__ import annotations

import threading

import pytest

import sim.model.engine.extrapolate as extrapolate
import sim.model.engine.kernel_run as kernel_run
import sim.model.engine.run as run_mod
from sim import load_chip, simulate_gemm
from sim.model.engine.assemble import compute_floor_cycles


@pytest.fixture
def engine_runs(monkeypatch, no_cache):
    """How many times the compiled engine ran (plain and probed runs)."""
    count = [0]
    lock = threading.Lock()  # (an op's candidates run on several threads)

    def counted(fn):
        def wrapper(*args):
            with lock:
                count[0] += 1
            return fn(*args)
        return wrapper

    monkeypatch.setattr(kernel_run.K, "run_tiled", counted(kernel_run.K.run_tiled))
    monkeypatch.setattr(kernel_run.KP, "run_tiled_probed", counted(kernel_run.KP.run_tiled_probed))
    return count


def test_a_compute_bound_gemm_shares_its_top_clock_run_with_the_clocks_dvfs_tries(monkeypatch, engine_runs):
    """A 16384x8192x7168 fp8 GEMM (a Llama-3-70B TP8 gate_up projection over 4 prompts of 4096)
    throttles on h200_sxm; its run at 1,650 MHz is compute-bound (the qkv projection,
    16384x8192x1280, was until session 40: on the 256x160 tiles it now takes, its run stalls
    2.3 %), so the lower clocks reuse
    it: the same clock and, within the tolerance, the same cycles as simulating each clock,
    in fewer engine runs."""
    chip = load_chip("h200_sxm")
    tolerance = run_mod.CLOCK_SHARE_TOLERANCE
    shared = simulate_gemm(chip, m=16384, k=8192, n=7168, dtype="fp8")
    shared_runs = engine_runs[0]
    run_mod.clear_cache()
    engine_runs[0] = 0
    monkeypatch.setattr(run_mod, "CLOCK_SHARE_TOLERANCE", -1.0)  # never shared
    alone = simulate_gemm(chip, m=16384, k=8192, n=7168, dtype="fp8")
    assert alone.details["clock_mhz"] < 1650 and shared.details["clock_mhz"] == alone.details["clock_mhz"]
    assert shared.mapping["compute"]["run_shared_from_clock_mhz"] == 1650.0
    assert "run_shared_from_clock_mhz" not in alone.mapping["compute"]
    assert shared.cycles == pytest.approx(alone.cycles, rel=tolerance)
    assert shared.energy_pj == pytest.approx(alone.energy_pj, rel=tolerance)
    assert shared_runs < engine_runs[0]


def test_a_run_with_memory_stalls_is_simulated_again_at_each_clock(no_cache):
    """A 4096^3 bf16 GEMM on h200_sxm stalls on memory a few per cent at 1,650 MHz: below it
    the DRAM costs fewer cycles, so its run there is its own, not the top clock's."""
    r = simulate_gemm(load_chip("h200_sxm"), m=4096, k=4096, n=4096)
    assert r.details["clock_mhz"] < 1650
    assert "run_shared_from_clock_mhz" not in r.mapping["compute"]


SHAPES = [(1, 4096, 4096), (7, 1000, 4096), (64, 4096, 4096), (300, 1000, 2048), (1024, 64, 1000),
          (2000, 4096, 128), (777, 333, 555)]


@pytest.mark.parametrize("chip_name", ["h200_sxm", "npu_128x128", "a100_sxm4_80gb", "blackwell_b200"])
def test_the_compute_floor_never_exceeds_a_full_engine_run(chip_name, monkeypatch, no_cache):
    """Every full (never extrapolated) engine run of a cyclic, unmasked problem lasts at
    least its compute floor, edge tiles and partial waves included."""
    monkeypatch.setattr(extrapolate, "EXTRAPOLATE", False)
    seen = []
    real = kernel_run.run_kernel

    def checked(chip, prob, mapping, ideal, bases=None, tile_limit=0):
        run = real(chip, prob, mapping, ideal, bases, tile_limit)
        floor = compute_floor_cycles(prob, mapping)
        if floor is not None and tile_limit == 0:
            seen.append((run.makespan, floor, prob.m, prob.n, prob.k, mapping.tile_m, mapping.tile_n))
        return run

    monkeypatch.setattr(run_mod, "run_kernel", checked)
    chip = load_chip(chip_name)
    for m, k, n in SHAPES:
        simulate_gemm(chip, m=m, k=k, n=n)
    assert seen, "no cyclic run was checked"
    for makespan, floor, *shape in seen:
        assert floor > 0 and makespan >= floor * (1 - 1e-12), shape
    # the floor is a tight one where the arrays are the bound (within 2x of some run)
    assert max(floor / makespan for makespan, floor, *_ in seen) > 0.5


@pytest.mark.parametrize("chip_name,shape", [("h200_sxm", (8192, 4096, 1024)), ("h200_sxm", (512, 4096, 4096)),
                                              ("a100_sxm4_80gb", (1024, 4096, 4096)), ("npu_128x128", (8192, 4096, 1024)),
                                              ("h200_sxm", (5, 8192, 28672))])
def test_pruned_candidates_never_change_the_answer(chip_name, shape, monkeypatch, engine_runs):
    """With pruning off every candidate is simulated; the answer (time, mapping, energy)
    is the same with it on."""
    chip = load_chip(chip_name)
    m, k, n = shape
    pruned = simulate_gemm(chip, m=m, k=k, n=n)
    pruned_runs = engine_runs[0]
    run_mod.clear_cache()
    engine_runs[0] = 0
    monkeypatch.setattr(run_mod, "PRUNE_MARGIN", float("inf"))
    every = simulate_gemm(chip, m=m, k=k, n=n)
    assert pruned.seconds == every.seconds and pruned.energy_pj == every.energy_pj
    assert run_mod.result_mapping_key(pruned) == run_mod.result_mapping_key(every)
    assert pruned_runs <= engine_runs[0]


def test_pruning_skips_a_candidate_that_cannot_win(monkeypatch, engine_runs):
    """A 2048x4096x4096 bf16 GEMM on h200_sxm: of its four candidate tiles at 1,650 MHz, the
    later ones' array work alone outlasts the best simulated run, so they are not simulated;
    the answer is the one simulating all of them gives."""
    chip = load_chip("h200_sxm")
    pruned = simulate_gemm(chip, m=2048, k=4096, n=4096)
    pruned_runs = engine_runs[0]
    run_mod.clear_cache()
    engine_runs[0] = 0
    monkeypatch.setattr(run_mod, "PRUNE_MARGIN", float("inf"))
    every = simulate_gemm(chip, m=2048, k=4096, n=4096)
    assert pruned.seconds == every.seconds
    assert pruned_runs < engine_runs[0]
