"""Convolutions: im2col lowering (WS/OS/IS, as SCALE-Sim) and Eyeriss's row primitive (RS).

Truth: SCALE-Sim 3.0.0 runs on convolution layers (recorded below: dataflow, R, C,
(ifmap_h, ifmap_w, filt_h, filt_w, channels, num_filters, stride), "Total Cycles",
"SRAM IFMAP Reads", "SRAM Filter Reads", "SRAM OFMAP Writes", "Mapping Efficiency %"),
a direct convolution, and the PE-level reference for the access counts.
"""
from __future__ import annotations

import numpy as np
import pytest

from sim.model.dataflow import ACCESS_FIELDS, conv_report, get_dataflow, scalesim_conv_gemm
from sim.errors import MappingError, ShapeError
from sim.model.reference import direct_conv, simulate_conv
from sim.ir.ops import Conv2d

SCALESIM_3_0_0_CONV = [
    ('os', 4, 4, (8, 8, 3, 3, 2, 4, 1), 215, 648, 648, 216, 100.0),
    ('os', 4, 4, (7, 9, 3, 2, 3, 5, 2), 191, 540, 360, 139, 58.59375),
    ('os', 4, 4, (6, 6, 3, 3, 1, 2, 2), 44, 81, 54, 42, 37.5),
    ('os', 4, 4, (10, 10, 1, 1, 4, 6, 1), 499, 800, 600, 1000, 75.0),
    ('os', 4, 4, (9, 7, 4, 3, 2, 3, 3), 89, 216, 216, 51, 56.25),
    ('os', 4, 4, (5, 5, 5, 5, 2, 2, 1), 55, 50, 100, 10, 12.5),
    ('os', 8, 4, (8, 8, 3, 3, 2, 4, 1), 139, 648, 360, 204, 90.0),
    ('os', 8, 4, (7, 9, 3, 2, 3, 5, 2), 111, 540, 180, 123, 58.59375),
    ('os', 8, 4, (6, 6, 3, 3, 1, 2, 2), 37, 81, 36, 42, 28.125),
    ('os', 8, 4, (10, 10, 1, 1, 4, 6, 1), 363, 800, 312, 912, 72.11538461538461),
    ('os', 8, 4, (9, 7, 4, 3, 2, 3, 3), 67, 216, 144, 51, 42.1875),
    ('os', 8, 4, (5, 5, 5, 5, 2, 2, 1), 59, 50, 100, 14, 6.25),
    ('ws', 4, 4, (8, 8, 3, 3, 2, 4, 1), 229, 648, 72, 720, 90.0),
    ('ws', 4, 4, (7, 9, 3, 2, 3, 5, 2), 249, 540, 90, 375, 56.25),
    ('ws', 4, 4, (6, 6, 3, 3, 1, 2, 2), 56, 81, 18, 54, 37.5),
    ('ws', 4, 4, (10, 10, 1, 1, 4, 6, 1), 219, 800, 24, 600, 75.0),
    ('ws', 4, 4, (9, 7, 4, 3, 2, 3, 3), 113, 216, 72, 162, 75.0),
    ('ws', 4, 4, (5, 5, 5, 5, 2, 2, 1), 142, 50, 100, 26, 48.07692307692308),
    ('ws', 8, 4, (8, 8, 3, 3, 2, 4, 1), 161, 648, 72, 432, 75.0),
    ('ws', 8, 4, (7, 9, 3, 2, 3, 5, 2), 197, 540, 90, 225, 46.875),
    ('ws', 8, 4, (6, 6, 3, 3, 1, 2, 2), 53, 81, 18, 36, 28.125),
    ('ws', 8, 4, (10, 10, 1, 1, 4, 6, 1), 235, 800, 24, 600, 37.5),
    ('ws', 8, 4, (9, 7, 4, 3, 2, 3, 3), 80, 216, 72, 81, 75.0),
    ('ws', 8, 4, (5, 5, 5, 5, 2, 2, 1), 132, 50, 100, 14, 44.642857142857146),
    ('is', 4, 4, (8, 8, 3, 3, 2, 4, 1), 629, 648, 648, 720, 90.0),
    ('is', 4, 4, (7, 9, 3, 2, 3, 5, 2), 299, 270, 360, 375, 84.375),
    ('is', 4, 4, (6, 6, 3, 3, 1, 2, 2), 107, 81, 54, 54, 56.25),
    ('is', 4, 4, (10, 10, 1, 1, 4, 6, 1), 399, 400, 600, 600, 100.0),
    ('is', 4, 4, (9, 7, 4, 3, 2, 3, 3), 233, 216, 216, 162, 75.0),
    ('is', 4, 4, (5, 5, 5, 5, 2, 2, 1), 155, 50, 100, 26, 24.03846153846154),
    ('is', 8, 4, (8, 8, 3, 3, 2, 4, 1), 593, 648, 648, 432, 75.0),
    ('is', 8, 4, (7, 9, 3, 2, 3, 5, 2), 275, 270, 360, 225, 70.3125),
    ('is', 8, 4, (6, 6, 3, 3, 1, 2, 2), 119, 81, 54, 36, 42.1875),
    ('is', 8, 4, (10, 10, 1, 1, 4, 6, 1), 599, 400, 600, 600, 50.0),
    ('is', 8, 4, (9, 7, 4, 3, 2, 3, 3), 188, 216, 216, 81, 75.0),
    ('is', 8, 4, (5, 5, 5, 5, 2, 2, 1), 139, 50, 100, 14, 22.321428571428573),
]


