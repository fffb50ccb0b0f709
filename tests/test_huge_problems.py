"""Bounded time for in-limit extremes: a cyclic problem too large to simulate in full whose
waves are too few for samples spanning whole raster periods (tile rows x tile columns / cores)
is sampled in whole waves anyway, flagged ``period_aligned: false``, instead of being
simulated in full (a 30000^3 GEMM on npu_128x128 walked ~8 x 10^8 DRAM chunks: hours).

Independent truth for the fallback: on problems small enough to simulate in full, forcing it
(the huge-work threshold set to 0) lands within a few per cent of the full simulation
(measured +4.7 % for 12000x1024x12000 and +3.2 % for 6000x3000x6000 on npu_128x128, the two
problems here whose only plan it is)."""
from __future__ import annotations

import time

import pytest

import sim.model.engine.extrapolate as X
from sim.model.engine.lower import FIDELITY
from sim.apps.single_op import simulate_gemm
from sim.model.engine.run import clear_cache
from sim.spec.registry import load_chip


def test_a_30000_cubed_gemm_answers_in_seconds(no_cache):
    chip = load_chip("npu_128x128")
    t0 = time.perf_counter()
    r = simulate_gemm(chip, m=30000, k=30000, n=30000)
    took = time.perf_counter() - t0
    ex = r.details["extrapolated"]
    assert ex["dim"] == "waves" and ex["period_aligned"] is False
    assert r.cycles >= r.roofline_cycles
    assert took < 120, took  # generous on a loaded machine; about 4 s on the 2-core build machine


@pytest.mark.parametrize("chip_name, m, k, n", [("npu_128x128", 12000, 1024, 12000),
                                                ("npu_128x128", 6000, 3000, 6000)])
def test_the_unaligned_fallback_is_close_to_the_full_simulation(no_cache, monkeypatch, chip_name, m, k, n):
    chip = load_chip(chip_name)
    monkeypatch.setattr(X, "EXTRAPOLATE", False)
    full = simulate_gemm(chip, m=m, k=k, n=n)
    clear_cache()
    monkeypatch.setattr(X, "EXTRAPOLATE", True)
    monkeypatch.setattr(X, "HUGE_WORK", 0)
    # the extrapolation itself: even where its samples are unsteady, and of the pick alone
    monkeypatch.setattr(X, "UNSTEADY_FULL_WORK", 0)
    monkeypatch.setitem(FIDELITY["high"], "refine_large", 1)
    forced = simulate_gemm(chip, m=m, k=k, n=n)
    ex = forced.details["extrapolated"]
    assert ex["dim"] == "waves" and ex["period_aligned"] is False  # the fallback, not a dim plan
    assert abs(forced.cycles / full.cycles - 1) < 0.08, (forced.cycles, full.cycles, ex)


# ------------------------------------------------------------- problems far beyond HUGE_WORK (#14)
#
# The size limit allows 10^17 MACs per op; before, a 46416^3 GEMM (10^14 MACs) took 193 s on
# npu_128x128 and a 10^5-cubed one (10^15) did not finish in 300 s: raster-aligned wave samples of
# 91-455 waves and block candidates sampled in 2-10 rounds of a 90-round dim cost 10^8 - 10^10
# DRAM chunks.  Now a huge problem's samples are bounded (X.SAMPLE_BUDGET): whole waves without
# raster alignment, candidates whose samples cost more skipped while an affordable one is left,
# and a dim plan's samples themselves extrapolated along another dim.


def _closed_form_compute_cycles(chip, macs: float) -> float:
    """MACs over the chip's peak MACs per cycle: every array of every core busy every cycle."""
    per_cycle = sum(a.rows * a.cols * a.count for a in chip.cores.arrays) * chip.cores.count
    return macs / per_cycle


def test_a_1e15_mac_gemm_answers_in_seconds(no_cache):
    chip = load_chip("npu_128x128")
    t0 = time.perf_counter()
    r = simulate_gemm(chip, m=100_000, k=100_000, n=100_000)
    took = time.perf_counter() - t0
    assert took < 30, took  # ~6 s on the 2-core build machine; > 300 s before
    assert r.macs == 1e15
    assert r.cycles >= r.roofline_cycles
    assert r.cycles <= 3 * _closed_form_compute_cycles(chip, r.macs), (r.cycles, r.roofline_cycles)
    ex = r.details["extrapolated"]
    assert ex["dim"] == "waves" and ex["period_aligned"] is False and ex["steady"] is True


