"""A core's window of DRAM requests in flight (``_window_wait`` / ``_window_add`` in
sim/model/kernels/transfers.py, a 4-ary heap popped bottom-up) against a plain reference:
a sorted list of completion times, the earliest leaving when the window is full."""
import bisect

import numpy as np
import pytest

from sim.model.kernels.transfers import _window_add, _window_wait


def _reference(times, issue, qn):
    """Issue times after the window's waits, and the completions each request is given."""
    window, out = [], []
    for t, d in zip(issue, times):
        if len(window) >= qn:
            t = max(t, window.pop(0))
        out.append(t)
        bisect.insort(window, max(d, t))
    return out


def _kernel(times, issue, qn, cores=3, core=1):
    slots = np.zeros((cores, qn))
    meta = np.zeros((cores, 2), np.int64)
    out = []
    for t, d in zip(issue, times):
        t = _window_wait(slots, meta, core, qn, t)
        out.append(t)
        _window_add(slots, meta, core, max(d, t))
    return out, meta


@pytest.mark.parametrize("qn", [1, 2, 3, 4, 5, 17, 384])
@pytest.mark.parametrize("order", ["random", "nearly_sorted", "ties"])
def test_the_window_frees_the_earliest_completion_as_a_sorted_list_does(qn, order):
    rng = np.random.default_rng(qn)
    n = 4000
    issue = np.cumsum(rng.uniform(0.0, 2.0, n))
    if order == "random":
        lat = rng.uniform(10.0, 3000.0, n)
    elif order == "nearly_sorted":
        lat = 300.0 + rng.uniform(0.0, 5.0, n)
    else:
        lat = np.round(rng.uniform(0.0, 4.0, n)) * 100.0     # many equal completion times
    got, meta = _kernel(list(issue + lat), list(issue), qn)
    assert got == _reference(list(issue + lat), list(issue), qn)
    assert meta[1, 1] == min(n, qn)          # the window stays full once it filled
    assert meta[0].tolist() == meta[2].tolist() == [0, 0]   # other cores untouched
