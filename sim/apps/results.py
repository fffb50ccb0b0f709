"""Typed results of an LLM run (:func:`sim.apps.inference.run_llm`): frozen dataclasses with
explicit fields, plain data out through ``to_dict()`` (what ``sim run --json`` prints).

* :class:`LlmRun` - one run (a prefill, a decode step, or a generation): latency, TTFT, TPOT,
  throughput, FLOPs, DRAM bytes, energy (total, per token, by component), MFU, MBU, the
  resolved precision / stack / attention / parallelism, the memory fit, and the op rows;
* :class:`PhaseResult` - one phase of a generation (the prefill, the first and the last
  decode step);
* :class:`RunPrecision`, :class:`RunParallel`, :class:`Fit` - what the run resolved and
  whether it fits the chips' memory.

Compatibility: run_llm used to return a ``dict``.  :class:`LlmRun` is also a read-only
:class:`~collections.abc.Mapping` over ``to_dict()`` - ``res["tokens_per_s"]``,
``res.get("ops")``, ``"ttft_s" in res`` and ``{**res, "ops": rows}`` keep working, with the
same keys and values as before - but new code should read the attributes
(``res.tokens_per_s``), which always exist and are never NaN stand-ins.  A metric a phase
does not have is ``None`` as an attribute (``ttft_s`` of a decode step, ``tpot_s`` of a
prefill) and absent from the mapping, as it was from the dict.  ``json.dumps(res)`` needs
``res.to_dict()`` (or ``default=sim.ir.results._json_default``, which calls it).
"""
from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any

__all__ = ["LlmRun", "PhaseResult", "RunPrecision", "RunParallel", "Fit"]


def _frozen_map(m: Mapping | None) -> Mapping:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True)
class RunPrecision:
    """The number formats a run resolved (defaults filled in)."""

    dtype: str
    weight_dtype: str
    kv_dtype: str
    sparsity: str | None
    vector_dtype: str
    quantised_lm_head: bool

    def to_dict(self) -> dict[str, Any]:
        return {"dtype": self.dtype, "weight_dtype": self.weight_dtype, "kv_dtype": self.kv_dtype,
                "sparsity": self.sparsity, "vector_dtype": self.vector_dtype,
                "quantised_lm_head": self.quantised_lm_head}


@dataclass(frozen=True)
class RunParallel:
    """Tensor and pipeline parallelism of a run and its collectives' algorithm."""

    tensor: int
    pipeline: int
    collective: str

    @property
    def chips(self) -> int:
        return self.tensor * self.pipeline

    def to_dict(self) -> dict[str, Any]:
        return {"tensor": self.tensor, "pipeline": self.pipeline, "collective": self.collective}


@dataclass(frozen=True)
class Fit:
    """Weights plus KV cache per chip against the chip's DRAM capacity
    (:func:`sim.apps.inference.check_fit`)."""

    weight_bytes: int
    kv_cache_bytes: int
    kv_cache_bytes_per_sequence: int
    bytes_per_chip: float
    capacity_bytes_per_chip: float
    chips: int
    fits: bool

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Fit":
        return cls(**{k: d[k] for k in cls.__dataclass_fields__})

    def to_dict(self) -> dict[str, Any]:
        return {"weight_bytes": self.weight_bytes, "kv_cache_bytes": self.kv_cache_bytes,
                "kv_cache_bytes_per_sequence": self.kv_cache_bytes_per_sequence,
                "bytes_per_chip": self.bytes_per_chip, "capacity_bytes_per_chip": self.capacity_bytes_per_chip,
                "chips": self.chips, "fits": self.fits}


@dataclass(frozen=True)
class PhaseResult:
    """One iteration (or phase) of a run: its time, the tokens it counts and what they cost.

    ``tokens`` are those ``tokens_per_s`` and ``energy_per_token_j`` count: a prefill's
    prompt tokens, a decode step's new tokens (one per sequence, or the verified drafts
    plus one).  ``extrapolated_share`` / ``unsteady_extrapolated_share``: shares of the time
    from kernels the engine extrapolated, and from those whose samples never agreed."""

    seconds: float
    tokens: int
    tokens_per_s: float
    mfu: float
    mbu: float
    energy_j: float
    energy_per_token_j: float
    flops: float
    dram_bytes: float
    extrapolated_share: float
    unsteady_extrapolated_share: float

    def to_dict(self) -> dict[str, Any]:
        return {"extrapolated_share": self.extrapolated_share,
                "unsteady_extrapolated_share": self.unsteady_extrapolated_share,
                "seconds": self.seconds, "tokens": self.tokens, "tokens_per_s": self.tokens_per_s,
                "mfu": self.mfu, "mbu": self.mbu, "energy_j": self.energy_j,
                "energy_per_token_j": self.energy_per_token_j, "flops": self.flops, "dram_bytes": self.dram_bytes}


