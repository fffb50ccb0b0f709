"""Prefill/decode disaggregation (DistServe, Zhong et al., OSDI 2024; Splitwise, Patel et
al., ISCA 2024): prompts run on a pool of prefill replicas, then their KV cache moves over a
link (``bytes / bandwidth + latency``) to a pool of decode replicas that only decode.

The first token is emitted by the prefill replica (TTFT ends there); the transfer delays
the second.  The prefill replica keeps the blocks until the transfer is done; the decode
replica admits a transferred sequence when blocks for its context fit.
"""
from __future__ import annotations

from sim.apps.serving.schedulers.base import Batch, Scheduler
from sim.apps.serving.schedulers.continuous import ContinuousScheduler


class PrefillPoolScheduler(Scheduler):
    """Prefill-only iterations: whole prompts, first come first served, up to the token budget."""

    name = "disaggregated"
    disaggregated = True

    def __init__(self, kv, **kw):
        super().__init__(kv, **kw)
        self.transferring: list = []

    def plan(self, now: float) -> Batch | None:
        b = Batch(kind="prefill-pool")
        budget = self.token_budget
        while self.waiting and len(self.running) < self.max_batch:
            s = self.waiting[0]
            if b.prefill and s.to_prefill > budget:
                break
            if not self.admit(s, now):
                break
            b.prefill.append((s, s.to_prefill))
            budget -= s.to_prefill
        return b if b.prefill else None

    def prefill_done(self, seq, now: float) -> None:
        super().prefill_done(seq, now)
        if not seq.done:
            self.running.remove(seq)
            self.transferring.append(seq)
            self.on_prefilled(seq)

    def transferred(self, seq) -> None:
        """The KV cache of ``seq`` has left: free its blocks here."""
        self.transferring.remove(seq)
        self.free(seq)


class DecodePoolScheduler(ContinuousScheduler):
    """Decode-side replicas: continuous batching of transferred sequences (a preempted one
    is recomputed locally)."""

    name = "disaggregated-decode"

    def receive(self, seq, now: float) -> None:
        seq.blocks = 0
        seq.shared = 0
        seq.prefix = None
        self.add(seq, now)
