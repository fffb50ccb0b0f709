"""A small reference PyTorch decoder built from a :class:`ModelSpec` (needs torch).

It exists to check :func:`sim.model.workload.llm.build_iteration` against an executable model:
capture it with :func:`sim.model.workload.capture.capture_module` and compare the traces op for
op (:func:`reference_trace` does both steps' first half).  It is written the way fast
inference code is: fused QKV and gate/up projections, RMSNorm/LayerNorm as one op, RoPE,
a preallocated KV cache written in place, ``scaled_dot_product_attention`` with GQA
(``enable_gqa``) and a lower-right causal mask when a prefix is cached, final norm over
every token and the LM head over the tokens that need logits.

The vector-unit pieces are modules with a ``sim_vector_op`` attribute, which the
capture records as one VectorOp each (the same names the builder uses).  Dense models
only (llama-, falcon- and gpt3-style); MoE routing is data-dependent and is not built.

This module imports torch at the top: import it only where torch is available.
"""
from __future__ import annotations

from typing import Any

import torch
import torch.nn as nn
import torch.nn.functional as F

from sim.errors import WorkloadError
from sim.model.workload.capture import _torch_dtype, capture_module
from sim.spec.model_spec import ModelSpec


class SimVectorOp(nn.Module):
    """Marker base: captured as one VectorOp named ``sim_vector_op``."""

    sim_vector_op = ""


class RMSNorm(SimVectorOp):
    sim_vector_op = "rmsnorm"

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.rms_norm(x, (x.shape[-1],), self.weight, self.eps)


class LayerNorm(SimVectorOp):
    sim_vector_op = "layernorm"

    def __init__(self, hidden: int, eps: float = 1e-5):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.bias = nn.Parameter(torch.zeros(hidden))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.layer_norm(x, (x.shape[-1],), self.weight, self.bias, self.eps)


