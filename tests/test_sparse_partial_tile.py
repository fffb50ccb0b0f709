"""cuSPARSELt's 2:4 kernel with its 256-row token tile at most half full (issue 11): the stack
rule's numbers are the H100 microbenchmark's (validation/fit_sparse_partial_tile.py), its closed
form, and the stored 2:4 cases it was not fitted to - the H200's and the H100's timed calls
and the H100's Nsight Compute times of those shapes."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from script_import import load_script

import sim
from sim.apps.validation import predict, read_cases
from sim.errors import ConfigError
from sim.model.engine.assemble import partial_token_tile_cycles
from sim.model.stacks import load_stack
from sim.spec.stack_spec import PartialTokenTileRule

ROOT = Path(__file__).resolve().parents[1]
MEAS = ROOT / "validation" / "measurements"
TILES = load_stack("eager_pytorch").gemm.sparse_2_4.tiles  # cuSPARSELt's (tokens, weight rows, k) tile


@pytest.fixture(scope="module")
def rule():
    return load_stack("eager_pytorch").gemm.sparse_2_4.partial_token_tile


def _fit():
    mod = load_script(ROOT / "validation" / "fit_sparse_partial_tile.py")
    return mod.fit()


@pytest.mark.parametrize("stack", ["eager_pytorch", "graph_serving_loop"])
def test_the_profile_numbers_are_the_microbenchmark(stack):
    got = load_stack(stack).gemm.sparse_2_4.partial_token_tile
    assert {c.rows: [list(p) for p in c.kstep_cycles] for c in got.curves} == \
        {m: [list(p) for p in pts] for m, pts in _fit().items()}
    assert got.max_rows == TILES[0] // 2


def test_closed_form(rule):
    # 8 rows, 4096 x 16384: 128 tiles at once, 64 k-steps of the 8-row curve's 128-tile point
    got = partial_token_tile_cycles(8, 4096, 16384, 1, 132, TILES, rule)
    assert got["resident_tiles"] == 128 and got["boost_cycles"] == pytest.approx(64 * 2194)
    # beyond the SMs a persistent grid: 256 tiles on 132 CTAs, each walking 256/132 tiles
    got = partial_token_tile_cycles(8, 8192, 32768, 1, 132, TILES, rule)
    assert got["resident_tiles"] == 132 and got["boost_cycles"] == pytest.approx(128 * 256 / 132 * 2147)
    # between the measured rows: linear in the rows; below the fewest tiles: the first slope
    mid = partial_token_tile_cycles(68, 4096, 8192, 1, 132, TILES, rule)["kstep_boost_cycles"]
    assert mid == pytest.approx((1799 + 1489) / 2)
    low = partial_token_tile_cycles(8, 4096, 2048, 1, 132, TILES, rule)["kstep_boost_cycles"]
    assert low == pytest.approx(1268 - 16 * (1799 - 1268) / 32)


def test_more_resident_tiles_never_take_less_per_kstep(rule):
    for c in rule.curves:
        ys = [p[1] for p in c.kstep_cycles if p[0] <= 128]
        assert ys == sorted(ys), c.rows


def _stored(path: Path):
    with open(path) as f:
        return [(i + 2, r) for i, r in enumerate(csv.DictReader(f)) if r["dtype"] == "bf16_2:4"]


@pytest.mark.parametrize("chip_name,cases", [("h200_sxm", "h200_dev.csv"), ("h200_sxm", "h200_holdout.csv"),
                                             ("h100_sxm", "h100_dev.csv"), ("h100_sxm", "h100_holdout.csv")])
def test_held_out_stored_cases_with_many_partial_tiles(chip_name, cases):
    """The stored 2:4 calls with at most 128 rows, at least 32 tiles at once and 16 k-steps
    (where the rule, not the launch, decides the time) were 19-56 % too fast without it; with
    it within 16 %."""
    chip = sim.load_chip(chip_name)
    picked = {line for line, r in _stored(MEAS / cases)
              if int(r["m"]) <= 128 and math.ceil(int(r["n"]) / 128) >= 32 and int(r["k"]) >= 16 * 64}
    assert picked
    for case in read_cases(MEAS / cases):
        if case.line in picked:
            got = predict(chip, case)["predicted_ms"]
            assert got == pytest.approx(case.measured_ms, rel=0.16), (case.line, got, case.measured_ms)


def test_rows_beyond_half_the_tile_keep_the_engines_time():
    base = sim.load_chip("h200_sxm")
    op = sim.Gemm(name="g", m=200, k=8960, n=1536, dtype="bf16", sparsity="2:4")
    r = sim.simulate(base, op)
    assert "partial_token_tile" not in r.details


def test_the_rule_only_lengthens_a_kernel(rule):
    # 16 tiles of 32 rows: the engine's own k-step is longer than the rule's extrapolation
    op = sim.Gemm(name="g", m=32, k=2048, n=2048, dtype="bf16", sparsity="2:4")
    r = sim.simulate(sim.load_chip("h200_sxm"), op)
    p = r.details["partial_token_tile"]
    assert r.cycles >= p["engine_cycles"] and r.cycles >= p["kernel_cycles"] - 1


def test_against_nsight_compute_kernel_times_it_was_not_fitted_to(rule):
    """The H100's Nsight Compute times of the stored shapes (kernel alone, its own clock), where
    at least 32 tiles of at most 128 rows run for at least 16 k-steps: the rule's kernel time
    was -18 .. +4 % off them (median |error| 5.7 %) when it was written."""
    n = 0
    with open(MEAS / "h100_micro_sparse_grid.csv") as f:
        for r in csv.DictReader(f):
            m, k, nn = int(r["m"]), int(r["k"]), int(r["n"])
            tiles = math.ceil(nn / 128) * math.ceil(m / 256)
            if m > 128 or tiles < 32 or k < 16 * 64:
                continue
            got = partial_token_tile_cycles(m, k, nn, 1, 132, TILES, rule)["boost_cycles"] / 1.98e9 + 2.554e-6
            assert got == pytest.approx(float(r["gpu__time_duration.sum"]) * 1e-9, rel=0.20), (m, k, nn)
            n += 1
    assert n >= 5


def test_bad_points_are_refused():
    with pytest.raises(ValueError):
        PartialTokenTileRule(max_rows=128, curves=[{"rows": 8, "kstep_cycles": [[64, 1.0], [32, 2.0]]}])
    with pytest.raises(ValueError):
        PartialTokenTileRule(max_rows=128, curves=[{"rows": 128, "kstep_cycles": [[32, 1.0]]},
                                                    {"rows": 8, "kstep_cycles": [[32, 1.0]]}])


def test_a_stack_file_with_a_bad_rule_names_its_line(tmp_path):
    text = (ROOT / "stacks" / "eager_pytorch.yaml").read_text()
    bad = text.replace("[[32, 1268], [64, 1799]", "[[64, 1268], [32, 1799]", 1)
    assert bad != text
    p = tmp_path / "mystack.yaml"
    p.write_text(bad)
    with pytest.raises(ConfigError) as e:
        load_stack(str(p))
    assert "mystack.yaml" in str(e.value) and "partial_token_tile" in str(e.value)
