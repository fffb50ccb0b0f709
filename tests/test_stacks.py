"""Software-stack profiles: one lowering from model ops to kernels for sim run and sim validate."""
from __future__ import annotations

import json

import pytest

import sim
from sim.spec.model_spec import ModelSpec
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op
from sim.errors import MappingError, UnknownNameError
from sim.apps.inference import run_llm, run_trace
from sim.model.stacks import chip_stack, kernels, list_stacks, load_stack, lower_trace
from sim.apps.validation import Case, case_kernels, predict
from sim.model.workload.llm import Iteration, Sequence, build_iteration
from sim.ir.ops import Attention, Gemm, VectorOp


@pytest.fixture(scope="module")
def h200():
    return sim.load_chip("h200_sxm")


def _layer_case(q: int, kv: int, b: int) -> Case:
    return Case(0, "layer", "bf16", {"hidden": 1024, "heads": 8, "kv_heads": 2, "head_dim": 128, "ffn": 2816,
                                     "batch": b, "q_len": q, "kv_len": kv}, None)


def _layer_spec(case: Case, layers: int = 1) -> ModelSpec:
    v = case.values
    return ModelSpec(name="validation_layer", hidden_size=int(v["hidden"]), num_layers=layers,
                     num_heads=int(v["heads"]), num_kv_heads=int(v["kv_heads"]), head_dim=int(v["head_dim"]),
                     ffn_size=int(v["ffn"]), activation="silu_glu", norm="rmsnorm", positional="none",
                     vocab_size=32000, max_context=int(v["kv_len"]))


def test_shipped_profiles_load_and_the_h200_runs_eager_pytorch(h200):
    assert {"ideal", "eager_pytorch", "fused_serving"} <= set(list_stacks())
    assert chip_stack(h200).name == "eager_pytorch"
    assert chip_stack(sim.load_chip("npu_128x128")).name == "ideal"


@pytest.mark.parametrize("q,kv,b", [(1, 2048, 4), (128, 128, 2), (64, 1024, 1)])
def test_a_layer_case_and_the_same_layer_in_sim_run_are_priced_by_identical_kernels(h200, q, kv, b):
    case = _layer_case(q, kv, b)
    validated = case_kernels(h200, case)
    # the same layer inside a two-layer model that sim run simulates (prefill of q new
    # tokens behind kv - q cached ones)
    res = run_llm(h200, _layer_spec(case, layers=2), phase="prefill" if q > 1 else "decode", batch=b,
                  prompt_len=q, context_len=kv - q if q > 1 else kv - 1)
    layer_rows = [r for r in res["ops"] if r["layer"] == 0]
    assert [r["op"] for r in layer_rows] == [op.name for op, _ in validated]
    assert all(r["repeat"] == 2 for r in layer_rows)
    for row, (op, opts) in zip(layer_rows, validated):
        assert row["seconds"] == simulate_op(h200, op, opts).seconds
    # and the case's prediction is those kernels' time plus the timed call's overhead
    overhead_ms = h200.runtime.event_timing_overhead_ns * 1e-6
    assert predict(h200, case)["predicted_ms"] == pytest.approx(
        sum(r["seconds"] for r in layer_rows) * 1e3 + overhead_ms, rel=1e-12)


def test_eager_pytorch_launches_what_eager_pytorch_launches(h200):
    stack = load_stack("eager_pytorch")
    dec = Attention("a", 4, 32, 8, 128, 1, 4096, causal=True, fused=True)
    assert kernels(dec, stack) == [(dec, {"array": "tensor_cores_sm80"})]
    pre = Attention("a", 1, 32, 8, 128, 512, 512, causal=True, fused=True)
    kinds = [type(k).__name__ for k, _ in kernels(pre, stack)]
    assert kinds == ["VectorOp", "Attention"]  # cuDNN's memset, then the flash kernel
    kv = VectorOp("attn.kv_append", "kv_append", 2 * 1000, 0.0, 4000, 4000)
    halves = kernels(kv, stack)
    assert len(halves) == 2 and sum(k.write_bytes for k, _ in halves) == kv.write_bytes
    act = VectorOp("mlp.act", "silu_mul", 1000, 5.0, 4000, 2000)
    silu, mul = (k for k, _ in kernels(act, stack))
    assert silu.flops + mul.flops == act.flops  # the same arithmetic in two kernels
    assert silu.read_bytes + mul.read_bytes == act.read_bytes + act.write_bytes  # mul re-reads silu's output
    assert kernels(Gemm("g", 64, 4096, 4099), stack)[0][1] == {"array": "tensor_cores_align1"}
    assert kernels(Gemm("g", 64, 4096, 4098), stack)[0][1] == {"array": "tensor_cores_align2"}
    assert kernels(Gemm("g", 64, 4096, 4096), stack)[0][1] == {}


