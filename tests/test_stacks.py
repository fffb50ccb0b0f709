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
    # cuDNN's sm80 decode kernel, and its split-KV combine kernel's measured rule where it splits
    assert kernels(dec, stack) == [(dec, {"array": "tensor_cores_sm80",
                                          "combine_stream": stack.stream_rule("split_kv_reduce")})]
    assert stack.stream_rule("split_kv_reduce").floor_ns > 0
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


# Kernels per decoder layer that validation/gpu/measure_models.py's Step.forward launches in
# eager PyTorch, counted off its code (GEMM calls one each; the libraries' own extra kernels -
# cuBLAS's split-K reduction, cuDNN's split-KV combine - are the engine's, not the profile's):
#   llama (rms_norm, F.linear qkv, RoPE, cache copies, SDPA, o_proj, residual, rms_norm,
#   gate_up, F.silu, * u, down, residual):
#     1 + 1 + 10 (per q and k: x*cos, -x[..., h:], torch.cat, rotate_half(x)*sin, +)
#     + 2 (kc[..].copy_(kg), vc[..].copy_(vg)) + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 = 23
#   prefill: + cuDNN's memset before its flash kernel = 24
#   mixed (one prefill group and one decode group): the copies and SDPA per group (+2, +1),
#     torch.cat of the two outputs (+1), the prefill group's memset (+1) = 28
#   fp8 W8A8: x.to(float8_e4m3fn) before each of the 4 weight GEMMs = 27
#   int8 weight-only: torch._weight_int8pack_mm's A.to(float), scales.to(float), C.to(bf16)
#     around each of the 4 GEMMs = 35
#   falcon (layer_norm, qkv, RoPE 10, copies 2, SDPA, o, up, F.gelu, down, mlp += a, mlp + x) = 21
#   mixtral decode, one token, top-2 (two experts of one token each): attention half 17
#     (rms, qkv, 10, 2, SDPA, o, residual), rms 1, router 1, softmax(dtype=float32) 2 (cast,
#     softmax), topk 2 (gatherTopK, its sort), w.sum 1, w / sum 1, .to(bf16) 1, zeros_like 1,
#     per expert 8 (index_select, gate_up, F.silu, * u, down, w[tok, slot], y * w, index_add_)
#     x 2, residual 1 = 44
HARNESS_LAYER_KERNELS = [
    ("llama3-8b", [(1, 1, 512)] * 8, "bf16", None, 23),
    ("llama3-8b", [(1, 128, 0)], "bf16", None, 24),
    ("llama3-8b", [(1, 512, 0)] + [(1, 1, 1024)] * 8, "bf16", None, 28),
    ("llama3-8b", [(1, 1, 1024)], "fp8", "fp8", 27),
    ("llama3-8b", [(1, 1, 1024)], "bf16", "int8", 35),
    ("falcon-7b", [(1, 1, 512)] * 4, "bf16", None, 21),
    ("mixtral-8x7b", [(1, 1, 512)], "bf16", None, 44),
]


@pytest.mark.parametrize("model,groups,dtype,wdt,expected", HARNESS_LAYER_KERNELS)
def test_eager_pytorch_layer_launches_the_harness_models_kernels(model, groups, dtype, wdt, expected):
    from sim.model.workload.llm import Precision
    from sim.model.workload.models import load_model_spec
    seqs = tuple(Sequence(n, p) for _, n, p in groups)
    trace = build_iteration(load_model_spec(model), Iteration(seqs),
                            precision=Precision(dtype=dtype, weight_dtype=wdt or dtype))
    ks = lower_trace(trace, load_stack("eager_pytorch"))
    first = next(k.layer for k in ks if k.layer is not None)
    layer = [k for k in ks if k.layer == first]
    assert sum(k.op.count if isinstance(k.op, Gemm) else 1 for k in layer) == expected
    # outside the layers: the embedding gather, the final norm, x.index_select(0, last), the LM head
    assert [k.op.name for k in ks if k.layer is None] == ["embed_tokens", "final_norm", "lm_head.gather", "lm_head"]


