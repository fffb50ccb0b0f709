"""Speculative decoding: a draft model proposes ``k`` tokens, the target verifies ``k + 1``.

With acceptance probability ``α_i`` for the i-th drafted token (given the ones before it
were accepted), a step emits the accepted run plus one token from the target (the
correction, or the bonus token when all ``k`` are accepted), so the expected tokens per step
are ``1 + Σ_{i=1..k} Π_{j≤i} α_j``; for a constant ``α`` that is
``(1 − α^(k+1)) / (1 − α)`` (Leviathan et al., "Fast Inference from Transformers via
Speculative Decoding", ICML 2023, eq. 1).  A step costs ``k`` draft decode iterations plus
one target iteration with ``k + 1`` new tokens per sequence, all with logits
(:meth:`sim.model.workload.llm.Sequence.verify`).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sim.errors import WorkloadError


@dataclass(frozen=True)
class Speculative:
    """``k`` drafted tokens per step; ``alpha``: one acceptance rate, or one per position."""

    k: int
    alpha: float | tuple[float, ...] = 0.7
    draft_model: str | None = None      # None: no draft cost (e.g. self-drafting heads not modelled)

    def __post_init__(self) -> None:
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise WorkloadError(f"speculative k: must be a whole number >= 1, got {self.k!r}")
        prof = self.profile
        if any(not 0 <= a <= 1 for a in prof):
            raise WorkloadError(f"speculative alpha: every acceptance rate must be in [0, 1], got {self.alpha!r}")

    @property
    def profile(self) -> tuple[float, ...]:
        if isinstance(self.alpha, (int, float)):
            return (float(self.alpha),) * self.k
        prof = tuple(float(a) for a in self.alpha)
        if len(prof) != self.k:
            raise WorkloadError(f"speculative alpha: a profile needs k = {self.k} rates, got {len(prof)}")
        return prof

    def expected_tokens_per_step(self) -> float:
        total, run = 1.0, 1.0
        for a in self.profile:
            run *= a
            total += run
        return total

    def sample_tokens(self, rng: np.random.Generator, n: int) -> np.ndarray:
        """Tokens emitted by each of ``n`` sequences in one step (1 .. k + 1)."""
        u = rng.random((n, self.k))
        ok = (u < np.asarray(self.profile)[None, :]).cumprod(axis=1)
        return ok.sum(axis=1) + 1


def closed_form_tokens_per_step(alpha: float, k: int) -> float:
    """``(1 − α^(k+1)) / (1 − α)`` (``k + 1`` at α = 1)."""
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)
