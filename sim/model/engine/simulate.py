"""The model layer's entry point: one op on one chip -> :class:`~sim.ir.results.OpResult`.

A chip whose ``power:`` block turns DVFS on runs each op at the clock its power allows
(:mod:`sim.model.engine.dvfs`); every other op runs at the chip's clock
(:func:`sim.model.engine.run.simulate_op_at_clock`).  Results are memoised either way.

:func:`simulate_ops` answers many ops at once: the distinct ones on several threads (the
compiled engine releases the GIL, and every simulation is a pure function of its chip, op and
options, so the answers are those of one thread in any order).
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor, as_completed
from typing import Callable, Iterable

from sim.ir.ops import Collective
from sim.ir.results import OpResult
from sim.model.engine.dvfs import simulate_op_dvfs
from sim.model.engine.lower import Options
from sim.errors import MappingError
from sim.model.engine.run import memoised, simulate_op_at_clock
from sim.model.engine.threads import THREADS_ENV, threads, threads_limited
from sim.spec.chip import ChipSpec

__all__ = ["simulate_op", "simulate_ops", "threads", "threads_limited", "THREADS_ENV"]


def simulate_op(chip: ChipSpec, op, options: Options | None = None) -> OpResult:
    """Simulate ``op`` on ``chip``; identical (chip, op, options) return the memoised result."""
    options = options or Options()
    try:
        if not isinstance(op, Collective) and getattr(chip, "power", None) is not None and chip.power.dvfs:
            return memoised(chip, op, options, lambda: simulate_op_dvfs(chip, op, options))
        return simulate_op_at_clock(chip, op, options)
    except MappingError as exc:
        name = getattr(op, "name", None)
        if not name or f"'{name}'" in str(exc):
            raise
        # a whole run's "chip 'edge_npu' cannot compute in bf16" did not say which op asked for bf16
        raise MappingError(f"op '{name}': {exc}") from None


def _work(op) -> float:
    """What orders the ops handed to the threads, largest first (the longest ones start
    first, so the threads end together): the op's FLOPs, else its bytes."""
    for name in ("flops", "bytes"):
        value = getattr(op, name, None)
        value = value() if callable(value) else value
        if isinstance(value, (int, float)) and value > 0:
            return float(value)
    return 0.0


def _simulate_alone(chip: ChipSpec, question: tuple, n: int = 1) -> OpResult:
    """One op on a thread of :func:`simulate_ops`' pool, its candidate mappings on ``n``
    threads: one after another (1), since the pool keeps every thread busy already (at most
    :func:`threads` engine runs at once, one more while an op that outweighs all the others
    has two - never that number squared)."""
    with threads_limited(n):
        return simulate_op(chip, *question)


def simulate_ops(chip: ChipSpec, questions: Iterable[tuple[object, Options]], workers: int | None = None,
                 done: Callable[[], None] | None = None) -> list[OpResult]:
    """:func:`simulate_op` of each (op, options) of ``questions``, in their order; the
    distinct ones simulated on ``workers`` threads (default :func:`threads`), the largest
    first, and one that outweighs all the others together with its candidates on two of them.
    ``done`` is called once per distinct question answered (a progress bar)."""
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
        work = {q: _work(q[0]) for q in distinct}
        order = sorted(distinct, key=lambda q: -work[q])
        lead = None
        if work[order[0]] > sum(work[q] for q in order[1:]):
            # one op outweighs all the others together (a decode step's lm_head: 8.4 of 12
            # GFLOP of a Llama-3-8B step): on one pool thread it would be the critical path,
            # its candidates one after another, so it gets two threads for its candidates
            # (sim.model.engine.run) beside a pool one thread smaller
            lead, order = order[0], order[1:]
        pool = ThreadPoolExecutor(max_workers=min(workers, len(order) + (lead is not None)),
                                  thread_name_prefix="sim-op")
        try:
            futures = {}
            if lead is not None:
                futures[pool.submit(_simulate_alone, chip, lead, min(2, workers))] = lead
            futures.update({pool.submit(_simulate_alone, chip, q): q for q in order})
            for future in as_completed(futures):
                answers[futures[future]] = future.result()
                if done is not None:
                    done()
        finally:
            # an error or an interrupt: what has not started never will (the runs in flight
            # end on their own; their answers stay in the memo)
            pool.shutdown(wait=False, cancel_futures=True)
    return [answers[q] for q in questions]
