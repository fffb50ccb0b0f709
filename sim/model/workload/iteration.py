"""The inputs of an LLM iteration: its sequences (:class:`Sequence`, :class:`Iteration`),
number formats (:class:`Precision`) and parallel degrees (:class:`Parallelism`), and the iterations
each phase of a run is made of (:func:`phase_iterations`).

These frozen, validated records are what :func:`sim.model.workload.llm.build_iteration`
takes and what the apps build from command lines, sweep points and serving schedules;
they live apart from the trace builder so that code describing a workload needs none of
the op-construction machinery.  :mod:`sim.model.workload.llm` re-exports every name.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from sim.errors import WorkloadError
from sim.ir.ops import SPARSITIES
from sim.spec.dtypes import get_format

_WIDE_FLOATS = ("bf16", "fp16", "fp32", "tf32")


# --------------------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Sequence:
    """One sequence of an iteration: ``new_tokens`` processed now, ``past_tokens`` cached.

    ``logits``: how many of the new positions need logits (LM head rows); ``None`` means
    1 (the last new token: prefill, decode, last prefill chunk).
    """

    new_tokens: int
    past_tokens: int = 0
    logits: int | None = None

    def __post_init__(self) -> None:
        for name in ("new_tokens", "past_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int):
                raise WorkloadError(f"Sequence: {name} must be a whole number, got {v!r}")
        if self.new_tokens < 1:
            raise WorkloadError(f"Sequence: new_tokens must be >= 1, got {self.new_tokens}")
        if self.past_tokens < 0:
            raise WorkloadError(f"Sequence: past_tokens must be >= 0, got {self.past_tokens}")
        if self.logits is not None and not (0 <= self.logits <= self.new_tokens):
            raise WorkloadError(f"Sequence: logits must be in 0..new_tokens ({self.new_tokens}), got {self.logits}")

    @property
    def kv_len(self) -> int:
        return self.past_tokens + self.new_tokens

    @property
    def logit_tokens(self) -> int:
        return 1 if self.logits is None else self.logits

    @classmethod
    def verify(cls, draft_tokens: int, past_tokens: int) -> "Sequence":
        """Speculative-decoding verification: ``draft + 1`` new tokens, logits for all."""
        return cls(draft_tokens + 1, past_tokens, logits=draft_tokens + 1)


@dataclass(frozen=True)
class Iteration:
    """A batch of sequences processed in one forward pass (continuous batching mixes kinds)."""

    sequences: tuple[Sequence, ...]
    label: str = ""

    def __post_init__(self) -> None:
        seqs = tuple(s if isinstance(s, Sequence) else Sequence(*s) for s in self.sequences)
        if not seqs:
            raise WorkloadError("an iteration needs at least one sequence")
        object.__setattr__(self, "sequences", seqs)

    @property
    def new_tokens(self) -> int:
        return sum(s.new_tokens for s in self.sequences)

    @property
    def logit_tokens(self) -> int:
        return sum(s.logit_tokens for s in self.sequences)

    @property
    def max_kv_len(self) -> int:
        return max(s.kv_len for s in self.sequences)

    def groups(self) -> list[tuple[int, int, int]]:
        """``(new, past, count)`` for each distinct ``(new, past)``, in first-seen order."""
        counts: dict[tuple[int, int], int] = {}
        for s in self.sequences:
            key = (s.new_tokens, s.past_tokens)
            counts[key] = counts.get(key, 0) + 1
        return [(n, p, c) for (n, p), c in counts.items()]

    def describe(self) -> str:
        parts = [f"{c}x(new={n}, past={p})" for n, p, c in self.groups()]
        return (self.label + ": " if self.label else "") + " + ".join(parts)

    def to_list(self) -> list[list[int | None]]:
        return [[s.new_tokens, s.past_tokens, s.logits] for s in self.sequences]


@dataclass(frozen=True)
class Precision:
    """Number formats of an iteration (names as in :mod:`sim.spec.dtypes`).

    ``dtype``: GEMM inputs (activations side); ``weight_dtype``: stored weights (None =
    ``dtype``); ``kv_dtype``: KV cache (None = the vector dtype); ``vector_dtype``: tensors
    between GEMMs (None = ``dtype`` if a 16/32-bit float, else bf16); ``sparsity``: "2:4"
    or "unstructured" on weights (see :class:`~sim.ir.ops.Gemm`); ``quantised_lm_head``: the LM head in the GEMM formats too (it normally
    stays in the vector format; a chip without units for that needs it quantised).
    """

    dtype: str = "bf16"
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    sparsity: str | None = None
    vector_dtype: str | None = None
    quantised_lm_head: bool = False

    def __post_init__(self) -> None:
        for name in ("dtype", "weight_dtype", "kv_dtype", "vector_dtype"):
            v = getattr(self, name)
            if v is not None:
                object.__setattr__(self, name, get_format(v).name)
        if self.sparsity not in SPARSITIES:
            raise WorkloadError(f"Precision: sparsity must be one of {SPARSITIES}, got {self.sparsity!r}")

    @property
    def vector_format(self) -> str:
        if self.vector_dtype:
            return self.vector_dtype
        return self.dtype if self.dtype in _WIDE_FLOATS else "bf16"

    @property
    def weight_format(self) -> str:
        return self.weight_dtype or self.dtype

    @property
    def kv_format(self) -> str:
        return self.kv_dtype or self.vector_format

    @property
    def quantised_activations(self) -> bool:
        return self.dtype != self.vector_format


@dataclass(frozen=True)
class Parallelism:
    """Tensor (Megatron) and pipeline parallel degrees, and the algorithm of the tensor-
    parallel collectives ("ring" or "tree", see :func:`sim.model.engine.collectives.collective_seconds`)."""

    tensor: int = 1
    pipeline: int = 1
    collective_algorithm: str = "ring"

    def __post_init__(self) -> None:
        for name in ("tensor", "pipeline"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise WorkloadError(f"Parallelism: {name} must be a whole number >= 1, got {v!r}")
        if self.collective_algorithm not in ("ring", "tree"):
            raise WorkloadError(f"Parallelism: collective_algorithm must be 'ring' or 'tree', "
                                f"got {self.collective_algorithm!r}")


#: the phases of an LLM run (``sim run --phase``)
RUN_PHASES = ("prefill", "decode", "generate")


def phase_iterations(phase: str, batch: int, prompt_len: int, context_len: int | None = None,
                     draft_tokens: int = 0, decode_steps: Iterable[int] = ()) -> list[Iteration]:
    """The iterations a run of ``phase`` is made of, each of ``batch`` equal sequences, labelled
    as :func:`sim.apps.inference.run_llm` reports them (the one place that says which
    iterations a phase builds: ``run_llm`` simulates them, the energy report re-reads them).

    ``prefill``: one pass over ``prompt_len`` tokens per sequence behind ``context_len`` cached
    ones (prefix caching; none when None).  ``decode``: one step behind ``context_len``
    (default ``prompt_len``) cached tokens; with ``draft_tokens`` > 0 it verifies that many
    speculative tokens plus one.  ``generate``: the prefill, then one decode step for each
    step index ``s`` of ``decode_steps``, behind ``context_len + prompt_len + s`` cached tokens
    (the caller picks the steps it samples)."""
    if phase not in RUN_PHASES:
        raise WorkloadError(f"phase must be prefill, decode or generate, got {phase!r}")
    past = int(context_len) if context_len is not None else 0
    if phase == "decode":
        ctx = int(context_len) if context_len is not None else prompt_len
        seq = Sequence.verify(draft_tokens, ctx) if draft_tokens else Sequence(1, ctx)
        return [Iteration(tuple([seq] * batch), label=f"verify {draft_tokens}" if draft_tokens else "decode")]
    prefill = Iteration(tuple([Sequence(prompt_len, past)] * batch), label="prefill")
    if phase == "prefill":
        return [prefill]
    start = past + prompt_len
    return [prefill] + [Iteration(tuple([Sequence(1, start + s)] * batch), label=f"decode@{start + s}")
                        for s in decode_steps]
