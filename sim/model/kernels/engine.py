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
G_LEN = 25

# ---- operand descriptors (int64 [3, D_LEN]) : rows 0 = A, 1 = B, 2 = C -------------------
D_PRESENT = 0
D_DIM1 = 1          # tile rows run over this loop dim (0 m, 1 n, 2 k)
D_DIM2 = 2          # contiguous dim (0 m, 1 n, 2 k) or 3 = a fixed extent not tiled
D_EXTENT2 = 3       # elements along dim2 when D_DIM2 == 3
D_SHARED = 4        # consecutive instances that read one copy (0/1: each its own)
D_CACHEABLE = 5     # 1: reads may be served by the chip-level cache
D_LEN = 6

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
F_LEN = 18

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
def _cyclic_total_tiles(geo):
    """Output tiles dealt in cyclic mode (all of them, or the first G_TILE_LIMIT)."""
    total = geo[G_COUNT] * _ceil_div(geo[G_M], geo[G_MT]) * _ceil_div(geo[G_N], geo[G_NT])
    if geo[G_TILE_LIMIT] > 0 and geo[G_TILE_LIMIT] < total:
        total = geo[G_TILE_LIMIT]
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
        if next_tile[0] >= _cyclic_total_tiles(geo):
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


@kernel
def run_tiled(geo, desc, ranges, ctab, fp, dram_p, dram_state, stats, hist, out_time):
    """Simulate the tile nest; fill ``stats`` [P, S_LEN] and ``hist`` [P, 8]; return the makespan in cycles.

    ``ctab`` [P or 1, 16] holds the compute cycles of one step for each combination of
    (m edge, k edge, n edge) tile, index em*4 + ek*2 + en, then (index + 8) the tail that
    step pays when it ends an output-tile visit (an array's fill/drain when k-steps chain).  ``out_time`` [1] receives the
    makespan as well (for symmetry with callers that pass buffers).
    """
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
    xcur = np.zeros(P, np.int64)             # transfer being issued
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
    noc_free = 0.0
    l2_free = 0.0
    n_blocked = 0
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
    l2_clock = 0
    # event heap
    hk = np.zeros(P + 1)
    hc = np.zeros(P + 1, np.int64)
    hsize = 0

    tmp_idx = np.zeros(3, np.int64)
    tmp_start = np.zeros(3, np.int64)
    tmp_ext = np.zeros(3, np.int64)

    cyclic = geo[G_MODE] == 1
    tile_of = np.full(P, -1, np.int64)       # cyclic mode: the output tile each core works on
    next_tile = np.zeros(1, np.int64)        # cyclic mode: the next tile to deal
    for c in range(P):
        # block mode: the core's whole walk; cyclic mode: only "has a first tile" (> 0) and
        # the "no tile left" sentinel, since tiles are dealt as cores free up
        nsteps[c] = core_step_count(geo, ranges, c)
        stats[c, S_FIRST_COMPUTE] = -1.0

    # ---------------------------------------------------------------------------------
    # helpers are written inline (numba closures over arrays are not cached)
    # prepare the first needed step of each core
    for c in range(P):
        if nsteps[c] == 0:
            continue
        active[c] = 1
        step[c] = -1
        # find first needed step (advance)
        s = 0
        if cyclic:
            s, inst = _next_dealt_step(geo, tile_of, next_tile, c, 0, tmp_idx, tmp_start, tmp_ext)
            if s < 0:
                s = nsteps[c]
        while s < nsteps[c] and not cyclic:
            inst = _decode_step(geo, ranges, c, s, tmp_idx, tmp_start, tmp_ext)
            if geo[G_CAUSAL] == 0 or tmp_idx[2] <= _last_needed_k_tile(geo, tmp_start[0], tmp_ext[0]):
                break
            s += 1
        if s >= nsteps[c]:
            active[c] = 0
            continue
        step[c] = s
        inst_cur[c] = inst
        for d in range(3):
            idx_cur[c, d] = tmp_idx[d]
            start_cur[c, d] = tmp_start[d]
            ext_cur[c, d] = tmp_ext[d]
        hsize = _heap_push(hk, hc, hsize, 0.0, c)

    # per-core: set up the transfers of the current step (called when a step begins)
    # implemented as a flag: xcur == -1 means "not set up yet"
    for c in range(P):
        xcur[c] = -1

    makespan = 0.0
    while hsize > 0:
        t_now, c, hsize = _heap_pop(hk, hc, hsize)
        next_top = (hk[0] + fp[F_QUANTUM_CYCLES]) if hsize > 0 else 1e300

        # ---------- set up the current step's loads if needed -----------------------
        if active[c] == 1 and xcur[c] == -1 and blocked[c] == 0:
            inst = inst_cur[c]
            nx = 0
            first_step = prev_valid[c] == 0
            ready = 0.0
            for op in range(2):
                if desc[op, D_PRESENT] == 0:
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
            if desc[2, D_PRESENT] == 1:
                cchanged = first_step or _tile_changed(desc, 2, inst, idx_cur[c], inst_prev[c], idx_prev[c])
                if cchanged and not first_step:
                    # store of the previous visit, ready when its last step finished
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
            # ---------------- issue store chunks ------------------------------------
            slot = wq_head[c] % _WQ
            while True:
                t_issue = max(wq_ready[c, slot], dma_t[c])
                if t_issue > next_top and t_issue > t_now:
                    break
                rows = wq[c, slot, 1]
                seg_len = wq[c, slot, 4]
                addr = wq[c, slot, 0] + wrow[c] * wq[c, slot, 2] + wq[c, slot, 3] + woff[c]
                remaining = seg_len - woff[c]
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
                    d_ns = dram_access(dram_p, dram_state, addr, nb, t_issue * cycle_ns, 1)
                    done = max(d_ns / cycle_ns, noc_free, port_free[c])
                    _slots_fill(slots, slots_meta, c, nreq, qn, False, done)
                    dma_t[c] = t_issue + issue_gap
                stats[c, S_DRAM_WRITE] += nb
                stats[c, S_BYTES_C_WRITE] += nb
                if done > wdone[c]:
                    wdone[c] = done
                woff[c] += nb
                if woff[c] >= seg_len:
                    woff[c] = 0
                    wrow[c] += 1
                    if wrow[c] >= rows:
                        # store complete; insert into the cache so a later psum read can hit
                        if wdone[c] > store_end[c]:
                            store_end[c] = wdone[c]
                        if l2_sets > 0:
                            key = wq[c, slot, 6]
                            sidx = _l2_set_index(key, l2_sets)
                            hit = -1
                            for w in range(l2_ways):
                                e = sidx * l2_ways + w
                                if l2_tag[e] == key:
                                    hit = e
                            if hit == -1:
                                hit = _l2_claim(l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, sidx, l2_ways,
                                                l2_cap, wq[c, slot, 1] * wq[c, slot, 4])
                            if hit >= 0:
                                l2_tag[hit] = key
                                l2_ready[hit] = wdone[c]
                                l2_clock += 1
                                l2_lru[hit] = l2_clock
                        wrow[c] = 0
                        wdone[c] = 0.0
                        wq_head[c] += 1
                        break
        else:
            # ---------------- issue load chunks (or compute when loads are done) ----
            while active[c] == 1 and blocked[c] == 0:
                if xcur[c] < nxf[c]:
                    x = xcur[c]
                    t_issue = max(load_ready[c], dma_t[c])
                    if t_issue > next_top and t_issue > t_now:
                        break
                    # chip-level cache lookup at the start of a cacheable transfer
                    op = xf[c, x, 7]
                    if xrow[c] == 0 and xoff[c] == 0 and l2_sets > 0 and desc[op, D_CACHEABLE] == 1 and xl2e[c] == -1:
                        key = xf[c, x, 6]
                        sidx = _l2_set_index(key, l2_sets)
                        hit = -1
                        for w in range(l2_ways):
                            e = sidx * l2_ways + w
                            if l2_tag[e] == key:
                                hit = e
                        tile_bytes = xf[c, x, 1] * xf[c, x, 4]
                        if hit >= 0:
                            if l2_ready[hit] < 0.0:
                                blocked[c] = hit + 1  # wait for the fill in flight
                                n_blocked += 1
                                break
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
                            if op == 0:
                                stats[c, S_BYTES_A] += tile_bytes
                            elif op == 1:
                                stats[c, S_BYTES_B] += tile_bytes
                            else:
                                stats[c, S_BYTES_PSUM_READ] += tile_bytes
                            dma_t[c] = t_issue + issue_gap
                            xcur[c] += 1
                            continue
                        # miss: claim room for the tile (never evict a fill in flight)
                        best = _l2_claim(l2_tag, l2_ready, l2_lru, l2_size, l2_set_used, sidx, l2_ways, l2_cap,
                                         tile_bytes)
                        if best >= 0:
                            l2_tag[best] = key
                            l2_ready[best] = -1.0
                            l2_clock += 1
                            l2_lru[best] = l2_clock
                            xl2e[c] = best
                        else:
                            xl2e[c] = -2  # uncached
                    rows = xf[c, x, 1]
                    seg_len = xf[c, x, 4]
                    addr = xf[c, x, 0] + xrow[c] * xf[c, x, 2] + xf[c, x, 3] + xoff[c]
                    remaining = seg_len - xoff[c]
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
                        d_ns = dram_access(dram_p, dram_state, addr, nb, t_issue * cycle_ns, 0)
                        done = max(d_ns / cycle_ns + fp[F_NOC_LATENCY_CYCLES], noc_free, port_free[c])
                        _slots_fill(slots, slots_meta, c, nreq, qn, False, done)
                        dma_t[c] = t_issue + issue_gap
                    stats[c, S_DRAM_READ] += nb
                    if op == 0:
                        stats[c, S_BYTES_A] += nb
                    elif op == 1:
                        stats[c, S_BYTES_B] += nb
                    else:
                        stats[c, S_BYTES_PSUM_READ] += nb
                    if done > xdone[c]:
                        xdone[c] = done
                    xoff[c] += nb
                    if xoff[c] >= seg_len:
                        xoff[c] = 0
                        xrow[c] += 1
                        if xrow[c] >= rows:
                            # transfer complete
                            if xdone[c] > load_done[c]:
                                load_done[c] = xdone[c]
                            e = xl2e[c]
                            if e >= 0:
                                l2_ready[e] = xdone[c]
                                # wake cores waiting for this fill
                                if n_blocked > 0:
                                    for c2 in range(P):
                                        if blocked[c2] == e + 1:
                                            blocked[c2] = 0
                                            n_blocked -= 1
                                            hsize = _heap_push(hk, hc, hsize, max(xdone[c], t_now), c2)
                            xl2e[c] = -1
                            xrow[c] = 0
                            xdone[c] = 0.0
                            xcur[c] += 1
                    continue
                # ---- all loads of the current step issued: compute it ----------------
                ecode = 0
                tiles_m = geo[G_MT]
                tiles_n = geo[G_NT]
                tiles_k = geo[G_KT]
                if ext_cur[c, 0] < tiles_m:
                    ecode += 4
                if ext_cur[c, 2] < tiles_k:
                    ecode += 2
                if ext_cur[c, 1] < tiles_n:
                    ecode += 1
                row = c if ctab.shape[0] > 1 else 0
                cyc = ctab[row, ecode]
                ready_t = max(load_done[c], load_ready[c])
                cstart = max(comp_end[c], ready_t)
                if stats[c, S_FIRST_COMPUTE] < 0.0:
                    stats[c, S_FIRST_COMPUTE] = cstart
                stats[c, S_STALL] += cstart - comp_end[c]
                comp_end[c] = cstart + cyc
                stats[c, S_COMPUTE] += cyc
                stats[c, S_STEPS] += 1
                hist[c, ecode] += 1
                # remember this step as "previous"
                inst_prev[c] = inst_cur[c]
                for d in range(3):
                    idx_prev[c, d] = idx_cur[c, d]
                    start_prev[c, d] = start_cur[c, d]
                    ext_prev[c, d] = ext_cur[c, d]
                prev_valid[c] = 1
                prev_last_k[c] = _last_needed_k_tile(geo, start_cur[c, 0], ext_cur[c, 0])
                # advance to the next needed step
                s = step[c] + 1
                if cyclic:
                    s, inst = _next_dealt_step(geo, tile_of, next_tile, c, s, tmp_idx, tmp_start, tmp_ext)
                    if s < 0:
                        s = nsteps[c]
                while s < nsteps[c] and not cyclic:
                    inst = _decode_step(geo, ranges, c, s, tmp_idx, tmp_start, tmp_ext)
                    if geo[G_CAUSAL] == 0 or tmp_idx[2] <= _last_needed_k_tile(geo, tmp_start[0], tmp_ext[0]):
                        break
                    s += 1
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
                    if desc[2, D_PRESENT] == 1:
                        slot = wq_tail[c] % _WQ
                        final = idx_prev[c, 2] >= prev_last_k[c]
                        if final:
                            _make_transfer(geo, desc, fp, 2, inst_prev[c], start_prev[c], ext_prev[c],
                                           fp[F_BPE_C], fp[F_BASE_C], 1, wq[c, slot])
                        else:
                            _make_transfer(geo, desc, fp, 2, inst_prev[c], start_prev[c], ext_prev[c],
                                           fp[F_BPE_PSUM], fp[F_BASE_PSUM], 1, wq[c, slot])
                        wq_ready[c, slot] = comp_end[c]
                        wq_tail[c] += 1
                        stats[c, S_STORES] += 1
                    break
                step[c] = s
                inst_cur[c] = inst
                for d in range(3):
                    idx_cur[c, d] = tmp_idx[d]
                    start_cur[c, d] = tmp_start[d]
                    ext_cur[c, d] = tmp_ext[d]
                xcur[c] = -1
                break  # re-enter through the heap so the next step's set-up runs

        # ---------- reschedule the core ------------------------------------------------
        if blocked[c] != 0:
            continue
        nt = 1e300
        if active[c] == 1:
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

    for c in range(P):
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
