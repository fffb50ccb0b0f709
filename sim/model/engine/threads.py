"""How many threads the engine's callers use: :func:`sim.model.engine.simulate.simulate_ops`
(distinct ops at once) and :mod:`sim.model.engine.run` (an op's candidate mappings at once).
The compiled engine releases the GIL, so threads use every CPU."""
from __future__ import annotations

import contextlib
import os
from contextvars import ContextVar
from typing import Iterator

from sim.errors import SimError

__all__ = ["THREADS_ENV", "threads", "threads_limited"]

#: the environment variable that sets how many threads the engine's callers use (default: the
#: CPUs this process may run on)
THREADS_ENV = "SIM_THREADS"
#: a caller's own limit (:func:`threads_limited`), before ``SIM_THREADS``
_LIMIT: ContextVar[int | None] = ContextVar("sim_threads_limit", default=None)


@contextlib.contextmanager
def threads_limited(n: int | None) -> Iterator[None]:
    """Within the block, the engine's callers use at most ``n`` threads (None: no limit).  A
    worker of a process pool or a Dask cluster (sweep points, ``sim validate -j`` cases) runs
    with 1: its pool already keeps every CPU busy."""
    token = _LIMIT.set(None if n is None else max(1, int(n)))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def threads() -> int:
    """How many threads the engine's callers use: a :func:`threads_limited` limit, else
    ``SIM_THREADS`` when set, else the CPUs this process may run on."""
    limit = _LIMIT.get()
    if limit is not None:
        return limit
    value = os.environ.get(THREADS_ENV, "").strip()
    if value:
        try:
            n = int(value)
        except ValueError:
            n = 0
        if n < 1:
            raise SimError(f"environment variable {THREADS_ENV}={value!r}: expected a whole number of threads >= 1")
        return n
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # (not on Linux)
        return max(1, os.cpu_count() or 1)