def test_a_46416_cubed_gemm_is_fast_and_close_to_sampling_every_candidate(no_cache):
    """The answer the old plan gave after 193 s (the block candidate, sampled along n in 2-10 of
    its 90 rounds: 2,118,836,095 cycles), within 2 %, from its affordable cyclic candidate."""
    chip = load_chip("npu_128x128")
    t0 = time.perf_counter()
    r = simulate_gemm(chip, m=46416, k=46416, n=46416)
    took = time.perf_counter() - t0
    assert took < 30, took  # ~1.2 s on the 2-core build machine
    assert abs(r.cycles / 2_118_836_095 - 1) < 0.02, r.cycles
    assert r.mapping["compute"]["candidates_too_costly_to_sample"] >= 1
    assert r.cycles >= r.roofline_cycles


@pytest.mark.slow
def test_a_one_core_1e15_gemm_extrapolates_its_samples_along_a_second_dim(no_cache):
    """edge_npu has one core (block distribution only): each sample along one dim is itself
    extrapolated along another (273 s with only the candidate choice, > 15 min before)."""
    chip = load_chip("edge_npu")
    t0 = time.perf_counter()
    r = simulate_gemm(chip, m=100_000, k=100_000, n=100_000, dtype="int8")
    took = time.perf_counter() - t0
    assert took < 90, took  # ~23 s on the 2-core build machine
    assert "samples_extrapolated" in r.details["extrapolated"]
    assert r.cycles >= r.roofline_cycles
    # the array's fill and drain around 256x128 tiles on its 64x32 array: 1.6x the closed form
    assert r.cycles <= 2 * _closed_form_compute_cycles(chip, r.macs), r.cycles
    assert abs(r.cycles / r.mapping["estimated_cycles"] - 1) < 0.1, (r.cycles, r.mapping["estimated_cycles"])


def test_problems_of_at_most_huge_work_keep_their_plans():
    """The bounds apply only above HUGE_WORK: a plan's samples, however costly, are kept below it."""
    small = X.DimPlan(dim="n", round_size=128, rounds=90, samples=(2, 4), work=X.HUGE_WORK)
    assert X.sample_work(small) > 0 and not X.too_costly(small)
    big = X.DimPlan(dim="n", round_size=128, rounds=90, samples=(2, 4), work=X.HUGE_WORK * 100)
    assert X.too_costly(big)


def test_the_cli_says_a_huge_gemm_is_sampled_and_answers(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = dict(os.environ, PYTHONPATH=str(root), SIM_NO_CACHE="1")
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "sim", "gemm", "npu_128x128", "--m", "100000", "--k", "100000",
                           "--n", "100000", "--fidelity", "fast"], capture_output=True, text=True, env=env,
                          cwd=root, timeout=300)
    took = time.perf_counter() - t0
    assert proc.returncode == 0, proc.stderr
    assert "1e+15 multiply-accumulates: simulated from samples of its loops and extrapolated" in proc.stderr
    assert "cycles" in proc.stdout
    assert took < 60, took  # ~4 s on the 2-core build machine, start-up included


def test_a_long_gemm_reports_its_candidates_and_engine_runs(no_cache, monkeypatch, capsys):
    """A huge GEMM takes up to a couple of minutes at the size limit: `sim gemm` prints on
    stderr which candidate and engine run it is at, every PROGRESS_INTERVAL_S (here 0)."""
    import sim.cli._common as common
    from sim.cli import main
    from sim.model.engine.progress import listening

    events = []
    clear_cache()
    with listening(events.append):
        simulate_gemm(load_chip("npu_128x128"), m=3000, k=2000, n=1000, dtype="bf16")
    assert events, "no engine run was reported"
    assert [e.engine_runs for e in events] == list(range(1, len(events) + 1))
    assert all(1 <= e.candidate <= e.candidates and e.op == "gemm" for e in events)
    assert "m x k x n" in events[0].last_run
    monkeypatch.setattr(common, "PROGRESS_INTERVAL_S", 0.0)
    clear_cache()
    assert main(["gemm", "npu_128x128", "--m", "3000", "--k", "2000", "--n", "1001", "--dtype", "bf16"]) == 0
    err = capsys.readouterr().err
    assert "candidate 1 of" in err and "engine run 1 (" in err
    clear_cache()
    assert main(["gemm", "npu_128x128", "--m", "3000", "--k", "2000", "--n", "1002", "--dtype", "bf16", "-q"]) == 0
    assert "engine run" not in capsys.readouterr().err  # -q: silent
