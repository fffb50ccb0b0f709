"""run_llm's typed result (sim.apps.results.LlmRun): frozen fields, the dict-compatible
read-only mapping, to_dict() as `sim run --json` prints it, and sweep rows read from it."""
from __future__ import annotations

import dataclasses
import json
import math

import pytest

from sim.apps.inference import run_llm
from sim.apps.results import LlmRun, PhaseResult, RunParallel, RunPrecision
from sim.ir.results import _json_default, results_dataframe
from sim.spec.registry import load_chip


@pytest.fixture(scope="module")
def chip():
    return load_chip("npu_128x128")


@pytest.fixture(scope="module")
def gen(chip):
    return run_llm(chip, "tiny", phase="generate", batch=2, prompt_len=32, new_tokens=4)


@pytest.fixture(scope="module")
def dec(chip):
    return run_llm(chip, "tiny", phase="decode", batch=2, context_len=64)


@pytest.fixture(scope="module")
def pre(chip):
    return run_llm(chip, "tiny", phase="prefill", batch=2, prompt_len=32)


def test_typed_fields_of_every_phase(pre, dec, gen):
    for r in (pre, dec, gen):
        assert isinstance(r, LlmRun)
        assert isinstance(r.precision, RunPrecision) and isinstance(r.parallel, RunParallel)
        for k in ("seconds", "tokens_per_s", "flops", "dram_bytes", "energy_j", "energy_per_token_j", "mfu", "mbu"):
            v = getattr(r, k)
            assert isinstance(v, float) and math.isfinite(v) and v > 0, (r.phase, k, v)
        assert r.kv_cache_bytes == r.fit.kv_cache_bytes > 0
        assert r.ops and all(o["phase"] in ("prefill", "decode") for o in r.ops)
        # the components are the kernels' breakdowns and add up to the run's energy
        assert r.energy_components_j and sum(r.energy_components_j.values()) == pytest.approx(r.energy_j, rel=1e-9)
        assert r.energy_per_token_j == pytest.approx(r.energy_j / r.tokens)
    assert pre.tokens_processed == 64 and pre.tokens_generated == 0 and pre.tpot_s is None
    assert pre.ttft_s == pre.seconds
    assert dec.tokens_processed == dec.tokens_generated == 2 and dec.ttft_s is None and dec.tpot_s == dec.seconds
    assert gen.tokens_generated == 8 and gen.tokens_processed == 2 * (32 + 4)
    assert set(gen.phases) == {"prefill", "decode_first", "decode_last"}
    assert all(isinstance(p, PhaseResult) for p in gen.phases.values())
    assert gen.prefill.tokens == 64 and gen.decode_first.tokens == 2
    assert gen.ttft_s == gen.prefill.seconds
    assert gen.seconds == pytest.approx(gen.ttft_s + 4 * gen.tpot_s)
    assert gen.energy_per_processed_token_j == pytest.approx(gen.energy_j / gen.tokens_processed)
    assert pre.phases == {} and pre.prefill is None


def test_frozen(gen):
    with pytest.raises(dataclasses.FrozenInstanceError):
        gen.seconds = 1.0
    with pytest.raises(TypeError):
        gen.ops[0]["seconds"] = 1.0  # the op rows are read-only views
    with pytest.raises(TypeError):
        gen["seconds"] = 1.0  # the mapping is read-only too
    d = gen.to_dict()
    d["ops"][0]["seconds"] = -1.0  # to_dict hands out copies
    assert gen.ops[0]["seconds"] > 0 and gen["ops"][0]["seconds"] > 0


def test_missing_phase_metric_fails_where_it_is_made(gen):
    fields = {f.name: getattr(gen, f.name) for f in dataclasses.fields(gen)}
    with pytest.raises(ValueError, match="decode_tokens_per_s"):
        LlmRun(**{**fields, "decode_tokens_per_s": None})
    with pytest.raises(TypeError):
        LlmRun(**{k: v for k, v in fields.items() if k != "dram_bytes"})


