"""One probed engine run gives the samples a wave extrapolation needs (each drained copy of
the run exactly the run that stops dealing output tiles there), so extrapolating from it
answers exactly as running the samples one by one did, at a fraction of the cost."""
from __future__ import annotations

import numpy as np
import pytest

import sim.model.engine.extrapolate as X
import sim.model.engine.kernel_run as KR
import sim.model.engine.run as R
from sim.apps.single_op import simulate_gemm
from sim.model.engine.arrays import operand_bases
from sim.model.engine.run import clear_cache
from sim.spec.registry import load_chip


def _cyclic_problem(chip, m, k, n):
    """The (problem, mapping) of the first cyclic engine run of an m x k x n GEMM."""
    seen = []
    real = KR.run_kernel

    def spy(chip_, prob, mapping, ideal, bases=None, tile_limit=0):
        if mapping.distribution == "cyclic" and not ideal:
            seen.append((prob, mapping))
        return real(chip_, prob, mapping, ideal, bases, tile_limit)

    with pytest.MonkeyPatch.context() as mp:
        for module in (KR, X, R):
            mp.setattr(module, "run_kernel", spy)
        simulate_gemm(chip, m=m, k=k, n=n, dtype="bf16")
    assert seen, "the GEMM ran no cyclic engine run"
    return seen[0]


def _same(a: KR.KernelRun, b: KR.KernelRun):
    assert a.makespan == b.makespan
    np.testing.assert_array_equal(a.stats, b.stats)
    np.testing.assert_array_equal(a.hist, b.hist)
    np.testing.assert_array_equal(np.nan_to_num(a.dram_stats), np.nan_to_num(b.dram_stats))


def test_each_drained_sample_is_the_run_that_stops_there(no_cache):
    chip = load_chip("h200_sxm")
    prob, mapping = _cyclic_problem(chip, 4096, 1024, 4096)
    P = mapping.cores_used
    bases = operand_bases(prob)
    # whole waves and a wave plus a few tiles (the first wave is dealt at the start)
    tiles = sorted({P, P + 7, 2 * P, 3 * P})
    tiles = [t for t in tiles if t < prob.m // mapping.tile_m * (prob.n // mapping.tile_n)]
    assert len(tiles) >= 3
    probes = tuple(KR.Probe(t, t // P if t % P == 0 else None) for t in tiles)
    got = KR.run_kernel_probed(chip, prob, mapping, False, bases, probes)
    assert sorted(got) == tiles  # no tolerance: every probe taken
    for t in tiles:
        _same(got[t], KR.run_kernel(chip, prob, mapping, False, bases, tile_limit=t))
    with pytest.raises(ValueError, match="at least"):
        KR.run_kernel_probed(chip, prob, mapping, False, bases, (KR.Probe(P // 2),))


def test_the_probed_run_stops_at_the_steady_state(no_cache):
    """With a tolerance the run ends at the first checked sample whose last two intervals
    agree; with an impossible one (0 < tol, never met) it takes every probe."""
    chip = load_chip("h200_sxm")
    prob, mapping = _cyclic_problem(chip, 4096, 1024, 4096)
    P = mapping.cores_used
    bases = operand_bases(prob)
    probes = tuple(KR.Probe(r * P, r) for r in (1, 2, 3))
    everything = KR.run_kernel_probed(chip, prob, mapping, False, bases, probes, steady_tolerance=1e-300)
    loose = KR.run_kernel_probed(chip, prob, mapping, False, bases, probes, steady_tolerance=10.0)
    assert sorted(everything) == [P, 2 * P, 3 * P] and sorted(loose) == [P, 2 * P, 3 * P]
    four = probes + (KR.Probe(4 * P, 4),)
    stops = KR.run_kernel_probed(chip, prob, mapping, False, bases, four, steady_tolerance=10.0)
    assert sorted(stops) == [P, 2 * P, 3 * P], "a tolerance of 1000 % is met at the third sample"


@pytest.mark.parametrize("m,k,n", [(32768, 1024, 8192)])
def test_extrapolating_from_one_probed_run_answers_as_runs_one_by_one(no_cache, monkeypatch, m, k, n):
    chip = load_chip("h200_sxm")
    probed = simulate_gemm(chip, m=m, k=k, n=n, dtype="bf16")
    ex = probed.details["extrapolated"]
    assert ex is not None and ex["dim"] == "waves" and ex["leftover_tiles"] > 0
    clear_cache()
    monkeypatch.setattr(X, "_wave_samples", lambda *a, **k: {})  # every sample a fresh run, as before
    one_by_one = simulate_gemm(chip, m=m, k=k, n=n, dtype="bf16")
    assert one_by_one.details["extrapolated"] == ex
    assert probed.cycles == one_by_one.cycles
    assert probed.dram_bytes == one_by_one.dram_bytes
    assert probed.energy_pj == one_by_one.energy_pj
