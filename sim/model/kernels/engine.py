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
call.  Only arrays and scalars cross the boundary.
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.dram import _slots_fill, _slots_wait, dram_access, dram_chunk_bytes
from sim.model.kernels.jit import kernel

# ---- geometry (int64) ------------------------------------------------------------------
G_MODE = 0          # 0 = block (each core owns a sub-problem), 1 = cyclic (output tiles dealt to whichever core frees first)
G_P = 1             # active cores
G_COUNT = 2         # independent instances (batched GEMM count, batch x kv heads, ...)
G_M = 3
G_N = 4
G_K = 5
G_MT = 6
G_NT = 7
G_KT = 8
G_ORDER0 = 9        # loop order outer -> inner over {0: m, 1: n, 2: k} (block mode)
G_ORDER1 = 10
G_ORDER2 = 11
G_CAUSAL = 12       # 1: skip (m-tile, k-tile) pairs that a causal mask removes entirely
G_CAUSAL_PAST = 13  # keys before the first query position
G_CAUSAL_GROUP = 14  # query rows per position (grouped-query rows are position-major)
G_IDEAL = 15        # 1: infinite bandwidth, zero latency memory
G_L2_SETS = 16      # 0: no chip-level cache
G_L2_WAYS = 17
G_OUTSTANDING = 18  # outstanding DRAM requests per core
G_GRAN = 19         # DRAM access granularity, bytes
G_STAGES = 20       # tile buffers per operand (2 = double buffering)
G_INTERLEAVE = 21    # DRAM interleave bytes: the largest chunk
G_TILE_LIMIT = 22    # cyclic mode: only output tiles t < limit are run (0 = all)
G_GROUP_M = 23       # cyclic mode: output tiles rasterised in groups of this many tile rows
G_CLUSTER = 24       # cores per multicast cluster (a tile one of them pulls reaches all)
G_STALL_LIMIT = 25   # progress guard: events at one instant before the run stops (0 = the default bound)
G_LEN = 26

# ---- operand descriptors (int64 [3, D_LEN]) : rows 0 = A, 1 = B, 2 = C -------------------
D_PRESENT = 0
D_DIM1 = 1          # tile rows run over this loop dim (0 m, 1 n, 2 k)
D_DIM2 = 2          # contiguous dim (0 m, 1 n, 2 k) or 3 = a fixed extent not tiled
D_EXTENT2 = 3       # elements along dim2 when D_DIM2 == 3
D_SHARED = 4        # consecutive instances that read one copy (0/1: each its own)
D_CACHEABLE = 5     # 1: reads may be served by the chip-level cache
D_RESIDENT = 6      # 1: the whole operand stays in the core's buffer between ops (no loads, stores, psum reads)
D_LEN = 7

# ---- float parameters ------------------------------------------------------------------
F_BPE_A = 0         # bytes per element (block scales / sparsity metadata included)
F_BPE_B = 1
F_BPE_C = 2
F_BPE_PSUM = 3
F_CYCLE_NS = 4
F_NOC_BYTES_PER_CYCLE = 5
F_PORT_BYTES_PER_CYCLE = 6   # per-core SRAM fill port
F_L2_BYTES_PER_CYCLE = 7
F_L2_LATENCY_CYCLES = 8
F_BASE_A = 9
F_BASE_B = 10
F_BASE_C = 11
F_BASE_PSUM = 12
F_NOC_LATENCY_CYCLES = 13
F_DMA_ISSUE_CYCLES = 14      # DMA engine issue interval per chunk
F_QUANTUM_CYCLES = 15        # a core keeps issuing until it is this far ahead of the next core
F_MULTICAST_WINDOW = 16      # cycles within which cluster partners share one pull of a tile
F_L2_SET_BYTES = 17          # bytes one chip-level cache set holds (tiles of any size share it)
F_SRAM_LATENCY_CYCLES = 18   # core-local SRAM access latency: read-to-use of a tile that just landed
F_STEADY_TOL = 19            # probed runs (kernels/probe.py): samples this close in slope end the run
F_LEN = 20

# ---- the event loop's scalars (float64 [L_LEN]): what it needs to pause and resume ------
L_NOC_FREE = 0
L_L2_FREE = 1
L_L2_CLOCK = 2
L_N_BLOCKED = 3
L_HSIZE = 4
L_T_LAST = 5
L_SAME_T = 6
L_PEND_CORE = 7     # core whose step was computed and whose advance is pending (-1: none)
L_PEND_T = 8
L_PEND_ECODE = 9
L_PEND_ROW = 10
L_PROBE = 11        # pause when a core asks for output tile number L_PROBE (0: never)
L_PAUSED = 12       # 1: the loop returned at a probe, 0: it ran to the end
L_LEN = 13