def test_mapping_is_the_old_dict(pre, dec, gen):
    for r in (pre, dec, gen):
        d = r.to_dict()
        assert dict(r) == d and list(r) == list(d) and len(r) == len(d)
        assert r["tokens_per_s"] == r.tokens_per_s and r.get("ops") == d["ops"]
        assert {**r, "x": 1}["seconds"] == r.seconds
        assert r == d  # a Mapping compares by its items
        assert json.loads(json.dumps(r, default=_json_default)) == json.loads(json.dumps(d))
        assert len(results_dataframe(r)) == len(r.ops) == len(results_dataframe(r.ops))
    assert "ttft_s" not in dec and "tpot_s" not in pre and dec.get("ttft_s") is None
    assert "tokens" not in gen and gen["phases"]["prefill"] == gen.prefill.to_dict()
    # the keys the dict had, in its order; the new fixed fields after them
    old_single = ["chip", "model", "phase", "batch", "precision", "parallel", "attention", "stack", "memory", "fit",
                  "kv_cache_bytes", "kv_cache_bytes_per_sequence", "extrapolated_share",
                  "unsteady_extrapolated_share", "seconds", "tokens", "tokens_per_s", "mfu", "mbu", "energy_j",
                  "energy_per_token_j", "flops", "dram_bytes"]
    assert list(pre) == old_single + ["ttft_s", "ops", "tokens_processed", "tokens_generated", "energy_components_j"]
    assert list(dec) == old_single + ["tpot_s", "ops", "tokens_processed", "tokens_generated", "energy_components_j"]
    assert list(gen)[-3:] == ["phases", "ops", "energy_components_j"]


def test_cli_json_is_to_dict(capsys):
    from sim.cli import main

    args = ["npu_128x128", "tiny", "--phase", "decode", "--batch", "2", "--context-len", "64"]
    assert main(["run", *args, "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    res = run_llm(load_chip("npu_128x128"), "tiny", phase="decode", batch=2, context_len=64)
    assert printed == json.loads(json.dumps(res.to_dict()))
    assert main(["run", *args, "-q"]) == 0
    out = capsys.readouterr().out
    assert "tpot_s" in out and "ttft_s" not in out


def test_generate_sweep_row_has_finite_dram_bytes_flops_energy_per_token():
    from sim.apps.sweep import sweep

    spec = {"chip": "npu_128x128",
            "workloads": [{"model": "tiny", "phase": "generate", "batch": 2, "prompt_len": 32, "new_tokens": 4}],
            "parameters": {"clock_mhz": [1000]},
            "metrics": ["dram_bytes", "flops", "energy_per_token_j", "ttft_s", "tpot_s", "decode_tokens_per_s"]}
    df = sweep(spec, jobs=1, progress=False)
    assert len(df) == 1 and df["error"].isna().all()
    row = df.iloc[0]
    for m in ("dram_bytes", "flops", "energy_per_token_j", "ttft_s", "tpot_s", "decode_tokens_per_s"):
        assert math.isfinite(row[m]) and row[m] > 0, (m, row[m])


def test_generate_reports_the_prefill_rate_in_prompt_tokens_per_second():
    """It was 0.0 (the prefill trace carries no new_tokens): the prompt's tokens over the TTFT."""
    import sim

    res = sim.run_llm("npu_128x128", "tiny", phase="generate", batch=2, prompt_len=64, new_tokens=4)
    assert res.prefill_tokens_per_s == pytest.approx(2 * 64 / res.ttft_s, rel=1e-9)
    assert res.prefill_tokens_per_s == pytest.approx(res.prefill.tokens_per_s, rel=1e-9)


def test_generate_energy_split_does_not_depend_on_the_hash_seed():
    """A generate run's energy split added its decode steps' components over set unions, so
    the JSON's last digits (and key order) changed with PYTHONHASHSEED."""
    import os
    import subprocess
    import sys

    code = ("import sim, json; r = sim.run_llm('npu_128x128', 'tiny', phase='generate', batch=1, "
            "prompt_len=32, new_tokens=40); print(json.dumps(r.to_dict()['energy_components_j']))")
    outs = {subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={**os.environ, "PYTHONHASHSEED": str(seed)}).stdout for seed in (1, 2, 3)}
    assert len(outs) == 1, outs
