"""The iteration trace builder: shapes, FLOPs, bytes, formats, parallelism."""
from __future__ import annotations

import pytest

from sim.spec.dtypes import get_format
from sim.errors import WorkloadError
from sim.model.workload.llm import (Iteration, Parallelism, Precision, Sequence, Trace, build_iteration,
                              compare_traces, decode, expert_token_counts, kv_cache_bytes, phase_iterations, prefill,
                              speculative_verify, stage_layers, weight_bytes)
from sim.model.workload.models import load_model_spec
from sim.ir.ops import Attention, Collective, Copy, Gemm, VectorOp


@pytest.fixture(scope="module")
def l8():
    return load_model_spec("llama3-8b")


@pytest.fixture(scope="module")
def mix():
    return load_model_spec("mixtral-8x7b")


def layer_ops(trace: Trace, layer: int = 0):
    return [t.op for t in trace.expanded().ops if t.layer == layer]


def by_name(ops, name):
    return [o for o in ops if o.name == name]


# --------------------------------------------------------------------------- KV cache


@pytest.mark.parametrize("name", ["llama3-8b", "llama3-70b", "falcon-7b", "gpt3-175b"])
@pytest.mark.parametrize("dtype, nbytes", [("bf16", 2), ("int8", 1), ("fp8", 1), ("fp32", 4)])
def test_kv_cache_bytes_closed_form(name, dtype, nbytes):
    s = load_model_spec(name)
    tokens, batch = 1000, 3
    assert kv_cache_bytes(s, tokens, batch, dtype) == \
        2 * s.num_layers * s.num_kv_heads * s.head_dim * tokens * batch * nbytes


def test_kv_append_writes_kv_dtype_bytes(l8):
    t = decode(l8, 4, 100, precision=Precision(kv_dtype="int8"))
    app = by_name(layer_ops(t), "attn.kv_append")[0]
    assert app.write_bytes == 2 * 4 * 8 * 128 * 1
    total = sum(o.op.write_bytes * o.repeat for o in t.ops if o.op.name == "attn.kv_append")
    assert total == kv_cache_bytes(l8, 1, 4, "int8")  # one new token per sequence
    att = [o for o in layer_ops(t) if isinstance(o, Attention)][0]
    assert att.kv_dtype == "int8"


# --------------------------------------------------------------------------- shapes and FLOPs


def test_llama3_8b_prefill_gemm_shapes_and_flops(l8):
    T = 2 * 512
    ops = layer_ops(prefill(l8, 2, 512))
    gemms = [o for o in ops if isinstance(o, Gemm)]
    assert [(g.name, g.m, g.k, g.n) for g in gemms] == [
        ("attn.qkv", T, 4096, (32 + 2 * 8) * 128),
        ("attn.o_proj", T, 4096, 4096),
        ("mlp.gate_up", T, 4096, 2 * 14336),
        ("mlp.down", T, 14336, 4096),
    ]
    assert gemms[0].n == 6144
    assert sum(g.flops for g in gemms) == 2 * T * (4096 * 6144 + 4096 * 4096 + 3 * 4096 * 14336)


def test_layer_order(l8):
    ops = layer_ops(decode(l8, 1, 10))
    assert [o.name for o in ops] == [
        "attn_norm", "attn.qkv", "attn.rope", "attn.kv_append", "attn.core", "attn.o_proj", "attn.residual",
        "mlp_norm", "mlp.gate_up", "mlp.act", "mlp.down", "mlp.residual"]


def test_decode_batch_gives_m_equal_batch(l8):
    for B in (1, 7, 64):
        t = decode(l8, B, 300)
        for g in [o.op for o in t.ops if isinstance(o.op, Gemm)]:
            assert g.m == B, g
        att = [o.op for o in t.ops if isinstance(o.op, Attention)]
        assert len(att) == 1 and att[0].batch == B and att[0].q_len == 1 and att[0].kv_len == 301


def test_prefill_with_cached_prefix_attends_to_past_plus_new(l8):
    t = build_iteration(l8, [Sequence(128, 1000)] * 2)
    att = [o.op for o in t.ops if isinstance(o.op, Attention)][0]
    assert (att.q_len, att.kv_len, att.batch) == (128, 1128, 2)
    assert att.scored_pairs() == 128 * 1000 + 128 * 129 // 2
    assert by_name(layer_ops(t), "attn.qkv")[0].m == 256


