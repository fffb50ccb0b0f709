"""LLM iteration traces: the ops one decoder iteration asks of a chip.

One **iteration** is a batch of sequences, each ``Sequence(new_tokens, past_tokens)``
(``past`` = context already in the KV cache).  That single form covers

* prefill (``past = 0``), decode (``new = 1``), chunked prefill (a chunk with ``past > 0``),
  prefill behind a cached prompt prefix (``past`` = cached tokens), and
* speculative-decoding verification (``new = draft + 1``, logits for every new token:
  :meth:`Sequence.verify`).

:func:`build_iteration` turns a :class:`~sim.spec.model_spec.ModelSpec` and an iteration
into a :class:`Trace`: an ordered list of :class:`TraceOp` (an op from
:mod:`sim.ir.ops` plus its layer, block, repeat count and pipeline stage).

This module keeps the builder and its entry points; the rest lives in sibling modules,
whose names it re-exports: the inputs (:mod:`~sim.model.workload.iteration`), the trace
container (:mod:`~sim.model.workload.trace`), trace comparison
(:mod:`~sim.model.workload.trace_compare`) and closed-form sizes
(:mod:`~sim.model.workload.sizing`).

Design decisions (each one a convention the timing engine can rely on)
----------------------------------------------------------------------
Layer order
    embedding → per layer [input norm, fused QKV Gemm, RoPE, KV-cache append, attention,
    output projection, (all-reduce), residual add, post-attention norm, MLP or MoE,
    (all-reduce), residual add] → final norm → LM head.  With ``parallel_attention``
    (Falcon/GPT-J) one norm feeds both branches, the two branch outputs are added, then
    one all-reduce and one residual add.

Fused QKV
    One Gemm ``m = new tokens, k = hidden, n = (heads + 2·kv_heads)·head_dim`` per layer
    (as vLLM, TensorRT-LLM and Megatron store it).  Likewise the gate and up projections
    of a gated MLP are one Gemm with ``n = 2·ffn``.

Compact layers (``repeat``)
    The layers of a pipeline stage are usually identical, so the trace holds the ops of
    one layer with ``repeat = number of consecutive identical layers`` and ``layer = the
    first of them``; a run of ops sharing ``(layer, repeat, stage)`` is one layer body.
    :meth:`Trace.expanded` replays the body once per layer (``repeat = 1``), giving the
    op-for-op list.  Totals multiply by ``repeat``.  Layers that differ (MoE every other
    layer) are emitted as separate runs.  Op names carry no layer number, so identical
    ops compare equal (the engine memoises by op).

MoE token assignment
    The router (Gemm ``n = experts``, weights kept in the vector dtype) and top-k
    (VectorOp) are followed by a dispatch (gather of ``tokens·k`` rows), the expert Gemms
    and a weighted combine.  Tokens go to experts deterministically
    (:func:`expert_token_counts`): by default (``moe_routing="random"``) the expected loads of
    routers that pick each token's top-k experts independently - a decode step of one token
    with top-2 reads two experts' weights, of four tokens about six, and larger batches load
    the busiest expert above the mean (128 tokens: +22 %); ``moe_routing="balanced"`` splits
    the ``T·k`` assignments as evenly as possible (expert-choice routing), the remainder ``r``
    one each to experts ``0..r-1``; ``moe_skew = s > 0`` gives expert ``i`` a share ∝
    ``(i+1)^-s`` (Zipf), capped at ``T`` per expert (a token never visits the same expert
    twice), rounded by largest remainder (ties to the lower index).  Experts with the same token count form one grouped Gemm
    (``count`` = number of such experts, each with its own weights); experts with no
    tokens are skipped (their weights are not read).

Number formats (:class:`Precision`)
    ``dtype`` is the GEMM input format; ``vector_dtype`` (default: ``dtype`` if it is a
    16/32-bit float, else bf16) is the format of everything between GEMMs (norms,
    residual, softmax, attention inputs, all-reduces).  Weight GEMMs get

    * weight-only quantisation (``weight_dtype`` ≠ ``dtype``): a ``dequant`` VectorOp right
      before the Gemm, ``elements = k·n·count`` weight values, 2 ops each (convert, scale;
      block scales of MXFP4/NVFP4 are applied here), **0 DRAM bytes**: it models the
      widening done on the way from on-chip memory into the array, as fused W4A16
      kernels (Marlin, AWQ) do; the weight bytes themselves are counted once, by the Gemm
      (``Gemm.weight_dtype``).  Counted once per weight value (a lower bound when the
      kernel re-dequantises per M tile).
    * low-precision activations (``dtype`` int8 / fp8 / fp4 ...: W8A8, FP8, W4A4): a
      ``quant_act`` VectorOp (3 ops: abs-max, scale, round) reading the activations in the
      vector dtype and writing them in ``dtype``, the Gemm with ``out_dtype`` = vector
      dtype (scales applied in the epilogue);
    * block-scaled GEMM inputs (``dtype`` mxfp4 / nvfp4 / mxfp8): a ``block_scale``
      VectorOp after the Gemm, ``elements = m·n·⌈k/block⌉·count`` partial sums, 2 ops each
      (combine the two scales, multiply), 0 bytes (done at the accumulator).
    * ``sparsity="2:4"`` or ``"unstructured"``: ``Gemm.sparsity`` on every weight Gemm (not the
      LM head/router).

    The LM head, embeddings, router and norm weights stay in the vector dtype.  The KV
    cache is stored in ``kv_dtype`` (``Attention.kv_dtype``; the append converts).

Attention lowerings
    ``fused``: one :class:`~sim.ir.ops.Attention` per layer per group of sequences
    with identical ``(new, past)`` (``batch`` = group size), FlashAttention-style: no
    score traffic; causal work is ``Attention.scored_pairs()`` (only the needed half of a
    prefill square).  ``unfused``: per group, ``QKᵀ`` Gemm (``m = q_len·heads/kv_heads``
    queries of a KV head, ``k = head_dim``, ``n = kv_len``, ``count = batch·kv_heads``,
    B operand = K cache in ``kv_dtype``) which writes the ``m×n`` scores to DRAM, a
    ``softmax`` VectorOp reading and writing them (scale, mask, max, exp, sum, normalise),
    and the ``PV`` Gemm reading them.  The unfused Gemms compute the **full rectangle**
    as real unfused kernels (eager PyTorch) do — the causal mask is applied in the
    softmax — so their FLOPs exceed the fused op's by about 2× for a prefill; the tag
    ``useful_pairs=N`` records the causal count.

LM head tokens
    Final norm over all new tokens (as vLLM and HF do), LM head only over the tokens whose
    logits are needed: ``Sequence.logits`` (default 1 = the last new token: prefill,
    decode, last chunk); :meth:`Sequence.verify` needs all ``new`` (speculative
    verification); an intermediate prefill chunk can set 0.

Tensor parallelism (Megatron-style, ``Parallelism.tensor = t``)
    The ops describe ONE chip's share: heads / t query heads, KV heads / t (when
    ``kv_heads < t`` each chip keeps one KV head, replicated ``t / kv_heads`` times —
    its cache and its QKV columns too), ffn / t (experts are split the same way, "expert
    tensor parallelism").  QKV and gate/up are column-parallel, output and down
    projections row-parallel, followed by an ``all_reduce`` of ``tokens·hidden`` values
    (after attention and after the MLP).  The MoE router, top-k, dispatch and combine
    are replicated on every chip.  The embedding table is replicated; the LM head
    is split over the vocabulary (``⌈vocab/t⌉`` columns) followed by an ``all_gather`` of
    the logits.  Collective ``bytes`` is the size of the full (reduced / gathered) tensor.

Pipeline parallelism (``Parallelism.pipeline = p``)
    Contiguous stages; when layers do not divide evenly the first ``layers % p`` stages get
    one more.  The embedding runs on stage 0, final norm and LM head on the last stage, and
    after every stage but the last a ``send`` of the ``tokens·hidden`` activations
    (``participants = 2``, ``stage`` = the sender).  One trace holds every stage.
"""
from __future__ import annotations

