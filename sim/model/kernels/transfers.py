"""Moving tiles: a step's operand transfers (rows of contiguous segments), the shared L2
(set-associative tags, LRU, MSHR merging of misses in flight), DMA chunk issue through the
network-on-chip into the DRAM model, the per-core write queue of output tiles, and the loads
of a step into the free stage of a core's tile buffer.  Compiled kernels, inlined into the
event loop (:mod:`sim.model.kernels.engine`); arrays and scalars only.
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.dram import dram_access, dram_chunk_bytes
from sim.model.kernels.dram_stream import _slots_fill, _slots_wait
from sim.model.kernels.layout import (D_CACHEABLE, D_DIM1, D_DIM2, D_PRESENT, D_RESIDENT, D_SHARED,
                                      F_BASE_A, F_BASE_B, F_BASE_C, F_BASE_PSUM, F_BPE_A, F_BPE_B,
                                      F_BPE_C, F_BPE_PSUM, F_L2_BYTES_PER_CYCLE,
                                      F_L2_LATENCY_CYCLES, F_MULTICAST_WINDOW,
                                      F_NOC_BYTES_PER_CYCLE, F_NOC_LATENCY_CYCLES,
                                      F_PORT_BYTES_PER_CYCLE, S_BYTES_A, S_BYTES_B,
                                      S_BYTES_C_WRITE, S_BYTES_PSUM_READ, S_DRAM_READ,
                                      S_DRAM_WRITE, S_L2_HIT, S_LOADS_A, S_LOADS_B, S_PSUM_READS,
                                      S_STORES, _MAX_STAGES, _WQ)
from sim.model.kernels.steps import (_full_extent, _heap_push, _tile_changed)
from sim.model.kernels.jit import kernel

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
