"""Model descriptions: loading, validation with file:line errors, parameter counts, KV bytes."""
from __future__ import annotations

import pytest

from sim.spec.model_spec import ModelSpec
from sim.errors import ConfigError, UnknownNameError
from sim.model.workload.models import list_models, load_model_spec, workloads_dir

SHIPPED = ["falcon-7b", "gpt3-175b", "llama3-70b", "llama3-8b", "mixtral-8x7b", "tiny"]


def test_every_shipped_model_loads_and_cites_a_source():
    names = list_models()
    for n in SHIPPED:
        assert n in names
        spec = load_model_spec(n)
        assert spec.name == n
        assert spec.source, f"{n} has no source"
        assert (workloads_dir() / f"{n}.yaml").read_text().lstrip().startswith("#")


@pytest.mark.parametrize("name, published, tol", [
    ("llama3-8b", 8.03e9, 0.01),
    ("llama3-70b", 70.6e9, 0.01),
    ("mixtral-8x7b", 46.7e9, 0.01),
    ("gpt3-175b", 175e9, 0.01),
])
def test_total_parameters_match_published(name, published, tol):
    spec = load_model_spec(name)
    assert abs(spec.params_total - published) / published < tol


def test_mixtral_active_parameters():
    spec = load_model_spec("mixtral-8x7b")
    assert abs(spec.params_active - 12.9e9) / 12.9e9 < 0.01
    assert spec.params_active < spec.params_total
    assert spec.num_moe_layers == 32


def test_llama3_8b_hand_count():
    s = load_model_spec("llama3-8b")
    h, f, v = 4096, 14336, 128256
    per_layer = h * 6144 + 4096 * h + 3 * h * f + 2 * h
    assert s.params_total == 32 * per_layer + h + 2 * v * h
    assert s.params_embedding == 2 * v * h
    assert s.qkv_size == (32 + 2 * 8) * 128 == 6144


def test_falcon_is_mqa_with_parallel_attention():
    s = load_model_spec("falcon-7b")
    assert s.num_kv_heads == 1 and s.qkv_size == 4672  # (71 + 2) x 64, the HF module printout
    assert s.parallel_attention and s.norms_per_layer == 1
    assert abs(s.params_total - 6.92e9) / 6.92e9 < 0.01


def test_defaults_head_dim_and_kv_heads(tmp_path):
    p = tmp_path / "m.yaml"
    p.write_text("name: m\nhidden_size: 512\nnum_layers: 2\nnum_heads: 8\nffn_size: 1024\n"
                 "vocab_size: 100\nmax_context: 64\n")
    s = load_model_spec(p)
    assert s.head_dim == 64 and s.num_kv_heads == 8 and s.num_experts == 1


@pytest.mark.parametrize("model_bytes, dtype", [(2, "bf16"), (1, "int8"), (1, "fp8"), (4, "fp32")])
def test_kv_bytes_per_token_closed_form(model_bytes, dtype):
    s = load_model_spec("llama3-70b")
    assert s.kv_bytes_per_token(dtype) == 2 * 80 * 8 * 128 * model_bytes


def test_kv_bytes_block_scaled_adds_scales():
    s = load_model_spec("llama3-8b")
    # nvfp4: 128 values = 64 bytes + 8 block scales of 1 byte per head vector
    assert s.kv_bytes_per_token("nvfp4") == 2 * 32 * 8 * (64 + 8)


def _write(tmp_path, text):
    p = tmp_path / "bad.yaml"
    p.write_text(text)
    return p


BASE = ("name: bad\nhidden_size: 512\nnum_layers: 2\nnum_heads: 8\nffn_size: 1024\n"
        "vocab_size: 100\nmax_context: 64\n")


def test_heads_not_multiple_of_kv_heads_is_reported(tmp_path):
    p = _write(tmp_path, BASE + "num_kv_heads: 3\n")
    with pytest.raises(ConfigError) as e:
        load_model_spec(p)
    assert "num_kv_heads (3)" in str(e.value) and str(p) in str(e.value)


def test_topk_above_experts_is_reported(tmp_path):
    p = _write(tmp_path, BASE + "num_experts: 4\nexperts_per_token: 5\n")
    with pytest.raises(ConfigError, match="experts_per_token"):
        load_model_spec(p)


def test_unknown_key_names_line_and_suggests(tmp_path):
    p = _write(tmp_path, BASE + "num_kv_head: 2\n")
    with pytest.raises(ConfigError) as e:
        load_model_spec(p)
    msg = str(e.value)
    assert f"{p}:8" in msg and "did you mean 'num_kv_heads'" in msg


def test_bad_enum_and_missing_key(tmp_path):
    p = _write(tmp_path, BASE.replace("ffn_size: 1024\n", "") + "activation: swish\n")
    with pytest.raises(ConfigError) as e:
        load_model_spec(p)
    msg = str(e.value)
    assert "ffn_size" in msg and "missing" in msg and "activation" in msg


def test_unknown_model_name_lists_valid_ones():
    with pytest.raises(UnknownNameError) as e:
        load_model_spec("llama3-8")
    assert "llama3-8b" in str(e.value) and "tiny" in str(e.value)


def test_overrides_and_env_dir(tmp_path, monkeypatch):
    s = load_model_spec("llama3-8b", {"num_layers": 2})
    assert s.num_layers == 2 and s.hidden_size == 4096
    s2 = load_model_spec("tiny", ["max_context=4096"])
    assert s2.max_context == 4096
    (tmp_path / "only.yaml").write_text(BASE.replace("name: bad", "name: only"))
    monkeypatch.setenv("SIM_WORKLOAD_DIR", str(tmp_path))  # an extra folder, searched first
    assert {"only", "llama3-8b"} <= set(list_models())
    assert load_model_spec("only").name == "only"
    assert load_model_spec("llama3-8b").hidden_size == 4096
    with pytest.raises(UnknownNameError, match="only.*tiny"):
        load_model_spec("no-such-model")


def test_spec_is_frozen():
    s = load_model_spec("tiny")
    with pytest.raises(Exception):
        s.num_layers = 3  # type: ignore[misc]
    assert isinstance(s, ModelSpec)