# ---- progress guard: consecutive events at one instant before the run is a livelock -----
STALL_EVENTS_MIN = 10_000_000   # ~0.1 s of a spinning loop; far above any real instant
STALL_EVENTS_PER_CORE = 1024    # each core is woken a handful of times per instant

# ---- per-core statistics (float64 [P, S_LEN]) -------------------------------------------
S_COMPUTE = 0       # cycles the arrays were busy
S_STALL = 1         # cycles compute waited for data
S_END = 2           # last compute end
S_DRAM_READ = 3     # bytes
S_DRAM_WRITE = 4
S_L2_HIT = 5        # bytes served by the chip-level cache
S_STEPS = 6
S_LOADS_A = 7       # tile loads (count)
S_LOADS_B = 8
S_PSUM_READS = 9
S_STORES = 10
S_STORE_END = 11    # last store completion
S_BYTES_A = 12      # bytes loaded per operand (from L2 or DRAM)
S_BYTES_B = 13
S_BYTES_PSUM_READ = 14
S_BYTES_C_WRITE = 15
S_FIRST_COMPUTE = 16
S_LEN = 17

_XF_LEN = 9  # per transfer: base, rows, row_stride, seg_off, seg_len, is_write, key, operand, row_step

_WQ = 64    # write-queue ring per core
_MAX_STAGES = 16