def test_speculative_verify_m_is_5B(l8):
    B = 6
    t = speculative_verify(l8, B, 4, 700)
    for t_op in t.ops:
        if isinstance(t_op.op, Gemm):
            assert t_op.op.m == 5 * B  # projections and the LM head (logits for every new token)
    att = [o.op for o in t.ops if isinstance(o.op, Attention)][0]
    assert (att.q_len, att.kv_len) == (5, 705)


def test_lm_head_only_last_token_in_prefill(l8):
    t = prefill(l8, 3, 200)
    lm = [o.op for o in t.ops if o.op.name == "lm_head"][0]
    assert (lm.m, lm.k, lm.n) == (3, 4096, 128256)
    fn = [o.op for o in t.ops if o.op.name == "final_norm"][0]
    assert fn.elements == 600 * 4096  # the final norm covers every token
    # an intermediate chunk needs no logits at all
    t2 = build_iteration(l8, [Sequence(64, 0, logits=0)])
    assert not [o for o in t2.ops if o.block == "lm_head"]


def test_mixed_batch_groups_attention(l8):
    it = Iteration((Sequence(1, 50), Sequence(1, 50), Sequence(32, 0), Sequence(1, 9)))
    t = build_iteration(l8, it)
    att = [o for o in layer_ops(t) if isinstance(o, Attention)]
    assert [(a.batch, a.q_len, a.kv_len) for a in att] == [(2, 1, 51), (1, 32, 32), (1, 1, 10)]
    assert by_name(layer_ops(t), "attn.qkv")[0].m == 35
    assert [o.op.m for o in t.ops if o.op.name == "lm_head"] == [4]


def test_compact_and_expanded_agree(l8):
    t = decode(l8, 2, 64)
    full = t.expanded()
    assert len(full) == 1 + 32 * 12 + 2
    assert all(x.repeat == 1 for x in full)
    assert [x.layer for x in full.ops if x.op.name == "attn.qkv"] == list(range(32))
    assert compare_traces(t, full) == []
    assert build_iteration(l8, [Sequence(1, 64)] * 2, compact=False).ops == full.ops
    assert t.totals()["flops"] == pytest.approx(full.totals()["flops"])


# --------------------------------------------------------------------------- attention lowering


