"""Ranking an op's candidate mappings on partial engine runs (sim.model.engine.run,
RANK_ON_WAVES_SHARE): where it applies, the candidate it keeps, simulated in full, is within
a small bound of the best of every candidate raced in full - and never faster, since the race
keeps the fastest of the same candidates."""
from __future__ import annotations

import pytest

import sim.model.engine.run as R
from sim.ir.ops import Gemm
from sim.model.engine.lower import Options
from sim.spec.registry import load_chip


@pytest.fixture(scope="module")
def h200():
    return load_chip("h200_sxm", overrides=["power.dvfs=false"])


def _simulate(chip, op, options=Options(), *, ranked: bool):
    with pytest.MonkeyPatch.context() as mp:
        if not ranked:
            mp.setattr(R, "RANK_MIN_WAVES", 10**9)
        R.clear_cache()
        return R.simulate_op_at_clock(chip, op, options)


@pytest.mark.parametrize("shape", [(6144, 4096, 8192), (8192, 4096, 6144)])
def test_the_candidate_ranked_on_partial_runs_is_within_2_percent_of_the_race(h200, shape):
    op = Gemm("gemm", *shape)
    ranked = _simulate(h200, op, ranked=True)
    raced = _simulate(h200, op, ranked=False)
    compute = ranked.mapping["compute"]
    assert compute["candidates_ranked_on_partial_runs"] >= 2  # it applied ...
    assert compute["candidates_simulated"] == 1               # ... and one candidate ran in full
    assert "candidates_ranked_on_partial_runs" not in raced.mapping["compute"]
    assert raced.cycles <= ranked.cycles <= raced.cycles * 1.02


def test_a_problem_simulated_in_full_anyway_races_its_candidates(h200):
    # 2048x4096x4096 is below the full-run size (FIDELITY["high"]): its candidates race in full
    res = _simulate(h200, Gemm("gemm", 2048, 4096, 4096), ranked=True)
    assert "candidates_ranked_on_partial_runs" not in res.mapping["compute"]
    assert res.mapping["compute"]["candidates_simulated"] >= 2


def test_a_fixed_mapping_is_not_ranked(h200):
    op = Gemm("gemm", 6144, 4096, 8192)
    top = _simulate(h200, op, ranked=True)
    pinned = _simulate(h200, op, Options(mapping_of=R.result_mapping_key(top)), ranked=True)
    assert "candidates_ranked_on_partial_runs" not in pinned.mapping["compute"]
    assert pinned.cycles == top.cycles
