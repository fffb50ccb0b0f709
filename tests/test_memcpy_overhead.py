"""A cudaMemcpy's own cost (``runtime.memcpy_overhead_ns``): a copy case is priced as the kernel
moving its bytes plus this, and the shipped value is what the fixed-cost microbenchmark's
smallest copies measured beyond the model's kernel (validation/measurements/h200_micro_fixed_cost.csv)."""
from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from sim.apps.validation import predict
from sim.apps.validation_cases import read_cases
from sim.spec.registry import load_chip

ROOT = Path(__file__).resolve().parents[1]


def _copies(tmp_path):
    src = (ROOT / "validation/measurements/h200_micro_fixed_cost.csv").read_text().splitlines()
    f = tmp_path / "copies.csv"
    f.write_text("\n".join([src[0]] + [ln for ln in src[1:] if ln.startswith("copy,")]) + "\n")
    return read_cases(f)


@pytest.mark.parametrize("name", ["h200_sxm", "h100_sxm"])
def test_a_copy_case_pays_the_memcpy_overhead_once(tmp_path, name):
    chip = load_chip(name)
    bare = load_chip(name, overrides=["runtime.memcpy_overhead_ns=0"])
    assert chip.runtime.memcpy_overhead_ns > 0
    for case in _copies(tmp_path):
        extra_ms = predict(chip, case)["predicted_ms"] - predict(bare, case)["predicted_ms"]
        assert extra_ms == pytest.approx(chip.runtime.memcpy_overhead_ns * 1e-6, rel=1e-9)


def test_the_overhead_is_what_the_smallest_copies_measured_beyond_the_model(tmp_path):
    chip = load_chip("h200_sxm")
    bare = load_chip("h200_sxm", overrides=["runtime.memcpy_overhead_ns=0"])
    cases = _copies(tmp_path)
    assert len(cases) >= 4
    gap_ns = statistics.median((c.measured_ms - predict(bare, c)["predicted_ms"]) * 1e6 for c in cases)
    assert chip.runtime.memcpy_overhead_ns == pytest.approx(gap_ns, abs=5.0)