import copy
import functools
from collections import Counter
from dataclasses import asdict, replace
from typing import Any, Iterable
from typing import Sequence as _Seq

from sim.errors import WorkloadError
from sim.ir.ops import (SPARSITIES, Attention, Collective, Conv2d, Copy, Gemm, Op, VectorOp, op_min_dram_bytes,
                        op_to_dict)
from sim.model.workload.iteration import (_WIDE_FLOATS, RUN_PHASES, Iteration, Parallelism, Precision, Sequence,
                                         phase_iterations)
from sim.model.workload.sizing import (MOE_ROUTINGS, _matrix_bytes, expert_token_counts, kv_cache_bytes,
                                       stage_layers, weight_bytes)
from sim.model.workload.trace import Trace, TraceOp, op_flops
from sim.model.workload.trace_compare import _SIG_NAMES, _describe_sig, _label, _signature, compare_traces
from sim.spec.dtypes import get_format, sparse_2_4_bytes
from sim.spec.model_spec import ModelSpec

#: vector-lane operations per element for the VectorOps the builder emits (estimates:
#: each counts one multiply, add, compare, exp or reciprocal as one lane op).
VECTOR_OPS_PER_ELEMENT: dict[str, float] = {
    "rmsnorm": 4.0,      # square, accumulate, scale by rsqrt, multiply by weight
    "layernorm": 7.0,    # mean, subtract, square, accumulate, scale, gamma, beta
    "rope": 3.0,         # x·cos + rotate(x)·sin
    "kv_append": 0.0,    # a copy into the cache (2.0 when converting to kv_dtype)
    "softmax": 5.0,      # scale+mask, max, exp, sum, normalise
    "silu_mul": 5.0,     # silu = x / (1 + exp(-x)): exp, add, divide; times up: 1; ~5
    "gelu_mul": 9.0,     # tanh-GELU (~8) times up (1)
    "gelu": 8.0,         # tanh approximation: cube, fma, tanh, add, multiplies
    "relu": 1.0,
    "add": 1.0,
    "topk": 6.0,         # softmax over experts (5) + selection (1) per router logit
    "moe_dispatch": 0.0, # gather of token rows into expert order (data movement only)
    "moe_combine": 2.0,  # multiply by the gate weight, accumulate
    "quant_act": 3.0,    # abs-max, scale, round/convert
    "dequant": 2.0,      # convert, multiply by (block) scale
    "block_scale": 2.0,  # combine the A and B block scales, scale the partial sum
}