def test_scalesim_conv_runs():
    assert len(SCALESIM_3_0_0_CONV) == 36
    for (df, R, C, layer, total, ifmap, filt, ofmap, map_eff) in SCALESIM_3_0_0_CONV:
        g = scalesim_conv_gemm(*layer)
        r = get_dataflow(df).fold_report(g.m, g.k, g.n, R, C)
        where = f"{df} {layer} on {R}x{C}"
        assert r.scalesim_cycles == total, where
        assert (r.scalesim_sram_reads_input, r.scalesim_sram_reads_weight, r.scalesim_sram_writes_output) == \
            (ifmap, filt, ofmap), where
        assert r.mapping_efficiency * 100 == pytest.approx(map_eff, rel=1e-12), where


def test_scalesim_conv_gemm_rounds_the_output_up():
    # 6x6 ifmap, 3x3 filter, stride 2: SCALE-Sim makes 3x3 outputs (ceil(5/2)), not 2x2
    g = scalesim_conv_gemm(6, 6, 3, 3, 4, 8, 2)
    assert g == (9, 36, 8, 3, 3)
    assert Conv2d("c", in_h=6, in_w=6, in_channels=4, out_channels=8, kernel_h=3, kernel_w=3, stride=2).out_h == 2
    # ResNet's 7x7/2 stem without padding: SCALE-Sim 110x110, floor((224 - 7) / 2) + 1 = 109
    assert scalesim_conv_gemm(224, 224, 7, 7, 3, 64, 2)[3:] == (110, 110)
    with pytest.raises(ShapeError):
        scalesim_conv_gemm(4, 4, 5, 3, 1, 1, 1)
    with pytest.raises(ShapeError):
        scalesim_conv_gemm(4, 4, 3, 3, 0, 1, 1)


def _conv(rng, Nb, Cin, Nf, FH, S, U, pad, H, W):
    I = rng.integers(-4, 5, (Nb, Cin, H, W))
    Wt = rng.integers(-4, 5, (Nf, Cin, FH, S))
    op = Conv2d("c", in_h=H, in_w=W, in_channels=Cin, out_channels=Nf, kernel_h=FH, kernel_w=S,
                stride=U, padding=pad, batch=Nb)
    return I, Wt, op


