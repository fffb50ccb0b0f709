"""The DRAM event counts of an extrapolated run stay possible.

A run sampled along k and extrapolated by the line through two samples had a row-hit rate
of -0.086 (int8 128x28672x16384 through torch._int_mm's sm80 path on h100_sxm, the H100
streams case list, in 128x256x128 tiles: the mapper's pick then): its sample of 29 k rounds had more row hits than its sample of 56, as
A's row stride (k) lays each sample's rows out differently.  Independent truth: a rate is in
[0, 1], and row outcomes sum to the accesses the line extrapolates; the timing is the line's.
"""
from __future__ import annotations

import dataclasses

import numpy as np

import sim.model.kernels.dram_layout as D
from sim.apps.kernel_harness import harness_clock
from sim.apps.validation import case_kernels
from sim.apps.validation_cases import read_cases
from sim.model.engine.extrapolate import _events_possible
from sim.model.engine.simulate import simulate_op
from sim.spec.registry import load_chip

_CASES = "validation/measurements/h100_micro_sm80_streams.csv"


def test_a_line_that_takes_row_hits_below_zero_keeps_the_larger_samples_mix():
    ref = np.zeros(D.N_STATS)
    ref[[D.S_REQUESTS, D.S_ROW_HITS, D.S_ROW_EMPTY, D.S_ROW_CONFLICTS, D.S_ACTIVATES]] = [100, 30, 10, 60, 70]
    line = ref.copy()
    line[[D.S_REQUESTS, D.S_ROW_HITS, D.S_ROW_EMPTY, D.S_ROW_CONFLICTS, D.S_ACTIVATES]] = [400, -20, 60, 360, 420]
    line[D.S_BYTES_READ] = 12345.0
    out = _events_possible(line, ref)
    assert list(out[[D.S_ROW_HITS, D.S_ROW_EMPTY, D.S_ROW_CONFLICTS, D.S_ACTIVATES]]) == [120, 40, 240, 280]
    assert out[D.S_REQUESTS] == 400 and out[D.S_BYTES_READ] == 12345.0  # only event counts change
    fine = line.copy()
    fine[D.S_ROW_HITS] = 5.0
    assert np.array_equal(_events_possible(fine, ref), fine)  # a possible line is kept as it is


def test_extrapolated_int8_streams_report_a_row_hit_rate_between_zero_and_one(no_cache):
    chip = load_chip("h100_sxm")
    seen = 0
    for case in read_cases(_CASES):
        if (case.get("m"), case.get("k"), case.get("n")) not in ((128, 28672, 16384), (128, 28672, 24576)):
            continue
        clocked, ops = harness_clock(chip, lambda c: case_kernels(c, case))
        for op, opts in ops:
            r = simulate_op(clocked, op, dataclasses.replace(opts, tiles=(128, 256, 128)))
            assert r.details.get("extrapolated"), "the case is meant to be sampled and extrapolated"
            assert 0.0 <= r.details["dram"]["row_hit_rate"] <= 1.0, r.details["dram"]
            seen += 1
    assert seen == 2
