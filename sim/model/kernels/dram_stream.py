"""Request streams through the DRAM model (conveniences on
:func:`~sim.model.kernels.dram.dram_access`): a transfer cut into interleave-block chunks
for a requester with a bounded number of requests in flight (the slot ring the engine's
DMA also uses: ``_slots_wait`` / ``_slots_fill``), one stream or several requesters
interleaved in time order.  Arrays and scalars only.
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.dram import dram_access, dram_chunk_bytes
from sim.model.kernels.dram_layout import (P_ACCESS_BYTES, P_ACCESS_SHIFT, P_INTERLEAVE_BYTES, _NEG)
from sim.model.kernels.jit import kernel

@kernel(_nrt=False, inline='always')
def _chunk_units(p, addr, rem, max_units):
    """Next chunk of a transfer for a requester limited to ``max_units`` requests.

    Returns (chunk bytes, number of access-granularity requests it counts as).
    """
    g = np.int64(p[P_ACCESS_BYTES])
    g_shift = np.int64(p[P_ACCESS_SHIFT])
    c = dram_chunk_bytes(p, addr, rem)
    if g_shift >= 0:
        off = addr & (g - 1)
    else:
        off = addr % g
    cap = max_units * g - off
    if c > cap:
        c = cap
    if g_shift >= 0:
        k = ((off + c - 1) >> g_shift) + 1
    else:
        k = (off + c - 1) // g + 1
    return c, k


@kernel(_nrt=False, inline='always')
def _window_pop(buf, r, size):
    """Remove the smallest of the ``size`` completion times in requester r's min-heap
    ``buf[r, :size]`` and return it.  The heap is 4-ary and popped bottom-up: the hole the
    minimum leaves walks down to a leaf through the smallest child, then the last entry
    rises into it.  A requester keeps hundreds of requests in flight (an H200 SM's cp.async
    stages: 384-576 chunks) whose completions return far out of order; a binary heap's
    sift-down branched twice per level and took a fifth of an H200 GEMM's simulation (a ring
    kept sorted spent as long moving entries).  Any heap pops the same values, so no time
    depends on which one is used (tests/test_request_window.py)."""
    top = buf[r, 0]
    size -= 1
    last = buf[r, size]
    i = 0
    while True:
        first = 4 * i + 1
        if first >= size:
            break
        end = first + 4
        if end > size:
            end = size
        m = first
        mv = buf[r, first]
        for j in range(first + 1, end):
            v = buf[r, j]
            if v < mv:
                mv = v
                m = j
        buf[r, i] = mv
        i = m
    _window_push(buf, r, i, last)   # the last entry rises from the hole as a new one would
    return top


@kernel(_nrt=False, inline='always')
def _window_push(buf, r, size, d):
    """Add completion time ``d`` to requester r's 4-ary min-heap of ``size`` entries."""
    i = size
    while i > 0:
        par = (i - 1) >> 2
        if buf[r, par] <= d:
            break
        buf[r, i] = buf[r, par]
        i = par
    buf[r, i] = d


@kernel(_nrt=False, inline='always')
def _slots_wait(buf, meta, r, k, m, in_order, t):
    """Earliest time >= t at which requester r has k free request slots (of m).

    In-order (``in_order``): slots retire in issue order, so the k oldest slots of the
    ring must have completed.  Otherwise any completed slot is free: the k earliest
    completions are popped from r's min-heap (:func:`_window_pop`) when it is full.
    """
    if in_order:
        idx = meta[r, 0]
        for j in range(k):
            if buf[r, idx] > t:
                t = buf[r, idx]
            idx += 1
            if idx == m:
                idx = 0
        return t
    size = meta[r, 1]
    while size + k > m:
        top = _window_pop(buf, r, size)
        size -= 1
        if top > t:
            t = top
    meta[r, 1] = size
    return t


@kernel(_nrt=False, inline='always')
def _slots_fill(buf, meta, r, k, m, in_order, d):
    """Record k requests of requester r completing at d (after :func:`_slots_wait`)."""
    if in_order:
        h = meta[r, 0]
        for j in range(k):
            buf[r, h] = d
            h += 1
            if h == m:
                h = 0
        meta[r, 0] = h
        return
    size = meta[r, 1]
    for j in range(k):
        _window_push(buf, r, size, d)
        size += 1
    meta[r, 1] = size