def _assert_same(res, rep, where):
    assert res.compute_cycles == rep.compute_cycles, where
    assert res.folds == rep.folds, where
    assert res.fold_cycles == [rep.cycles_per_fold] * rep.folds, where
    assert res.macs == rep.macs, where
    diffs = {f: (res.counts[f], getattr(rep, f)) for f in ACCESS_FIELDS if res.counts[f] != getattr(rep, f)}
    assert not diffs, f"{where}: reference vs closed form {diffs}"


@pytest.mark.parametrize("df", ["os", "ws", "is"])
def test_im2col_conv_in_the_reference(df):
    rng = np.random.default_rng(31)
    for args in [(1, 2, 3, 3, 3, 1, 0, 6, 5), (2, 1, 2, 2, 3, 2, 1, 5, 6)]:
        I, Wt, op = _conv(rng, *args)
        res = simulate_conv(df, I, Wt, 3, 4, stride=op.stride, padding=op.padding)
        np.testing.assert_array_equal(res.output, direct_conv(I, Wt, op.stride, op.padding))
        rep = conv_report(get_dataflow(df), op, 3, 4)
        g = op.as_gemm()
        assert (rep.m, rep.k, rep.n) == (g.m, g.k, g.n)
        _assert_same(res, rep, f"{df} {args}")


@pytest.mark.parametrize("columns", ["output_rows", "filters"])
def test_rs_conv_reference_random(columns):
    rng = np.random.default_rng(17 if columns == "filters" else 71)
    df = get_dataflow("rs")
    for _ in range(30):
        R, C = (int(x) for x in rng.integers(1, 7, 2))
        Nb, Cin, Nf = (int(x) for x in rng.integers(1, 4, 3))
        FH, S, U = (int(x) for x in rng.integers(1, 4, 3))
        pad = int(rng.integers(0, 2))
        H, W = FH + int(rng.integers(0, 6)), S + int(rng.integers(0, 7))
        I, Wt, op = _conv(rng, Nb, Cin, Nf, FH, S, U, pad, H, W)
        res = simulate_conv(df, I, Wt, R, C, stride=U, padding=pad, columns=columns)
        where = f"{columns} Nb={Nb} C={Cin} Nf={Nf} {FH}x{S}/{U} pad={pad} {H}x{W} on {R}x{C}"
        np.testing.assert_array_equal(res.output, direct_conv(I, Wt, U, pad), err_msg=where)
        _assert_same(res, df.conv_report(op, R, C, columns=columns), where)


def test_rs_conv_eyeriss_reuse_hand_computed():
    # one channel, 3x3 filter, stride 1, 6x6 ifmap -> 4x4 output, on a 3x4 array: the logical
    # PE set (3 filter rows x 4 output rows) fits exactly, one fold per filter
    rng = np.random.default_rng(2)
    I, Wt, op = _conv(rng, 1, 1, 2, 3, 3, 1, 0, 6, 6)
    rep = get_dataflow("rs").conv_report(op, 3, 4)
    assert (rep.Sr, rep.Sc, rep.T, rep.passes, rep.folds) == (3, 4, 4, 2, 2)
    assert rep.cycles_per_fold == 3 * 3 + 3 * 4 + 2 + 3
    # each filter row read once per fold and multicast along its array row
    assert rep.sram_reads_weight == 2 * 3 * 3 and rep.rf_writes_weight == 2 * 3 * 3 * 4
    # the 6 ifmap rows stream once per filter (anti-diagonal multicast): 3 + 3 new pixels each
    assert rep.sram_reads_input == 2 * 6 * (3 + 3)
    # every PE still gets its window: 12 PEs x (3 + 3) per filter
    assert rep.rf_writes_input == 2 * 12 * 6
    assert rep.sram_writes_output == 2 * 16 and rep.sram_reads_psum == 0
    res = simulate_conv("rs", I, Wt, 3, 4)
    np.testing.assert_array_equal(res.output, direct_conv(I, Wt))
    _assert_same(res, rep, "hand")


