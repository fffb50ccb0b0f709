"""ModelSpec: the shape of a decoder-only transformer, read from ``workloads/*.yaml``.

Only what decides the work of an inference iteration is described: sizes, the attention
layout (GQA / MQA through ``num_kv_heads``), the MLP kind, the norm, MoE routing and the
embeddings.  Weights are never needed.

Derived quantities (parameter counts, KV-cache bytes) are closed-form properties so that
tests can hold them against published numbers.

Conventions
-----------
* ``head_dim`` defaults to ``hidden_size // num_heads`` (then ``hidden_size`` must divide).
* ``num_kv_heads`` defaults to ``num_heads`` (multi-head attention); 1 is MQA.
* MoE: ``num_experts > 1`` replaces the MLP of every ``moe_layer_frequency``-th layer by
  ``num_experts`` experts of ``ffn_size`` each, ``experts_per_token`` (top-k) of them used
  per token.  Layer ``i`` (0-based) is an MoE layer when ``(i + 1) % moe_layer_frequency == 0``
  (frequency 2 = layers 1, 3, 5, ... as in GShard / Switch "every other layer").
* ``parallel_attention`` (GPT-J / Falcon-7B): attention and MLP read the same normed
  input and their outputs are added to the residual together; one norm per layer.
* Embedding parameters (token table, learned position table, and the LM head when it is
  not tied) are counted apart from the decoder's parameters.
"""
from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, PositiveInt, model_validator

from sim.spec.dtypes import get_format
from sim.spec.spec_base import FileSafeName


