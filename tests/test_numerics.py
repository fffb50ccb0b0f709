"""Number-format error measurement: quantisers against hand-computed values."""
from __future__ import annotations

import math

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from sim.errors import UnknownNameError  # noqa: E402
from sim.model.numerics import (E2M1_GRID, format_error, format_error_table, mx_shared_scale,  # noqa: E402
                          quantize, round_to_float_grid)


def t64(values):
    return torch.tensor(values, dtype=torch.float64)


def e2m1(x):
    return round_to_float_grid(t64(x), 1, 0, 6.0)


def test_e2m1_grid_points_are_exact():
    grid = list(E2M1_GRID) + [-v for v in E2M1_GRID]
    assert e2m1(grid).tolist() == grid


def test_e2m1_ties_to_even_and_saturation():
    # midpoints: 0.25 -> 0, 0.75 -> 1, 1.25 -> 1, 1.75 -> 2, 2.5 -> 2, 3.5 -> 4, 5 -> 4
    assert e2m1([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0]).tolist() == [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0]
    assert e2m1([0.26, 5.01, 7.0, 1e9, -100.0]).tolist() == [0.5, 6.0, 6.0, 6.0, -6.0]


@pytest.mark.parametrize("name, tdtype, mbits, emin, vmax", [
    ("e4m3", "float8_e4m3fn", 3, -6, 448.0),
    ("e5m2", "float8_e5m2", 2, -14, 57344.0),
])
def test_fp8_grid_matches_torch_casts(name, tdtype, mbits, emin, vmax):
    g = torch.Generator().manual_seed(1)
    for scale in (1e-4, 1e-2, 1.0, 30.0, vmax / 8):
        x = (torch.randn(20000, generator=g, dtype=torch.float64) * scale).clamp(-vmax, vmax)
        ours = round_to_float_grid(x, mbits, emin, vmax)
        ref = x.to(getattr(torch, tdtype)).to(torch.float64)
        assert torch.equal(ours, ref)
    # saturating (torch's cast would give NaN above the largest value)
    assert round_to_float_grid(t64([500.0, -1e6]), 3, -6, 448.0).tolist() == [448.0, -448.0]


def test_fp8_hand_values():
    e4m3 = lambda v: round_to_float_grid(t64(v), 3, -6, 448.0).tolist()  # noqa: E731
    # 1 + 1/16 is halfway between 1 and 1.125: ties to even -> 1; smallest subnormal 2^-9
    assert e4m3([1.0625, 1.1875, 2 ** -9, 2 ** -10, 3 * 2 ** -11]) == [1.0, 1.25, 2 ** -9, 0.0, 2 ** -9]


@pytest.mark.parametrize("e", [-6, -1, 0, 3, 20])
def test_mxfp4_block_with_max_6_times_2e_is_exact(e):
    block = [v * 2.0 ** e for v in (6.0, -4.0, 3.0, 1.5, 0.5, 0.0, -1.0, 2.0)] * 4  # 32 values
    assert float(mx_shared_scale(t64([6 * 2.0 ** e]))) == 2.0 ** e
    r = format_error(np.array([block]), "mxfp4")
    assert r["max_abs_error"] == 0.0 and r["sqnr_db"] == math.inf


def test_mxfp4_scale_rule_and_saturation():
    # amax 7: floor(log2 7) = 2 -> X = 2^0; 7 saturates to 6
    assert float(mx_shared_scale(t64([7.0]))) == 1.0
    q = quantize([[7.0] + [0.3] * 31], "mxfp4")
    assert q[0, 0].item() == 6.0 and q[0, 1].item() == 0.5
    # amax 8: X = 2^1, so 0.3 -> 0.15 on the grid -> 0 (below the 0.25 midpoint)
    q = quantize([[8.0] + [0.3] * 31], "mxfp4")
    assert q[0, 0].item() == 8.0 and q[0, 1].item() == 0.0


def test_nvfp4_hand_example():
    # tensor amax 6 -> s_t = 6/(448*6) = 1/448; block amax 3 -> block scale 3/6*448 = 224 (exact in E4M3)
    w = [[6.0] + [0.0] * 15, [3.0, 1.5, -0.75, 0.25] + [0.0] * 12]
    q = quantize(w, "nvfp4")
    s_t = float(torch.tensor(1 / 448, dtype=torch.float32))
    unit = 224 * s_t  # = 0.5 up to fp32 rounding of the tensor scale
    assert q[1, :4].tolist() == pytest.approx([6 * unit, 3 * unit, -1.5 * unit, 0.5 * unit], rel=1e-12)
    assert q[0, 0].item() == pytest.approx(6.0, rel=1e-6)


