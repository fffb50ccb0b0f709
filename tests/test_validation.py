"""The validation gate: predictions against the stored H200 measurements must not get worse.

``validation/ci_cases.csv`` is a fixed, stratified subset of the stored dev and holdout
measurements (every kind and GEMM dtype, cheap enough to simulate in CI); its error
statistics must stay under ``validation/thresholds.json`` - recorded from the model when
the thresholds were last set (``validation/make_ci_subset.py``), plus two percentage points
of headroom so a small deliberate model change need not re-record them.  The simulator is
deterministic, so a failure here is a real loss of accuracy.  The full comparison on all 609 cases is `sim validate`
(README, Validation).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sim.config.registry import load_chip
from sim.errors import WorkloadError
from sim.validation import read_cases, summarize, validate

ROOT = Path(__file__).resolve().parents[1]
VAL = ROOT / "validation"


@pytest.fixture(scope="module")
def ci_result():
    return validate(load_chip("h200_sxm"), VAL / "ci_cases.csv", progress=False)


def test_ci_cases_cover_every_kind():
    cases = read_cases(VAL / "ci_cases.csv")
    kinds = {c.kind for c in cases}
    assert kinds == {"gemm", "attention", "layer", "copy"}
    dtypes = {c.dtype for c in cases if c.kind == "gemm"}
    assert dtypes == {"bf16", "fp16", "fp32", "fp8", "int8", "bf16_2:4"}


def test_error_does_not_rise_above_recorded_thresholds(ci_result):
    limits = json.loads((VAL / "thresholds.json").read_text())
    summary = summarize(ci_result)
    assert summary["failed"] == 0, ci_result[ci_result["error"] != ""][["line", "error"]]
    assert summary["median_abs_error_pct"] <= limits["all"]["median_abs_error_pct"]
    assert summary["p90_abs_error_pct"] <= limits["all"]["p90_abs_error_pct"]
    for kind, lim in limits["by_kind"].items():
        got = summary["by_kind"][kind]
        assert got["median_abs_error_pct"] <= lim["median_abs_error_pct"], kind
        assert got["p90_abs_error_pct"] <= lim["p90_abs_error_pct"], kind


def test_every_prediction_is_positive_and_finite(ci_result):
    assert np.isfinite(ci_result["predicted_ms"]).all()
    assert (ci_result["predicted_ms"] > 0).all()


def test_stored_measurements_are_complete():
    for name, n in (("h200_dev.csv", 400), ("h200_holdout.csv", 150)):
        cases = read_cases(VAL / "measurements" / name)
        assert len(cases) >= n
        assert all(c.measured_ms and c.measured_ms > 0 for c in cases)
    env = json.loads((VAL / "measurements" / "h200_env.json").read_text())
    assert env["device"]["name"] == "NVIDIA H200"
    assert env["torch"] and env["device"]["sm_count"] == 132


def test_case_file_errors_name_line_and_column(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
                   "gemm,bf16,4,x,4,,,,,,,,,,,0.01\n"
                   "attention,bf16,,,,1,8,3,64,1,128,0,,,,0.01\n"
                   "copy,uint8,,,,,,,,,,,,,-5,0.01\n")
    with pytest.raises(WorkloadError) as exc:
        read_cases(bad)
    msg = str(exc.value)
    assert f"{bad}:2: column k" in msg and f"{bad}:4: column bytes" in msg
    # heads not a multiple of kv_heads is a shape error at prediction time, not a crash
    good = tmp_path / "good.csv"
    good.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
                    "attention,bf16,,,,1,8,3,64,1,128,0,,,,0.01\n")
    df = validate(load_chip("h200_sxm"), good, progress=False)
    assert "kv_heads" in df.loc[0, "error"]


def test_parallel_validation_gives_the_serial_table():
    cases = VAL / "measurements" / "h200_micro_fixed_cost.csv"
    serial = validate(load_chip("h200_sxm"), cases, progress=False, jobs=1)
    parallel = validate(load_chip("h200_sxm"), cases, progress=False, jobs=2)
    cols = [c for c in serial.columns if c != "wall_s"]
    assert len(serial) == len(read_cases(cases))
    assert serial[cols].equals(parallel[cols])
