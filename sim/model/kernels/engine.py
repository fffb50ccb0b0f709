"""The event engine: tiled ops on many cores sharing an L2 and a cycle-level DRAM.

One kernel, :func:`run_tiled`, simulates any op that the lowering (:mod:`sim.model.engine.lower`)
expresses as a three-loop tile nest over (m, n, k)::

    C[inst, m, n] (+)= f(A[inst, ...], B[inst, ...])   reduction over k

GEMMs, FlashAttention-style attention (Q as A, K/V as B, k = key positions), vector ops
and copies all take this form.  Each core walks its own steps (one step = one tile of
each operand, one compute of the tile on the core's arrays):

* loads of a step are issued by the core's DMA engine chunk by chunk (each chunk lies in
  one DRAM pseudo-channel/bank/row) after the loads of the previous step, into the free
  half of a double buffer: a new version of an operand may only overwrite the slot used
  by the version before the current one;
* compute of step s starts when its loads have arrived and step s-1 has finished; a core
  whose data is late stalls;
* the core-local SRAM's access latency (F_SRAM_LATENCY_CYCLES) is paid where a pipelined
  schedule cannot hide it, as read-to-use: the array's first read of a tile that has just
  landed returns data that many cycles after the landing.  Reads of a tile that landed
  earlier are issued ahead of use, under the previous step's compute, and stream at the
  port's rate, so a core whose data is early never pays it (SCALE-Sim's read buffers hide
  their hit latency the same way; a store's read-out of the output buffer is overlapped
  with the next tile's compute, and only the op's last one could expose it - not modelled);
* output tiles (final results, or partial sums when the reduction is split) drain through
  a write queue when the last step that accumulates into them finishes;
* all cores' DMA chunks are served in global time order (an event heap), so the DRAM's
  banks and buses, the network-on-chip and the shared L2 see a correctly interleaved
  stream; an L2 miss in flight is shared by every core that asks for the same tile (MSHR
  merging), so cores working on neighbouring tiles at the same time reuse each other's
  fetches.

Time is counted in core clock cycles (float64 holding whole numbers for compute, so the
stall-free case is exact); the DRAM model works in nanoseconds and is converted at the
call.  Only arrays and scalars cross the boundary, the entry points' arrays grouped in the
named tuples of :mod:`~sim.model.kernels.io` (``KernelInputs``, ``KernelOutputs``).

Modules: :mod:`~sim.model.kernels.layout` (array layouts), :mod:`~sim.model.kernels.steps`
(the heap and step decoding), :mod:`~sim.model.kernels.transfers` (L2, DMA, loads and
stores), :mod:`~sim.model.kernels.dram` (the DRAM model); this module holds a core's
compute and advance, the event loop and the entry points.  Every layout constant is
re-exported here (``sim.model.kernels.engine.G_TILE_LIMIT`` and friends).
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.layout import (D_PRESENT, D_RESIDENT, F_CYCLE_NS, F_DMA_ISSUE_CYCLES,
                                      F_L2_SET_BYTES, F_QUANTUM_CYCLES, F_SRAM_LATENCY_CYCLES,
                                      G_CAUSAL, G_CLUSTER, G_GRAN, G_IDEAL, G_INTERLEAVE, G_K,
                                      G_KT, G_L2_SETS, G_L2_WAYS, G_MODE, G_MT, G_NT,
                                      G_OUTSTANDING, G_P, G_STAGES, G_STALL_LIMIT, G_TILE_LIMIT,
                                      L_HSIZE, L_L2_CLOCK, L_L2_FREE, L_LEN, L_NOC_FREE,
                                      L_N_BLOCKED, L_PAUSED, L_PEND_CORE, L_PEND_ECODE, L_PEND_ROW,
                                      L_PEND_T, L_PROBE, L_SAME_T, L_T_LAST, STALL_EVENTS_MIN,
                                      STALL_EVENTS_PER_CORE, S_COMPUTE, S_END, S_FIRST_COMPUTE,
                                      S_LEN, S_STALL, S_STEPS, S_STORE_END, _MAX_STAGES, _WQ,
                                      _XF_LEN)
from sim.model.kernels.steps import (_ceil_div, _decode_step, _heap_pop, _heap_push,
                                     _last_needed_k_tile, _next_dealt_step, _tile_changed,
                                     core_step_count)
from sim.model.kernels.jit import kernel
from sim.model.kernels.transfers import _enqueue_store, _issue_loads, _issue_stores, _setup_loads

# every layout constant, re-exported: callers read them as sim.model.kernels.engine.X
from sim.model.kernels.layout import *  # noqa: E402,F401,F403


@kernel(_nrt=False, inline='always')
def _next_needed_step(geo, ranges, cyclic, tile_of, next_tile, c, s, n, idx, start, ext):
    """Core ``c``'s first step from ``s`` that is needed (causal masking skips some), its
    tiles decoded into ``idx``/``start``/``ext``; returns (step, inst), step ``n`` when none
    is left."""
    inst = -1
    if cyclic:
        s, inst = _next_dealt_step(geo, tile_of, next_tile, c, s, idx, start, ext)
        if s < 0:
            s = n
    else:
        while s < n:
            inst = _decode_step(geo, ranges, c, s, idx, start, ext)
            if geo[G_CAUSAL] == 0 or idx[2] <= _last_needed_k_tile(geo, start[0], ext[0]):
                break
            s += 1
    return s, inst


@kernel(_nrt=False, inline='always')
def _set_current_step(c, s, inst, cur, tmp):
    step, inst_cur, idx_cur, start_cur, ext_cur = cur
    idx, start, ext = tmp
    step[c] = s
    inst_cur[c] = inst
    for d in range(3):
        idx_cur[c, d] = idx[d]
        start_cur[c, d] = start[d]
        ext_cur[c, d] = ext[d]


@kernel(_nrt=False, inline='always')
def _compute_step(geo, ctab, fp, c, ext_cur, nxf, load_done, load_ready, comp_end, stats, hist):
    """Run the current step of core ``c`` on its arrays once its loads have arrived (and,
    for a step that loaded tiles, one SRAM access latency later: the array's first read of
    a freshly landed tile) and its previous step has finished; returns (edge code,
    ``ctab`` row)."""
    ecode = 0
    if ext_cur[c, 0] < geo[G_MT]:
        ecode += 4
    if ext_cur[c, 2] < geo[G_KT]:
        ecode += 2
    if ext_cur[c, 1] < geo[G_NT]:
        ecode += 1
    row = c if ctab.shape[0] > 1 else 0
    cyc = ctab[row, ecode]
    ready_t = load_ready[c]
    if nxf[c] > 0:
        # read-to-use: data that landed at load_done reaches the array one access later
        ready_t = max(ready_t, load_done[c] + fp[F_SRAM_LATENCY_CYCLES])
    cstart = max(comp_end[c], ready_t)
    if stats[c, S_FIRST_COMPUTE] < 0.0:
        stats[c, S_FIRST_COMPUTE] = cstart
    stats[c, S_STALL] += cstart - comp_end[c]
    comp_end[c] = cstart + cyc
    stats[c, S_COMPUTE] += cyc
    stats[c, S_STEPS] += 1
    hist[c, ecode] += 1
    return ecode, row


@kernel(_nrt=False, inline='always')
def _advance_core(geo, desc, fp, ranges, ctab, cyclic, c, ecode, row, nsteps, active, tile_of, next_tile,
                  cur, prev, comp_end, xcur, wq, wq_ready, wq_tail, stats, tmp):
    """After core ``c`` computed its current step: remember it as the previous one and move
    to the next needed step (paying the array's tail when an output-tile visit ends), or
    retire the core's read side, queueing the store of its last visit."""
    step, inst_cur, idx_cur, start_cur, ext_cur = cur
    inst_prev, idx_prev, start_prev, ext_prev, prev_valid, prev_last_k = prev
    tmp_idx, tmp_start, tmp_ext = tmp
    inst_prev[c] = inst_cur[c]
    for d in range(3):
        idx_prev[c, d] = idx_cur[c, d]
        start_prev[c, d] = start_cur[c, d]
        ext_prev[c, d] = ext_cur[c, d]
    prev_valid[c] = 1
    prev_last_k[c] = _last_needed_k_tile(geo, start_cur[c, 0], ext_cur[c, 0])
    s, inst = _next_needed_step(geo, ranges, cyclic, tile_of, next_tile, c, step[c] + 1, nsteps[c],
                                tmp_idx, tmp_start, tmp_ext)
    # the output-tile visit ends here: pay the array's tail (fill/drain)
    visit_ends = s >= nsteps[c]
    if not visit_ends and desc[2, D_PRESENT] == 1:
        visit_ends = _tile_changed(desc, 2, inst, tmp_idx, inst_cur[c], idx_cur[c])
    if visit_ends and ctab.shape[1] > 8:
        tail = ctab[row, 8 + ecode]
        comp_end[c] += tail
        stats[c, S_COMPUTE] += tail
    if s >= nsteps[c]:
        active[c] = 0
        # final store of the last visit
        if desc[2, D_PRESENT] == 1 and desc[2, D_RESIDENT] == 0:
            _enqueue_store(geo, desc, fp, c, prev, comp_end, wq, wq_ready, wq_tail, stats)
    else:
        _set_current_step(c, s, inst, cur, tmp)
        xcur[c] = -1  # re-enter through the heap so the next step's set-up runs


@kernel(_nrt=False, inline='always')
def _reschedule(c, t_now, active, xcur, nxf, load_ready, dma_t, wq_head, wq_tail, wq_ready, hk, hc, hsize):
    """Put core ``c`` back on the event heap at its next read or write issue time.  With
    its write queue full the core cannot read (the event loop drains first), so only the
    write side wakes it: waking it for a read it may not issue would pop it again at the
    same instant forever (a write-only stream whose compute outruns its stores did)."""
    nt = 1e300
    if active[c] == 1 and wq_tail[c] - wq_head[c] < _WQ - 1:
        if xcur[c] == -1:
            nt = min(nt, max(dma_t[c], t_now))
        elif xcur[c] < nxf[c]:
            nt = min(nt, max(load_ready[c], dma_t[c]))
        else:
            nt = min(nt, max(t_now, dma_t[c]))
    if wq_head[c] < wq_tail[c]:
        nt = min(nt, max(wq_ready[c, wq_head[c] % _WQ], dma_t[c]))
    if nt < 1e300:
        if nt < t_now:
            nt = t_now
        hsize = _heap_push(hk, hc, hsize, nt, c)
    return hsize


@kernel(_nrt=False, inline='always')
def _start_cores(geo, ranges, cyclic, nsteps, active, xcur, tile_of, next_tile, cur, stats, hk, hc, tmp):
    """Each core's step count and first needed step; every core with one goes on the
    event heap at time 0.  Returns the heap size."""
    step = cur[0]
    tmp_idx, tmp_start, tmp_ext = tmp
    P = nsteps.shape[0]
    for c in range(P):
        # block mode: the core's whole walk; cyclic mode: only "has a first tile" (> 0) and
        # the "no tile left" sentinel, since tiles are dealt as cores free up
        nsteps[c] = core_step_count(geo, ranges, c)
        stats[c, S_FIRST_COMPUTE] = -1.0
    hsize = 0
    for c in range(P):
        if nsteps[c] == 0:
            continue
        active[c] = 1
        step[c] = -1
        s, inst = _next_needed_step(geo, ranges, cyclic, tile_of, next_tile, c, 0, nsteps[c],
                                    tmp_idx, tmp_start, tmp_ext)
        if s >= nsteps[c]:
            active[c] = 0
            continue
        _set_current_step(c, s, inst, cur, tmp)
        hsize = _heap_push(hk, hc, hsize, 0.0, c)
    # xcur == -1: the current step's transfers are not set up yet
    for c in range(P):
        xcur[c] = -1
    return hsize


@kernel(_nrt=False, inline='always')
def _finish_stats(comp_end, store_end, stats, out_time):
    """Per-core end times into ``stats``; the makespan into ``out_time[0]`` and returned."""
    makespan = 0.0
    for c in range(comp_end.shape[0]):
        stats[c, S_END] = comp_end[c]
        stats[c, S_STORE_END] = store_end[c]
        if comp_end[c] > makespan:
            makespan = comp_end[c]
        if store_end[c] > makespan:
            makespan = store_end[c]
        if stats[c, S_FIRST_COMPUTE] < 0.0:
            stats[c, S_FIRST_COMPUTE] = 0.0
    out_time[0] = makespan
    return makespan


@kernel(_nrt=False)
def _event_loop(geo, desc, ranges, ctab, fp, stats, hist, out_time, stages, cyclic, cur, prev, tmp, dma, l2, mc,
                xs, ws, core, hk, hc, lp):
    """The event loop of :func:`run_tiled` on its state: pop the core with the earliest
    event, set up its step's loads, issue its store or load chunks (computing a step once
    its loads are issued), put it back on the heap.  Returns the makespan.

    Its scalars live in ``lp`` (``L_*``) so that it can pause and resume: with
    ``lp[L_PROBE]`` = t > 0 it returns (``lp[L_PAUSED]`` = 1) just before a core that
    finished its output tile asks for tile t, with that core's advance pending; the next
    call does the advance first.  A run paused there and resumed with ``next_tile[1]`` =
    t (no tile t is ever dealt) is, event for event, the run with G_TILE_LIMIT = t.

    Compiled without reference counting (it allocates nothing) and with every helper
    inlined: inlined into a function that counts references, each array argument would
    cost an incref/decref pair, and called, each call would pass dozens of array fields -
    both measurably slower than the single loop this replaced."""
    step, inst_cur, idx_cur, start_cur, ext_cur = cur
    dma_t = dma[9]
    xf, nxf, xcur, xrow, xoff, xdone, xl2e, load_ready, load_done = xs
    wq, wq_ready, wq_head, wq_tail, wrow, woff, wdone, store_end = ws
    nsteps, active, blocked, comp_end, rel_ring, n_versions, tile_of, next_tile = core
    noc_free = lp[L_NOC_FREE]
    l2_free = lp[L_L2_FREE]
    l2_clock = np.int64(lp[L_L2_CLOCK])
    n_blocked = np.int64(lp[L_N_BLOCKED])
    hsize = np.int64(lp[L_HSIZE])
    t_last = lp[L_T_LAST]
    same_t = np.int64(lp[L_SAME_T])
    pend = np.int64(lp[L_PEND_CORE])
    probe = np.int64(lp[L_PROBE])
    tk = _ceil_div(geo[G_K], geo[G_KT])
    lp[L_PAUSED] = 0.0
    # progress guard: a core woken again and again at one instant without anything to do
    # is a livelock (one hung every Mixtral prefill before it was fixed); stop and say so
    # rather than hang.  A real instant wakes each core a few times.
    stall_limit = max(STALL_EVENTS_MIN, STALL_EVENTS_PER_CORE * nsteps.shape[0])
    if geo[G_STALL_LIMIT] > 0:  # tests of the guard itself
        stall_limit = geo[G_STALL_LIMIT]
    while hsize > 0 or pend >= 0:
        if pend >= 0:
            # resume: the advance of the core whose step was computed before the pause
            c = pend
            t_now = lp[L_PEND_T]
            pend = -1
            _advance_core(geo, desc, fp, ranges, ctab, cyclic, c, np.int64(lp[L_PEND_ECODE]),
                          np.int64(lp[L_PEND_ROW]), nsteps, active, tile_of, next_tile,
                          cur, prev, comp_end, xcur, wq, wq_ready, wq_tail, stats, tmp)
            if blocked[c] == 0:
                hsize = _reschedule(c, t_now, active, xcur, nxf, load_ready, dma_t, wq_head, wq_tail, wq_ready,
                                    hk, hc, hsize)
            continue
        t_now, c, hsize = _heap_pop(hk, hc, hsize)
        if t_now == t_last:
            same_t += 1
            if same_t > stall_limit:
                out_time[0] = -1.0 - t_now  # the caller raises EngineStall with this instant
                return out_time[0]
        else:
            t_last = t_now
            same_t = 0
        next_top = (hk[0] + fp[F_QUANTUM_CYCLES]) if hsize > 0 else 1e300
        if active[c] == 1 and xcur[c] == -1 and blocked[c] == 0:
            _setup_loads(geo, desc, fp, c, stages, cur, prev, comp_end, rel_ring, n_versions,
                         xf, nxf, xcur, xrow, xoff, xdone, xl2e, load_ready, load_done, wq, wq_ready, wq_tail, stats)
        # ---------- choose the read or the write side --------------------------------
        t_read = 1e300
        if active[c] == 1 and blocked[c] == 0:
            t_read = max(load_ready[c], dma_t[c])
        t_write = 1e300
        if wq_head[c] < wq_tail[c]:
            t_write = max(wq_ready[c, wq_head[c] % _WQ], dma_t[c])
        if wq_tail[c] - wq_head[c] >= _WQ - 1:
            t_read = 1e300  # write queue full: drain first
        if t_read == 1e300 and t_write == 1e300:
            continue
        if t_write <= t_read:
            noc_free, l2_clock = _issue_stores(c, t_now, next_top, fp, dma, wq, wq_ready, wq_head, wrow, woff, wdone,
                                               store_end, stats, l2, noc_free, l2_clock)
        elif active[c] == 1 and blocked[c] == 0:
            all_issued, hsize, noc_free, l2_free, l2_clock, n_blocked = _issue_loads(
                c, t_now, next_top, desc, fp, dma, xf, nxf, xcur, xrow, xoff, xdone, xl2e, load_ready, load_done,
                blocked, stats, l2, mc, hk, hc, hsize, noc_free, l2_free, l2_clock, n_blocked)
            if all_issued:
                # all loads of the current step issued: compute it, move to the next step
                ecode, row = _compute_step(geo, ctab, fp, c, ext_cur, nxf, load_done, load_ready, comp_end, stats,
                                           hist)
                if probe > 0 and cyclic and next_tile[0] == probe and step[c] + 1 >= tk:
                    # the core asks for tile number `probe` next: pause before its advance
                    lp[L_NOC_FREE] = noc_free
                    lp[L_L2_FREE] = l2_free
                    lp[L_L2_CLOCK] = l2_clock
                    lp[L_N_BLOCKED] = n_blocked
                    lp[L_HSIZE] = hsize
                    lp[L_T_LAST] = t_last
                    lp[L_SAME_T] = same_t
                    lp[L_PEND_CORE] = c
                    lp[L_PEND_T] = t_now
                    lp[L_PEND_ECODE] = ecode
                    lp[L_PEND_ROW] = row
                    lp[L_PAUSED] = 1.0
                    return 0.0
                _advance_core(geo, desc, fp, ranges, ctab, cyclic, c, ecode, row, nsteps, active, tile_of, next_tile,
                              cur, prev, comp_end, xcur, wq, wq_ready, wq_tail, stats, tmp)
        # ---------- reschedule the core ------------------------------------------------
        if blocked[c] != 0:
            continue
        hsize = _reschedule(c, t_now, active, xcur, nxf, load_ready, dma_t, wq_head, wq_tail, wq_ready, hk, hc, hsize)
    return _finish_stats(comp_end, store_end, stats, out_time)


@kernel
def run_tiled(inputs, dram_p, dram_state, outputs):
    """Simulate the tile nest that ``inputs`` (a :class:`~sim.model.kernels.io.KernelInputs`)
    describes; fill ``outputs`` (a :class:`~sim.model.kernels.io.KernelOutputs`: ``stats``
    [P, S_LEN], ``hist`` [P, 8], ``out_time`` [1], the makespan); return the makespan in
    cycles (negative, -1 - the cycle it stopped at, when the progress guard found a livelock).

    ``inputs.ctab`` [P or 1, 16] holds the compute cycles of one step for each combination
    of (m edge, k edge, n edge) tile, index em*4 + ek*2 + en, then (index + 8) the tail that
    step pays when it ends an output-tile visit (an array's fill/drain when k-steps chain).

    :func:`new_state` allocates the state; :func:`_event_loop` runs the simulation on it
    (the named tuples are unpacked here: the loop and its helpers take plain arrays).
    """
    geo, desc, ranges, ctab, fp = inputs
    stats, hist, out_time = outputs
    stages, cyclic, cur, prev, tmp, dma, l2, mc, xs, ws, core, hk, hc, lp = new_state(geo, ranges, fp, dram_p,
                                                                                    dram_state, stats)
    return _event_loop(geo, desc, ranges, ctab, fp, stats, hist, out_time, stages, cyclic, cur, prev, tmp, dma,
                       l2, mc, xs, ws, core, hk, hc, lp)


@kernel
def new_state(geo, ranges, fp, dram_p, dram_state, stats):
    """The event loop's whole state for a fresh run, every core started (its first step
    found, on the event heap at time 0): (stages, cyclic, cur, prev, tmp, dma, l2, mc, xs,
    ws, core, hk, hc, lp), the arguments :func:`_event_loop` takes after ``out_time``."""
    P = geo[G_P]
    ideal = geo[G_IDEAL] == 1
    cycle_ns = fp[F_CYCLE_NS]
    gran = geo[G_GRAN]
    # outstanding-request window in chunk units (a chunk is at most one interleave block;
    # counting whole chunks keeps the window's bytes and costs one heap pop and push each)
    qn = (geo[G_OUTSTANDING] * gran) // max(geo[G_INTERLEAVE], gran)
    if qn < 1:
        qn = 1
    issue_gap = fp[F_DMA_ISSUE_CYCLES]

    # --- per-core state -------------------------------------------------------------
    nsteps = np.zeros(P, np.int64)
    step = np.zeros(P, np.int64)            # step whose loads are being issued
    inst_cur = np.zeros(P, np.int64)
    idx_cur = np.zeros((P, 3), np.int64)
    start_cur = np.zeros((P, 3), np.int64)
    ext_cur = np.zeros((P, 3), np.int64)
    inst_prev = np.full(P, -1, np.int64)
    idx_prev = np.full((P, 3), -1, np.int64)
    start_prev = np.zeros((P, 3), np.int64)
    ext_prev = np.zeros((P, 3), np.int64)
    prev_valid = np.zeros(P, np.int64)
    prev_last_k = np.zeros(P, np.int64)
    comp_end = np.zeros(P)                   # compute end of the last computed step
    # buffer reuse: version v of an operand may only be loaded once version v - stages
    # has been released (its last step finished); releases kept in a small ring
    stages = geo[G_STAGES]
    if stages < 1:
        stages = 1
    if stages > _MAX_STAGES:
        stages = _MAX_STAGES
    rel_ring = np.zeros((P, 3, _MAX_STAGES))
    n_versions = np.zeros((P, 3), np.int64)
    load_ready = np.zeros(P)                 # loads of the current step may not start before this
    load_done = np.zeros(P)
    xf = np.zeros((P, 3, _XF_LEN), np.int64)  # up to 3 read transfers per step
    nxf = np.zeros(P, np.int64)
    xcur = np.zeros(P, np.int64)             # transfer being issued (-1: the step is not set up)
    xrow = np.zeros(P, np.int64)
    xoff = np.zeros(P, np.int64)
    xdone = np.zeros(P)                      # completion of the transfer being issued
    xl2e = np.full(P, -1, np.int64)          # cache entry being filled by this transfer
    dma_t = np.zeros(P)                      # DMA engine's next free issue time
    # outstanding DRAM requests per core: a slot frees when any of its requests completes
    # (a count limit; retiring in issue order would let one request caught behind a
    # refresh stall the whole window)
    slots = np.zeros((P, qn))
    slots_meta = np.zeros((P, 2), np.int64)
    port_free = np.zeros(P)
    blocked = np.zeros(P, np.int64)          # waiting for an in-flight cache fill
    active = np.zeros(P, np.int64)           # read side has work
    # write queue
    wq = np.zeros((P, _WQ, _XF_LEN), np.int64)
    wq_ready = np.zeros((P, _WQ))
    wq_head = np.zeros(P, np.int64)
    wq_tail = np.zeros(P, np.int64)
    wrow = np.zeros(P, np.int64)
    woff = np.zeros(P, np.int64)
    wdone = np.zeros(P)
    store_end = np.zeros(P)
    # chip-level cache
    l2_sets = geo[G_L2_SETS]
    l2_ways = geo[G_L2_WAYS]
    n_l2 = l2_sets * l2_ways if l2_sets > 0 else 1
    l2_tag = np.full(n_l2, -1, np.int64)
    l2_ready = np.zeros(n_l2)
    l2_lru = np.zeros(n_l2, np.int64)
    l2_size = np.zeros(n_l2)                     # bytes of the tile an entry holds
    l2_set_used = np.zeros(max(1, l2_sets))      # bytes held per set
    l2_cap = fp[F_L2_SET_BYTES]
    l2_mc_cluster = np.full(n_l2, -1, np.int64)   # cluster that last pulled the tile over the L2 bus
    l2_mc_time = np.zeros(n_l2)
    l2_mc_done = np.zeros(n_l2)
    cluster = geo[G_CLUSTER]
    if cluster < 1:
        cluster = 1
    # event heap
    hk = np.zeros(P + 1)
    hc = np.zeros(P + 1, np.int64)
    tmp_idx = np.zeros(3, np.int64)
    tmp_start = np.zeros(3, np.int64)
    tmp_ext = np.zeros(3, np.int64)
    cyclic = geo[G_MODE] == 1
    tile_of = np.full(P, -1, np.int64)       # cyclic mode: the output tile each core works on
    next_tile = np.zeros(2, np.int64)        # cyclic mode: the next tile to deal; a drained copy's limit

    # state groups, to keep calls under 31 arguments (beyond that CPython passes an
    # argument list, which Numba cannot inline)
    cur = (step, inst_cur, idx_cur, start_cur, ext_cur)
    prev = (inst_prev, idx_prev, start_prev, ext_prev, prev_valid, prev_last_k)
    tmp = (tmp_idx, tmp_start, tmp_ext)
    dma = (ideal, qn, cycle_ns, issue_gap, dram_p, dram_state, slots, slots_meta, port_free, dma_t)
    l2 = (l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, l2_sets, l2_ways, l2_cap)
    mc = (cluster, l2_mc_cluster, l2_mc_time, l2_mc_done)

    xs = (xf, nxf, xcur, xrow, xoff, xdone, xl2e, load_ready, load_done)
    ws = (wq, wq_ready, wq_head, wq_tail, wrow, woff, wdone, store_end)
    core = (nsteps, active, blocked, comp_end, rel_ring, n_versions, tile_of, next_tile)
    lp = np.zeros(L_LEN)
    lp[L_T_LAST] = -1.0
    lp[L_PEND_CORE] = -1.0
    lp[L_HSIZE] = _start_cores(geo, ranges, cyclic, nsteps, active, xcur, tile_of, next_tile, cur, stats, hk, hc,
                               tmp)
    return stages, cyclic, cur, prev, tmp, dma, l2, mc, xs, ws, core, hk, hc, lp
