"""The attention block of a software-stack profile (``attention:`` in ``stacks/*.yaml``):
which library path the fused attention kernels take, and the grid-of-programs kernels a
profile may name instead of the engine's attention op - a varlen prefill launch and a
split-KV decode over a CUDA graph's rows (priced by :mod:`sim.model.varlen_attention`).
:mod:`sim.spec.stack_spec` holds the rest of the profile."""
from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, model_validator


class FrozenSpec(BaseModel):
    """A frozen profile block: unknown keys are errors."""

    model_config = ConfigDict(frozen=True, extra="forbid")


class VarlenLatency(FrozenSpec):
    """What one program of a varlen prefill-attention kernel takes beyond its tile work
    (:mod:`sim.model.varlen_attention`): a program (query block x head) walks its key blocks one
    after another, each step a dependent chain (load K, QK^T, softmax, load V, PV) that one
    program cannot overlap, and few programs fit on a core at once."""

    program_ns: float = Field(ge=0, le=1e6, description="fixed time of one program (its query block's load, "
                                                         "the epilogue's normalise and store), ns")
    step_ns: float = Field(ge=0, le=1e6, description="least time of one key step of one program (the serial "
                                                      "chain's latency), ns; a step takes the longer of this and "
                                                      "the engine's tile work")
    programs_per_core: int = Field(ge=1, le=64, description="programs resident on one core at once (shared "
                                                             "memory / registers per program)")
    source: str = Field(min_length=1, description="the measurement the numbers are calibrated on")


class DecodeSplitRule(FrozenSpec):
    """A split-KV (flash-decoding) decode kernel whose grid is fixed when a CUDA graph is
    captured (:func:`sim.model.varlen_attention.split_decode`): a split kernel of (graph rows x
    KV heads x splits) programs, splits = ceil(cache length / ``split_tokens``), each program
    walking its split's tokens of its row's sequence in ``block_k``-key steps (a split past the
    sequence, or a row without one, exits at once), then a combine kernel of (graph rows x
    query heads) programs.  Pricing each program's steps as a dependent chain (load K and V,
    QK^T, softmax, PV) in waves of ``programs_per_core`` per core is what the serving loop's
    kernels measured (validation/fit_decode_split.py)."""

    split_tokens: int = Field(ge=1, le=1 << 24, description="tokens of one split (one program's share of a "
                                                            "sequence's cache)")
    block_k: int = Field(ge=1, le=1 << 20, description="keys per step of a program")
    programs_per_core: int = Field(ge=1, le=64, description="programs resident on one core at once")
    kernel_ns: float = Field(ge=0, le=1e7, description="fixed time of the split kernel beyond the chip's "
                                                       "launch overhead, ns")
    step_ns: float = Field(ge=0, le=1e6, description="one key step of one program (a dependent chain), ns")
    empty_program_ns: float = Field(ge=0, le=1e6, description="a program with no tokens (it exits), ns")
    combine_kernel_ns: float = Field(ge=0, le=1e7, description="fixed time of the combine kernel beyond the "
                                                               "chip's launch overhead, ns")
    combine_program_ns: float = Field(ge=0, le=1e6, description="one program (row x query head) of the "
                                                                "combine kernel, ns")
    query_copy_decode_only: bool = Field(
        default=False, description="a decode-only iteration first copies its queries into a contiguous "
                                   "tensor (one copy kernel a layer); iterations with prompt chunks pass a view")
    source: str = Field(min_length=1, description="the measurement the numbers are calibrated on")


class AttentionRule(FrozenSpec):
    """How the fused attention op runs."""

    decode_array: str | None = Field(
        default=None, description="array (library path) of the kernel for one query row per sequence; "
                                  "None: the chip's default array")
    prefill_array: str | None = Field(default=None, description="array of the kernel for longer queries")
    prefill_tiles: tuple[Annotated[int, Field(ge=1, le=1 << 20)], Annotated[int, Field(ge=1, le=1 << 20)]] | None = \
        Field(default=None, description="(query rows, key rows) of the kernel for longer queries' tile; None: "
                                         "the chip's attention_tiles for its array")
    prefill_stats_fill: bool = Field(
        default=False, description="a fill kernel of one fp32 softmax statistic per query row runs before a "
                                   "prefill attention kernel")
    output_copy: bool = Field(
        default=False, description="for more than one query row the attention output is made contiguous "
                                   "(a copy) before the output projection")
    output_concat: bool = Field(
        default=False, description="a layer with several attention calls (groups of sequences of different "
                                   "lengths) concatenates their outputs (one cat kernel) before the projection")
    prefill_varlen: bool = Field(
        default=False, description="one varlen kernel per layer serves every prompt chunk of an iteration "
                                   "(one launch; its programs are every chunk's query blocks x heads, each "
                                   "walking its own chunk's keys); needs prefill_tiles. sim serve and sim run "
                                   "(run_trace) both group an iteration's chunks")
    prefill_latency: VarlenLatency | None = Field(
        default=None, description="per-program latency of the varlen kernel (needs prefill_varlen); None: "
                                  "programs as fast as the engine's tile work, one per core")
    decode_split: DecodeSplitRule | None = Field(
        default=None, description="the decoding sequences' attention is a split-KV kernel over a CUDA graph's "
                                  "rows and the cache's length, then a combine kernel (sim serve prices it "
                                  "per iteration: LatencyModel); None: the engine's decode attention op")

    @model_validator(mode="after")
    def _varlen_needs_tiles(self):
        if self.prefill_varlen and self.prefill_tiles is None:
            raise ValueError("attention.prefill_varlen needs attention.prefill_tiles (the kernel's query rows "
                             "and keys per step: its programs are counted in query blocks)")
        if self.prefill_latency is not None and not self.prefill_varlen:
            raise ValueError("attention.prefill_latency prices the varlen prefill kernel: set "
                             "attention.prefill_varlen: true")
        return self