class Rotary(SimVectorOp):
    """Rotary position embedding of q and k (rotate-half form); elements = q + k values."""

    sim_vector_op = "rope"

    def __init__(self, head_dim: int, theta: float = 10000.0):
        super().__init__()
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    @staticmethod
    def _rotate_half(x: torch.Tensor) -> torch.Tensor:
        a, b = x.chunk(2, dim=-1)
        return torch.cat((-b, a), dim=-1)

    def forward(self, q: torch.Tensor, k: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        t = q.shape[-2]
        pos = torch.arange(start, start + t, device=q.device, dtype=torch.float32)
        freqs = torch.outer(pos, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = emb.cos().to(q.dtype), emb.sin().to(q.dtype)
        return q * cos + self._rotate_half(q) * sin, k * cos + self._rotate_half(k) * sin


class KVAppend(SimVectorOp):
    """A preallocated KV cache; forward writes the new K, V and returns the valid prefix."""

    sim_vector_op = "kv_append"

    def __init__(self, batch: int, kv_heads: int, max_len: int, head_dim: int):
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(batch, kv_heads, max_len, head_dim), persistent=False)
        self.register_buffer("v_cache", torch.zeros(batch, kv_heads, max_len, head_dim), persistent=False)

    def sim_elements(self, args: tuple, output: Any) -> int:
        return args[0].numel() + args[1].numel()

    def forward(self, k: torch.Tensor, v: torch.Tensor, start: int) -> tuple[torch.Tensor, torch.Tensor]:
        end = start + k.shape[-2]
        if end > self.k_cache.shape[-2]:
            raise WorkloadError(f"KV cache holds {self.k_cache.shape[-2]} positions, {end} needed")
        self.k_cache[:, :, start:end].copy_(k)
        self.v_cache[:, :, start:end].copy_(v)
        return self.k_cache[:, :, :end], self.v_cache[:, :, :end]


class GatedAct(SimVectorOp):
    """act(gate) * up on a fused [.., 2·ffn] input (vLLM's SiluAndMul)."""

    def __init__(self, kind: str):
        super().__init__()
        self.sim_vector_op = {"silu_glu": "silu_mul", "gelu_glu": "gelu_mul"}[kind]
        self.fn = F.silu if kind == "silu_glu" else (lambda x: F.gelu(x, approximate="tanh"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        gate, up = x.chunk(2, dim=-1)
        return self.fn(gate) * up


class Act(SimVectorOp):
    def __init__(self, kind: str):
        super().__init__()
        self.sim_vector_op = kind
        self.fn = F.relu if kind == "relu" else (lambda x: F.gelu(x, approximate="tanh"))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fn(x)


def lower_right_mask(q_len: int, kv_len: int) -> Any:
    """SDPA mask: query i (of the last ``q_len`` positions) sees keys ``0..kv_len-q_len+i``."""
    from torch.nn.attention.bias import causal_lower_right

    return causal_lower_right(q_len, kv_len)


def _norm(spec: ModelSpec) -> nn.Module:
    return RMSNorm(spec.hidden_size) if spec.norm == "rmsnorm" else LayerNorm(spec.hidden_size)


class SelfAttention(nn.Module):
    def __init__(self, spec: ModelSpec, batch: int, max_len: int):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = spec.num_heads, spec.num_kv_heads, spec.head_dim
        self.qkv = nn.Linear(spec.hidden_size, spec.qkv_size, bias=spec.attention_bias)
        self.rotary = Rotary(spec.head_dim) if spec.positional == "rope" else None
        self.kv = KVAppend(batch, spec.num_kv_heads, max_len, spec.head_dim)
        self.o_proj = nn.Linear(spec.q_size, spec.hidden_size, bias=spec.attention_bias)

    def forward(self, x: torch.Tensor, start: int, attn_bias: Any = None) -> torch.Tensor:
        b, t, _ = x.shape
        d = self.head_dim
        q, k, v = self.qkv(x).split([self.heads * d, self.kv_heads * d, self.kv_heads * d], dim=-1)
        q = q.view(b, t, self.heads, d).transpose(1, 2)
        k = k.view(b, t, self.kv_heads, d).transpose(1, 2)
        v = v.view(b, t, self.kv_heads, d).transpose(1, 2)
        if self.rotary is not None:
            q, k = self.rotary(q, k, start)
        keys, values = self.kv(k, v, start)
        gqa = self.heads != self.kv_heads
        if start == 0:
            o = F.scaled_dot_product_attention(q, keys, values, is_causal=True, enable_gqa=gqa)
        elif t == 1:
            o = F.scaled_dot_product_attention(q, keys, values, enable_gqa=gqa)
        else:
            if attn_bias is None:
                attn_bias = lower_right_mask(t, start + t)
            o = F.scaled_dot_product_attention(q, keys, values, attn_mask=attn_bias, enable_gqa=gqa)
        o = o.transpose(1, 2).reshape(b, t, self.heads * d)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, spec: ModelSpec):
        super().__init__()
        h, f = spec.hidden_size, spec.ffn_size
        if spec.gated_mlp:
            self.gate_up = nn.Linear(h, 2 * f, bias=spec.mlp_bias)
            self.act = GatedAct(spec.activation)
        else:
            self.up = nn.Linear(h, f, bias=spec.mlp_bias)
            self.act = Act(spec.activation)
        self.down = nn.Linear(f, h, bias=spec.mlp_bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.gate_up(x) if hasattr(self, "gate_up") else self.up(x)
        return self.down(self.act(x))


class DecoderLayer(nn.Module):
    def __init__(self, spec: ModelSpec, batch: int, max_len: int):
        super().__init__()
        self.parallel = spec.parallel_attention
        self.attn_norm = _norm(spec)
        self.attn = SelfAttention(spec, batch, max_len)
        if not self.parallel:
            self.mlp_norm = _norm(spec)
        self.mlp = MLP(spec)

    def forward(self, x: torch.Tensor, start: int, attn_bias: Any = None) -> torch.Tensor:
        if self.parallel:
            h = self.attn_norm(x)
            return x + (self.attn(h, start, attn_bias) + self.mlp(h))
        x = x + self.attn(self.attn_norm(x), start, attn_bias)
        return x + self.mlp(self.mlp_norm(x))


class ReferenceDecoder(nn.Module):
    """Token ids ``[batch, new]`` + ``start`` (tokens already cached) → logits."""

    def __init__(self, spec: ModelSpec, batch: int, max_len: int):
        super().__init__()
        if spec.is_moe:
            raise WorkloadError(f"the reference module builds dense models only; {spec.name} is MoE")
        self.spec = spec
        self.embed = nn.Embedding(spec.vocab_size, spec.hidden_size)
        self.pos_embed = nn.Embedding(spec.max_context, spec.hidden_size) if spec.positional == "learned" else None
        self.layers = nn.ModuleList(DecoderLayer(spec, batch, max_len) for _ in range(spec.num_layers))
        self.final_norm = _norm(spec)
        self.lm_head = nn.Linear(spec.hidden_size, spec.vocab_size, bias=False)
        if spec.tied_embeddings:
            self.lm_head.weight = self.embed.weight

    def forward(self, input_ids: torch.Tensor, start: int = 0, logits: str = "last",
                attn_bias: Any = None) -> torch.Tensor:
        """``attn_bias``: the lower-right causal mask for ``start > 0`` prefill chunks; made
        here when not given (pass it in when capturing: PyTorch cannot construct the
        ``CausalBias`` tensor subclass while a dispatch mode is active)."""
        b, t = input_ids.shape
        x = self.embed(input_ids)
        if self.pos_embed is not None:
            pos = torch.arange(start, start + t, device=input_ids.device).expand(b, t)
            x = x + self.pos_embed(pos)
        for layer in self.layers:
            x = layer(x, start, attn_bias)
        x = self.final_norm(x)
        if logits == "last":
            x = x[:, -1:, :]
        elif logits != "all":
            raise WorkloadError(f"logits must be 'last' or 'all', got {logits!r}")
        return self.lm_head(x)


def build_reference_model(spec: ModelSpec, batch: int, max_len: int, dtype: torch.dtype = torch.bfloat16,
                          device: str | torch.device = "meta") -> ReferenceDecoder:
    """The reference decoder on ``device`` (meta by default: shapes only, no memory)."""
    with torch.device(device):
        model = ReferenceDecoder(spec, batch, max_len)
    return model.to(dtype=dtype)


def reference_trace(spec: ModelSpec, batch: int, new_tokens: int, past_tokens: int = 0,
                    logits: str = "last", dtype: str = "bf16"):
    """Capture one iteration of the reference decoder: ``batch`` sequences of ``new_tokens``
    behind ``past_tokens`` cached ones (the builder's ``Sequence(new, past)``; ``logits="all"``
    is the speculative-verification form)."""
    model = build_reference_model(spec, batch, past_tokens + new_tokens, dtype=_torch_dtype(dtype))
    ids = torch.empty(batch, new_tokens, dtype=torch.long, device="meta")
    bias = lower_right_mask(new_tokens, past_tokens + new_tokens) if past_tokens and new_tokens > 1 else None
    return capture_module(model, (ids,), kwargs={"start": past_tokens, "logits": logits, "attn_bias": bias},
                          name=spec.name)


__all__ = ["ReferenceDecoder", "build_reference_model", "reference_trace", "SimVectorOp"]
