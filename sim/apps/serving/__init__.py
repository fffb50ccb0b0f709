"""Request-level serving on simulated chips: a SimPy simulation of replicas behind a router,
iteration latencies from the chip model (memoised and interpolated), paged KV cache with
prefix caching and preemption, batching policies behind a registry, speculative decoding.

Entry point: :func:`serve` (the CLI is ``sim serve``, :mod:`sim.cli.serve`).
"""
from __future__ import annotations

from sim.apps.serving.metrics import SLO_METRICS, ServingResult
from sim.apps.serving.simulator import serve
from sim.apps.serving.speculative import Speculative, closed_form_tokens_per_step
from sim.apps.serving.workload import LengthDist, Request, generate, load_trace, save_trace


__all__ = ["serve", "ServingResult", "SLO_METRICS", "Speculative", "closed_form_tokens_per_step",
           "LengthDist", "Request", "generate", "load_trace", "save_trace"]
