"""Static batching: a batch of ``max_batch`` requests is formed, prefilled together and
decoded until its longest request finishes; nothing joins a running batch.

Sequences that finish early keep their slot (the batch is padded to its size, as in the
request-level batching of FasterTransformer-style servers), so the decode iterations cost
the whole batch.  Every request's blocks for prompt + output are reserved when the batch
forms.  A batch forms when ``max_batch`` requests wait (or when no more will arrive).
"""
from __future__ import annotations

from sim.apps.serving.schedulers.base import Batch, Scheduler


class StaticScheduler(Scheduler):
    name = "static"

    def __init__(self, kv, **kw):
        super().__init__(kv, **kw)
        self.batch: list = []

    def ready(self, now: float) -> bool | float:
        """True to form a batch now; a time to look again; False to wait for arrivals."""
        return len(self.waiting) >= self.max_batch or self.arrivals_done

    def form(self, now: float) -> Batch | None:
        picked = []
        while self.waiting and len(picked) < self.max_batch:
            s = self.waiting[0]
            if not self.admit(s, now, extra=s.remaining, reserve=0):
                break
            picked.append(s)
        if not picked:
            return None
        self.batch = picked
        return Batch(prefill=[(s, s.to_prefill) for s in picked if s.to_prefill], kind="static-prefill")

    def plan(self, now: float) -> Batch | float | None:
        if self.batch and all(s.done for s in self.batch):
            self.batch = []
        if not self.batch:
            if not self.waiting:
                return None
            r = self.ready(now)
            if r is False:
                return None
            if r is not True:
                return float(r)
            return self.form(now)
        live = [s for s in self.batch if not s.done]
        pad = [s for s in self.batch if s.done]
        return Batch(decode=live, padded=len(pad), padded_context_tokens=sum(s.ctx for s in pad), kind="static-decode")