@dataclass(frozen=True, eq=False)
class LlmRun(Mapping):
    """One LLM run on a chip (:func:`sim.apps.inference.run_llm`).

    Always set, for every phase:

    * ``chip``, ``model``, ``phase`` (``prefill`` / ``decode`` / ``generate``), ``batch``;
      ``precision`` (:class:`RunPrecision`), ``parallel`` (:class:`RunParallel`),
      ``attention`` (``fused`` / ``unfused``), ``stack`` (software stack), ``memory``
      (``modeled`` / ``ideal``), ``fit`` (:class:`Fit`; ``kv_cache_bytes`` and
      ``kv_cache_bytes_per_sequence`` read it);
    * ``seconds`` - latency of the whole run;
    * ``tokens_processed`` - tokens the forward passes ran over (prefill: the prompts;
      decode: the new tokens, drafts included; generate: prompts plus every decode step's);
    * ``tokens_generated`` - tokens decode steps produced (prefill: 0 - its first token is
      what ``ttft_s`` times, and a generation counts ``new_tokens`` decode steps; a
      speculative step counts its verified drafts plus one);
    * ``tokens_per_s``, ``energy_per_token_j`` - per ``tokens`` (prefill: processed tokens;
      decode and generate: generated tokens);
    * ``flops``, ``dram_bytes``, ``energy_j`` - all chips together; ``energy_components_j`` -
      ``energy_j`` by memory level and unit (``mac``, ``vector``, ``noc``, ``static``) from the
      simulated kernels' breakdowns (empty where the kernels carry none);
    * ``mfu``, ``mbu`` (0..1), ``extrapolated_share``, ``unsteady_extrapolated_share``;
    * ``ops`` - one read-only row (a mapping) per kernel; a generation lists the prefill's and its last
      decode step's, each with its ``phase``.

    Phase-dependent (``None`` where the phase has no such number):

    * ``ttft_s`` (prefill, generate), ``tpot_s`` (decode, generate);
    * generate only: ``prompt_len``, ``new_tokens``, ``decode_steps_simulated`` (the rest are
      interpolated), ``decode_tokens_per_s``, ``prefill_tokens_per_s``, ``energy_per_processed_token_j``
      and the phases
      ``prefill``, ``decode_first``, ``decode_last`` (:class:`PhaseResult`).

    Read-only :class:`~collections.abc.Mapping` over :meth:`to_dict` for code written against
    the dict run_llm used to return (see the module's docstring).
    """

    chip: str
    model: str
    phase: str
    batch: int
    precision: RunPrecision
    parallel: RunParallel
    attention: str
    stack: str
    memory: str
    fit: Fit
    seconds: float
    tokens_processed: int
    tokens_generated: int
    tokens_per_s: float
    flops: float
    dram_bytes: float
    energy_j: float
    energy_per_token_j: float
    mfu: float
    mbu: float
    extrapolated_share: float
    unsteady_extrapolated_share: float
    ops: tuple[Mapping[str, Any], ...]
    energy_components_j: Mapping[str, float] = field(default_factory=dict)
    ttft_s: float | None = None
    tpot_s: float | None = None
    prompt_len: int | None = None
    new_tokens: int | None = None
    decode_steps_simulated: int | None = None
    decode_tokens_per_s: float | None = None
    #: generate: what run_llm has always reported here, IterationResult.tokens_per_s of the
    #: prefill (0.0 to date: see run_trace's new_tokens); the prefill's prompt tokens per
    #: second are ``prefill.tokens_per_s``
    prefill_tokens_per_s: float | None = None
    energy_per_processed_token_j: float | None = None
    prefill: PhaseResult | None = None
    decode_first: PhaseResult | None = None
    decode_last: PhaseResult | None = None

    def __post_init__(self):
        if self.phase not in ("prefill", "decode", "generate"):
            raise ValueError(f"phase must be prefill, decode or generate, got {self.phase!r}")
        need = {"prefill": ("ttft_s",), "decode": ("tpot_s",),
                "generate": ("ttft_s", "tpot_s", "prompt_len", "new_tokens", "decode_steps_simulated",
                             "decode_tokens_per_s", "prefill_tokens_per_s", "energy_per_processed_token_j",
                             "prefill", "decode_first", "decode_last")}[self.phase]
        missing = [k for k in need if getattr(self, k) is None]
        if missing:
            raise ValueError(f"a {self.phase} LlmRun needs {', '.join(missing)}")
        object.__setattr__(self, "ops", tuple(r if isinstance(r, MappingProxyType) else _frozen_map(r)
                                              for r in self.ops))
        object.__setattr__(self, "energy_components_j", _frozen_map(self.energy_components_j))

    # ------------------------------------------------------------------ derived numbers

    @property
    def tokens(self) -> int:
        """The tokens ``tokens_per_s`` and ``energy_per_token_j`` count."""
        return self.tokens_processed if self.phase == "prefill" else self.tokens_generated

    @property
    def kv_cache_bytes(self) -> int:
        return self.fit.kv_cache_bytes

    @property
    def kv_cache_bytes_per_sequence(self) -> int:
        return self.fit.kv_cache_bytes_per_sequence

    @property
    def phases(self) -> dict[str, PhaseResult]:
        """Generate: ``{"prefill", "decode_first", "decode_last"}``; empty otherwise."""
        return {k: v for k, v in (("prefill", self.prefill), ("decode_first", self.decode_first),
                                  ("decode_last", self.decode_last)) if v is not None}

    def dataframe(self):
        """The op rows as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame([dict(r) for r in self.ops])

    # ------------------------------------------------------------------ plain data

    def to_dict(self) -> dict[str, Any]:
        """Plain data, the keys (and their order) of ``sim run --json``; fresh copies of the
        op rows, so that changing them leaves this run as it was."""
        d: dict[str, Any] = {"chip": self.chip, "model": self.model, "phase": self.phase, "batch": self.batch,
                             "precision": self.precision.to_dict(), "parallel": self.parallel.to_dict(),
                             "attention": self.attention, "stack": self.stack, "memory": self.memory,
                             "fit": self.fit.to_dict(), "kv_cache_bytes": self.kv_cache_bytes,
                             "kv_cache_bytes_per_sequence": self.kv_cache_bytes_per_sequence}
        if self.phase != "generate":
            d.update({"extrapolated_share": self.extrapolated_share,
                      "unsteady_extrapolated_share": self.unsteady_extrapolated_share,
                      "seconds": self.seconds, "tokens": self.tokens, "tokens_per_s": self.tokens_per_s,
                      "mfu": self.mfu, "mbu": self.mbu, "energy_j": self.energy_j,
                      "energy_per_token_j": self.energy_per_token_j, "flops": self.flops,
                      "dram_bytes": self.dram_bytes})
            if self.phase == "prefill":
                d["ttft_s"] = self.ttft_s
            else:
                d["tpot_s"] = self.tpot_s
        else:
            d.update({"seconds": self.seconds, "ttft_s": self.ttft_s, "tpot_s": self.tpot_s,
                      "tokens_per_s": self.tokens_per_s, "decode_tokens_per_s": self.decode_tokens_per_s,
                      "prefill_tokens_per_s": self.prefill_tokens_per_s, "energy_j": self.energy_j,
                      "energy_per_token_j": self.energy_per_token_j,
                      "energy_per_processed_token_j": self.energy_per_processed_token_j,
                      "tokens_generated": self.tokens_generated, "tokens_processed": self.tokens_processed,
                      "flops": self.flops, "dram_bytes": self.dram_bytes, "mfu": self.mfu, "mbu": self.mbu,
                      "new_tokens": self.new_tokens, "prompt_len": self.prompt_len,
                      "decode_steps_simulated": self.decode_steps_simulated,
                      "extrapolated_share": self.extrapolated_share,
                      "unsteady_extrapolated_share": self.unsteady_extrapolated_share,
                      "phases": {k: v.to_dict() for k, v in self.phases.items()}})
        d["ops"] = [dict(r) for r in self.ops]
        # fields the dict of old did not have (generate had the token counts already)
        if self.phase != "generate":
            d["tokens_processed"] = self.tokens_processed
            d["tokens_generated"] = self.tokens_generated
        d["energy_components_j"] = dict(self.energy_components_j)
        return d

    # ------------------------------------------------------------------ Mapping (compatibility)

    @cached_property
    def _view(self) -> dict[str, Any]:
        return self.to_dict()

    def __getitem__(self, key: str) -> Any:
        return self._view[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view)

    def __len__(self) -> int:
        return len(self._view)

    def __repr__(self) -> str:
        lat = (f"ttft_s={self.ttft_s!r}, " if self.ttft_s is not None else "") + \
              (f"tpot_s={self.tpot_s!r}, " if self.tpot_s is not None else "")
        return (f"LlmRun(chip={self.chip!r}, model={self.model!r}, phase={self.phase!r}, batch={self.batch}, "
                f"seconds={self.seconds!r}, {lat}tokens_per_s={self.tokens_per_s!r}, mfu={self.mfu!r}, "
                f"mbu={self.mbu!r}, energy_j={self.energy_j!r}, ops=[{len(self.ops)} rows])")

    def _repr_html_(self) -> str:
        head = (f"<b>{self.model} {self.phase} on {self.chip}</b> (batch {self.batch}): "
                f"{self.seconds * 1e3:.3f} ms, {self.tokens_per_s:,.1f} tokens/s, "
                f"MFU {self.mfu:.1%}, MBU {self.mbu:.1%}, {self.energy_per_token_j * 1e3:.3g} mJ/token<br>")
        return head + self.dataframe()._repr_html_()
