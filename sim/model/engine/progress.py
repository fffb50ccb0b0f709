"""Progress of one op's simulation, for a caller that wants to show it.

A huge op (up to the 1e17-MAC size limit) is answered from several engine runs - a few
candidate mappings, each from samples of its loops - and can take a minute or two with
nothing else to show.  The engine says what it is doing here (which candidate of how many,
each engine run it starts, its size in output tiles and k); the model layer never prints,
so a front end that wants progress subscribes with :func:`listening` and decides how often to
show it (``sim gemm`` prints a line every few seconds on stderr).  With no listener, every
call is a no-op check of an empty list.
"""
from __future__ import annotations

import contextlib
import threading
from dataclasses import dataclass
from typing import Callable, Iterator


@dataclass(frozen=True)
class EngineProgress:
    """What the engine is doing now: the op, the candidate mapping among those simulated
    (1-based), its tile, and how many engine runs this op has started so far."""

    op: str
    candidate: int
    candidates: int
    tile: str
    engine_runs: int
    last_run: str

    def describe(self) -> str:
        return (f"{self.op}: candidate {self.candidate} of {self.candidates} (tiles {self.tile}), "
                f"engine run {self.engine_runs} ({self.last_run})")


_listeners: list[Callable[[EngineProgress], None]] = []
#: what each thread is simulating (threads simulate distinct ops at once:
#: sim.model.engine.simulate.simulate_ops)
_local = threading.local()


_lock = threading.RLock()  # an op's candidates may run on several threads: one count, events in order


def _state() -> dict:
    state = getattr(_local, "state", None)
    if state is None:
        state = _local.state = {"op": "", "candidate": 0, "candidates": 0, "tile": "", "runs": 0}
    return state


def current() -> dict:
    """This thread's progress state: hand it to :func:`shared` in a thread that works on the
    same op (sim.model.engine.run simulates an op's candidates at once)."""
    return _state()


@contextlib.contextmanager
def shared(state: dict) -> Iterator[None]:
    """Within the block this thread reports into ``state`` (another thread's :func:`current`):
    the op's engine runs are counted once, whichever thread starts them."""
    before = getattr(_local, "state", None)
    _local.state = state
    try:
        yield
    finally:
        _local.state = before


@contextlib.contextmanager
def listening(callback: Callable[[EngineProgress], None]) -> Iterator[None]:
    """Call ``callback`` with an :class:`EngineProgress` at every candidate and engine run
    started inside the block."""
    _listeners.append(callback)
    try:
        yield
    finally:
        _listeners.remove(callback)


def active() -> bool:
    """Whether anyone listens: callers build their progress text only then (the engine's
    loop should not format strings nobody reads)."""
    return bool(_listeners)


def op_started(op: str) -> None:
    """The engine starts on ``op``: its count of engine runs starts at 0."""
    if _listeners:
        _state().update(op=op, candidate=0, candidates=0, tile="", runs=0)


def candidate_started(op: str, index: int, count: int, tile: str) -> None:
    """The engine starts simulating candidate ``index`` (0-based) of ``count`` for ``op``."""
    if _listeners:
        _state().update(op=op, candidate=index + 1, candidates=count, tile=tile)


def engine_run_started(what: str) -> None:
    """An engine run starts (not a cache hit): ``what`` says its size."""
    if not _listeners:
        return
    state = _state()
    with _lock:
        state["runs"] += 1
        event = EngineProgress(op=state["op"], candidate=state["candidate"], candidates=state["candidates"],
                               tile=state["tile"], engine_runs=state["runs"], last_run=what)
        for callback in list(_listeners):
            callback(event)
