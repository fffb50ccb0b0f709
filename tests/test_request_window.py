"""The engine's heaps.  A requester's window of DRAM requests in flight (``_slots_wait`` / ``_slots_fill`` /
``_slots_peek`` in sim/model/kernels/dram_stream.py: the engine's cores and the request
streams keep their completions in a 4-ary heap popped bottom-up) against a plain reference:
a sorted list of completion times, the earliest leaving when the window is full; and the
event heap (earliest core first, ties by core id) against a sorted list of (time, core)."""
import bisect

import numpy as np
import pytest

from sim.model.kernels.dram_stream import _slots_fill, _slots_peek, _slots_wait


def _reference(issue, done, k, qn):
    """Issue times after the window's waits (k requests per chunk, any completion frees a
    slot), and what a peek before each wait says."""
    window, out = [], []
    for t, d in zip(issue, done):
        need = len(window) + k - qn
        if need > 0:
            t = max(t, window[need - 1])
            del window[:need]
        out.append(t)
        for _ in range(k):
            bisect.insort(window, max(d, t))
    return out


def _kernel(issue, done, k, qn, cores=3, core=1):
    buf = np.zeros((cores, qn))
    meta = np.zeros((cores, 2), np.int64)
    scratch = np.empty(k + 2)
    out, peeks = [], []
    for t, d in zip(issue, done):
        peeks.append(_slots_peek(buf, meta, core, k, qn, False, t, scratch))
        t = _slots_wait(buf, meta, core, k, qn, False, t)
        out.append(t)
        _slots_fill(buf, meta, core, k, qn, False, max(d, t))
    return out, peeks, meta


@pytest.mark.parametrize("qn,k", [(1, 1), (2, 1), (3, 1), (4, 1), (5, 1), (17, 1), (384, 1), (64, 8), (7, 3)])
@pytest.mark.parametrize("order", ["random", "nearly_sorted", "ties"])
def test_the_window_frees_the_earliest_completions_as_a_sorted_list_does(qn, k, order):
    rng = np.random.default_rng(qn * 10 + k)
    n = 3000
    issue = np.cumsum(rng.uniform(0.0, 2.0, n))
    if order == "random":
        lat = rng.uniform(10.0, 3000.0, n)
    elif order == "nearly_sorted":
        lat = 300.0 + rng.uniform(0.0, 5.0, n)
    else:
        lat = np.round(rng.uniform(0.0, 4.0, n)) * 100.0     # many equal completion times
    want = _reference(list(issue), list(issue + lat), k, qn)
    got, peeks, meta = _kernel(list(issue), list(issue + lat), k, qn)
    assert got == want
    assert peeks == want                     # a peek says what the wait then does
    assert qn - k < meta[1, 1] <= qn          # the window stays full once it filled
    assert meta[0].tolist() == meta[2].tolist() == [0, 0]   # other requesters untouched


def test_in_order_slots_retire_in_issue_order():
    """With ``in_order`` the oldest request frees the slot, even if a younger one finished."""
    buf = np.zeros((1, 2))
    meta = np.zeros((1, 2), np.int64)
    for t, d in [(0.0, 100.0), (1.0, 5.0)]:
        _slots_fill(buf, meta, 0, 1, 2, True, d)
    assert _slots_wait(buf, meta, 0, 1, 2, True, 2.0) == 100.0


@pytest.mark.parametrize("cores", [1, 2, 5, 132])
def test_the_event_heap_pops_cores_by_time_then_core_id(cores):
    """sim/model/kernels/steps.py's event heap against a sorted list of (time, core):
    pushes and pops interleaved as the engine does, many equal times."""
    from sim.model.kernels.steps import _heap_pop, _heap_push

    rng = np.random.default_rng(cores)
    hk = np.zeros(cores + 1)
    hc = np.zeros(cores + 1, np.int64)
    size, ref, got, want = 0, [], [], []
    for c in range(cores):
        t = float(rng.integers(0, 4))
        size = _heap_push(hk, hc, size, t, c)
        bisect.insort(ref, (t, c))
    for _ in range(5000):
        t, c, size = _heap_pop(hk, hc, size)
        got.append((t, c))
        want.append(ref.pop(0))
        nt = t + float(rng.integers(0, 3))           # a core goes back at or after now
        size = _heap_push(hk, hc, size, nt, c)
        bisect.insort(ref, (nt, c))
    assert got == want
