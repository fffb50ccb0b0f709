"""Dynamic batching (as in NVIDIA Triton's dynamic batcher): like static batching, but a
batch also forms when its oldest waiting request has waited ``timeout_s``, so a light load
is not held back until ``max_batch`` requests arrive."""
from __future__ import annotations

from sim.apps.serving.schedulers.static import StaticScheduler

#: default queue delay before a partial batch runs (Triton's ``max_queue_delay_microseconds``
#: has no universal default; 10 ms is the order its docs use in examples)
DEFAULT_TIMEOUT_S = 0.010


class DynamicScheduler(StaticScheduler):
    name = "dynamic"

    def ready(self, now: float) -> bool | float:
        if len(self.waiting) >= self.max_batch or self.arrivals_done:
            return True
        timeout = float(self.policy.get("timeout_s", DEFAULT_TIMEOUT_S))
        due = self.waiting[0].enqueued_s + timeout
        return True if now >= due - 1e-12 else due
