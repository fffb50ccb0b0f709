"""Edge folds on the rows and columns they use (``pads_edge_folds: false``), against the PE reference.

SCALE-Sim pads every edge fold to the full array, and so do fixed-shape MMA instructions
(the GPU chip files say ``pads_edge_folds: true``); a systolic array needs not - a fold that
uses 8 of 256 columns streams its inputs across 8.  The closed form
(``Dataflow.trimmed_compute_cycles``, sim/model/dataflow/) must equal the PE reference run with
``trim_edge_folds`` (no bubbles in unused PEs, sums still down the output path to the bottom
edge), and with that schedule more columns never slow a fold.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from script_import import load_script

from sim.apps.single_op import simulate
from sim.ir.ops import Gemm
from sim.model.dataflow import ACCESS_FIELDS, get_dataflow
from sim.model.mapper.compute import ArrayChoice, gemm_step_cycles
from sim.model.reference import simulate_gemm
from sim.spec.registry import load_chip

CONFIGS = [("os", {}), ("ws", {}), ("is", {}), ("rs", {"row_length": 2}), ("rs", {"row_length": 3})]


@pytest.mark.parametrize("df,opts", CONFIGS, ids=[f"{d}{o.get('row_length', '')}" for d, o in CONFIGS])
def test_trimmed_closed_form_equals_the_pe_reference(df, opts):
    rng = np.random.default_rng(36 + len(df) + opts.get("row_length", 0))
    model = get_dataflow(df, **opts)
    shorter = 0
    for _ in range(12):
        m, k, n = (int(x) for x in rng.integers(1, 10, 3))
        R, C = (int(x) for x in rng.integers(2, 6, 2))
        A, B = rng.integers(-5, 6, (m, k)), rng.integers(-5, 6, (k, n))
        trimmed = simulate_gemm(df, A, B, R, C, trim_edge_folds=True, **opts)
        padded = simulate_gemm(df, A, B, R, C, **opts)
        where = f"{df} {opts} {m}x{k}x{n} on {R}x{C}"
        np.testing.assert_array_equal(trimmed.output, A @ B, err_msg=where)
        assert trimmed.compute_cycles == model.trimmed_compute_cycles(m, k, n, R, C), where
        assert trimmed.compute_cycles <= padded.compute_cycles == model.compute_cycles(m, k, n, R, C), where
        shorter += trimmed.compute_cycles < padded.compute_cycles
        # bubbles count nothing: trimming changes time, not one access
        assert {f: trimmed.counts[f] for f in ACCESS_FIELDS} == {f: padded.counts[f] for f in ACCESS_FIELDS}, where
    assert shorter >= 6   # the draw does exercise edge folds


@pytest.mark.parametrize("df,opts", CONFIGS, ids=[f"{d}{o.get('row_length', '')}" for d, o in CONFIGS])
def test_trimmed_schedule_properties(df, opts):
    """Equal to the padded one where the problem fills the array; never longer; more columns
    never longer; more rows never longer where the dataflow has no output path below them
    (OS; under a reduction the sums of a short fold still cross the taller array)."""
    model = get_dataflow(df, **opts)
    rng = np.random.default_rng(7)
    m, k, n = (rng.integers(1, 700, 500) for _ in range(3))
    for R, C in ((8, 8), (32, 16), (128, 128)):
        t = model.trimmed_compute_cycles(m, k, n, R, C)
        assert (t <= model.compute_cycles(m, k, n, R, C)).all()
        assert (model.trimmed_compute_cycles(m, k, n, R, 2 * C) <= t).all()
        if df == "os":
            assert (model.trimmed_compute_cycles(m, k, n, 2 * R, C) <= t).all()
        L = opts.get("row_length", 1)
        full = {"m": 3 * R if model.spec.spatial_rows == "m" else 5, "k": 2 * R * L, "n": 4 * C}
        if model.spec.spatial_cols == "m":
            full = {"m": 4 * C, "k": 2 * R * L, "n": 5}
        args = (full["m"], full["k"], full["n"], R, C)
        assert model.trimmed_compute_cycles(*args) == model.compute_cycles(*args)


@pytest.mark.parametrize("df,opts", CONFIGS, ids=[f"{d}{o.get('row_length', '')}" for d, o in CONFIGS])
def test_overlapped_trimmed_folds(df, opts):
    """With fold overlap the trimmed chain costs what the trimmed schedule does for one fold
    (nothing to overlap) and never more for many; the engine's step + tail is that sum."""
    model = get_dataflow(df, **opts)
    rng = np.random.default_rng(11)
    m, k, n = (rng.integers(1, 700, 400) for _ in range(3))
    single = 0
    for R, C in ((8, 8), (32, 16), (128, 128)):
        choice = ArrayChoice("a", R, C, 1, "bf16", 1.0, False, df)
        plain = sum(gemm_step_cycles(model, choice, m, n, k))
        step, tail = gemm_step_cycles(model, dataclasses.replace(choice, fold_overlap=True), m, n, k)
        np.testing.assert_array_equal(plain, model.trimmed_compute_cycles(m, k, n, R, C))
        assert (step + tail <= plain).all()
        L = opts.get("row_length", 1)
        ext = {"m": m, "k": k, "n": n}
        one = (ext[model.spec.spatial_rows] <= R * L) & (ext[model.spec.spatial_cols] <= C)
        np.testing.assert_array_equal((step + tail)[one], plain[one])
        single += int(one.sum())
    assert single >= 20   # the draw has one-fold problems on the largest array


