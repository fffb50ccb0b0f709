"""Replica schedulers, one file per policy on :class:`~.base.Scheduler`, behind a registry.

``get_scheduler(name)`` accepts a registered name or a Scheduler subclass; an unknown name
raises :class:`sim.errors.UnknownNameError` listing the registered ones.
"""
from __future__ import annotations

from sim.apps.serving.schedulers.base import Batch, Scheduler, Seq
from sim.apps.serving.schedulers.chunked_prefill import ChunkedPrefillScheduler
from sim.apps.serving.schedulers.continuous import ContinuousScheduler
from sim.apps.serving.schedulers.disaggregated import DecodePoolScheduler, PrefillPoolScheduler
from sim.apps.serving.schedulers.dynamic import DynamicScheduler
from sim.apps.serving.schedulers.static import StaticScheduler
from sim.errors import UnknownNameError

SCHEDULERS: dict[str, type[Scheduler]] = {
    "static": StaticScheduler,
    "dynamic": DynamicScheduler,
    "continuous": ContinuousScheduler,
    "chunked_prefill": ChunkedPrefillScheduler,
    "disaggregated": PrefillPoolScheduler,
}


def register(name: str, cls: type[Scheduler]) -> None:
    """Add a policy under ``name`` (a subclass of :class:`Scheduler`)."""
    if not (isinstance(cls, type) and issubclass(cls, Scheduler)):
        raise TypeError(f"scheduler {name!r} must be a Scheduler subclass")
    SCHEDULERS[name] = cls


def get_scheduler(name_or_cls) -> type[Scheduler]:
    if isinstance(name_or_cls, type) and issubclass(name_or_cls, Scheduler):
        return name_or_cls
    key = str(name_or_cls).replace("-", "_")
    if key not in SCHEDULERS:
        raise UnknownNameError("scheduler", str(name_or_cls), list(SCHEDULERS))
    return SCHEDULERS[key]


__all__ = ["Batch", "Scheduler", "Seq", "SCHEDULERS", "register", "get_scheduler", "StaticScheduler",
           "DynamicScheduler", "ContinuousScheduler", "ChunkedPrefillScheduler", "PrefillPoolScheduler",
           "DecodePoolScheduler"]