def test_rs_conv_input_reuse_against_im2col():
    rs, ws = get_dataflow("rs"), get_dataflow("ws")
    one = Conv2d("c", in_h=30, in_w=30, in_channels=8, out_channels=1, kernel_h=3, kernel_w=3)
    # per filter, the row primitive reads each ifmap row once (sliding window + diagonal
    # multicast) where im2col reads every pixel once per window it falls in (up to 9 times)
    a, b = rs.conv_report(one, 12, 14), ws.conv_report(one, 12, 14)
    assert a.macs == b.macs and 3 * a.sram_reads_input < b.sram_reads_input
    # Eyeriss's set processes filters in time and re-streams the ifmap for each one, so with
    # many filters im2col on WS (filters across the columns) can read less
    many = Conv2d("c", in_h=30, in_w=30, in_channels=8, out_channels=16, kernel_h=3, kernel_w=3)
    eyeriss = rs.conv_report(many, 12, 14)
    assert eyeriss.sram_reads_input == 16 * rs.conv_report(one, 12, 14).sram_reads_input
    assert eyeriss.sram_reads_input > ws.conv_report(many, 12, 14).sram_reads_input
    # the filters-on-columns orientation shares each ifmap word across the filters as well
    across = rs.conv_report(many, 12, 14, columns="filters")
    assert across.sram_reads_input < ws.conv_report(many, 12, 14).sram_reads_input


def test_1x1_conv_filters_orientation_is_the_rs_gemm_mapping():
    rng = np.random.default_rng(4)
    for (Nb, Cin, Nf, U, H, W, R, C, L) in [(1, 5, 7, 1, 3, 4, 3, 4, 1), (2, 9, 3, 2, 5, 3, 4, 2, 1),
                                            (1, 4, 4, 1, 4, 4, 2, 2, 1)]:
        I, Wt, op = _conv(rng, Nb, Cin, Nf, 1, 1, U, 0, H, W)
        conv = get_dataflow("rs").conv_report(op, R, C, columns="filters")
        g = op.as_gemm()
        gemm = get_dataflow("rs", row_length=L).fold_report(g.m, g.k, g.n, R, C)
        for f in conv.__dataclass_fields__:
            assert getattr(conv, f) == getattr(gemm, f), f
        res = simulate_conv("rs", I, Wt, R, C, stride=U, columns="filters")
        np.testing.assert_array_equal(res.output, direct_conv(I, Wt, U))
        _assert_same(res, gemm, "1x1")


def test_1x1_conv_eyeriss_orientation_is_the_rs_gemm_fold_per_filter():
    """Eyeriss's set puts output rows on the columns: per filter it is the RS GEMM fold
    structure of (m = batch x out_w, k = channels, n = out_h)."""
    for (Nb, Cin, Nf, H, W, R, C) in [(1, 5, 7, 3, 4, 3, 4), (2, 9, 3, 5, 3, 4, 2), (3, 16, 2, 9, 9, 4, 4)]:
        op = Conv2d("c", in_h=H, in_w=W, in_channels=Cin, out_channels=Nf, kernel_h=1, kernel_w=1, batch=Nb)
        conv = get_dataflow("rs").conv_report(op, R, C)
        per_filter = get_dataflow("rs").fold_report(Nb * W, Cin, H, R, C)
        assert conv.compute_cycles == Nf * per_filter.compute_cycles
        assert conv.folds == Nf * per_filter.folds
        for f in ("sram_writes_output", "sram_reads_psum", "rf_reads_psum", "rf_writes_psum", "hops_psum", "macs"):
            assert getattr(conv, f) == Nf * getattr(per_filter, f), f