@kernel
def _ceil_div(a, b):
    return -((-a) // b)


@kernel
def _heap_push(hk, hc, size, key, core):
    i = size
    hk[i] = key
    hc[i] = core
    while i > 0:
        parent = (i - 1) // 2
        if hk[parent] > hk[i] or (hk[parent] == hk[i] and hc[parent] > hc[i]):
            tk = hk[parent]
            tc = hc[parent]
            hk[parent] = hk[i]
            hc[parent] = hc[i]
            hk[i] = tk
            hc[i] = tc
            i = parent
        else:
            break
    return size + 1


@kernel
def _heap_pop(hk, hc, size):
    key = hk[0]
    core = hc[0]
    size -= 1
    if size > 0:
        hk[0] = hk[size]
        hc[0] = hc[size]
        i = 0
        while True:
            left = 2 * i + 1
            right = left + 1
            small = i
            if left < size and (hk[left] < hk[small] or (hk[left] == hk[small] and hc[left] < hc[small])):
                small = left
            if right < size and (hk[right] < hk[small] or (hk[right] == hk[small] and hc[right] < hc[small])):
                small = right
            if small == i:
                break
            tk = hk[small]
            tc = hc[small]
            hk[small] = hk[i]
            hc[small] = hc[i]
            hk[i] = tk
            hc[i] = tc
            i = small
    return key, core, size


@kernel
def core_step_count(geo, ranges, c):
    """Number of steps (before causal skipping) core ``c`` walks."""
    if geo[G_MODE] == 1:
        tm = _ceil_div(geo[G_M], geo[G_MT])
        tn = _ceil_div(geo[G_N], geo[G_NT])
        tk = _ceil_div(geo[G_K], geo[G_KT])
        total_tiles = geo[G_COUNT] * tm * tn
        if geo[G_TILE_LIMIT] > 0 and geo[G_TILE_LIMIT] < total_tiles:
            total_tiles = geo[G_TILE_LIMIT]
        p = geo[G_P]
        if c >= total_tiles:
            return 0
        return _ceil_div(total_tiles - c, p) * tk
    ic = ranges[c, 1] - ranges[c, 0]
    mm = ranges[c, 3] - ranges[c, 2]
    nn = ranges[c, 5] - ranges[c, 4]
    if ic <= 0 or mm <= 0 or nn <= 0:
        return 0
    return ic * _ceil_div(mm, geo[G_MT]) * _ceil_div(nn, geo[G_NT]) * _ceil_div(geo[G_K], geo[G_KT])


@kernel
def _decode_cyclic(geo, t, kk, idx, start, ext):
    """Tile indices, element starts and extents of k-step ``kk`` of output tile ``t`` (in
    dealing order) in cyclic mode; returns inst."""
    M = geo[G_M]
    N = geo[G_N]
    Kd = geo[G_K]
    mt = geo[G_MT]
    nt = geo[G_NT]
    kt = geo[G_KT]
    tm = (M + mt - 1) // mt
    tn = (N + nt - 1) // nt
    inst = t // (tm * tn)
    rem = t - inst * tm * tn
    g = geo[G_GROUP_M]
    if g > 1:
        # grouped rasterisation: a wave covers a g-row block of tiles, so the A and B
        # panels it needs fit the chip-level cache (thread-block swizzling)
        per_group = g * tn
        first_m = (rem // per_group) * g
        gs = min(tm - first_m, g)
        within = rem - (rem // per_group) * per_group
        i = first_m + within % gs
        j = within // gs
    else:
        i = rem // tn
        j = rem - i * tn
    idx[0] = i
    idx[1] = j
    idx[2] = kk
    start[0] = i * mt
    start[1] = j * nt
    start[2] = kk * kt
    ext[0] = min(mt, M - start[0])
    ext[1] = min(nt, N - start[1])
    ext[2] = min(kt, Kd - start[2])
    return inst


@kernel
def _cyclic_total_tiles(geo, next_tile):
    """Output tiles dealt in cyclic mode: all of them, or the first G_TILE_LIMIT, or the
    first ``next_tile[1]`` (a drained sample of a probed run, :mod:`sim.model.kernels.probe`)."""
    total = geo[G_COUNT] * _ceil_div(geo[G_M], geo[G_MT]) * _ceil_div(geo[G_N], geo[G_NT])
    if geo[G_TILE_LIMIT] > 0 and geo[G_TILE_LIMIT] < total:
        total = geo[G_TILE_LIMIT]
    if next_tile[1] > 0 and next_tile[1] < total:
        total = next_tile[1]
    return total


@kernel
def _next_dealt_step(geo, tile_of, next_tile, c, s, idx, start, ext):
    """Cyclic mode's next needed step of core ``c`` from k-step ``s`` of its tile: the rest
    of the tile, or (once it is done, or masked out by causality) the first step of the
    next tile nobody has taken.  Returns (k-step, inst), k-step -1 when no tile is left.

    Tiles are dealt dynamically, as a GPU's block scheduler hands the next thread block to
    whichever SM frees up first: cores finishing short (causally masked) tiles take more."""
    tk = _ceil_div(geo[G_K], geo[G_KT])
    while True:
        if tile_of[c] >= 0 and s < tk:
            inst = _decode_cyclic(geo, tile_of[c], s, idx, start, ext)
            if geo[G_CAUSAL] == 0 or idx[2] <= _last_needed_k_tile(geo, start[0], ext[0]):
                return s, inst
        if next_tile[0] >= _cyclic_total_tiles(geo, next_tile):
            return -1, -1
        tile_of[c] = next_tile[0]
        next_tile[0] += 1
        s = 0


@kernel
def _decode_step(geo, ranges, c, s, idx, start, ext):
    """Block mode: tile indices, element starts and extents of step ``s`` of core ``c``
    (its sub-problem walked in the loop order); returns inst."""
    Kd = geo[G_K]
    mt = geo[G_MT]
    nt = geo[G_NT]
    kt = geo[G_KT]
    tk = (Kd + kt - 1) // kt
    m0 = ranges[c, 2]
    n0 = ranges[c, 4]
    trip_m = (ranges[c, 3] - m0 + mt - 1) // mt
    trip_n = (ranges[c, 5] - n0 + nt - 1) // nt
    r = s
    for pos in range(2, -1, -1):
        d = geo[G_ORDER0 + pos]
        if d == 0:
            idx[0] = r % trip_m
            r = r // trip_m
        elif d == 1:
            idx[1] = r % trip_n
            r = r // trip_n
        else:
            idx[2] = r % tk
            r = r // tk
    inst = ranges[c, 0] + r
    start[0] = m0 + idx[0] * mt
    start[1] = n0 + idx[1] * nt
    start[2] = idx[2] * kt
    ext[0] = min(mt, ranges[c, 3] - start[0])
    ext[1] = min(nt, ranges[c, 5] - start[1])
    ext[2] = min(kt, Kd - start[2])
    return inst


@kernel
def _tile_changed(desc, op, inst_a, idx_a, inst_b, idx_b):
    """Whether operand ``op``'s tile differs between two steps (instance ``inst_*``, tile
    indices ``idx_*``): a new instance (unless both share one copy) or a new index along
    either of the dims its tile spans."""
    share = max(1, desc[op, D_SHARED])
    if inst_a // share != inst_b // share:
        return True
    d1 = desc[op, D_DIM1]
    d2 = desc[op, D_DIM2]
    if idx_a[d1] != idx_b[d1]:
        return True
    return d2 != 3 and idx_a[d2] != idx_b[d2]


@kernel
def _last_needed_k_tile(geo, m_start, m_ext):
    """Index of the last k tile a causal query block needs (all of them when not causal)."""
    tk = _ceil_div(geo[G_K], geo[G_KT])
    if geo[G_CAUSAL] == 0:
        return tk - 1
    last_pos = geo[G_CAUSAL_PAST] + (m_start + m_ext - 1) // geo[G_CAUSAL_GROUP]
    last = last_pos // geo[G_KT]
    if last > tk - 1:
        last = tk - 1
    return last


@kernel
def _full_extent(geo, desc, op, dim_sel):
    d = desc[op, dim_sel]
    if d == 3:
        return desc[op, D_EXTENT2]
    if d == 0:
        return geo[G_M]
    if d == 1:
        return geo[G_N]
    return geo[G_K]


@kernel
def _make_transfer(geo, desc, fp, op, inst, start, ext, bpe, base, is_write, xf):
    """Fill ``xf`` with a tile transfer of operand ``op`` (rows along dim1, contiguous dim2)."""
    d1 = desc[op, D_DIM1]
    d2 = desc[op, D_DIM2]
    full2 = _full_extent(geo, desc, op, D_DIM2)
    full1 = _full_extent(geo, desc, op, D_DIM1)
    row_stride = np.int64(np.ceil(full2 * bpe))
    if d2 == 3:
        s2 = 0
        e2 = full2
    else:
        s2 = start[d2]
        e2 = ext[d2]
    seg_off = np.int64(np.floor(s2 * bpe))
    seg_len = np.int64(np.ceil((s2 + e2) * bpe)) - seg_off
    inst_eff = inst // max(1, desc[op, D_SHARED])
    rows = ext[d1]
    first_row = start[d1]
    addr0 = np.int64(base) + inst_eff * full1 * row_stride + first_row * row_stride
    # rows that are contiguous in memory (whole rows) are merged into one segment
    if seg_off == 0 and seg_len == row_stride:
        xf[0] = addr0
        xf[1] = 1
        xf[2] = row_stride * rows
        xf[3] = 0
        xf[4] = row_stride * rows
    else:
        xf[0] = addr0
        xf[1] = rows
        xf[2] = row_stride
        xf[3] = seg_off
        xf[4] = seg_len
    xf[5] = is_write
    # tile identity for the chip-level cache
    key = op
    key = key * 1000003 + inst_eff
    key = key * 1000003 + start[d1]
    key = key * 1000003 + s2
    key = key * 1000003 + np.int64(np.floor(bpe * 64.0))
    xf[6] = key
    xf[7] = op


@kernel(_nrt=False, inline='always')
def _l2_set_index(key, sets):
    """Set of a tile key.  Keys are tile coordinates packed with strides, so a plain
    modulo sends whole rows or columns of tiles to one set; a multiplicative hash
    (Fibonacci hashing, as XOR-folded address bits do in a real cache) spreads them."""
    h = (key * np.int64(-7046029254386353131)) >> np.int64(17)
    return (h % sets + sets) % sets


@kernel(_nrt=False, inline='always')
def _l2_claim(l2_tag, l2_ready, l2_lru, l2_size, set_used, sidx, ways, cap, need):
    """An entry of set ``sidx`` for a new tile of ``need`` bytes: least recently used
    tiles are evicted until it fits in the set's bytes (tiles being filled are never
    evicted); -1 when it cannot fit."""
    if need > cap:
        return -1
    while set_used[sidx] + need > cap:
        best = -1
        for w in range(ways):
            e = sidx * ways + w
            if l2_tag[e] != -1 and l2_ready[e] >= 0.0 and (best == -1 or l2_lru[e] < l2_lru[best]):
                best = e
        if best == -1:
            return -1
        set_used[sidx] -= l2_size[best]
        l2_tag[best] = -1
        l2_size[best] = 0.0
    free = -1
    for w in range(ways):
        e = sidx * ways + w
        if l2_tag[e] == -1:
            free = e
            break
    if free == -1:
        # every way holds a tile: evict the least recently used one that is not filling
        for w in range(ways):
            e = sidx * ways + w
            if l2_ready[e] >= 0.0 and (free == -1 or l2_lru[e] < l2_lru[free]):
                free = e
        if free == -1:
            return -1
        set_used[sidx] -= l2_size[free]
    l2_tag[free] = -1
    l2_size[free] = need
    set_used[sidx] += need
    return free


@kernel(_nrt=False, inline='always')
def _l2_find(l2_tag, key, sets, ways):
    """Set of tile ``key`` and the entry holding it (-1 when the cache holds no such tile)."""
    sidx = _l2_set_index(key, sets)
    hit = -1
    for w in range(ways):
        e = sidx * ways + w
        if l2_tag[e] == key:
            hit = e
    return sidx, hit


@kernel(_nrt=False, inline='always')
def _count_operand_bytes(stats, c, op, nb):
    """Charge ``nb`` loaded bytes to operand ``op`` (0 A, 1 B, 2 partial sums)."""
    if op == 0:
        stats[c, S_BYTES_A] += nb
    elif op == 1:
        stats[c, S_BYTES_B] += nb
    else:
        stats[c, S_BYTES_PSUM_READ] += nb


@kernel(_nrt=False, inline='always')
def _issue_chunk(xq, c, x, row, off, t_issue, is_write, fp, dma, noc_free):
    """Issue the next DRAM chunk of transfer ``xq[c, x]`` (a load in ``xf`` or a store in the
    write queue ``wq``, both rows of :data:`_XF_LEN`) from byte ``off`` of its row ``row`` at
    ``t_issue``; the chunk stays inside one interleave block.  Returns (bytes, completion,
    noc_free).

    The one difference between the two directions is the NoC latency: a read's data comes
    back across the network-on-chip after the DRAM has delivered it, so its completion is
    one NoC traversal (F_NOC_LATENCY_CYCLES) after the DRAM's; a write is posted - it is
    complete when its last beat is on the DRAM bus (docs/dram_model.md) and nothing comes
    back that the core waits for - so no latency is added.  Both pay the NoC's and the
    core port's bandwidth (noc_free, port_free).  Adding the latency to writes too would
    move every store completion (makespans ending in a store drain, partial-sum reads that
    hit the cache behind a store), so the two are not equivalent."""
    ideal, qn, cycle_ns, issue_gap, dram_p, dram_state, slots, slots_meta, port_free, dma_t = dma
    addr = xq[c, x, 0] + row * xq[c, x, 2] + xq[c, x, 3] + off
    remaining = xq[c, x, 4] - off
    if ideal:
        nb = remaining
        done = t_issue
    else:
        nb = dram_chunk_bytes(dram_p, addr, remaining)
        nreq = 1
        t_issue = _slots_wait(slots, slots_meta, c, nreq, qn, False, t_issue)
        noc_start = max(noc_free, t_issue)
        noc_free = noc_start + nb / fp[F_NOC_BYTES_PER_CYCLE]
        pstart = max(port_free[c], t_issue)
        port_free[c] = pstart + nb / fp[F_PORT_BYTES_PER_CYCLE]
        # a bool, not the literal 0/1 of the call site: one compiled dram_access for every caller
        d_ns = dram_access(dram_p, dram_state, addr, nb, t_issue * cycle_ns, is_write != 0)
        if is_write == 0:
            t_mem = d_ns / cycle_ns + fp[F_NOC_LATENCY_CYCLES]  # read: data returns over the NoC
        else:
            t_mem = d_ns / cycle_ns  # posted write
        done = max(t_mem, noc_free, port_free[c])
        _slots_fill(slots, slots_meta, c, nreq, qn, False, done)
        dma_t[c] = t_issue + issue_gap
    return nb, done, noc_free


@kernel(_nrt=False, inline='always')
def _enqueue_store(geo, desc, fp, c, prev, comp_end, wq, wq_ready, wq_tail, stats):
    """Queue the store of core ``c``'s previous output-tile visit (final results when its
    reduction is complete, else partial sums), ready when its last step finished."""
    inst_prev, idx_prev, start_prev, ext_prev, prev_valid, prev_last_k = prev
    final = idx_prev[c, 2] >= prev_last_k[c]
    slot = wq_tail[c] % _WQ
    if final:
        _make_transfer(geo, desc, fp, 2, inst_prev[c], start_prev[c], ext_prev[c],
                       fp[F_BPE_C], fp[F_BASE_C], 1, wq[c, slot])
    else:
        _make_transfer(geo, desc, fp, 2, inst_prev[c], start_prev[c], ext_prev[c],
                       fp[F_BPE_PSUM], fp[F_BASE_PSUM], 1, wq[c, slot])
    wq_ready[c, slot] = comp_end[c]
    wq_tail[c] += 1
    stats[c, S_STORES] += 1


@kernel(_nrt=False, inline='always')
def _setup_loads(geo, desc, fp, c, stages, cur, prev, comp_end, rel_ring, n_versions,
                 xf, nxf, xcur, xrow, xoff, xdone, xl2e, load_ready, load_done, wq, wq_ready, wq_tail, stats):
    """Set up the transfers of core ``c``'s current step: the operand tiles that changed
    since the previous step (each waiting for its buffer slot), and, when the output tile
    changes, the store of the previous visit and the partial-sum read of this one."""
    step, inst_cur, idx_cur, start_cur, ext_cur = cur
    inst_prev, idx_prev, start_prev, ext_prev, prev_valid, prev_last_k = prev
    inst = inst_cur[c]
    nx = 0
    first_step = prev_valid[c] == 0
    ready = 0.0
    for op in range(2):
        if desc[op, D_PRESENT] == 0 or desc[op, D_RESIDENT] == 1:
            continue
        if first_step or _tile_changed(desc, op, inst, idx_cur[c], inst_prev[c], idx_prev[c]):
            bpe = fp[F_BPE_A] if op == 0 else fp[F_BPE_B]
            base = fp[F_BASE_A] if op == 0 else fp[F_BASE_B]
            _make_transfer(geo, desc, fp, op, inst, start_cur[c], ext_cur[c], bpe, base, 0, xf[c, nx])
            xf[c, nx, 8] = 0
            v = n_versions[c, op]
            if v >= 1:
                # the version in use until now is released when its last step ends
                rel_ring[c, op, (v - 1) % _MAX_STAGES] = comp_end[c]
            if v >= stages:
                rt = rel_ring[c, op, (v - stages) % _MAX_STAGES]
                if rt > ready:
                    ready = rt
            n_versions[c, op] = v + 1
            if op == 0:
                stats[c, S_LOADS_A] += 1
            else:
                stats[c, S_LOADS_B] += 1
            nx += 1
    # output visit change: enqueue the store of the previous visit, psum read for this one
    if desc[2, D_PRESENT] == 1 and desc[2, D_RESIDENT] == 0:
        cchanged = first_step or _tile_changed(desc, 2, inst, idx_cur[c], inst_prev[c], idx_prev[c])
        if cchanged and not first_step:
            _enqueue_store(geo, desc, fp, c, prev, comp_end, wq, wq_ready, wq_tail, stats)
        if cchanged and idx_cur[c, 2] > 0:
            _make_transfer(geo, desc, fp, 2, inst, start_cur[c], ext_cur[c],
                           fp[F_BPE_PSUM], fp[F_BASE_PSUM], 0, xf[c, nx])
            xf[c, nx, 7] = 2
            stats[c, S_PSUM_READS] += 1
            nx += 1
    nxf[c] = nx
    xcur[c] = 0
    xrow[c] = 0
    xoff[c] = 0
    xdone[c] = 0.0
    xl2e[c] = -1
    load_ready[c] = ready
    load_done[c] = 0.0


@kernel(_nrt=False, inline='always')
def _l2_insert_store(wq, c, slot, t_done, l2, l2_clock):
    """A completed store enters the chip-level cache (so a later partial-sum read can hit);
    returns the LRU clock."""
    l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, l2_sets, l2_ways, l2_cap = l2
    key = wq[c, slot, 6]
    sidx, hit = _l2_find(l2_tag, key, l2_sets, l2_ways)
    if hit == -1:
        hit = _l2_claim(l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, sidx, l2_ways,
                        l2_cap, wq[c, slot, 1] * wq[c, slot, 4])
    if hit >= 0:
        l2_tag[hit] = key
        l2_ready[hit] = t_done
        l2_clock += 1
        l2_lru[hit] = l2_clock
    return l2_clock


@kernel(_nrt=False, inline='always')
def _issue_stores(c, t_now, next_top, fp, dma, wq, wq_ready, wq_head, wrow, woff, wdone, store_end, stats, l2,
                  noc_free, l2_clock):
    """Issue core ``c``'s store chunks from the head of its write queue until it runs
    ahead of the next core or the store completes; returns (noc_free, l2_clock)."""
    dma_t = dma[9]
    l2_sets = l2[5]
    slot = wq_head[c] % _WQ
    while True:
        t_issue = max(wq_ready[c, slot], dma_t[c])
        if t_issue > next_top and t_issue > t_now:
            break
        rows = wq[c, slot, 1]
        seg_len = wq[c, slot, 4]
        nb, done, noc_free = _issue_chunk(wq, c, slot, wrow[c], woff[c], t_issue, 1, fp, dma, noc_free)
        stats[c, S_DRAM_WRITE] += nb
        stats[c, S_BYTES_C_WRITE] += nb
        if done > wdone[c]:
            wdone[c] = done
        woff[c] += nb
        if woff[c] >= seg_len:
            woff[c] = 0
            wrow[c] += 1
            if wrow[c] >= rows:
                # store complete
                if wdone[c] > store_end[c]:
                    store_end[c] = wdone[c]
                if l2_sets > 0:
                    l2_clock = _l2_insert_store(wq, c, slot, wdone[c], l2, l2_clock)
                wrow[c] = 0
                wdone[c] = 0.0
                wq_head[c] += 1
                break
    return noc_free, l2_clock


# outcomes of a load's chip-level cache lookup
_L2_MISS = 0    # go to DRAM (an entry may have been claimed for the fill)
_L2_HIT = 1     # served by the cache
_L2_WAIT = 2    # the tile's fill is in flight: the core waits for it


@kernel(_nrt=False, inline='always')
def _l2_load_lookup(c, x, t_issue, xf, fp, issue_gap, l2, mc, port_free, dma_t, load_done, blocked, xcur, xl2e,
                    stats, l2_free, l2_clock, n_blocked):
    """Chip-level cache lookup at the start of cacheable load ``xf[c, x]``: a hit is served
    whole (over the L2 bus, or by a cluster partner's multicast), a fill in flight blocks
    the core (MSHR merging), a miss claims an entry for the fill (uncached if none fits).
    Returns (outcome, l2_free, l2_clock, n_blocked)."""
    l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, l2_sets, l2_ways, l2_cap = l2
    cluster, l2_mc_cluster, l2_mc_time, l2_mc_done = mc
    key = xf[c, x, 6]
    op = xf[c, x, 7]
    sidx, hit = _l2_find(l2_tag, key, l2_sets, l2_ways)
    tile_bytes = xf[c, x, 1] * xf[c, x, 4]
    outcome = _L2_MISS
    if hit >= 0:
        if l2_ready[hit] < 0.0:
            blocked[c] = hit + 1  # wait for the fill in flight
            n_blocked += 1
            outcome = _L2_WAIT
        else:
            l2_clock += 1
            l2_lru[hit] = l2_clock
            t0 = max(t_issue + fp[F_L2_LATENCY_CYCLES], l2_ready[hit])
            my_cluster = c // cluster
            if (cluster > 1 and l2_mc_cluster[hit] == my_cluster
                    and abs(t_issue - l2_mc_time[hit]) <= fp[F_MULTICAST_WINDOW]):
                # a cluster partner's pull of this tile is multicast to this
                # core too: no second trip over the L2 bus
                bus_done = l2_mc_done[hit]
            else:
                s0 = max(l2_free, t_issue)
                l2_free = s0 + tile_bytes / fp[F_L2_BYTES_PER_CYCLE]
                bus_done = l2_free
                l2_mc_cluster[hit] = my_cluster
                l2_mc_time[hit] = t_issue
                l2_mc_done[hit] = bus_done
            pstart = max(port_free[c], t_issue)
            port_free[c] = pstart + tile_bytes / fp[F_PORT_BYTES_PER_CYCLE]
            done = max(t0, bus_done, port_free[c])
            if done > load_done[c]:
                load_done[c] = done
            stats[c, S_L2_HIT] += tile_bytes
            _count_operand_bytes(stats, c, op, tile_bytes)
            dma_t[c] = t_issue + issue_gap
            xcur[c] += 1
            outcome = _L2_HIT
    else:
        # miss: claim room for the tile (never evict a fill in flight)
        best = _l2_claim(l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, sidx, l2_ways, l2_cap, tile_bytes)
        if best >= 0:
            l2_tag[best] = key
            l2_ready[best] = -1.0
            l2_clock += 1
            l2_lru[best] = l2_clock
            xl2e[c] = best
        else:
            xl2e[c] = -2  # uncached
    return outcome, l2_free, l2_clock, n_blocked


@kernel(_nrt=False, inline='always')
def _finish_load(c, t_now, xcur, xrow, xdone, xl2e, load_done, l2_ready, blocked, hk, hc, hsize, n_blocked):
    """Load transfer of core ``c`` complete: its cache fill (if any) becomes ready and wakes
    the cores waiting for it.  Returns (n_blocked, hsize)."""
    if xdone[c] > load_done[c]:
        load_done[c] = xdone[c]
    e = xl2e[c]
    if e >= 0:
        l2_ready[e] = xdone[c]
        # wake cores waiting for this fill
        if n_blocked > 0:
            for c2 in range(blocked.shape[0]):
                if blocked[c2] == e + 1:
                    blocked[c2] = 0
                    n_blocked -= 1
                    hsize = _heap_push(hk, hc, hsize, max(xdone[c], t_now), c2)
    xl2e[c] = -1
    xrow[c] = 0
    xdone[c] = 0.0
    xcur[c] += 1
    return n_blocked, hsize


@kernel(_nrt=False, inline='always')
def _issue_loads(c, t_now, next_top, desc, fp, dma, xf, nxf, xcur, xrow, xoff, xdone, xl2e, load_ready, load_done,
                 blocked, stats, l2, mc, hk, hc, hsize, noc_free, l2_free, l2_clock, n_blocked):
    """Issue core ``c``'s load chunks for its current step until it runs ahead of the next
    core, waits for a cache fill, or has issued them all.  Returns (all issued, hsize,
    noc_free, l2_free, l2_clock, n_blocked)."""
    issue_gap = dma[3]
    port_free = dma[8]
    dma_t = dma[9]
    l2_ready = l2[1]
    l2_sets = l2[5]
    while xcur[c] < nxf[c]:
        x = xcur[c]
        t_issue = max(load_ready[c], dma_t[c])
        if t_issue > next_top and t_issue > t_now:
            break
        # chip-level cache lookup at the start of a cacheable transfer
        op = xf[c, x, 7]
        if xrow[c] == 0 and xoff[c] == 0 and l2_sets > 0 and desc[op, D_CACHEABLE] == 1 and xl2e[c] == -1:
            outcome, l2_free, l2_clock, n_blocked = _l2_load_lookup(
                c, x, t_issue, xf, fp, issue_gap, l2, mc, port_free, dma_t, load_done, blocked, xcur, xl2e,
                stats, l2_free, l2_clock, n_blocked)
            if outcome == _L2_WAIT:
                break
            if outcome == _L2_HIT:
                continue
        rows = xf[c, x, 1]
        seg_len = xf[c, x, 4]
        nb, done, noc_free = _issue_chunk(xf, c, x, xrow[c], xoff[c], t_issue, 0, fp, dma, noc_free)
        stats[c, S_DRAM_READ] += nb
        _count_operand_bytes(stats, c, op, nb)
        if done > xdone[c]:
            xdone[c] = done
        xoff[c] += nb
        if xoff[c] >= seg_len:
            xoff[c] = 0
            xrow[c] += 1
            if xrow[c] >= rows:
                n_blocked, hsize = _finish_load(c, t_now, xcur, xrow, xdone, xl2e, load_done, l2_ready, blocked,
                                                hk, hc, hsize, n_blocked)
    # the loop is left early only with a transfer still to issue
    return xcur[c] >= nxf[c], hsize, noc_free, l2_free, l2_clock, n_blocked


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
def run_tiled(geo, desc, ranges, ctab, fp, dram_p, dram_state, stats, hist, out_time):
    """Simulate the tile nest; fill ``stats`` [P, S_LEN] and ``hist`` [P, 8]; return the makespan in cycles
    (negative, -1 - the cycle it stopped at, when the progress guard found a livelock).

    ``ctab`` [P or 1, 16] holds the compute cycles of one step for each combination of
    (m edge, k edge, n edge) tile, index em*4 + ek*2 + en, then (index + 8) the tail that
    step pays when it ends an output-tile visit (an array's fill/drain when k-steps chain).  ``out_time`` [1] receives the
    makespan as well (for symmetry with callers that pass buffers).

    :func:`new_state` allocates the state; :func:`_event_loop` runs the simulation on it.
    """
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
    # counting whole chunks keeps the window's bytes and costs one heap operation each)
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
