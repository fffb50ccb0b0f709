"""The PE-level reference simulator (sim.model.reference) against A@B, and the closed forms against it.

The reference moves every operand PE to PE, cycle by cycle, with real numbers; the closed
forms in sim.model.dataflow must reproduce its cycle count, fold count and every access count.
"""
from __future__ import annotations

import numpy as np
import pytest

from sim.spec.dataflow_spec import DataflowSpec
from sim.model.dataflow import ACCESS_FIELDS, get_dataflow
from sim.errors import ShapeError
from sim.model.reference import simulate_gemm

CONFIGS = [("os", {}), ("ws", {}), ("is", {}),
           ("rs", {"row_length": 1}), ("rs", {"row_length": 2}), ("rs", {"row_length": 3})]


def _check(df, opts, m, k, n, R, C, rng):
    A = rng.integers(-9, 10, (m, k))
    B = rng.integers(-9, 10, (k, n))
    res = simulate_gemm(df, A, B, R, C, **opts)
    rep = get_dataflow(df, **opts).fold_report(m, k, n, R, C)
    where = f"{df} {opts} m={m} k={k} n={n} on {R}x{C}"
    np.testing.assert_array_equal(res.output, A @ B, err_msg=where)
    assert res.folds == rep.folds, where
    assert res.fold_cycles == [rep.cycles_per_fold] * rep.folds, where
    assert res.compute_cycles == rep.compute_cycles, where
    assert res.scalesim_cycles == rep.scalesim_cycles, where
    assert res.macs == rep.macs == m * k * n, where
    diffs = {f: (res.counts[f], getattr(rep, f)) for f in ACCESS_FIELDS if res.counts[f] != getattr(rep, f)}
    assert not diffs, f"{where}: reference vs closed form {diffs}"
    return res, rep


@pytest.mark.parametrize("df,opts", CONFIGS, ids=[f"{d}{o.get('row_length', '')}" for d, o in CONFIGS])
def test_random_shapes_cycle_and_access_exact(df, opts):
    rng = np.random.default_rng(2024 + len(df) + opts.get("row_length", 0))
    for _ in range(25):
        R, C = (int(x) for x in rng.integers(1, 9, 2))
        m, k, n = (int(x) for x in rng.integers(1, 41, 3))
        _check(df, opts, m, k, n, R, C, rng)


EDGE_SHAPES = [
    # (m, k, n, R, C)
    (1, 1, 1, 1, 1),      # smallest everything
    (1, 1, 1, 4, 4),      # one MAC on a padded array
    (3, 2, 2, 4, 4),      # every dimension smaller than the array
    (8, 8, 8, 4, 4),      # exact multiples
    (9, 7, 5, 4, 3),      # edge folds in both directions
    (2, 13, 1, 3, 5),     # a long reduction, one output column
    (17, 1, 6, 2, 2),     # k = 1
    (5, 6, 7, 1, 8),      # a single array row
    (5, 6, 7, 8, 1),      # a single array column
]


@pytest.mark.parametrize("df,opts", CONFIGS, ids=[f"{d}{o.get('row_length', '')}" for d, o in CONFIGS])
def test_edge_shapes(df, opts):
    rng = np.random.default_rng(99)
    for (m, k, n, R, C) in EDGE_SHAPES:
        _check(df, opts, m, k, n, R, C, rng)


def test_scalesim_4x4x4_os_from_the_reference():
    rng = np.random.default_rng(0)
    res, _ = _check("os", {}, 4, 4, 4, 4, 4, rng)
    assert res.compute_cycles == 10 and res.scalesim_cycles == 9


def test_rs_row_length_1_is_ws_in_the_reference_too():
    rng = np.random.default_rng(5)
    A, B = rng.integers(-5, 6, (7, 10)), rng.integers(-5, 6, (10, 6))
    ws = simulate_gemm("ws", A, B, 3, 4)
    rs = simulate_gemm("rs", A, B, 3, 4, row_length=1)
    assert ws.counts == rs.counts and ws.fold_cycles == rs.fold_cycles


def test_rs_long_rows_cut_partial_sum_traffic_in_the_reference():
    rng = np.random.default_rng(6)
    A, B = rng.integers(-5, 6, (6, 24)), rng.integers(-5, 6, (24, 3))
    by_l = {L: simulate_gemm("rs", A, B, 4, 3, row_length=L) for L in (1, 2, 3, 6)}
    psum = [by_l[L].counts["sram_reads_psum"] for L in (1, 2, 3, 6)]
    assert psum == [5 * 18, 2 * 18, 1 * 18, 0]
    assert all(np.array_equal(r.output, A @ B) for r in by_l.values())


def test_output_stationary_with_n_on_the_rows():
    spec = get_dataflow("os").spec.model_dump()
    spec.update(name="os_t", spatial_rows="n", spatial_cols="m")
    df = get_dataflow(DataflowSpec.model_validate(spec))
    rng = np.random.default_rng(8)
    for (m, k, n, R, C) in [(5, 4, 9, 4, 3), (7, 3, 2, 2, 5)]:
        _check(df, {}, m, k, n, R, C, rng)


def test_reference_rejects_bad_shapes():
    with pytest.raises(ShapeError):
        simulate_gemm("ws", np.ones((3, 4), int), np.ones((5, 2), int), 2, 2)
    with pytest.raises(ShapeError):
        simulate_gemm("ws", np.ones((3, 4), int), np.ones((4, 2), int), 0, 2)