def test_eager_rope_is_rotate_half_for_q_and_k():
    # q = q * cos + rotate_half(q) * sin, then k: per tensor of n elements (bf16) and a table
    # of T x d: mul (n + table read, n written), neg (n/2, n/2), cat (n, n), mul, add (2n, n)
    T, H, KV, d = 4, 8, 2, 64
    el = T * (H + KV) * d
    rope = VectorOp("attn.rope", "rope", el, 3.0, 2 * el + 2 * T * d, 2 * el)
    kv = VectorOp("attn.kv_append", "kv_append", 2 * T * KV * d, 0.0, 4 * T * KV * d, 4 * T * KV * d)
    stack = load_stack("eager_pytorch")
    ks = [k for k, _ in kernels(rope, stack, {"eb": 2, "kv_rows": kv.elements // 2})]
    assert [k.op for k in ks] == ["bcast_mul", "neg", "strided_cat", "bcast_mul", "add"] * 2
    for n, part in ((T * H * d, ks[:5]), (T * KV * d, ks[5:])):
        assert [k.read_bytes for k in part] == [2 * (n + T * d), n, 2 * n, 2 * (n + T * d), 4 * n]
        assert [k.write_bytes for k in part] == [2 * n, n, 2 * n, 2 * n, 2 * n]


def test_graph_serving_loop_is_eager_pytorch_but_its_graph_rules():
    """stacks/graph_serving_loop.yaml (serving_loop.py --graphs all) copies eager_pytorch.yaml's
    kernels; only what the loop runs differently may differ (its header says what and why)."""
    g, e = load_stack("graph_serving_loop"), load_stack("eager_pytorch")
    differ = {"name", "description", "kv_append_per_group", "attention", "host", "graphs", "references",
              "stream_kernels"}
    for key in type(g).model_fields:
        if key not in differ:
            assert getattr(g, key) == getattr(e, key), key
    # the same elementwise kernels; cuDNN's split-KV combine is eager PyTorch's alone (the loop's
    # decode runs its own Triton kernel and combine: attention.decode_split)
    cudnn_combine = [r for r in e.stream_kernels if "split_kv_reduce" in r.ops]
    assert len(cudnn_combine) == 1 and g.stream_rule("split_kv_reduce") is None
    assert g.stream_kernels == tuple(r for r in e.stream_kernels if r not in cudnn_combine)
    assert not g.kv_append_per_group and e.kv_append_per_group
    assert g.attention.model_dump(exclude={"prefill_latency", "decode_split"}) == {
        **e.attention.model_dump(exclude={"prefill_latency", "decode_split"}), "prefill_tiles": (64, 64),
        "prefill_stats_fill": False, "output_concat": False, "prefill_varlen": True}
    assert e.attention.prefill_latency is None and g.attention.prefill_latency.programs_per_core == 2
    # the loop's own split-KV Triton decode kernel over its graphs' grid; eager PyTorch's is cuDNN's
    assert e.attention.decode_split is None and g.attention.decode_split.split_tokens == 256
    assert g.host.model_dump(exclude={"graph_replay_ns", "source"}) == \
        e.host.model_dump(exclude={"graph_replay_ns", "source"})
    assert e.graphs is None and g.graphs.token_buckets[:19] == (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56,
                                                                 64, 80, 96, 112, 128)


def test_graph_buckets_round_up_and_must_ascend():
    from pydantic import ValidationError
    from sim.spec.stack_spec import GraphRule

    r = GraphRule(token_buckets=(1, 2, 4, 64, 512))
    assert [r.bucket(n) for n in (0, 1, 3, 4, 5, 64, 65, 512, 513)] == [0, 1, 4, 4, 64, 64, 512, 512, 513]
    with pytest.raises(ValidationError, match="ascending"):
        GraphRule(token_buckets=(1, 4, 4))


def test_prefill_tiles_fix_the_prefill_kernel_tile(h200):
    """attention.prefill_tiles: the stack's own prefill kernel tile (query rows x keys) reaches the
    engine; decode keeps the chip's; no tile given, the chip's attention_tiles as before."""
    g = load_stack("graph_serving_loop")
    pre = Attention("a", 1, 32, 8, 128, 512, 1536, causal=True, fused=True)
    ((op, lib),) = kernels(pre, g)
    assert lib == {"tiles": (64, 1, 64)}
    dec = Attention("a", 4, 32, 8, 128, 1, 4096, causal=True, fused=True)
    assert kernels(dec, g) == [(dec, {"array": "tensor_cores_sm80"})]
    small = simulate_op(h200, pre, Options(tiles=(64, 1, 64)))
    chip = simulate_op(h200, pre, Options())
    assert small.seconds != chip.seconds
    assert small.flops == chip.flops


def test_graph_iterations_are_priced_over_their_buckets():
    """A graph iteration runs its dense work over the bucket of its new tokens and its LM head over
    the bucket of its logit rows (graph_serving_loop's token_buckets); attention is the real
    sequences'.  Eager iterations, and stacks without graph buckets, run unpadded."""
    from sim.apps.serving.latency import LatencyModel

    chip = sim.load_chip("h200_sxm")
    from sim.model.workload.models import load_model_spec

    spec = load_model_spec("tiny")
    lm = LatencyModel(chip, spec, stack="graph_serving_loop", cache_dir=False)
    pre, nd, ctx = [(100, 0), (37, 64)], 5, 5 * 40
    T, L = 137 + 5, 2 + 5
    b = lm.stack.graphs.bucket
    assert (b(T), b(L)) == (160, 8)
    # the prompt chunks' attention: one varlen kernel per layer (attention.prefill_varlen); the
    # decodes' split-KV kernel over the graph's rows (no max_batch: the bucket's), eager over theirs
    want = (lm.dense(160) + lm.lm_head(8) + lm.split_decode_attention(160, nd, ctx)
            + lm.varlen_prefill_attention(pre)).seconds
    assert lm.iteration(pre, nd, ctx, graph=True).seconds == pytest.approx(want, rel=1e-12)
    eager = (lm.dense(T) + lm.lm_head(L) + lm.split_decode_attention(nd, nd, ctx)
             + lm.varlen_prefill_attention(pre)).seconds
    assert lm.iteration(pre, nd, ctx).seconds == pytest.approx(eager, rel=1e-12)
    assert want > eager
    plain = LatencyModel(chip, spec, stack="eager_pytorch", cache_dir=False)
    assert plain.iteration(pre, nd, ctx, graph=True).seconds == plain.iteration(pre, nd, ctx).seconds


def test_prefill_varlen_needs_tiles_and_latency_needs_varlen():
    """attention.prefill_varlen counts its programs in query blocks (prefill_tiles), and
    prefill_latency only prices a varlen kernel: either missing is an error naming the key."""
    from pydantic import ValidationError
    from sim.spec.stack_spec import AttentionRule

    lat = {"program_ns": 1000, "step_ns": 2000, "programs_per_core": 2, "source": "test"}
    with pytest.raises(ValidationError, match="prefill_varlen needs attention.prefill_tiles"):
        AttentionRule(prefill_varlen=True)
    with pytest.raises(ValidationError, match="set attention.prefill_varlen: true"):
        AttentionRule(prefill_tiles=(64, 64), prefill_latency=lat)
    with pytest.raises(ValidationError):
        AttentionRule(prefill_tiles=(64, 64), prefill_varlen=True, prefill_latency={**lat, "programs_per_core": 0})
    assert AttentionRule(prefill_tiles=(64, 64), prefill_varlen=True, prefill_latency=lat).prefill_varlen


def test_eager_stacks_launch_one_gemm_per_expert_and_a_fused_stack_groups_them():
    """Eager PyTorch runs a MoE layer as a loop over the experts (HF transformers' Mixtral block,
    the harness's Step.moe): each expert with tokens is its own GEMM kernel (count 1), six of
    them for a batch-4 decode step whose router picks about six experts.  A stack without
    ``moe_experts: per_expert`` keeps experts of one token count in one grouped kernel."""
    from sim.model.workload.models import load_model_spec
    trace = build_iteration(load_model_spec("mixtral-8x7b"), Iteration(tuple(Sequence(1, 512) for _ in range(4))))
    for name, want_kernels in (("eager_pytorch", 6), ("graph_serving_loop", 6)):
        ups = [k.op for k in lower_trace(trace, load_stack(name)) if k.layer is not None
               and isinstance(k.op, Gemm) and k.op.name == "moe.gate_up"]
        first_layer = ups[:want_kernels]
        assert all(g.count == 1 for g in ups) and sum(g.m for g in first_layer) == 8, name
    fused = [k.op for k in lower_trace(trace, load_stack("fused_serving")) if isinstance(k.op, Gemm)
             and k.op.name == "moe.gate_up"]
    assert any(g.count > 1 for g in fused)
