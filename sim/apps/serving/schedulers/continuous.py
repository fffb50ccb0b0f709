"""Continuous (iteration-level) batching, Orca (Yu et al., OSDI 2022) / vLLM.

Every iteration: every running sequence decodes one token (growing its KV blocks, preempting
the newest sequences when the cache is full); waiting requests join first come, first served
while the batch has room (``max_batch`` sequences), their whole prompts fit the token budget
(``token_budget`` tokens per iteration, vLLM's ``max_num_batched_tokens``; a prompt longer
than the budget runs alone), and their prompt's blocks fit the cache above the watermark.
New prompts are prefilled whole, in the same iteration as the decodes (Orca's selective
batching); a sequence joins the decodes the iteration after its prefill.
"""
from __future__ import annotations

from sim.apps.serving.schedulers.base import Batch, Scheduler


class ContinuousScheduler(Scheduler):
    name = "continuous"

    def plan(self, now: float) -> Batch | None:
        b = Batch(kind="continuous")
        if self.swapped:
            self.swap_in(b)
        b.decode = self.grow_decodes(b)
        budget = self.token_budget - len(b.decode) * self.q
        admitted = False
        while self.waiting and len(self.running) < self.max_batch and not self.swapped:
            s = self.waiting[0]
            need = s.to_prefill
            if b.prefill and need > budget:
                break
            if not self.admit(s, now):
                break
            admitted = True
            if s.to_prefill:
                b.prefill.append((s, s.to_prefill))
                budget -= s.to_prefill
        if not b.prefill and not b.decode:
            if admitted:   # only sequences that arrived with their KV (disaggregated): decode them now
                b.decode = self.grow_decodes(b)
                return b if b.decode else None
            return None if b.extra_s == 0 else b
        return b