def test_filters_orientation_has_the_rs_gemm_schedule_with_row_length_kernel_w():
    for (FH, S, Cin, Nf, R, C) in [(3, 3, 4, 5, 4, 3), (2, 5, 3, 2, 5, 2), (1, 4, 7, 9, 3, 4)]:
        op = Conv2d("c", in_h=9, in_w=11, in_channels=Cin, out_channels=Nf, kernel_h=FH, kernel_w=S, stride=2)
        conv = get_dataflow("rs").conv_report(op, R, C, columns="filters")
        g = op.as_gemm()
        gemm = get_dataflow("rs", row_length=S).fold_report(g.m, g.k, g.n, R, C)
        for f in ("compute_cycles", "folds", "cycles_per_fold", "sram_reads_weight", "rf_writes_weight",
                  "sram_writes_output", "sram_reads_psum", "hops_psum", "macs"):
            assert getattr(conv, f) == getattr(gemm, f), f
        assert conv.sram_reads_input <= gemm.sram_reads_input   # the sliding window reuses pixels


def test_systolic_conv_report_is_the_im2col_gemm():
    op = Conv2d("c", in_h=14, in_w=14, in_channels=32, out_channels=64, kernel_h=3, kernel_w=3, padding=1, batch=2)
    g = op.as_gemm()
    for df in ("os", "ws", "is"):
        assert get_dataflow(df).conv_report(op, 16, 16) == get_dataflow(df).fold_report(g.m, g.k, g.n, 16, 16)


def test_rs_conv_errors():
    rs = get_dataflow("rs")
    wide = Conv2d("c", in_h=30, in_w=30, in_channels=1, out_channels=1, kernel_h=3, kernel_w=17)
    with pytest.raises(MappingError, match="register_file_words.weight is 16"):
        rs.conv_report(wide, 4, 4)
    roomy = rs.with_options(overrides={"register_file_words.weight": 32, "register_file_words.input": 32})
    assert roomy.conv_report(wide, 4, 4).row_length == 17
    narrow_in = rs.with_options(overrides={"register_file_words.input": 2})
    with pytest.raises(MappingError, match="sliding ifmap window"):
        narrow_in.conv_report(Conv2d("c", in_h=8, in_w=8, in_channels=1, out_channels=1, kernel_h=3, kernel_w=3), 4, 4)
    ok = Conv2d("c", in_h=6, in_w=6, in_channels=1, out_channels=1, kernel_h=3, kernel_w=3, stride=2)
    with pytest.raises(MappingError, match="columns must be"):
        rs.conv_report(ok, 4, 4, columns="diagonal")
    # SCALE-Sim's rounded-up output size needs a window past the input
    over = Conv2d("c", in_h=6, in_w=6, in_channels=1, out_channels=1, kernel_h=3, kernel_w=3, stride=2,
                  out_h_override=3, out_w_override=3)
    with pytest.raises(ShapeError, match="beyond"):
        rs.conv_report(over, 4, 4)
    with pytest.raises(ShapeError):
        rs.conv_report(ok, 0, 4)
    with pytest.raises(ShapeError, match="one array size"):
        rs.conv_report(ok, np.array([4, 8]), 4)
    from sim.model.dataflow import rs_conv_report
    with pytest.raises(MappingError):
        rs_conv_report(get_dataflow("ws"), ok, 4, 4)


def test_reference_conv_rejects_bad_shapes():
    with pytest.raises(ShapeError):
        simulate_conv("rs", np.ones((1, 2, 5, 5), int), np.ones((1, 3, 3, 3), int), 2, 2)
    with pytest.raises(ShapeError):
        simulate_conv("rs", np.ones((1, 1, 2, 5), int), np.ones((1, 1, 3, 3), int), 2, 2)
    with pytest.raises(ShapeError):
        simulate_conv("ws", np.ones((1, 1, 5, 5), int), np.ones((1, 1, 3, 3), int), 2, 2, stride=0)
