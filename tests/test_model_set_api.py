"""Model edits from Python (issue 14): ``run_llm(model_set=...)``, ``sim.serve(model_set=...)``
and a sweep workload's ``model_set`` take the edits ``sim run --model-set`` takes, validated
the same way, and move the answer the way the edit says."""
from __future__ import annotations

import pytest

import sim
from sim.errors import ConfigError, ModelSpecError, WorkloadError
from sim.model.workload.models import load_model_spec

CHIP = "npu_128x128"
DECODE = dict(phase="decode", context_len=512)


def _layer_seconds(run) -> float:
    """Time of the ops that repeat per transformer layer (not the embedding or LM head)."""
    return sum(o["total_seconds"] for o in run.ops if o["layer"] is not None)


def _other_seconds(run) -> float:
    return sum(o["total_seconds"] for o in run.ops if o["layer"] is None)


@pytest.fixture(scope="module")
def chip():
    return sim.load_chip(CHIP)


@pytest.fixture(scope="module")
def base(chip):
    return sim.run_llm(chip, "llama3-8b", **DECODE)


def test_half_the_layers_halves_the_layer_time_and_nothing_else(chip, base):
    half = sim.run_llm(chip, "llama3-8b", **DECODE, model_set=["num_layers=16"])
    assert load_model_spec("llama3-8b").num_layers == 32
    # every layer is the same kernels, so the per-layer time is exactly halved ...
    assert _layer_seconds(base) / _layer_seconds(half) == pytest.approx(2.0, rel=1e-12)
    # ... and the embedding and LM head, which do not repeat per layer, do not move
    assert _other_seconds(half) == pytest.approx(_other_seconds(base), rel=1e-12)
    assert half.seconds < base.seconds
    assert half.fit.weight_bytes < base.fit.weight_bytes


def test_the_mapping_form_the_list_form_and_a_loaded_spec_agree(chip):
    as_list = sim.run_llm(chip, "llama3-8b", **DECODE, model_set=["num_layers=16"])
    as_dict = sim.run_llm(chip, "llama3-8b", **DECODE, model_set={"num_layers": 16})
    as_spec = sim.run_llm(chip, load_model_spec("llama3-8b"), **DECODE, model_set={"num_layers": 16})
    assert as_list.seconds == as_dict.seconds == as_spec.seconds


def test_max_context_edit_admits_a_longer_context(chip):
    # tiny's max_context is 2048: a 4,000-token context is refused until the edit raises it
    with pytest.raises(WorkloadError, match="max_context"):
        sim.run_llm(chip, "tiny", phase="decode", context_len=4000)
    res = sim.run_llm(chip, "tiny", phase="decode", context_len=4000, model_set=["max_context=8192"])
    assert res.tpot_s > 0


@pytest.mark.parametrize("edits", [["max_contxt=131072"], {"max_contxt": 131072}])
def test_an_unknown_key_is_a_workload_error_naming_it_with_a_did_you_mean(chip, edits):
    with pytest.raises(WorkloadError) as info:
        sim.run_llm(chip, "llama3-8b", **DECODE, model_set=edits)
    err = info.value
    assert isinstance(err, ModelSpecError) and isinstance(err, ConfigError)  # the CLI's kind of error too
    assert "max_contxt: unknown key 'max_contxt'; did you mean 'max_context'?" in str(err)
    assert "--model-set" in str(err)


def test_bad_values_and_bad_forms_name_the_key(chip):
    with pytest.raises(ModelSpecError, match="num_layers: Input should be a valid integer"):
        sim.run_llm(chip, "llama3-8b", **DECODE, model_set=["num_layers=many"])
    with pytest.raises(ModelSpecError, match="expected dotted.path=value"):
        sim.run_llm(chip, "llama3-8b", **DECODE, model_set=["num_layers"])
    with pytest.raises(ModelSpecError, match="a mapping .* or a list of 'key=value' strings, got int"):
        sim.run_llm(chip, "llama3-8b", **DECODE, model_set=16)
    # the Hugging Face name gets the exact hint, as in a model file
    with pytest.raises(ModelSpecError, match="'num_hidden_layers' is the Hugging Face name; this file calls it "
                                             "'num_layers'"):
        sim.run_llm(chip, "llama3-8b", **DECODE, model_set={"num_hidden_layers": 16})


def test_the_facade_and_serving_take_the_same_edits(chip):
    assert sim.run_llm is sim.apps.inference.run_llm
    # a bad edit fails before any simulation, with the same message
    with pytest.raises(ModelSpecError, match="did you mean 'max_context'"):
        sim.serve(chip, "tiny", num_requests=2, model_set=["max_contxt=8192"])
    from sim.apps.serving.search import search

    with pytest.raises(ModelSpecError, match="did you mean 'max_context'"):
        search(chip, "tiny", {"replicas": [1, 2]}, num_requests=2, model_set={"max_contxt": 8192})


def test_a_sweep_workload_takes_the_list_form_too():
    from sim.apps.sweep.plan import expand
    from sim.apps.sweep.run import load_spec

    wl = {"model": "tiny", "phase": "decode", "context_len": 4000}
    spec = {"name": "ms", "chip": CHIP, "workloads": [dict(wl, name="a", model_set=["max_context=8192"]),
                                                       dict(wl, name="b", model_set={"max_context": 8192})]}
    a, b = expand(load_spec(spec))
    assert a.task["model"]["max_context"] == b.task["model"]["max_context"] == 8192
    assert a.hash == b.hash  # the two forms are one design point
    bad = dict(spec, workloads=[dict(wl, model_set=["max_context"])])
    with pytest.raises(ConfigError, match="workloads.0.model_set: expected dotted.path=value"):
        expand(load_spec(bad))