class ModelSpec(BaseModel):
    """A decoder-only transformer (dense or mixture-of-experts)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1] = 1
    name: FileSafeName
    description: str = ""
    source: str = Field("", description="where the numbers come from (config.json URL, paper table)")

    hidden_size: PositiveInt
    num_layers: Annotated[int, Field(ge=1, le=10_000)]  # the engine walks layers one by one: 10^8 ran for ever
    num_heads: PositiveInt
    num_kv_heads: PositiveInt | None = None
    head_dim: PositiveInt | None = None
    ffn_size: PositiveInt
    activation: Literal["silu_glu", "gelu_glu", "gelu", "relu"] = "silu_glu"
    norm: Literal["rmsnorm", "layernorm"] = "rmsnorm"
    positional: Literal["rope", "learned", "none"] = "rope"
    parallel_attention: bool = False
    vocab_size: PositiveInt
    tied_embeddings: bool = False
    max_context: PositiveInt

    # each expert is priced as its own GEMM and routed loads are drawn per expert: 10^9 experts
    # ran out of memory and 2^16 took minutes; 4,096 at top-256 takes ~50 s (production MoEs: 8-384 experts)
    num_experts: Annotated[int, Field(ge=1, le=4096)] = 1
    experts_per_token: Annotated[int, Field(ge=1, le=256)] = 1   # production top-k: 1-8
    moe_layer_frequency: PositiveInt = 1

    attention_bias: bool = False
    mlp_bias: bool = False

    @model_validator(mode="after")
    def _check(self) -> "ModelSpec":
        problems: list[str] = []
        if self.num_kv_heads is None:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        if self.head_dim is None:
            if self.hidden_size % self.num_heads:
                problems.append(
                    f"hidden_size ({self.hidden_size}) is not a multiple of num_heads ({self.num_heads}); "
                    "give head_dim explicitly")
            else:
                object.__setattr__(self, "head_dim", self.hidden_size // self.num_heads)
        if self.num_heads % self.num_kv_heads:
            problems.append(f"num_heads ({self.num_heads}) must be a multiple of num_kv_heads ({self.num_kv_heads})")
        if self.experts_per_token > self.num_experts:
            problems.append(f"experts_per_token ({self.experts_per_token}) cannot exceed num_experts ({self.num_experts})")
        if self.moe_layer_frequency > self.num_layers:
            problems.append(f"moe_layer_frequency ({self.moe_layer_frequency}) exceeds num_layers ({self.num_layers})")
        if self.num_experts == 1 and self.moe_layer_frequency != 1:
            problems.append("moe_layer_frequency only applies when num_experts > 1")
        if problems:
            raise ValueError("; ".join(problems))
        return self

    # ------------------------------------------------------------------ layout

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 1

    def is_moe_layer(self, layer: int) -> bool:
        return self.is_moe and (layer + 1) % self.moe_layer_frequency == 0

    @property
    def num_moe_layers(self) -> int:
        return sum(self.is_moe_layer(i) for i in range(self.num_layers))

    @property
    def gated_mlp(self) -> bool:
        return self.activation.endswith("_glu")

    @property
    def q_size(self) -> int:
        return self.num_heads * self.head_dim

    @property
    def kv_size(self) -> int:
        return self.num_kv_heads * self.head_dim

    @property
    def qkv_size(self) -> int:
        """Output width of the fused QKV projection: (heads + 2·kv_heads)·head_dim."""
        return (self.num_heads + 2 * self.num_kv_heads) * self.head_dim

    @property
    def norms_per_layer(self) -> int:
        return 1 if self.parallel_attention else 2

    # ------------------------------------------------------------------ parameters

    def _norm_params(self) -> int:
        return self.hidden_size * (2 if self.norm == "layernorm" else 1)

    @property
    def params_attention(self) -> int:
        """Per layer: QKV and output projections (+ biases)."""
        h = self.hidden_size
        p = h * self.qkv_size + self.q_size * h
        if self.attention_bias:
            p += self.qkv_size + h
        return p

    def _mlp_params(self) -> int:
        """One MLP (or one expert)."""
        h, f = self.hidden_size, self.ffn_size
        if self.gated_mlp:
            p = 3 * h * f
            if self.mlp_bias:
                p += 2 * f + h
        else:
            p = 2 * h * f
            if self.mlp_bias:
                p += f + h
        return p

    def _layer_params(self, layer: int, active: bool) -> int:
        p = self.params_attention + self.norms_per_layer * self._norm_params()
        if self.is_moe_layer(layer):
            experts = self.experts_per_token if active else self.num_experts
            p += experts * self._mlp_params() + self.hidden_size * self.num_experts  # + router
        else:
            p += self._mlp_params()
        return p

    @property
    def params_embedding(self) -> int:
        """Token table, learned position table, and the LM head unless tied."""
        p = self.vocab_size * self.hidden_size
        if self.positional == "learned":
            p += self.max_context * self.hidden_size
        if not self.tied_embeddings:
            p += self.vocab_size * self.hidden_size
        return p

    @property
    def params_non_embedding(self) -> int:
        """All decoder layers plus the final norm."""
        return sum(self._layer_params(i, active=False) for i in range(self.num_layers)) + self._norm_params()

    @property
    def params_active_non_embedding(self) -> int:
        """Decoder parameters one token uses (top-k experts only in MoE layers)."""
        return sum(self._layer_params(i, active=True) for i in range(self.num_layers)) + self._norm_params()

    @property
    def params_total(self) -> int:
        return self.params_non_embedding + self.params_embedding

    @property
    def params_active(self) -> int:
        """Parameters touched per token, embeddings included (how Mixtral's 12.9B is quoted)."""
        return self.params_active_non_embedding + self.params_embedding

    def parameter_counts(self) -> dict[str, int]:
        return {
            "total": self.params_total,
            "active_per_token": self.params_active,
            "embedding": self.params_embedding,
            "non_embedding": self.params_non_embedding,
            "active_non_embedding": self.params_active_non_embedding,
        }

    # ------------------------------------------------------------------ KV cache

    def kv_bytes_per_token(self, dtype: str = "bf16") -> int:
        """K and V of one token over all layers: 2·layers·kv_heads·head_dim values.

        Block-scaled formats (mxfp4, nvfp4, mxfp8) add their scales; blocks run along
        ``head_dim`` inside one head's vector, so each head vector is rounded up to whole
        blocks and bytes separately.
        """
        per_vector = get_format(dtype).bytes_for(self.head_dim)
        return 2 * self.num_layers * self.num_kv_heads * per_vector
