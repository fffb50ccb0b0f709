"""Closed-form sizes of an LLM workload: the tokens each MoE expert receives
(:func:`expert_token_counts`), the layers of each pipeline stage (:func:`stage_layers`),
KV-cache bytes (:func:`kv_cache_bytes`) and weight bytes (:func:`weight_bytes`).

The trace builder uses the first two; fit checks, serving and the KV-cache model use
the byte counts without building a trace, which is why these rules live on their own.
:mod:`sim.model.workload.llm` re-exports every public name.
"""
from __future__ import annotations

import functools
import math
from statistics import NormalDist

from sim.errors import WorkloadError
from sim.model.workload.iteration import Precision
from sim.spec.dtypes import get_format, sparse_2_4_bytes
from sim.spec.model_spec import ModelSpec

#: how tokens are routed to experts: ``random`` - each token's router picks ``top_k`` experts
#: independently of the other tokens' (expected loads of uniform random top-k routing); ``balanced``
#: - the assignments split evenly (expert-choice routing, Zhou et al., NeurIPS 2022)
MOE_ROUTINGS = ("random", "balanced")
#: ``random`` routing's expected loads are averaged over this many seeded draws up to
#: RANDOM_ROUTING_EXACT_TOKENS tokens, and come from the normal approximation of the multinomial
#: order statistics beyond (loads of hundreds of tokens per expert)
RANDOM_ROUTING_DRAWS = 256
RANDOM_ROUTING_EXACT_TOKENS = 1024
#: ... and while tokens x experts stays within this (every expert count of production MoEs,
#: 8-384, at RANDOM_ROUTING_EXACT_TOKENS): the draws cost RANDOM_ROUTING_DRAWS x tokens x
#: experts random numbers, ~3 s at this bound; 64 tokens over 2^20 experts never finished
RANDOM_ROUTING_EXACT_CELLS = 1 << 20


def expert_token_counts(tokens: int, num_experts: int, top_k: int, skew: float = 0.0,
                        routing: str = "random") -> list[int]:
    """Tokens each expert receives when ``tokens`` tokens each pick ``top_k`` experts, largest first.

    ``routing="random"`` (the default): the expected loads, sorted, when every token's router
    picks ``top_k`` distinct experts at random, independently of the others - what a router does
    on tokens it has no reason to group: a decode step of 4 tokens with top-2 of 8 reads about 6
    experts' weights, not 8, and 128 tokens load the busiest expert 22 % above the mean.
    ``routing="balanced"``: ``tokens·top_k`` assignments split evenly, the remainder one each
    to experts ``0..r-1`` (expert-choice routing).  ``skew > 0``: shares ∝ ``(i+1)^-skew``
    (Zipf).  Largest-remainder rounding (ties → lower index); the counts always sum to
    ``tokens·top_k`` and none exceeds ``tokens``.  Deterministic (seeded draws).
    """
    if tokens < 0 or num_experts < 1 or not (1 <= top_k <= num_experts):
        raise WorkloadError(f"expert_token_counts: bad arguments tokens={tokens}, experts={num_experts}, top_k={top_k}")
    if skew < 0:
        raise WorkloadError(f"moe skew must be >= 0, got {skew}")
    if routing not in MOE_ROUTINGS:
        raise WorkloadError(f"moe routing must be one of {', '.join(MOE_ROUTINGS)}, got {routing!r}")
    total = tokens * top_k
    if skew == 0 and (routing == "balanced" or top_k == num_experts):
        base, rem = divmod(total, num_experts)
        return [base + (1 if i < rem else 0) for i in range(num_experts)]
    if skew == 0:
        return _largest_remainder(list(_random_routing_loads(tokens, num_experts, top_k)), total, tokens)
    weights = [(i + 1) ** -skew for i in range(num_experts)]
    shares = [0.0] * num_experts
    free = list(range(num_experts))
    remaining = float(total)
    while free:
        wsum = sum(weights[i] for i in free)
        over = [i for i in free if remaining * weights[i] / wsum > tokens]
        if not over:
            for i in free:
                shares[i] = remaining * weights[i] / wsum
            break
        for i in over:
            shares[i] = float(tokens)
            remaining -= tokens
            free.remove(i)
    return _largest_remainder(shares, total, tokens)


def _largest_remainder(shares: list[float], total: int, cap: int) -> list[int]:
    """Whole counts (each at most ``cap``) summing to ``total``, from real shares: floors, then
    one more each by descending fractional part (ties to the lower index)."""
    counts = [min(cap, math.floor(s + 1e-9)) for s in shares]
    left = total - sum(counts)
    order = sorted(range(len(shares)), key=lambda i: (-(shares[i] - math.floor(shares[i] + 1e-9)), i))
    while left > 0:
        progressed = False
        for i in order:
            if left == 0:
                break
            if counts[i] < cap:
                counts[i] += 1
                left -= 1
                progressed = True
        if not progressed:  # pragma: no cover - impossible when top_k <= experts
            raise WorkloadError("expert_token_counts: cannot place every assignment")
    return counts


