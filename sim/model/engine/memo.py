"""A bounded, thread-safe memo (least recently used out first).

The engine's in-memory memos (op results, the run each op kept, engine runs) are shared by
the threads that simulate distinct ops at once (:func:`sim.model.engine.simulate.simulate_ops`:
the compiled engine releases the GIL).  An ``OrderedDict`` read and then moved to the end is
two steps another thread may split (its entry evicted in between), so every step here holds
one lock; the values are computed outside it.  Two threads that miss the same key both
compute it: the results are identical (every simulation is a pure function of its key), and
the second store keeps one of them.
"""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Generic, Hashable, TypeVar

V = TypeVar("V")


class Memo(Generic[V]):
    """At most ``size`` entries; :meth:`get` marks an entry recently used."""

    def __init__(self, size: int) -> None:
        self.size = int(size)
        self._data: "OrderedDict[Hashable, V]" = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            hit = self._data.get(key)
            if hit is not None:
                self._data.move_to_end(key)
            return hit

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

    def __contains__(self, key: Any) -> bool:
        return key in self._data
