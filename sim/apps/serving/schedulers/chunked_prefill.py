"""Chunked prefill with a token budget: Sarathi-Serve (Agrawal et al., OSDI 2024).

Every iteration holds at most ``token_budget`` new tokens: all running decodes first (one
token each, ``k + 1`` when verifying drafts), then chunks of prompts already being
prefilled, then chunks of newly admitted prompts, first come, first served.  A long prompt
is split over several iterations, so decodes never stall behind it ("stall-free
batching"); blocks are allocated chunk by chunk.
"""
from __future__ import annotations

from sim.apps.serving.schedulers.base import Batch, Scheduler

#: Sarathi-Serve's token budget for Llama-class models on A100/H100 (OSDI 2024, sec. 5: 512
#: for strict TBT SLOs, 2048 for relaxed ones); the default here is the strict one
DEFAULT_CHUNK_TOKENS = 512


class ChunkedPrefillScheduler(Scheduler):
    name = "chunked_prefill"

    def plan(self, now: float) -> Batch | None:
        b = Batch(kind="chunked")
        if self.swapped:
            self.swap_in(b)
        b.decode = self.grow_decodes(b)
        budget = self.token_budget - len(b.decode) * self.q
        for s in self.running:
            if budget <= 0:
                break
            if s.to_prefill:
                n = min(s.to_prefill, budget)
                if not self.ensure(s, s.ctx + n):
                    break
                b.prefill.append((s, n))
                budget -= n
        while self.waiting and budget > 0 and len(self.running) < self.max_batch and not self.swapped:
            s = self.waiting[0]
            if not self.admit(s, now, chunk=budget):
                break
            if s.to_prefill:
                n = min(s.to_prefill, budget)
                b.prefill.append((s, n))
                budget -= n
        if not b.prefill and not b.decode:
            return None if b.extra_s == 0 else b
        return b