@functools.lru_cache(maxsize=4096)
def _random_routing_loads(tokens: int, num_experts: int, top_k: int) -> tuple[float, ...]:
    """Expected loads, largest first, of ``tokens`` tokens each routed to ``top_k`` distinct
    experts of ``num_experts`` uniformly at random: the mean of the sorted loads over
    :data:`RANDOM_ROUTING_DRAWS` seeded draws, or - beyond :data:`RANDOM_ROUTING_EXACT_TOKENS`
    tokens - the mean ``tokens·p`` plus the standard deviation ``sqrt(tokens·p·(1−p))``
    (``p = top_k/num_experts``) times Blom's expected normal order statistics.  Scaled to sum
    to ``tokens·top_k``, each at most ``tokens``."""
    import numpy as np

    total = tokens * top_k
    if tokens == 0:
        return (0.0,) * num_experts
    if tokens <= RANDOM_ROUTING_EXACT_TOKENS and tokens * num_experts <= RANDOM_ROUTING_EXACT_CELLS:
        rng = np.random.default_rng(0)
        acc = np.zeros(num_experts)
        chunk = max(1, (1 << 20) // (tokens * num_experts))
        done = 0
        while done < RANDOM_ROUTING_DRAWS:
            n = min(chunk, RANDOM_ROUTING_DRAWS - done)
            picks = np.argpartition(rng.random((n, tokens, num_experts)), top_k - 1, axis=-1)[..., :top_k]
            loads = np.stack([np.bincount(p.ravel(), minlength=num_experts) for p in picks])
            acc += np.sort(loads, axis=1)[:, ::-1].sum(axis=0)
            done += n
        mean = acc / RANDOM_ROUTING_DRAWS
    else:
        p = top_k / num_experts
        sd = math.sqrt(tokens * p * (1 - p))
        normal = NormalDist()
        z = [normal.inv_cdf((num_experts - i - 0.375) / (num_experts + 0.25)) for i in range(num_experts)]
        mean = np.array([tokens * p + sd * zi for zi in z])
    mean = np.clip(mean, 0.0, tokens)
    return tuple(float(x) for x in mean * (total / mean.sum()))


def stage_layers(num_layers: int, pipeline: int) -> list[range]:
    """Contiguous layer ranges per pipeline stage; the first ``layers % p`` stages get one more."""
    if pipeline > num_layers:
        raise WorkloadError(f"pipeline degree {pipeline} exceeds the number of layers {num_layers}")
    base, rem = divmod(num_layers, pipeline)
    out, start = [], 0
    for s in range(pipeline):
        n = base + (1 if s < rem else 0)
        out.append(range(start, start + n))
        start += n
    return out


def kv_replication(model: ModelSpec, tensor: int = 1) -> int:
    """Copies of each KV head a tensor-parallel group of ``tensor`` chips keeps: 1, or
    ``tensor / kv_heads`` when there are fewer KV heads than chips (each chip keeps one head,
    its cache and its K/V weight columns; Megatron-LM and vLLM replicate them so)."""
    return max(1, int(tensor) // model.num_kv_heads)


def kv_cache_bytes(model: ModelSpec, tokens: int, batch: int = 1, kv_dtype: str = "bf16", tensor: int = 1) -> int:
    """KV-cache bytes: ``2 × layers × kv_heads × head_dim × tokens × batch × bytes per value``,
    on all ``tensor`` chips of a tensor-parallel group together (replicated heads counted
    once per copy, :func:`kv_replication`).

    Block-scaled formats add their scales (blocks along ``head_dim``, per head vector).
    """
    return model.kv_bytes_per_token(kv_dtype) * int(tokens) * int(batch) * kv_replication(model, tensor)


def _matrix_bytes(fmt: str, k: int, n: int, sparsity: str | None = None) -> int:
    if sparsity == "2:4":
        return sparse_2_4_bytes(fmt, k * n)
    return get_format(fmt).bytes_for(k * n)


def weight_bytes(model: ModelSpec, precision: Precision = Precision(), tensor: int = 1) -> int:
    """Bytes of all weights as the builder stores them (whole model, all ``tensor`` chips of
    a tensor-parallel group together: K/V columns replicated with their heads,
    :func:`kv_replication`; embeddings and LM head split over the vocabulary as serving
    stacks shard them, so stored once).

    Linear layers of the decoder (QKV, output, MLP / experts) in ``weight_format`` (2:4
    compressed when sparse); embeddings, LM head, router, norms and biases in the
    vector dtype.  Each matrix is sized as the fused Gemm operand the trace uses.
    """
    wf, vf, sp = precision.weight_format, precision.vector_format, precision.sparsity
    h, f = model.hidden_size, model.ffn_size
    vb = get_format(vf)
    rep = kv_replication(model, tensor)
    if rep > 1:     # the replicated K and V columns of every layer's QKV projection
        kv_cols = 2 * model.num_kv_heads * model.head_dim
        extra = (rep - 1) * model.num_layers * (_matrix_bytes(wf, h, kv_cols, sp)
                                                + (vb.bytes_for(kv_cols) if model.attention_bias else 0))
        return weight_bytes(model, precision) + extra
    mlp = (_matrix_bytes(wf, h, 2 * f, sp) if model.gated_mlp else _matrix_bytes(wf, h, f, sp)) \
        + _matrix_bytes(wf, f, h, sp)
    mlp_bias = vb.bytes_for((2 * f if model.gated_mlp else f) + h) if model.mlp_bias else 0
    total = 0
    for layer in range(model.num_layers):
        total += _matrix_bytes(wf, h, model.qkv_size, sp) + _matrix_bytes(wf, model.q_size, h, sp)
        if model.attention_bias:
            total += vb.bytes_for(model.qkv_size + h)
        total += model.norms_per_layer * vb.bytes_for(h * (2 if model.norm == "layernorm" else 1))
        if model.is_moe_layer(layer):
            total += model.num_experts * (mlp + mlp_bias) + vb.bytes_for(h * model.num_experts)
        else:
            total += mlp + mlp_bias
    total += vb.bytes_for(h * (2 if model.norm == "layernorm" else 1))  # final norm
    emb_values = model.vocab_size * h * (1 if model.tied_embeddings else 2)
    if model.positional == "learned":
        emb_values += model.max_context * h
    return total + vb.bytes_for(emb_values)