@kernel
def _stream_core(p, state, addrs, sizes, t_issue, is_write, requester, max_outstanding,
                 out_done, in_order):
    n = addrs.shape[0]
    n_req = max_outstanding.shape[0]
    counts = np.zeros(n_req + 1, np.int64)
    for i in range(n):
        counts[requester[i] + 1] += 1
    for r in range(n_req):
        counts[r + 1] += counts[r]
    order = np.empty(n, np.int64)
    fill = counts[:n_req].copy()
    for i in range(n):
        r = requester[i]
        order[fill[r]] = i
        fill[r] += 1
    m_r = np.empty(n_req, np.int64)
    m_max = 1
    for r in range(n_req):
        m_r[r] = max_outstanding[r] if max_outstanding[r] > 0 else 1
        if m_r[r] > m_max:
            m_max = m_r[r]
    buf = np.full((n_req, m_max), _NEG)
    meta = np.zeros((n_req, 2), np.int64)   # ring head / heap size
    pos = counts[:n_req].copy()             # next transfer (index into order) per requester
    cur_addr = np.zeros(n_req, np.int64)
    cur_rem = np.full(n_req, -1, np.int64)  # -1: no transfer loaded
    t_prev = np.full(n_req, _NEG)
    scratch = np.empty(np.int64(p[P_INTERLEAVE_BYTES]) // np.int64(p[P_ACCESS_BYTES]) + 2)
    return _stream_loop(p, state, addrs, sizes, t_issue, is_write, out_done, in_order, counts, order, m_r, buf,
                        meta, pos, cur_addr, cur_rem, t_prev, scratch)


@kernel(_nrt=False)
def _stream_loop(p, state, addrs, sizes, t_issue, is_write, out_done, in_order, counts, order, m_r, buf, meta, pos,
                 cur_addr, cur_rem, t_prev, scratch):
    """The chunk loop of :func:`_stream_core` on its prepared arrays.  Compiled without
    reference counting, like the engine's event loop: :func:`~sim.model.kernels.dram.dram_access`
    is inlined here, and in a function that counts references every use of the DRAM state's
    arrays cost an atomic increment and decrement (the streams of a 70B generate run took 3.7x as
    long)."""
    n_req = m_r.shape[0]
    t_end = _NEG
    while True:
        best = -1
        best_t = 0.0
        best_c = 0
        best_k = 0
        for r in range(n_req):
            while cur_rem[r] <= 0 and pos[r] < counts[r + 1]:
                if cur_rem[r] == 0:         # previous transfer finished
                    pos[r] += 1
                    cur_rem[r] = -1
                    continue
                i = order[pos[r]]
                out_done[i] = t_issue[i]
                if out_done[i] > t_end:
                    t_end = out_done[i]
                if sizes[i] <= 0:
                    pos[r] += 1
                    continue
                cur_addr[r] = addrs[i]
                cur_rem[r] = sizes[i]
            if cur_rem[r] <= 0:
                continue
            i = order[pos[r]]
            c, k = _chunk_units(p, cur_addr[r], cur_rem[r], m_r[r])
            t = t_issue[i]
            if t_prev[r] > t:
                t = t_prev[r]
            if n_req > 1 and (best < 0 or t < best_t):
                # only then can the slot wait change the choice
                t = _slots_peek(buf, meta, r, k, m_r[r], in_order, t, scratch)
            if best < 0 or t < best_t:
                best = r
                best_t = t
                best_c = c
                best_k = k
        if best < 0:
            break
        r = best
        i = order[pos[r]]
        t = _slots_wait(buf, meta, r, best_k, m_r[r], in_order, best_t)
        d = dram_access(p, state, cur_addr[r], np.int64(best_c), t, is_write[i] != 0)
        _slots_fill(buf, meta, r, best_k, m_r[r], in_order, d)
        t_prev[r] = t
        if d > out_done[i]:
            out_done[i] = d
        if d > t_end:
            t_end = d
        cur_addr[r] += best_c
        cur_rem[r] -= best_c
    return t_end


@kernel(_nrt=False, inline='always')
def _slots_peek(buf, meta, r, k, m, in_order, t, scratch):
    """Like :func:`_slots_wait` but leaves the slots as they were (``scratch``: >= k floats)."""
    if in_order:
        return _slots_wait(buf, meta, r, k, m, in_order, t)
    size = meta[r, 1]
    need = size + k - m
    if need <= 0:
        return t
    if need == 1:
        top = buf[r, 0]   # the heap's minimum, read in place
    else:
        # the need-th earliest completion: pop the need earliest into scratch, push them back
        for q in range(need):
            scratch[q] = _window_pop(buf, r, size - q)
        for q in range(need):
            _window_push(buf, r, size - need + q, scratch[q])
        top = scratch[need - 1]
    if top > t:
        t = top
    return t


@kernel
def dram_stream(p, state, addrs, sizes, t_issue, is_write, max_outstanding, out_done,
                in_order=True):
    """Serve transfers from ONE requester with at most ``max_outstanding`` requests in flight.

    Transfers are issued in list order; each is split into chunks (interleave blocks, and
    no more than ``max_outstanding`` access-granularity requests).  A chunk of ``k``
    requests is issued at the latest of: its transfer's issue time, the previous chunk's
    issue time, and the time ``k`` request slots are free.  With ``in_order`` (default) a
    slot frees when the request ``max_outstanding`` places earlier in issue order has
    completed; with ``in_order=False`` whenever any in-flight request completes (a pure
    count limit).  ``out_done[i]`` receives transfer ``i``'s completion time (its issue
    time when empty).  Returns the last completion time.
    """
    n = addrs.shape[0]
    req = np.zeros(n, np.int64)
    mo = np.empty(1, np.int64)
    mo[0] = max_outstanding
    return _stream_core(p, state, addrs, sizes, t_issue, is_write, req, mo, out_done, in_order)


@kernel
def dram_stream_multi(p, state, addrs, sizes, t_issue, is_write, requester,
                      max_outstanding, out_done, in_order=True):
    """Several requesters sharing the DRAM, interleaved in time order.

    ``requester[i]`` (0 .. R-1) owns transfer ``i``; each requester issues its own
    transfers in list order with at most ``max_outstanding[r]`` requests in flight (same
    rules as :func:`dram_stream`).  At every step the chunk with the earliest possible
    issue time among all requesters is served (ties: lowest requester id), so arrival
    times at the controller never decrease.  Returns the last completion time.
    """
    return _stream_core(p, state, addrs, sizes, t_issue, is_write, requester,
                        max_outstanding, out_done, in_order)