def test_unfused_moves_scores_and_fused_does_not(l8):
    B, q = 2, 256
    fused = prefill(l8, B, q)
    unfused = prefill(l8, B, q, attention="unfused")
    scores = B * 32 * q * q * 2  # bf16 scores of every head
    ops = layer_ops(unfused)
    qk, pv = by_name(ops, "attn.qk")[0], by_name(ops, "attn.pv")[0]
    sm = by_name(ops, "attn.softmax")[0]
    assert (qk.m, qk.k, qk.n, qk.count) == (q * 4, 128, q, B * 8)
    assert (pv.m, pv.k, pv.n, pv.count) == (q * 4, q, 128, B * 8)
    assert qk.c_bytes() == scores and sm.read_bytes == scores and sm.write_bytes == scores
    assert pv.a_bytes() == scores
    assert not any(isinstance(o, Attention) for o in ops)
    diff = unfused.totals()["min_dram_bytes"] - fused.totals()["min_dram_bytes"]
    assert diff == 32 * 4 * scores  # write, softmax read + write, read: per layer
    # causal: fused counts the needed half, unfused computes the full rectangle
    att = [o for o in layer_ops(fused) if isinstance(o, Attention)][0]
    assert att.flops == 4 * B * 32 * 128 * (q * (q + 1) // 2)
    assert qk.flops + pv.flops == 4 * B * 32 * 128 * q * q


# --------------------------------------------------------------------------- formats


def test_weight_only_int4_has_dequant_and_smaller_weights(l8):
    t = decode(l8, 1, 10, precision=Precision(weight_dtype="int4"))
    ops = layer_ops(t)
    qkv = by_name(ops, "attn.qkv")[0]
    assert qkv.dtype == "bf16" and qkv.weight_dtype == "int4"
    assert qkv.b_bytes() == 4096 * 6144 // 2
    dq = by_name(ops, "attn.qkv.dequant")[0]
    assert dq.elements == 4096 * 6144 and dq.read_bytes == 0 and dq.write_bytes == 0
    assert ops.index(dq) == ops.index(qkv) - 1
    lm = [o.op for o in t.ops if o.op.name == "lm_head"][0]
    assert lm.weight_dtype is None and lm.dtype == "bf16"


def test_w8a8_quantises_activations(l8):
    t = prefill(l8, 1, 64, precision=Precision(dtype="int8"))
    ops = layer_ops(t)
    g = by_name(ops, "mlp.down")[0]
    assert (g.dtype, g.b_dtype, g.c_dtype) == ("int8", "int8", "bf16")
    qa = by_name(ops, "mlp.down.quant_act")[0]
    assert qa.elements == 64 * 14336 and qa.read_bytes == 2 * qa.write_bytes
    assert not by_name(ops, "mlp.down.dequant")
    norm = by_name(ops, "attn_norm")[0]
    assert norm.write_bytes == 64 * 4096 * 2  # vector ops stay in bf16
    att = [o for o in ops if isinstance(o, Attention)][0]
    assert att.dtype == "bf16"


def test_fp8_and_block_scaled_formats(l8):
    t = decode(l8, 1, 10, precision=Precision(dtype="fp8"))
    g = by_name(layer_ops(t), "attn.o_proj")[0]
    assert g.dtype == "fp8_e4m3" and g.b_dtype == "fp8_e4m3"
    t = decode(l8, 1, 10, precision=Precision(weight_dtype="nvfp4"))
    g = by_name(layer_ops(t), "attn.o_proj")[0]
    assert g.b_bytes() == 4096 * 4096 // 2 + 4096 * 4096 // 16  # values + E4M3 block scales
    t = decode(l8, 4, 10, precision=Precision(dtype="mxfp4"))
    ops = layer_ops(t)
    bs = by_name(ops, "attn.o_proj.block_scale")[0]
    assert bs.elements == 4 * 4096 * (4096 // 32)
    assert by_name(ops, "attn.o_proj.quant_act")[0].write_bytes == get_format("mxfp4").bytes_for(4 * 4096)


def test_sparsity_on_weight_gemms_only(l8):
    t = decode(l8, 1, 10, precision=Precision(sparsity="2:4"))
    for o in t.ops:
        if isinstance(o.op, Gemm):
            assert o.op.sparsity == ("2:4" if o.op.name != "lm_head" else None)


def test_weight_bytes(l8, mix):
    assert weight_bytes(l8) == 2 * l8.params_total
    assert weight_bytes(mix) == 2 * mix.params_total
    assert weight_bytes(l8, Precision(weight_dtype="int4")) < weight_bytes(l8) / 2
    # the weight Gemms of a dense decode read every decoder weight matrix once
    t = decode(l8, 1, 10)
    gemm_bytes = sum(o.op.b_bytes() * o.repeat for o in t.ops if isinstance(o.op, Gemm))
    norms = 2 * (32 * 2 * 4096 + 4096)
    embedding_table = 2 * 128256 * 4096  # gathered by a Copy, not read by a Gemm (the LM head is)
    assert gemm_bytes == weight_bytes(l8) - embedding_table - norms
    assert t.totals()["weight_bytes"] == gemm_bytes


# --------------------------------------------------------------------------- parallelism


def test_tensor_parallel_halves_projections_and_adds_all_reduces(l8):
    B = 8
    t1 = decode(l8, B, 100)
    t2 = decode(l8, B, 100, parallel=Parallelism(tensor=2))
    f1 = sum(o.op.flops * o.repeat for o in t1.ops if isinstance(o.op, Gemm) and o.op.name != "lm_head")
    f2 = sum(o.op.flops * o.repeat for o in t2.ops if isinstance(o.op, Gemm) and o.op.name != "lm_head")
    assert f2 * 2 == f1
    ops = layer_ops(t2)
    ar = [o for o in ops if isinstance(o, Collective)]
    assert len(ar) == 2 and all(o.collective == "all_reduce" for o in ar)
    assert all(o.bytes == B * 4096 * 2 and o.participants == 2 for o in ar)
    assert sum(1 for o in t2.expanded().ops if isinstance(o.op, Collective) and o.op.collective == "all_reduce") == 64
    qkv = by_name(ops, "attn.qkv")[0]
    assert qkv.n == (16 + 2 * 4) * 128
    att = [o for o in ops if isinstance(o, Attention)][0]
    assert (att.heads, att.kv_heads) == (16, 4)
    lm = [o.op for o in t2.ops if o.op.name == "lm_head"][0]
    assert lm.n == 128256 // 2
    assert [o.op.collective for o in t2.ops if o.op.name == "lm_head.all_gather"] == ["all_gather"]


def test_tensor_parallel_replicates_kv_heads(l8):
    t = decode(l8, 1, 10, parallel=Parallelism(tensor=16))
    ops = layer_ops(t)
    att = [o for o in ops if isinstance(o, Attention)][0]
    assert (att.heads, att.kv_heads) == (2, 1)
    assert by_name(ops, "attn.qkv")[0].n == (2 + 2) * 128
    with pytest.raises(WorkloadError, match="num_heads"):
        decode(l8, 1, 10, parallel=Parallelism(tensor=3))
    with pytest.raises(WorkloadError, match="num_heads"):
        decode(load_model_spec("falcon-7b"), 1, 10, parallel=Parallelism(tensor=2))


def test_pipeline_parallel_splits_layers_and_sends(l8):
    B = 4
    t = decode(l8, B, 50, parallel=Parallelism(pipeline=2))
    full = t.expanded()
    layers0 = {o.layer for o in full.ops if o.stage == 0 and o.layer is not None}
    layers1 = {o.layer for o in full.ops if o.stage == 1 and o.layer is not None}
    assert layers0 == set(range(16)) and layers1 == set(range(16, 32))
    sends = [o for o in full.ops if isinstance(o.op, Collective) and o.op.collective == "send"]
    assert len(sends) == 1 and sends[0].stage == 0 and sends[0].op.bytes == B * 4096 * 2
    assert [o.stage for o in full.ops if o.op.name == "lm_head"] == [1]
    assert [o.stage for o in full.ops if o.op.name == "embed_tokens"] == [0]
    assert t.num_stages == 2
    assert [len(r) for r in stage_layers(5, 3)] == [2, 2, 1]
    assert t.totals(stage=0)["flops"] + t.totals(stage=1)["flops"] == pytest.approx(t.totals()["flops"])


# --------------------------------------------------------------------------- MoE


def test_moe_decode_reads_top_k_experts(mix):
    t = decode(mix, 1, 100)
    ops = layer_ops(t)
    router = by_name(ops, "moe.router")[0]
    assert (router.m, router.k, router.n) == (1, 4096, 8)
    up = by_name(ops, "moe.gate_up")
    assert len(up) == 1 and (up[0].m, up[0].n, up[0].count) == (1, 2 * 14336, 2)
    assert by_name(ops, "moe.down")[0].count == 2
    assert by_name(ops, "moe.topk") and by_name(ops, "moe.combine") and by_name(ops, "moe.dispatch")


def test_moe_prefill_balanced_assignment(mix):
    t = prefill(mix, 1, 100, moe_routing="balanced")
    up = by_name(layer_ops(t), "moe.gate_up")
    assert [(g.m, g.count) for g in up] == [(25, 8)]
    t = prefill(mix, 1, 3, moe_routing="balanced")  # 6 assignments over 8 experts: six experts with one token
    assert [(g.m, g.count) for g in by_name(layer_ops(t), "moe.gate_up")] == [(1, 6)]
    with pytest.raises(WorkloadError, match="moe_routing must be one of random, balanced"):
        prefill(mix, 1, 3, moe_routing="even")


def test_moe_random_routing_matches_its_closed_forms_and_the_measured_router():
    """Routing each token's top-k experts independently (the default): the expected number of
    experts with tokens is E(1 - (1 - k/E)^T) (a closed form); for many tokens the busiest
    expert sits Blom's first normal order statistic (1.42 sd for E = 8) above the mean; and the
    counts agree with what the router of the measured Mixtral steps did on the H200
    (validation/measurements/h200_models_stats.csv: decode batch 4 used 5.9-6.1 experts per
    layer, batch 8 7.0, batch 32 a busiest expert 1.38-1.47x the mean)."""
    E, k = 8, 2
    for T in (1, 2, 4, 8, 16):
        active = sum(1 for c in expert_token_counts(T, E, k) if c > 0)
        assert abs(active - E * (1 - (1 - k / E) ** T)) <= 1.0, T
    for T in (3, 37, 128, 5000):
        c = expert_token_counts(T, E, k)
        assert sum(c) == T * k and max(c) <= T and c == sorted(c, reverse=True)
    big = expert_token_counts(100_000, E, k)
    mean, sd = 100_000 * k / E, (100_000 * (k / E) * (1 - k / E)) ** 0.5
    assert big[0] == pytest.approx(mean + 1.4236 * sd, abs=2)
    # what the measured router did (random weights on the step's data)
    assert sum(1 for c in expert_token_counts(4, E, k) if c > 0) == 6
    assert sum(1 for c in expert_token_counts(8, E, k) if c > 0) == 7
    c32 = expert_token_counts(32, E, k)
    assert 1.3 <= c32[0] / (32 * k / E) <= 1.6
    assert expert_token_counts(4, E, k) == expert_token_counts(4, E, k)   # deterministic


def test_expert_token_counts_rules():
    assert expert_token_counts(100, 8, 2, routing="balanced") == [25] * 8
    assert expert_token_counts(3, 8, 2, routing="balanced") == [1, 1, 1, 1, 1, 1, 0, 0]
    assert expert_token_counts(100, 8, 8) == [100] * 8     # every token visits every expert
    sk = expert_token_counts(100, 8, 2, skew=1.0)
    assert sum(sk) == 200 and max(sk) <= 100 and sk == sorted(sk, reverse=True) and sk[0] > sk[-1]
    capped = expert_token_counts(3, 8, 2, skew=3.0)
    assert sum(capped) == 6 and max(capped) <= 3
    t = prefill(load_model_spec("mixtral-8x7b"), 1, 100, moe_skew=1.0)
    ups = [o.op for o in t.ops if o.op.name == "moe.gate_up"]
    assert sum(g.m * g.count for g in ups) == 200 and len(ups) > 1


# --------------------------------------------------------------------------- other models


def test_gpt3_learned_positions_layernorm_no_rope():
    s = load_model_spec("gpt3-175b")
    t = prefill(s, 1, 2048)
    names = [o.op.name for o in t.ops]
    assert names[:3] == ["embed_tokens", "embed_positions", "embed.add"]
    ops = layer_ops(t)
    assert not by_name(ops, "attn.rope")
    assert by_name(ops, "attn_norm")[0].op == "layernorm"
    assert by_name(ops, "mlp.up")[0].n == 49152 and by_name(ops, "mlp.act")[0].op == "gelu"


def test_falcon_parallel_attention_layer():
    s = load_model_spec("falcon-7b")
    ops = layer_ops(decode(s, 2, 100))
    assert [o.name for o in ops] == [
        "attn_norm", "attn.qkv", "attn.rope", "attn.kv_append", "attn.core", "attn.o_proj",
        "mlp.up", "mlp.act", "mlp.down", "parallel.add", "residual"]
    att = [o for o in ops if isinstance(o, Attention)][0]
    assert (att.heads, att.kv_heads) == (71, 1)


def test_embedding_copy_bytes(l8):
    t = prefill(l8, 2, 100)
    emb = t.ops[0].op
    assert isinstance(emb, Copy) and emb.bytes == 200 * 4096 * 2
    assert not [o for o in prefill(l8, 2, 100, include_embedding=False).ops if o.block == "embed"]


# --------------------------------------------------------------------------- errors


def test_input_errors(l8):
    with pytest.raises(WorkloadError, match="max_context"):
        prefill(l8, 1, 9000)
    with pytest.raises(WorkloadError, match="attention"):
        decode(l8, 1, 10, attention="flash")
    with pytest.raises(WorkloadError):
        Sequence(0, 10)
    with pytest.raises(WorkloadError):
        Sequence(3, 1, logits=4)
    with pytest.raises(WorkloadError):
        Iteration(())
    with pytest.raises(WorkloadError):
        Parallelism(tensor=0)
    with pytest.raises(Exception, match="did you mean"):
        Precision(weight_dtype="int5")
    with pytest.raises(WorkloadError, match="pipeline"):
        decode(load_model_spec("tiny"), 1, 10, parallel=Parallelism(pipeline=3))


def test_vector_ops_have_positive_elements(l8, mix):
    for t in (decode(mix, 3, 10, attention="unfused", precision=Precision(dtype="int8", kv_dtype="fp8")),
              prefill(l8, 2, 33, parallel=Parallelism(2, 2))):
        for o in t.ops:
            if isinstance(o.op, VectorOp):
                assert o.op.elements > 0 and o.op.flops >= 0


def test_phase_iterations_are_the_iterations_a_run_builds():
    # one function says which iterations a phase is made of (run_llm and the energy report both use it)
    (pre,) = phase_iterations("prefill", 2, 64, context_len=100)
    assert pre.label == "prefill" and pre.groups() == [(64, 100, 2)]
    (dec,) = phase_iterations("decode", 3, 64)
    assert dec.label == "decode" and dec.groups() == [(1, 64, 3)]
    (ver,) = phase_iterations("decode", 1, 64, context_len=200, draft_tokens=3)
    assert ver.label == "verify 3" and ver.groups() == [(4, 200, 1)] and ver.logit_tokens == 4
    gen = phase_iterations("generate", 2, 32, context_len=50, decode_steps=[0, 7])
    assert [it.label for it in gen] == ["prefill", "decode@82", "decode@89"]
    assert [it.groups() for it in gen] == [[(32, 50, 2)], [(1, 82, 2)], [(1, 89, 2)]]
    with pytest.raises(WorkloadError, match="phase must be"):
        phase_iterations("train", 1, 8)