def test_a_wider_array_does_not_slow_a_narrow_tile():
    """tpu_v1's 64x256x512 int8 GEMM ran its 256-column tiles at the same cost on a 512-column
    array plus 256 padding columns a fold (x0.884 before the trim); now the wider array is no
    slower, and scalesim_32x32 keeps SCALE-Sim's padding (its cycles are SCALE-Sim's)."""
    op = Gemm("g", 64, 256, 512, dtype="int8")
    base = simulate(load_chip("tpu_v1"), op).seconds
    wide = simulate(load_chip("tpu_v1", ["cores.arrays.mxu.cols=512"]), op).seconds
    assert wide <= base * 1.001
    assert load_chip("scalesim_32x32").cores.arrays[0].pads_edge_folds
    assert not load_chip("tpu_v1").cores.arrays[0].pads_edge_folds


SYSTOLIC = ("tpu_v1", "npu_128x128", "edge_npu", "eyeriss")


@pytest.mark.parametrize("name", SYSTOLIC)
def test_more_columns_never_slow_a_gemm_on_a_systolic_chip(name):
    """Six GEMMs of random shape (the knob search's own draw, validation/knob_monotonicity.py,
    seed 1) on each systolic chip, with twice the array columns: none more than 1 % slower
    (before the trim, tpu_v1 had 6 of 8 ops 1-12 % slower with 512 columns)."""
    import random
    from pathlib import Path
    path = Path(__file__).resolve().parents[1] / "validation" / "knob_monotonicity.py"
    script = load_script(path)
    chip = load_chip(name)
    wide = load_chip(name, [script.double_knob(chip, "cols")])
    gemms = [op for op in script.draw_ops(chip, 6, random.Random(f"1:{name}")) if isinstance(op, Gemm)]
    for op in gemms:
        base, doubled = simulate(chip, op).seconds, simulate(wide, op).seconds
        assert base / doubled >= 0.99, (op, base / doubled)


def test_sim_show_states_the_fold_schedule_a_study_depends_on():
    """The two schedule defaults that can decide a study (fold overlap, derived or stated,
    and edge-fold padding) are in ``sim show`` and its JSON, as the engine uses them."""
    from sim.apps.single_op import chip_summary
    tpu = chip_summary("tpu_v1")["arrays"][0]
    assert tpu["fold_overlap"] and tpu["fold_overlap_derived"] and not tpu["pads_edge_folds"]
    npu = chip_summary("npu_128x128")["arrays"][0]
    assert not npu["fold_overlap"] and not npu["pads_edge_folds"]
    gpu = chip_summary("h200_sxm")["arrays"][0]
    assert gpu["fold_overlap"] and not gpu["fold_overlap_derived"] and gpu["pads_edge_folds"]
    assert chip_summary("scalesim_32x32")["arrays"][0]["pads_edge_folds"]
