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
import pandas as pd
import pytest

from sim.spec.registry import load_chip
from sim.errors import WorkloadError
from sim.apps.validation import read_cases, summarize, validate

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


def test_checkpoint_resumes_an_interrupted_run_to_the_same_table(tmp_path):
    cases = VAL / "measurements" / "h200_micro_fixed_cost.csv"
    chip = load_chip("h200_sxm")
    full = validate(chip, cases, progress=False)
    ck = tmp_path / "run.partial.jsonl"
    validate(chip, cases, progress=False, checkpoint=ck)
    lines = ck.read_text().splitlines()
    assert len(lines) == 1 + len(full)          # a header, then one line per case
    # as if killed after two cases, the second mid-write
    ck.write_text("\n".join(lines[:2]) + "\n" + lines[2][: len(lines[2]) // 2])
    resumed = validate(chip, cases, progress=False, checkpoint=ck)
    cols = [c for c in full.columns if c != "wall_s"]
    assert resumed[cols].equals(full[cols])
    # the first case came from the checkpoint, not from a new prediction
    assert resumed.loc[0, "wall_s"] == pytest.approx(json.loads(lines[1])["wall_s"])
    # a checkpoint of another chip is refused, not mixed in
    other = load_chip("h200_sxm", overrides=["clock_mhz=1000"])
    with pytest.raises(WorkloadError, match="another chip, case file or simulator version"):
        validate(other, cases, progress=False, checkpoint=ck)


def test_cli_validate_resume_keeps_finished_cases(tmp_path, capsys):
    from sim.cli import main

    cases = VAL / "measurements" / "h200_micro_fixed_cost.csv"
    out = tmp_path / "v"
    chip = load_chip("h200_sxm")
    validate(chip, cases, progress=False, checkpoint=out / "predictions.partial.jsonl")
    ck = out / "predictions.partial.jsonl"
    header, first = ck.read_text().splitlines()[:2]
    ck.write_text(header + "\n" + first + "\n")   # one case finished before the interruption
    assert main(["validate", "h200_sxm", str(cases), "--out", str(out), "--resume", "-j", "1", "--json"]) == 0
    df = pd.read_csv(out / "predictions.csv")
    assert len(df) == len(read_cases(cases)) and not ck.exists()
    assert df.loc[0, "wall_s"] == pytest.approx(json.loads(first)["wall_s"])
    assert main(["validate", "h200_sxm", str(cases), "--resume"]) == 2   # --resume without --out
    assert "--resume needs --out" in capsys.readouterr().err


# ----------------------------------------------------------------------------- model cases and single-op kinds

MODEL_HEADER = ("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms,"
                "model,num_layers,phase,weight_dtype,prompt_len,context_len,decode_seqs,decode_ctx,op\n")


def _model_row(model="tiny", phase="decode", dtype="bf16", wdt="bf16", batch=2, prompt="", ctx=64, dseq="", dctx="",
               layers="", kind="model", op=""):
    return (f"{kind},{dtype},,,,{batch},,,,,,,,,,1.0,{model},{layers},{phase},{wdt},{prompt},{ctx},{dseq},{dctx},"
            f"{op}\n")


def test_model_cases_are_priced_by_the_sim_run_path(tmp_path):
    """A prefill / decode model case is sim run's own number (run_llm) plus the one event-pair
    overhead of the timed call: no second lowering of the model."""
    from sim.apps.inference import run_llm
    from sim.apps.validation import predict_model

    chip = load_chip("h200_sxm")
    f = tmp_path / "m.csv"
    f.write_text(MODEL_HEADER + _model_row(phase="decode", batch=3, ctx=100)
                 + _model_row(phase="prefill", batch=2, prompt=48, ctx=0, wdt="int4", layers=3)
                 + _model_row(phase="decode", dtype="fp8", wdt="fp8", batch=1, ctx=7))
    dec, pre, fp8 = read_cases(f)
    ovh = chip.runtime.event_timing_overhead_ns * 1e-6
    want = run_llm(chip, "tiny", phase="decode", batch=3, context_len=100)["tpot_s"] * 1e3 + ovh
    assert predict_model(chip, dec)["predicted_ms"] == pytest.approx(want, rel=1e-12)
    from sim.model.workload.models import load_model_spec

    spec3 = load_model_spec("tiny", overrides={"num_layers": 3})
    want = run_llm(chip, spec3, phase="prefill", batch=2, prompt_len=48, weight_dtype="int4")["ttft_s"] * 1e3 + ovh
    assert predict_model(chip, pre)["predicted_ms"] == pytest.approx(want, rel=1e-12)
    want = run_llm(chip, "tiny", phase="decode", batch=1, context_len=7, dtype="fp8")["tpot_s"] * 1e3 + ovh
    assert predict_model(chip, fp8)["predicted_ms"] == pytest.approx(want, rel=1e-12)


def test_mixed_model_case_is_one_iteration_of_both_groups(tmp_path):
    from sim.apps.validation import predict_model

    chip = load_chip("h200_sxm")
    f = tmp_path / "m.csv"
    f.write_text(MODEL_HEADER + _model_row(phase="mixed", batch=1, prompt=32, ctx=16, dseq=5, dctx=80)
                 + _model_row(phase="prefill", batch=1, prompt=32, ctx=16)
                 + _model_row(phase="decode", batch=5, ctx=80))
    mixed, pre, dec = read_cases(f)
    p = predict_model(chip, mixed, with_ops=True)
    att = [o for o in p["ops"] if o["kind"] == "attention"]
    assert len(att) == 2  # one attention op per group of sequences, the weights read once
    assert p["predicted_ms"] < predict_model(chip, pre)["predicted_ms"] + predict_model(chip, dec)["predicted_ms"]
    assert p["predicted_ms"] > max(predict_model(chip, pre)["predicted_ms"], predict_model(chip, dec)["predicted_ms"])


def test_model_case_errors_name_the_line_and_the_valid_values(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text(MODEL_HEADER + _model_row(model="llama9-1t")
                 + _model_row(wdt="int3")
                 + _model_row(phase="train")
                 + _model_row(phase="mixed", prompt=16, dseq="")
                 + _model_row(ctx="nan")
                 + _model_row(kind="conv")
                 + _model_row(kind="norm", op="batchnorm")
                 + "softmax,int8,4,,8,,,,,,,,,,,0.01,,,,,,,,,\n")
    with pytest.raises(WorkloadError) as exc:
        read_cases(f)
    msg = str(exc.value)
    assert f"{f}:2: column model: unknown model 'llama9-1t'" in msg and "llama3-8b" in msg
    assert f"{f}:3: column weight_dtype: unknown format 'int3'" in msg and "int4" in msg
    assert f"{f}:4: column phase: 'train'" in msg and "prefill, decode, mixed" in msg
    assert f"{f}:5: column decode_seqs: required" in msg and f"{f}:6: column context_len" in msg
    assert f"{f}:7: column kind: unknown kind 'conv'" in msg and "elementwise" in msg
    assert f"{f}:8: column op: 'batchnorm'" in msg and "rmsnorm" in msg
    assert f"{f}:9: column dtype: 'int8' is not a dtype of softmax cases" in msg
    # a file of the old format (no model columns) with a model row names what is missing
    old = tmp_path / "old.csv"
    old.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
                   "model,bf16,,,,1,,,,,,,,,,1.0\nnorm,bf16,4,,8,,,,,,,,,,,0.01\n")
    with pytest.raises(WorkloadError) as exc:
        read_cases(old)
    assert f"{old}:2: column model: required" in str(exc.value) and f"{old}:3: column op" in str(exc.value)


def test_a_model_that_does_not_fit_is_reported_per_case_and_the_run_goes_on(tmp_path):
    f = tmp_path / "fit.csv"
    f.write_text(MODEL_HEADER + _model_row(model="llama3-70b", batch=64, ctx=8000)
                 + _model_row(model="llama3-70b", phase="mixed", batch=1, prompt=8, ctx=0, dseq=64, dctx=8000)
                 + _model_row(batch=1, ctx=10))
    df = validate(load_chip("h200_sxm"), f, progress=False)
    assert "does not fit" in df.loc[0, "error"] and "does not fit" in df.loc[1, "error"]
    assert df.loc[2, "error"] == "" and df.loc[2, "predicted_ms"] > 0
    assert summarize(df)["failed"] == 2


def test_single_op_kinds_lower_to_the_workload_ops(tmp_path):
    from sim.model.engine.simulate import simulate_op
    from sim.ir.ops import Gemm, VectorOp

    chip = load_chip("h200_sxm")
    f = tmp_path / "ops.csv"
    f.write_text(MODEL_HEADER
                 + "bmm,bf16,64,128,256,8,,,,,,,,,,0.01,,,,,,,,,\n"
                 + "softmax,bf16,1024,,4096,,,,,,,,,,,0.05,,,,,,,,,\n"
                 + "norm,bf16,1024,,4096,,,,,,,,,,,0.02,,,,,,,,,rmsnorm\n"
                 + "elementwise,fp32,,,1048576,,,,,,,,,,,0.01,,,,,,,,,add\n")
    df = validate(chip, f, progress=False)
    assert (df["error"] == "").all() and (df["predicted_ms"] > 0).all()
    ovh = chip.runtime.event_timing_overhead_ns * 1e-6
    bmm = simulate_op(chip, Gemm("bmm", 64, 128, 256, count=8)).seconds * 1e3 + ovh
    assert df.loc[0, "predicted_ms"] == pytest.approx(bmm)
    add = simulate_op(chip, VectorOp("add", "add", 1 << 20, 1.0, 8 << 20, 4 << 20)).seconds * 1e3 + ovh
    assert df.loc[3, "predicted_ms"] == pytest.approx(add)
    # softmax over the same elements moves the same bytes as a norm of them: both memory-bound, similar times
    assert 0.5 < df.loc[1, "predicted_ms"] / df.loc[2, "predicted_ms"] < 2.0


def test_model_ci_subset_stays_within_recorded_thresholds():
    """A few measured whole-model steps (validation/measurements/h200_models_ci.csv, each kind
    of model, phase and weight format) and single-op kernels: errors must not grow beyond what
    was recorded in thresholds.json (``model_subset``, recorded from the model as it was, plus
    the margin)."""
    limits = json.loads((VAL / "thresholds.json").read_text())["model_subset"]
    df = validate(load_chip("h200_sxm"), VAL / "measurements" / "h200_models_ci.csv", progress=False)
    s = summarize(df)
    assert s["failed"] == 0, df[df["error"] != ""][["line", "error"]]
    margin = limits["margin_pct_points"]
    for group, lim in limits["groups"].items():
        got = s if group == "all" else s["by_kind"][group]
        assert got["median_abs_error_pct"] <= lim["median_abs_error_pct"] + margin, group
        assert got["p90_abs_error_pct"] <= lim["p90_abs_error_pct"] + margin, group
        assert abs(got["mean_signed_error_pct"]) <= abs(lim["mean_signed_error_pct"]) + margin, group


def test_a_size_beyond_any_case_is_a_row_error(tmp_path):
    """A 1e30 size is refused at its line and column, not run and reported as unpredictable."""
    from sim.apps.validation import read_cases

    f = tmp_path / "cases.csv"
    head = "kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
    f.write_text(head + "gemm,bf16,1e30,64,64,,,,,,,,,,,0.1\ngemm,bf16,64,64,64,,,,,,,,,,,0.01\n")
    with pytest.raises(WorkloadError, match=r"cases.csv:2: column m: '1e30' is larger than any case can be"):
        read_cases(f)


def test_validate_reports_progress_when_stderr_is_not_a_terminal(tmp_path):
    """A long `sim validate` in a log is never silent; -q keeps it quiet."""
    import subprocess
    import sys

    f = tmp_path / "cases.csv"
    head = "kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
    f.write_text(head + "copy,uint8,,,,,,,,,,,,,4096,0.005\n")
    run = lambda *extra: subprocess.run([sys.executable, "-m", "sim", "validate", "h200_sxm", str(f), "-j", "1", *extra],  # noqa: E731
                                        capture_output=True, text=True, timeout=300)
    loud, quiet = run(), run("-q")
    assert loud.returncode == 0 and quiet.returncode == 0, loud.stderr
    assert "validate" in loud.stderr and "1/1" in loud.stderr
    assert "1/1" not in quiet.stderr


def test_a_cases_bound_is_the_most_common_class_with_ties_in_a_fixed_order():
    """The bound column broke ties with max(set(...)), whose order follows the hash seed."""
    from sim.apps.validation import _most_common

    assert _most_common(["memory", "compute", "memory"]) == "memory"
    assert _most_common(["memory", "compute"]) == _most_common(["compute", "memory"]) == "compute"
    assert _most_common([]) == ""
