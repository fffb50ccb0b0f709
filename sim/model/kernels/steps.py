"""Where each core is in its tile nest: the event heap (earliest core first) and the
decoding of a core's step number into the (instance, m, n, k) tile it works on, in block
mode (a contiguous range of steps per core) and cyclic mode (output tiles dealt to the core
that frees first, rasterised in groups of tile rows).  Compiled kernels; arrays and scalars
only.
"""
from __future__ import annotations

from sim.model.kernels.layout import (D_DIM1, D_DIM2, D_EXTENT2, D_SHARED, G_CAUSAL,
                                      G_CAUSAL_GROUP, G_CAUSAL_PAST, G_COUNT, G_GROUP_M, G_K, G_KT,
                                      G_M, G_MODE, G_MT, G_N, G_NT, G_ORDER0, G_P, G_TILE_LIMIT)
from sim.model.kernels.jit import kernel

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
