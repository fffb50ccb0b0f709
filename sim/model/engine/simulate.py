"""The model layer's entry point: one op on one chip -> :class:`~sim.ir.results.OpResult`.

A chip whose ``power:`` block turns DVFS on runs each op at the clock its power allows
(:mod:`sim.model.engine.dvfs`); every other op runs at the chip's clock
(:func:`sim.model.engine.run.simulate_op_at_clock`).  Results are memoised either way.

:func:`simulate_ops` answers many ops at once: the distinct ones on several threads (the
compiled engine releases the GIL, and every simulation is a pure function of its chip, op and
options, so the answers are those of one thread in any order).
"""
from __future__ import annotations

import contextlib
import os
from concurrent.futures import ThreadPoolExecutor, as_completed
from contextvars import ContextVar
from typing import Callable, Iterable, Iterator

from sim.errors import SimError
from sim.ir.ops import Collective
from sim.ir.results import OpResult
from sim.model.engine.dvfs import simulate_op_dvfs
from sim.model.engine.lower import Options
from sim.model.engine.run import memoised, simulate_op_at_clock
from sim.spec.chip import ChipSpec

__all__ = ["simulate_op", "simulate_ops", "threads", "threads_limited"]

#: the environment variable that sets how many threads :func:`simulate_ops` uses (default:
#: the CPUs this process may run on)
THREADS_ENV = "SIM_THREADS"
#: a caller's own limit (:func:`threads_limited`), before ``SIM_THREADS``
_LIMIT: ContextVar[int | None] = ContextVar("sim_threads_limit", default=None)


@contextlib.contextmanager
def threads_limited(n: int | None) -> Iterator[None]:
    """Within the block, :func:`simulate_ops` uses at most ``n`` threads (None: no limit).  A
    worker of a process pool or a Dask cluster (sweep points, ``sim validate -j`` cases) runs
    with 1: its pool already keeps every CPU busy."""
    token = _LIMIT.set(None if n is None else max(1, int(n)))
    try:
        yield
    finally:
        _LIMIT.reset(token)


def simulate_op(chip: ChipSpec, op, options: Options | None = None) -> OpResult:
    """Simulate ``op`` on ``chip``; identical (chip, op, options) return the memoised result."""
    options = options or Options()
    if not isinstance(op, Collective) and getattr(chip, "power", None) is not None and chip.power.dvfs:
        return memoised(chip, op, options, lambda: simulate_op_dvfs(chip, op, options))
    return simulate_op_at_clock(chip, op, options)


def threads() -> int:
    """How many threads :func:`simulate_ops` uses: a :func:`threads_limited` limit, else
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


def _work(op) -> float:
    """What orders the ops handed to the threads, largest first (the longest ones start
    first, so the threads end together): the op's FLOPs, else its bytes."""
    for name in ("flops", "bytes"):
        value = getattr(op, name, None)
        value = value() if callable(value) else value
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return 0.0


def simulate_ops(chip: ChipSpec, questions: Iterable[tuple[object, Options]], workers: int | None = None,
                 done: Callable[[], None] | None = None) -> list[OpResult]:
    """:func:`simulate_op` of each (op, options) of ``questions``, in their order; the
    distinct ones simulated on ``workers`` threads (default :func:`threads`), the largest
    first.  ``done`` is called once per distinct question answered (a progress bar)."""
    questions = list(questions)
    distinct = list(dict.fromkeys(questions))
    workers = threads() if workers is None else max(1, int(workers))
    answers: dict = {}
    if workers == 1 or len(distinct) < 2:
        for q in distinct:
            answers[q] = simulate_op(chip, *q)
            if done is not None:
                done()
    else:
        order = sorted(distinct, key=lambda q: -_work(q[0]))
        pool = ThreadPoolExecutor(max_workers=min(workers, len(order)), thread_name_prefix="sim-op")
        try:
            futures = {pool.submit(simulate_op, chip, *q): q for q in order}
            for future in as_completed(futures):
                answers[futures[future]] = future.result()
                if done is not None:
                    done()
        finally:
            # an error or an interrupt: what has not started never will (the runs in flight
            # end on their own; their answers stay in the memo)
            pool.shutdown(wait=False, cancel_futures=True)
    return [answers[q] for q in questions]
