"""A bounded, thread-safe memo (least recently used out first).

The engine's in-memory memos (op results, the run each op kept, engine runs) are shared by
the threads that simulate distinct ops at once (:func:`sim.model.engine.simulate.simulate_ops`:
the compiled engine releases the GIL).  An ``OrderedDict`` read and then moved to the end is
two steps another thread may split (its entry evicted in between), so every step here holds
one lock; the values are computed outside it.  :meth:`Memo.get_or_compute` computes a key
once: a thread that misses a key another thread is computing waits for that answer instead
of simulating the same op again (the answer would be identical - every simulation is a pure
function of its key - but the time would be spent twice).
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Callable, Generic, Hashable, TypeVar

V = TypeVar("V")


class Memo(Generic[V]):
    """At most ``size`` entries; :meth:`get` marks an entry recently used."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._data: "OrderedDict[Hashable, V]" = OrderedDict()
        self._lock = threading.Lock()
        #: keys being computed: (the computing thread's ident, an event set when it is done)
        self._inflight: dict[Hashable, tuple[int, threading.Event]] = {}

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

    def get_or_compute(self, key: Hashable, compute: Callable[[], V]) -> V:
        """The value of ``key``, computed by ``compute()`` on a miss - once: a thread that
        misses a key another thread is computing waits for it.  (A thread computing a key
        that asks for it again, inside ``compute``, computes it again rather than wait for
        itself.)"""
        me = threading.get_ident()
        while True:
            with self._lock:
                hit = self._data.get(key)
                if hit is not None:
                    self._data.move_to_end(key)
                    return hit
                owner = self._inflight.get(key)
                if owner is None or owner[0] == me:
                    mine = owner is None
                    if mine:
                        done = threading.Event()
                        self._inflight[key] = (me, done)
                    break
            owner[1].wait()  # another thread computes it: its answer, or (if it failed) try ourselves
        try:
            value = compute()
            self.put(key, value)
            return value
        finally:
            if mine:
                with self._lock:
                    self._inflight.pop(key, None)
                done.set()

    def put(self, key: Hashable, value: V) -> None:
        with self._lock:
            self._data[key] = value
            self._data.move_to_end(key)
            while len(self._data) > self.size:
                self._data.popitem(last=False)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()

    def __len__(self) -> int:
        return len(self._data)

    def __bool__(self) -> bool:
        return bool(self._data)