# --------------------------------------------------------------------------- builder


class _Builder:
    def __init__(self, model: ModelSpec, it: Iteration, precision: Precision, attention: str,
                 parallel: Parallelism, moe_skew: float, moe_routing: str = "random"):
        self.model, self.it, self.p, self.attention, self.par = model, it, precision, attention, parallel
        self.moe_skew, self.moe_routing = moe_skew, moe_routing
        t = parallel.tensor
        m = model
        if m.num_heads % t:
            raise WorkloadError(f"tensor parallel degree {t} does not divide num_heads ({m.num_heads}) of {m.name}")
        if m.num_kv_heads >= t:
            if m.num_kv_heads % t:
                raise WorkloadError(f"tensor parallel degree {t} does not divide num_kv_heads ({m.num_kv_heads}) of {m.name}")
            self.kv = m.num_kv_heads // t
        else:
            if t % m.num_kv_heads:
                raise WorkloadError(f"num_kv_heads ({m.num_kv_heads}) of {m.name} does not divide tensor parallel degree {t}")
            self.kv = 1  # each KV head replicated t / kv_heads times
        if m.ffn_size % t:
            raise WorkloadError(f"tensor parallel degree {t} does not divide ffn_size ({m.ffn_size}) of {m.name}")
        self.heads = m.num_heads // t
        self.ffn = m.ffn_size // t
        self.d = m.head_dim
        self.h = m.hidden_size
        self.T = it.new_tokens
        self.vf = precision.vector_format
        self.vfmt = get_format(self.vf)
        self.kvf = precision.kv_format

    # ......................................................... small makers

    def vbytes(self, n: int) -> int:
        return self.vfmt.bytes_for(n)

    def vec(self, name: str, op: str, elements: int, read: int, write: int, ops: float | None = None) -> VectorOp:
        return VectorOp(name, op, int(elements), float(VECTOR_OPS_PER_ELEMENT[op] if ops is None else ops),
                        int(read), int(write))

    def norm(self, name: str, tokens: int) -> VectorOp:
        kind = self.model.norm
        params = self.h * (2 if kind == "layernorm" else 1)
        return replace(self.vec(name, kind, tokens * self.h, self.vbytes(tokens * self.h)
                                + self.vbytes(params), self.vbytes(tokens * self.h)), row_elements=self.h)

    def add(self, name: str, elements: int) -> VectorOp:
        return self.vec(name, "add", elements, 2 * self.vbytes(elements), self.vbytes(elements))

    def weight_gemm(self, name: str, m: int, k: int, n: int, count: int = 1, quantised: bool = True,
                    tags: tuple[str, ...] = ()) -> list[Op]:
        """A Gemm against stored weights, with the explicit format-conversion work around it."""
        tags = ("weight",) + tags
        if not quantised:
            return [Gemm(name, m, k, n, count, dtype=self.vf, tags=tags)]
        p = self.p
        gd, wd = p.dtype, p.weight_format
        ops: list[Op] = []
        if p.quantised_activations:
            ops.append(self.vec(f"{name}.quant_act", "quant_act", m * k * count, self.vbytes(m * k) * count,
                                get_format(gd).bytes_for(m * k) * count))
        if wd != gd:
            ops.append(self.vec(f"{name}.dequant", "dequant", k * n * count, 0, 0))
            tags = tags + (f"dequant:{wd}->{gd}",)
        if p.sparsity:
            tags = tags + (f"sparse:{p.sparsity}",)
        # an integer GEMM writes the tensors' format (bf16 after W8A8 on a GPU, int8 on an
        # int8-only chip), not its int32 accumulators
        out = self.vf if (p.quantised_activations or get_format(gd).kind == "int") else None
        ops.append(Gemm(name, m, k, n, count, dtype=gd, weight_dtype=wd if wd != gd else None,
                        out_dtype=out, sparsity=p.sparsity, tags=tags))
        bs = get_format(gd).block_size
        if bs:
            ops.append(self.vec(f"{name}.block_scale", "block_scale", m * n * (-(-k // bs)) * count, 0, 0))
        return ops

    # ......................................................... layer pieces

    def attention_ops(self) -> list[Op]:
        p, d = self.p, self.d
        heads, kv = self.heads, self.kv
        group = heads // kv
        kv_fmt = None if self.kvf == self.vf else self.kvf
        out: list[Op] = []
        for new, past, count in self.it.groups():
            kv_len = past + new
            att = Attention("attn.core", batch=count, heads=heads, kv_heads=kv, head_dim=d, q_len=new,
                            kv_len=kv_len, causal=True, dtype=self.vf, kv_dtype=kv_fmt, fused=True)
            if self.attention == "fused":
                out.append(att)
                continue
            m = new * group
            cnt = count * kv
            useful = f"useful_pairs={att.scored_pairs() * count * heads}"
            if kv_fmt:
                out.append(self.vec("attn.qk.dequant", "dequant", d * kv_len * cnt, 0, 0))
            qk = Gemm("attn.qk", m, d, kv_len, cnt, dtype=self.vf, weight_dtype=kv_fmt,
                      tags=("scores_to_dram", "full_rectangle", useful))
            out.append(qk)
            score_bytes = qk.c_bytes()
            out.append(self.vec("attn.softmax", "softmax", m * kv_len * cnt, score_bytes, score_bytes))
            if kv_fmt:
                out.append(self.vec("attn.pv.dequant", "dequant", kv_len * d * cnt, 0, 0))
            out.append(Gemm("attn.pv", m, kv_len, d, cnt, dtype=self.vf, weight_dtype=kv_fmt,
                            tags=("scores_from_dram", "full_rectangle", useful)))
        return out

    def attn_branch(self, normed_tokens: int) -> list[tuple[Op, str]]:
        T, d, h = self.T, self.d, self.h
        ops: list[Op] = []
        qkv_n = (self.heads + 2 * self.kv) * d
        ops += self.weight_gemm("attn.qkv", T, h, qkv_n, tags=("column_parallel",) if self.par.tensor > 1 else ())
        if self.model.positional == "rope":
            el = T * (self.heads + self.kv) * d
            ops.append(self.vec("attn.rope", "rope", el, self.vbytes(el) + self.vbytes(T * d), self.vbytes(el)))
        kv_el = 2 * T * self.kv * d
        kv_write = 2 * T * self.kv * get_format(self.kvf).bytes_for(d)
        ops.append(self.vec("attn.kv_append", "kv_append", kv_el, self.vbytes(kv_el), kv_write,
                            ops=0.0 if self.kvf == self.vf else VECTOR_OPS_PER_ELEMENT["quant_act"]))
        ops += self.attention_ops()
        ops += self.weight_gemm("attn.o_proj", T, self.heads * d, h,
                                tags=("row_parallel",) if self.par.tensor > 1 else ())
        return [(o, "attn") for o in ops]

    def mlp_branch(self, layer: int) -> list[tuple[Op, str]]:
        T, h, F = self.T, self.h, self.ffn
        model = self.model
        tp = self.par.tensor > 1
        act = {"silu_glu": "silu_mul", "gelu_glu": "gelu_mul", "gelu": "gelu", "relu": "relu"}[model.activation]
        if not model.is_moe_layer(layer):
            ops: list[Op] = []
            if model.gated_mlp:
                ops += self.weight_gemm("mlp.gate_up", T, h, 2 * F, tags=("column_parallel",) if tp else ())
                ops.append(self.vec("mlp.act", act, T * F, self.vbytes(2 * T * F), self.vbytes(T * F)))
            else:
                ops += self.weight_gemm("mlp.up", T, h, F, tags=("column_parallel",) if tp else ())
                ops.append(self.vec("mlp.act", act, T * F, self.vbytes(T * F), self.vbytes(T * F)))
            ops += self.weight_gemm("mlp.down", T, F, h, tags=("row_parallel",) if tp else ())
            return [(o, "mlp") for o in ops]
        E, k = model.num_experts, model.experts_per_token
        ops = []
        ops += self.weight_gemm("moe.router", T, h, E, quantised=False)
        ops.append(self.vec("moe.topk", "topk", T * E, self.vbytes(T * E), T * k * (4 + self.vfmt.bits // 8)))
        A = T * k
        ops.append(self.vec("moe.dispatch", "moe_dispatch", A * h, self.vbytes(A * h), self.vbytes(A * h)))
        counts = expert_token_counts(T, E, k, self.moe_skew, self.moe_routing)
        by_count = Counter(c for c in counts if c > 0)
        groups = sorted(by_count.items(), key=lambda kv_: -kv_[0])
        n_up = 2 * F if model.gated_mlp else F
        for c, nexp in groups:
            ops += self.weight_gemm("moe.gate_up" if model.gated_mlp else "moe.up", c, h, n_up, count=nexp,
                                    tags=(f"experts={nexp}", f"tokens_per_expert={c}"))
        ops.append(self.vec("moe.act", act, A * F, self.vbytes(A * n_up), self.vbytes(A * F)))
        for c, nexp in groups:
            ops += self.weight_gemm("moe.down", c, F, h, count=nexp,
                                    tags=(f"experts={nexp}", f"tokens_per_expert={c}"))
        ops.append(self.vec("moe.combine", "moe_combine", A * h, self.vbytes(A * h) + T * k * self.vfmt.bits // 8,
                            self.vbytes(T * h)))
        return [(o, "moe") for o in ops]

    def all_reduce(self, name: str) -> Collective:
        return Collective(name, "all_reduce", self.vbytes(self.T * self.h), self.par.tensor,
                          self.par.collective_algorithm)

    def layer(self, layer: int) -> list[tuple[Op, str]]:
        T, h = self.T, self.h
        tp = self.par.tensor > 1
        model = self.model
        out: list[tuple[Op, str]] = [(self.norm("attn_norm", T), "attn")]
        if model.parallel_attention:
            out += self.attn_branch(T)
            mlp = self.mlp_branch(layer)
            out += mlp
            blk = mlp[-1][1]
            out.append((self.add("parallel.add", T * h), blk))
            if tp:
                out.append((self.all_reduce("parallel.all_reduce"), blk))
            out.append((self.add("residual", T * h), blk))
            return out
        out += self.attn_branch(T)
        if tp:
            out.append((self.all_reduce("attn.all_reduce"), "attn"))
        out.append((self.add("attn.residual", T * h), "attn"))
        mlp = self.mlp_branch(layer)
        blk = mlp[-1][1]
        out.append((self.norm("mlp_norm", T), blk))
        out += mlp
        if tp:
            out.append((self.all_reduce(f"{blk}.all_reduce"), blk))
        out.append((self.add(f"{blk}.residual", T * h), blk))
        return out

    # ......................................................... whole iteration

    def build(self, include_lm_head: bool, include_embedding: bool, compact: bool) -> list[TraceOp]:
        T, h, model = self.T, self.h, self.model
        stages = stage_layers(model.num_layers, self.par.pipeline)
        ops: list[TraceOp] = []
        if include_embedding:
            ops.append(TraceOp(Copy("embed_tokens", self.vbytes(T * h)), None, "embed", 1, 0))
            if model.positional == "learned":
                ops.append(TraceOp(Copy("embed_positions", self.vbytes(T * h)), None, "embed", 1, 0))
                ops.append(TraceOp(self.add("embed.add", T * h), None, "embed", 1, 0))
        for s, layers in enumerate(stages):
            bodies = [(i, tuple(self.layer(i))) for i in layers]
            runs: list[tuple[int, int, tuple]] = []
            for i, body in bodies:
                if compact and runs and runs[-1][2] == body:
                    first, n, b = runs[-1]
                    runs[-1] = (first, n + 1, b)
                else:
                    runs.append((i, 1, body))
            for first, n, body in runs:
                ops.extend(TraceOp(op, first, blk, n, s) for op, blk in body)
            if s < len(stages) - 1:
                ops.append(TraceOp(Collective("pp.send", "send", self.vbytes(T * h), 2), None, "pp", 1, s))
        last = len(stages) - 1
        L = self.it.logit_tokens
        if include_lm_head and L > 0:
            ops.append(TraceOp(self.norm("final_norm", T), None, "lm_head", 1, last))
            t = self.par.tensor
            vocab = -(-model.vocab_size // t)
            for op in self.weight_gemm("lm_head", L, h, vocab, quantised=self.p.quantised_lm_head,
                                       tags=("column_parallel",) if t > 1 else ()):
                ops.append(TraceOp(op, None, "lm_head", 1, last))
            if t > 1:
                ops.append(TraceOp(Collective("lm_head.all_gather", "all_gather", self.vbytes(L * model.vocab_size), t,
                                              self.par.collective_algorithm), None, "lm_head", 1, last))
        return ops


def _as_iteration(batch: Iteration | Iterable[Sequence | tuple] | Sequence) -> Iteration:
    if isinstance(batch, Iteration):
        return batch
    if isinstance(batch, Sequence):
        return Iteration((batch,))
    return Iteration(tuple(batch))


def build_iteration(model: ModelSpec, batch: Iteration | _Seq[Sequence] | Sequence,
                    precision: Precision = Precision(), attention: str = "fused",
                    parallel: Parallelism = Parallelism(), include_lm_head: bool = True,
                    include_embedding: bool = True, *, moe_skew: float = 0.0,
                    moe_routing: str = "random", compact: bool = True) -> Trace:
    """The ops of one decoder iteration (see the module notes for every convention).

    ``batch``: an :class:`Iteration`, a list of :class:`Sequence` (or ``(new, past)``
    tuples) or one Sequence.  ``attention``: ``"fused"`` or ``"unfused"``.  ``moe_routing``:
    ``"random"`` (each token's experts picked independently: the expected loads) or
    ``"balanced"``; ``moe_skew`` > 0 a Zipf-skewed assignment instead.  ``compact=False``
    emits every layer separately (the same as ``.expanded()``).
    """
    if not isinstance(model, ModelSpec):
        raise WorkloadError(f"build_iteration: model must be a ModelSpec, got {type(model).__name__}")
    if attention not in ("fused", "unfused"):
        raise WorkloadError(f"attention must be 'fused' or 'unfused', got {attention!r}")
    if moe_routing not in MOE_ROUTINGS:
        raise WorkloadError(f"moe_routing must be one of {', '.join(MOE_ROUTINGS)}, got {moe_routing!r}")
    if not isinstance(precision, Precision):
        raise WorkloadError("precision must be a Precision")
    if not isinstance(parallel, Parallelism):
        raise WorkloadError("parallel must be a Parallelism")
    it = _as_iteration(batch)
    if it.max_kv_len > model.max_context:
        raise WorkloadError(
            f"a sequence reaches {it.max_kv_len} tokens, beyond max_context {model.max_context} of {model.name} "
            f"(to explore longer contexts edit the model: --model-set max_context={it.max_kv_len} on the command "
            f"line, model_set=['max_context={it.max_kv_len}'] in Python, model_set: in a sweep workload)")
    ops, meta = _build_cached(model, it, precision, attention, parallel, include_lm_head, include_embedding,
                              moe_skew, moe_routing, compact)
    return Trace(ops, copy.deepcopy(meta))


@functools.lru_cache(maxsize=256)
def _build_cached(model: ModelSpec, it: Iteration, precision: Precision, attention: str, parallel: Parallelism,
                  include_lm_head: bool, include_embedding: bool, moe_skew: float, moe_routing: str, compact: bool):
    """The ops (a tuple of frozen TraceOps) and metadata of one iteration; every input is
    immutable and hashable, so a sweep that runs the same iteration on many chips builds
    it once."""
    b = _Builder(model, it, precision, attention, parallel, moe_skew, moe_routing)
    ops = b.build(include_lm_head, include_embedding, compact)
    meta = {
        "format": "sim-trace",
        "version": 1,
        "model": model.name,
        "iteration": it.to_list(),
        "iteration_text": it.describe(),
        "precision": asdict(precision),
        "parallel": asdict(parallel),
        "attention": attention,
        "include_lm_head": include_lm_head,
        "include_embedding": include_embedding,
        "moe_skew": moe_skew,
        "moe_routing": moe_routing,
    }
    return tuple(ops), meta


def prefill(model: ModelSpec, batch: int, prompt_len: int, past_tokens: int = 0, **kwargs: Any) -> Trace:
    """``batch`` sequences of ``prompt_len`` new tokens (behind ``past_tokens`` cached ones)."""
    return build_iteration(model, Iteration(tuple(Sequence(prompt_len, past_tokens) for _ in range(batch)),
                                            label="prefill"), **kwargs)


def decode(model: ModelSpec, batch: int, context_len: int, **kwargs: Any) -> Trace:
    """One decode step: ``batch`` sequences with ``context_len`` tokens already cached, 1 new each."""
    return build_iteration(model, Iteration(tuple(Sequence(1, context_len) for _ in range(batch)),
                                            label="decode"), **kwargs)


def speculative_verify(model: ModelSpec, batch: int, draft_tokens: int, context_len: int, **kwargs: Any) -> Trace:
    """Verification of ``draft_tokens`` drafted tokens per sequence (``draft + 1`` new, all with logits)."""
    return build_iteration(model, Iteration(tuple(Sequence.verify(draft_tokens, context_len) for _ in range(batch)),
                                            label="verify"), **kwargs)


__all__ = [
    "Sequence", "Iteration", "Precision", "Parallelism", "RUN_PHASES", "phase_iterations", "TraceOp", "Trace",
    "build_iteration", "prefill", "decode", "speculative_verify",
    "kv_cache_bytes", "weight_bytes", "expert_token_counts", "MOE_ROUTINGS", "stage_layers",
    "compare_traces", "op_flops", "op_min_dram_bytes", "VECTOR_OPS_PER_ELEMENT",
]