def test_int8_per_channel_hand_example():
    w = [[127.0, 63.5, -1.0, 0.2], [0.0, 0.0, 0.0, 0.0], [1.0, -0.5, 0.25, 0.0]]
    q = quantize(w, "int8")
    # row 0: scale 1 -> 63.5 rounds half to even (64), 0.2 -> 0
    assert q[0].tolist() == [127.0, 64.0, -1.0, 0.0]
    assert q[1].tolist() == [0.0] * 4
    s = 1 / 127
    assert q[2].tolist() == pytest.approx([1.0, -64 * s, 32 * s, 0.0])  # -63.5 -> -64, 31.75 -> 32
    assert format_error(w, "int8")["bits_per_value"] == 8 + 16 / 4


def test_int4_groupwise_hand_example():
    # one group [-1, 0, 2, 0.1]: s = 3/15 = 0.2, zero = 5; 0.1/0.2 = 0.5 -> 0 (half to even)
    q = quantize([[-1.0, 0.0, 2.0, 0.1]], "int4", group=4)
    assert q[0].tolist() == pytest.approx([-1.0, 0.0, 2.0, 0.0])
    qs = quantize([[-7.0, 3.5, 1.0, 0.4]], "int4", group=4, symmetric=True)  # s = 1
    assert qs[0].tolist() == [-7.0, 4.0, 1.0, 0.0]
    w = torch.randn(8, 300, generator=torch.Generator().manual_seed(3))  # 300: padded groups
    assert quantize(w, "int4").shape == (8, 300)
    assert format_error(w, "int4")["bits_per_value"] == 4 + 20 / 128
    assert format_error(w, "int4", symmetric=True)["bits_per_value"] == 4 + 16 / 128


def test_sparse_2_4_keeps_two_largest_of_four():
    q = quantize([[1.0, -3.0, 2.0, 0.5, 1.0, 1.0, 1.0, 1.0]], "2:4", base=None)
    assert q[0].tolist() == [0.0, -3.0, 2.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    w = torch.randn(64, 256, generator=torch.Generator().manual_seed(4))
    qz = quantize(w, "2:4")
    assert (qz == 0).double().mean().item() == 0.5
    assert format_error(w, "2:4")["bits_per_value"] == 9.0


def test_bits_per_value_of_block_formats():
    w = torch.randn(16, 256, generator=torch.Generator().manual_seed(5))
    assert format_error(w, "nvfp4")["bits_per_value"] == 4.5
    assert format_error(w, "mxfp4")["bits_per_value"] == 4.25
    assert format_error(w, "fp8_e4m3")["bits_per_value"] == 8.0


def test_error_ordering_on_gaussian_weights():
    w = torch.randn(512, 1024, generator=torch.Generator().manual_seed(0))
    err = {f: format_error(w, f)["rel_fro_error"] for f in
           ("bf16", "int8", "fp8_e4m3", "fp8_e5m2", "int4", "mxfp4", "nvfp4", "2:4")}
    assert err["bf16"] < err["int8"] < err["fp8_e4m3"] < err["fp8_e5m2"] < err["int4"] < err["2:4"]
    assert err["fp8_e4m3"] < err["mxfp4"] and err["nvfp4"] < err["mxfp4"]
    r = format_error(w, "int8")
    assert r["sqnr_db"] == pytest.approx(-20 * math.log10(r["rel_fro_error"]))
    # uniform quantisation noise: rel error ~ (max/127)/sqrt(12) / std
    expect = (w.abs().amax(dim=1) / 127).pow(2).mean().sqrt().item() / math.sqrt(12)
    assert r["rel_fro_error"] == pytest.approx(expect, rel=0.05)


def test_table_numpy_input_and_errors():
    w = np.random.default_rng(0).standard_normal((32, 128))
    df = format_error_table(w, ["int8", ("int4", {"group": 32}), "nvfp4"])
    assert list(df.index) == ["int8", "int4(group=32)", "nvfp4"]
    assert list(df.columns) == ["rel_fro_error", "max_abs_error", "sqnr_db", "bits_per_value"]
    assert df.loc["int8", "rel_fro_error"] < df.loc["nvfp4", "rel_fro_error"]
    assert len(format_error_table(w)) == 7
    with pytest.raises(UnknownNameError, match="did you mean"):
        format_error(w, "mxfp5")