def test_fused_serving_fuses_and_moves_fewer_bytes(h200):
    spec = _layer_spec(_layer_case(1, 4096, 8), layers=4)
    spec = spec.model_copy(update={"positional": "rope"})
    trace = build_iteration(spec, Iteration(tuple(Sequence(1, 4095) for _ in range(8))))
    eager = lower_trace(trace, load_stack("eager_pytorch"))
    fused = lower_trace(trace, load_stack("fused_serving"))
    ideal = lower_trace(trace, load_stack("ideal"))
    count = lambda ks: sum(k.repeat for k in ks)  # noqa: E731
    assert count(fused) < count(ideal) < count(eager)
    vec_bytes = lambda ks: sum((k.op.read_bytes + k.op.write_bytes) * k.repeat for k in ks  # noqa: E731
                               if isinstance(k.op, VectorOp))
    # closed form: fusing an add with the next norm saves re-reading the add's output
    # (one activation tensor per fusion); RoPE with the cache write saves writing and
    # re-reading the rotated k
    adds = [t.op for t in trace if isinstance(t.op, VectorOp) and t.op.name.endswith("residual")]
    assert vec_bytes(ideal) - vec_bytes(fused) >= sum(a.write_bytes for a in adds) * 0.99
    r_eager = run_trace(h200, trace, stack="eager_pytorch").seconds
    r_fused = run_trace(h200, trace, stack="fused_serving").seconds
    assert r_fused < r_eager


def test_ideal_is_the_trace_as_built(h200):
    spec = _layer_spec(_layer_case(16, 16, 2), layers=2)
    trace = build_iteration(spec, Iteration(tuple(Sequence(16, 0) for _ in range(2))))
    ks = lower_trace(trace, load_stack("ideal"))
    assert [k.op for k in ks] == [t.op for t in trace if getattr(t.op, "op", None) != "dequant"]
    assert all(k.array is None and k.tiles is None for k in ks)


def test_a_decode_query_sees_every_key_causal_mask_or_not(h200):
    for b in (1, 16):
        ops = [Attention("a", b, 32, 8, 128, 1, 4097, causal=c, fused=True) for c in (True, False)]
        assert ops[0].scored_pairs() == ops[1].scored_pairs()
        r = [simulate_op(h200, op, Options(array="tensor_cores_sm80")) for op in ops]
        assert r[0].seconds == r[1].seconds


def test_unknown_stack_and_missing_arrays_are_clear_errors(h200):
    with pytest.raises(UnknownNameError, match="eager_pytorch"):
        load_stack("eagr_pytorch")
    with pytest.raises(MappingError, match="tensor_cores_sm80.*npu_128x128.*mxu"):
        chip_stack(sim.load_chip("npu_128x128"), "eager_pytorch")
    with pytest.raises(UnknownNameError):
        run_llm(h200, "tiny", phase="prefill", prompt_len=16, stack="nope")


def test_sim_run_takes_a_stack(capsys):
    from sim.cli import main

    assert main(["run", "h200_sxm", "tiny", "--phase", "decode", "--context-len", "64", "--stack", "fused_serving",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["stack"] == "fused_serving"
    assert main(["run", "h200_sxm", "tiny", "--phase", "decode", "--context-len", "64", "--stack", "nope"]) == 2
    assert "fused_serving" in capsys.readouterr().err
