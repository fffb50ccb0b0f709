"""Off-chip DRAM (HBM / DDR / LPDDR) timing kernels.

The event engine calls :func:`dram_access` once per DMA chunk; every other function here
is a convenience built on it.  Kernels see only NumPy arrays and scalars:

``p``      float64 parameter vector, filled by :meth:`sim.model.memory.dram.DramParams.to_array`
           and indexed by the ``P_*`` constants below.  Times are nanoseconds.
``state``  tuple of arrays made by :meth:`sim.model.memory.dram.DramParams.new_state`::

               (bank_row   int64[n_banks]            open row per bank, -1 = closed
                bank_t     float64[n_banks, N_BANK_T] per-bank times, ``B_*`` columns
                pc_t       float64[n_pc, N_PC_T]     per-pseudo-channel times, ``C_*``
                pc_i       int64[n_pc, N_PC_I]       per-pseudo-channel integers, ``I_*``
                bank_i     int64[n_banks, N_BANK_I]  per-bank integers, ``BI_*`` columns
                stats      float64[N_STATS]          counters, ``S_*`` indices; always last)

           ``n_pc`` = channels x pseudo-channels per channel (all stacks);
           ``n_banks`` = n_pc x banks per pseudo-channel; bank ``b`` of pseudo-channel
           ``pc`` lives at row ``pc * banks + b``.

The model (see docs/dram_model.md for the full description and its sources):

* Address mapping, channel first: ``addr = [row | bank | column block | pseudo-channel |
  offset]`` where ``offset`` spans one interleave block.  With hashing on (default) the
  pseudo-channel index is XORed with every log2(n_pc)-bit group of all the address bits
  above it, and the bank index with every log2(banks)-bit group of the row number
  (XOR folding, as real controllers do).  Both are bijections for fixed upper bits, so a
  sequential stream still visits every pseudo-channel once per ``n_pc`` blocks and stays
  in an open row, while streams whose addresses differ only in high bits (bases 64 MiB
  apart, tiles of one tensor) land in different banks and channels.
* Per bank: open page.  Row hit = CAS only; row empty = ACT (+tRCD); row conflict = PRE
  (not before tRAS after the ACT, tRTP after the last read CAS, tWR after the last write
  data) + tRP, then ACT + tRCD.
* Per pseudo-channel: an ACT calendar (every ACT takes a max(tRRD, tFAW/4) slot, so ACTs
  are >= tRRD apart and any five span >= tFAW) and one shared data bus on which each
  access-granularity burst takes ``max(burst time, tCCD)``; read data start tCL after the
  CAS, write data tCWL after it.  Writes are posted and drained in batches of
  ``write_batch`` bursts: while reads are in the mix, each write burst also occupies the
  bus for its share of one read->write plus one write->read turnaround per batch
  ((tRTW + tWTR + tCL) / write_batch), instead of per-request bubbles.
* Refresh, staggered across pseudo-channels: all-bank (the pseudo-channel waits for its
  in-flight work, precharges, is blocked for tRFC every tREFI, all rows close) or
  per-bank (one bank at a time for tRFCpb, one every tREFI/banks, the controller picking,
  in round-robin order, the next bank of the round that has no work scheduled past the
  due time; the other banks keep working).
* Scheduling, FR-FCFS approximated in one time-ordered pass, without revising any
  completion time already returned:

  - admission: the controller queue holds ``P_WINDOW_NS`` of data-bus work per
    pseudo-channel; a request is seen (may activate, precharge, be reordered) once the
    data-bus work booked ahead of it fits in the queue (both schedulers);
  - ready requests first: both calendars remember up to ``N_HOLES`` gaps left by older
    requests that wait for their bank (precharge, activation, refresh), and a younger
    request whose bank is ready takes the earliest gap that fits, so a blocked bank no
    longer stalls its whole pseudo-channel;
  - row hits first: each bank remembers the last ``N_RECENT`` rows displaced by a
    younger conflicting request.  A request to such a row that the controller sees
    before that row was actually precharged (it would have been in the queue while the
    row was open, so FR-FCFS would have served it as a hit ahead of the conflict) is
    served as a hit of that row's batch, its CAS scheduled after the batch in progress,
    at most ``P_ROW_HIT_CAP`` times per batch (the bypass cap).  Its cost is that of the
    legal FR-FCFS schedule (one CAS slot, no PRE/ACT); only which of the two requests
    gets which slot differs.  With one stream per bank no row is ever asked for again
    after being displaced, so this never triggers and the bank is FCFS.

* A read completes when its last data beat is delivered plus the fixed controller/PHY
  latency; a write completes when its last data beat is on the bus (posted).

Modules: :mod:`~sim.model.kernels.dram_layout` (the arrays' layouts, re-exported here),
:mod:`~sim.model.kernels.dram_calendar` (bus / ACT calendars, refresh), this module (address
decoding and :func:`dram_access`) and :mod:`~sim.model.kernels.dram_stream` (request streams).
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.dram_calendar import (_act_place, _hole_find, _hole_insert, _hole_take,
                                             _refresh_all_bank, _refresh_per_bank)
from sim.model.kernels.dram_layout import (BI_DEF0, BI_ROW0, B_ACT, B_ACT_READY, B_BG_ACT,
                                           B_BG_DATA, B_CAS_READY, B_CLOSE0, B_PRE_READY,
                                           C_BUS_FREE, C_BUS_HOLES, C_LAST_READ_END,
                                           C_LAST_WRITE_END, C_NEXT_REFRESH, I_BUS_HOLES, N_HOLES,
                                           N_RECENT, P_ACCESS_BYTES, P_ACCESS_SHIFT,
                                           P_ADDRESS_HASH, P_BANKS, P_BANK_GROUPS, P_BANK_POLY,
                                           P_BANK_SHIFT, P_BLOCKS_PER_ROW, P_BPR_SHIFT,
                                           P_CTRL_LATENCY, P_FRFCFS, P_IL_SHIFT,
                                           P_INTERLEAVE_BYTES, P_NUM_PC, P_PC_POLY, P_PC_SHIFT,
                                           P_READ_PJ_PER_BYTE, P_REFRESH_PER_BANK, P_ROW_HIT_CAP,
                                           P_RW_HORIZON, P_T_CCD_L, P_T_CL, P_T_CWL, P_T_RAS,
                                           P_T_RCD, P_T_REFI, P_T_RP, P_T_RRD_L, P_T_RTP, P_T_SLOT,
                                           P_T_TURN_PER_WRITE, P_T_WR, P_WINDOW_NS, P_WRITE_BATCH,
                                           P_WRITE_PJ_PER_BYTE, S_ACTIVATES, S_BURSTS,
                                           S_BUS_BUSY_NS, S_BYTES_READ, S_BYTES_WRITTEN,
                                           S_ENERGY_PJ, S_FIRST_ARRIVAL_NS, S_HOLE_FILLS,
                                           S_LAST_DONE_NS, S_LATENCY_SUM_NS, S_REFRESH_STALL_NS,
                                           S_REORDERED_HITS, S_REQUESTS, S_ROW_CONFLICTS,
                                           S_ROW_EMPTY, S_ROW_HITS, S_TURNAROUNDS, _HASH_MUL)
from sim.model.kernels.jit import kernel

# every layout constant, re-exported: callers read them as sim.model.kernels.dram.X
from sim.model.kernels.dram_layout import *  # noqa: E402,F401,F403
from sim.model.kernels.dram_layout import (_HASH_MUL, _NEG)  # noqa: F401


@kernel(_nrt=False)
def dram_chunk_bytes(p, addr, nbytes):
    """Bytes from ``addr`` (at most ``nbytes``) that stay inside one interleave block.

    One interleave block lives in one pseudo-channel, bank and row, so the caller may
    pass each such chunk to :func:`dram_access`.
    """
    il = np.int64(p[P_INTERLEAVE_BYTES])
    room = il - (addr & (il - 1))
    if nbytes < room:
        return np.int64(nbytes)
    return room


@kernel(_nrt=False, inline='always')
def _gf2_hash(p, col, x, shift, mask):
    """``x`` read as a polynomial over GF(2), reduced modulo a primitive polynomial of
    degree ``shift`` (``P_*_POLY`` parameters at ``col``): a ``shift``-bit XOR hash of
    all bits of ``x >= 0`` in which address bit j contributes alpha**j.

    The contributions of any ``2**shift - 1`` consecutive bits are distinct and non-zero,
    so differences of one or two bits closer than that never hash to zero - unlike a
    plain fold of ``shift``-bit groups, where bits ``shift`` apart cancel (pseudo-random
    interleaving, Rau, ISCA 1991).  For ``shift`` <= 3 the bits are first folded with
    period ``2**shift - 1`` (x**(2**shift - 1) = 1 modulo a primitive polynomial); then
    ``x = low ^ high * (poly - x**shift)`` a fixed number of times (enough for every
    address of the device; the final mask keeps any address beyond it in range).
    """
    period = np.int64(p[col + 3])
    if period > 0:
        r = np.int64(p[col + 4])
        while r > 0:
            r -= 1
            x ^= x >> (period << r)
        x &= (np.int64(1) << period) - 1
    k1 = np.int64(p[col])
    k2 = np.int64(p[col + 1])
    k3 = np.int64(p[col + 2])
    for _ in range(np.int64(p[col + 5])):
        h = x >> shift
        x = (x & mask) ^ h ^ (h << k1)
        if k2 > 0:
            x ^= h << k2
            if k3 > 0:
                x ^= h << k3
    return x & mask


@kernel(_nrt=False, inline='always')
def dram_decode(p, addr):
    """(pseudo-channel, bank, row) of a byte address; see the module docstring."""
    block = addr >> np.int64(p[P_IL_SHIFT])
    npc = np.int64(p[P_NUM_PC])
    pc_shift = np.int64(p[P_PC_SHIFT])
    if pc_shift >= 0:
        rest = block >> pc_shift
        pc = block & (npc - 1)
    else:
        rest = block // npc
        pc = block - rest * npc
    bpr_shift = np.int64(p[P_BPR_SHIFT])
    if bpr_shift >= 0:
        rest2 = rest >> bpr_shift
    else:
        rest2 = rest // np.int64(p[P_BLOCKS_PER_ROW])
    nb = np.int64(p[P_BANKS])
    bank_shift = np.int64(p[P_BANK_SHIFT])
    if bank_shift >= 0:
        row = rest2 >> bank_shift
        bank = rest2 & (nb - 1)
    else:
        row = rest2 // nb
        bank = rest2 - row * nb
    if p[P_ADDRESS_HASH] != 0.0:
        # pseudo-channel: XOR with every log2(n_pc)-bit group of the bits above it
        # (column block, bank and row bits); a bijection for fixed upper bits
        if pc_shift > 0:
            pc = pc ^ _gf2_hash(p, P_PC_POLY, rest, pc_shift, npc - 1)
        elif pc_shift < 0:
            pc = (pc + (((rest * _HASH_MUL) >> 33) & np.int64(0x3FFFFFFF))) % npc
        # bank: XOR with every log2(banks)-bit group of the row, each rotated
        # (permutation interleaving folded over the whole row number)
        if bank_shift > 0:
            bank = bank ^ _gf2_hash(p, P_BANK_POLY, row, bank_shift, nb - 1)
        elif bank_shift < 0:
            bank = (bank + (((row * _HASH_MUL) >> 33) & np.int64(0x3FFFFFFF))) % nb
    return pc, bank, row



@kernel(_nrt=False, inline='always')
def _admitted_at(p, pc_t, pc_i, pc, t_ns):
    """When the controller of pseudo-channel ``pc`` sees a chunk that arrives at ``t_ns``."""
    # ---- admission: the controller sees a request once its queue has room ----------
    # The queue holds P_WINDOW_NS of data-bus work; its occupancy is the bus time already
    # booked after t_ns (frontier minus the free holes), which drains at the bus rate.
    # Until then the request can neither activate nor be reordered.
    t_in = t_ns
    occ = pc_t[pc, C_BUS_FREE] - t_ns
    lim = p[P_WINDOW_NS]
    if occ > lim:
        if pc_i[pc, I_BUS_HOLES] > 0:
            for hh in range(N_HOLES):
                hs = pc_t[pc, C_BUS_HOLES + 2 * hh]
                he = pc_t[pc, C_BUS_HOLES + 2 * hh + 1]
                if hs < t_ns:
                    hs = t_ns
                if he > hs:
                    occ -= he - hs
        if occ > lim:
            t_in = t_ns + (occ - lim)
    return t_in


@kernel(_nrt=False, inline='always')
def _wait_for_refresh(p, state, pc, b, t_in):
    """Run the refreshes due before a chunk seen at ``t_in`` (bank ``b``) and count its wait."""
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    stats = state[5]
    # ---- refresh --------------------------------------------------------------------
    if p[P_T_REFI] > 0.0:
        if p[P_REFRESH_PER_BANK] != 0.0:
            if t_in >= pc_t[pc, C_NEXT_REFRESH]:
                _refresh_per_bank(p, state, pc, t_in)
            if bank_row[b] < 0 and bank_t[b, B_ACT_READY] > t_in:
                stats[S_REFRESH_STALL_NS] += bank_t[b, B_ACT_READY] - t_in
        else:
            t_check = t_in
            if pc_t[pc, C_BUS_FREE] > t_check:
                t_check = pc_t[pc, C_BUS_FREE]
            if t_check >= pc_t[pc, C_NEXT_REFRESH]:
                end = _refresh_all_bank(p, state, pc, t_check)
                if end > t_check:
                    stats[S_REFRESH_STALL_NS] += end - t_check


@kernel(_nrt=False, inline='always')
def _cas_ready(p, state, pc, b, row, bgrow, nbg, frfcfs, t_in, dur):
    """The earliest CAS of a chunk to ``row`` of bank ``b`` seen at ``t_in``: a row hit, a
    reordered hit (FR-FCFS), or an activation after a precharge or into a closed bank."""
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    pc_i = state[3]
    bank_i = state[4]
    stats = state[5]
    # ---- row buffer -----------------------------------------------------------------
    open_row = bank_row[b]
    if open_row == row:
        stats[S_ROW_HITS] += 1.0
        cas_ready = bank_t[b, B_CAS_READY]
        if t_in > cas_ready:
            cas_ready = t_in
    else:
        # FR-FCFS row batching: a row that a younger conflict closed, asked for again
        # while it was still open (before its precharge, extended by the hits it has
        # already taken this way), is served as a hit of that row's batch, up to the cap
        found = -1
        take = False
        if frfcfs and open_row >= 0:
            for k in range(N_RECENT):
                if bank_i[b, BI_ROW0 + k] == row:
                    found = k
                    take = (t_in < bank_t[b, B_CLOSE0 + k]
                            and bank_i[b, BI_DEF0 + k] < np.int64(p[P_ROW_HIT_CAP]))
                    break
        if take:
            stats[S_ROW_HITS] += 1.0
            stats[S_REORDERED_HITS] += 1.0
            cas_ready = bank_t[b, B_CAS_READY]
            if t_in > cas_ready:
                cas_ready = t_in
            bank_i[b, BI_DEF0 + found] += 1
            bank_t[b, B_CLOSE0 + found] += dur
        else:
            if open_row >= 0:
                stats[S_ROW_CONFLICTS] += 1.0
                t_pre = bank_t[b, B_PRE_READY]
                if t_in > t_pre:
                    t_pre = t_in
                want = t_pre + p[P_T_RP]
            else:
                stats[S_ROW_EMPTY] += 1.0
                want = bank_t[b, B_ACT_READY]
                if t_in > want:
                    want = t_in
            if nbg > 1:
                t_bg = bank_t[bgrow, B_BG_ACT] + p[P_T_RRD_L]
                if t_bg > want:
                    want = t_bg
            t_act = _act_place(p, pc_t, pc_i, pc, want, t_in)
            if nbg > 1 and t_act > bank_t[bgrow, B_BG_ACT]:
                bank_t[bgrow, B_BG_ACT] = t_act
            if open_row >= 0 and frfcfs:
                # remember the displaced row: in the slot of the new row if it was
                # remembered, else in the slot closed longest ago
                k = found
                if k < 0:
                    k = 0
                    for kk in range(1, N_RECENT):
                        if bank_t[b, B_CLOSE0 + kk] < bank_t[b, B_CLOSE0 + k]:
                            k = kk
                bank_i[b, BI_ROW0 + k] = open_row
                bank_i[b, BI_DEF0 + k] = 0
                bank_t[b, B_CLOSE0 + k] = t_act - p[P_T_RP]
            bank_row[b] = row
            bank_t[b, B_ACT] = t_act
            cas_ready = t_act + p[P_T_RCD]
            bank_t[b, B_CAS_READY] = cas_ready
            bank_t[b, B_PRE_READY] = t_act + p[P_T_RAS]
            stats[S_ACTIVATES] += 1.0
    return cas_ready


@kernel(_nrt=False, inline='always')
def _book_data(p, state, pc, b, bgrow, nbg, frfcfs, t_ns, t_in, cas_ready, n_bursts, dur, nbytes, is_write):
    """Book a chunk's bursts on the data bus (a remembered gap or the frontier) from
    ``cas_ready``; update the bank's precharge limit and the counters; its completion."""
    bank_t = state[1]
    pc_t = state[2]
    pc_i = state[3]
    stats = state[5]
    slot = p[P_T_SLOT]
    # ---- data bus -------------------------------------------------------------------
    # Writes are posted and drained in batches of P_WRITE_BATCH bursts; while reads are
    # in the mix each batch costs one read->write and one write->read bubble, charged
    # to the batch's write bursts (amortised) rather than to individual requests.
    if is_write:
        ready = cas_ready + p[P_T_CWL]
        if pc_t[pc, C_LAST_READ_END] > t_in - p[P_RW_HORIZON]:
            dur += n_bursts * p[P_T_TURN_PER_WRITE]
            stats[S_TURNAROUNDS] += 2.0 * n_bursts / p[P_WRITE_BATCH]
    else:
        ready = cas_ready + p[P_T_CL]
    # bank groups: the chunk's CAS commands to one bank are tCCD_L apart.  Its bursts are
    # booked back to back on the bus (the controller interleaves other groups' bursts
    # into the gaps), but the group takes no new chunk before n x tCCD_L after this one's
    # first burst, and the chunk's last beat is (n - 1) x tCCD_L after its first.
    step = slot
    if nbg > 1:
        if p[P_T_CCD_L] > step:
            step = p[P_T_CCD_L]
        if bank_t[bgrow, B_BG_DATA] > ready:
            ready = bank_t[bgrow, B_BG_DATA]
    h = -1
    ds = 0.0
    if pc_i[pc, I_BUS_HOLES] > 0:
        h, ds = _hole_find(pc_t, pc, C_BUS_HOLES, ready, dur)
    if h >= 0:
        # the data goes into a gap left by an older request still waiting for its bank
        _hole_take(pc_t, pc_i, pc, C_BUS_HOLES, I_BUS_HOLES, h, ds, dur, slot)
        stats[S_HOLE_FILLS] += 1.0
    else:
        bus = pc_t[pc, C_BUS_FREE]
        ds = ready
        if bus > ds:
            ds = bus
        elif frfcfs:
            # remember the gap, less the part no later request could reach
            hs = t_in + p[P_T_CWL] if p[P_T_CWL] < p[P_T_CL] else t_in + p[P_T_CL]
            if bus > hs:
                hs = bus
            _hole_insert(pc_t, pc_i, pc, C_BUS_HOLES, I_BUS_HOLES, hs, ds, slot)
        pc_t[pc, C_BUS_FREE] = ds + dur
    de = ds + dur
    if nbg > 1:
        bank_t[bgrow, B_BG_DATA] = ds + n_bursts * step
        if step > slot:
            de = ds + dur + (n_bursts - 1) * (step - slot)
    if is_write:
        if de > pc_t[pc, C_LAST_WRITE_END]:
            pc_t[pc, C_LAST_WRITE_END] = de
        t_pre = de + p[P_T_WR]
        if t_pre > bank_t[b, B_PRE_READY]:
            bank_t[b, B_PRE_READY] = t_pre
        done = de
        stats[S_BYTES_WRITTEN] += nbytes
        stats[S_ENERGY_PJ] += nbytes * p[P_WRITE_PJ_PER_BYTE]
    else:
        if de > pc_t[pc, C_LAST_READ_END]:
            pc_t[pc, C_LAST_READ_END] = de
        t_pre = de - slot - p[P_T_CL] + p[P_T_RTP]   # last CAS + tRTP
        if t_pre > bank_t[b, B_PRE_READY]:
            bank_t[b, B_PRE_READY] = t_pre
        done = de + p[P_CTRL_LATENCY]
        stats[S_BYTES_READ] += nbytes
        stats[S_ENERGY_PJ] += nbytes * p[P_READ_PJ_PER_BYTE]

    stats[S_REQUESTS] += 1.0
    stats[S_BURSTS] += n_bursts
    stats[S_BUS_BUSY_NS] += n_bursts * slot
    stats[S_LATENCY_SUM_NS] += done - t_ns
    if t_ns < stats[S_FIRST_ARRIVAL_NS]:
        stats[S_FIRST_ARRIVAL_NS] = t_ns
    if done > stats[S_LAST_DONE_NS]:
        stats[S_LAST_DONE_NS] = done
    return done


@kernel(_nrt=False, inline='always')
def dram_access(p, state, addr, nbytes, t_ns, is_write):
    """Serve one chunk arriving at the controller at ``t_ns``; return its completion time.

    ``nbytes`` must not exceed ``dram_chunk_bytes(p, addr, nbytes)``.  Reads complete when
    their last beat is delivered plus the controller latency; writes when their last beat
    is on the bus.  Updates ``state`` in place; allocates nothing.  ``is_write`` may be a
    bool or an int.  Completion times already returned are never revised.

    Compiled without Numba's reference counting (``_nrt=False``): the function never
    allocates, and the atomic increfs/decrefs of the state arrays otherwise cost more
    than the model itself.  Inlined into its callers: the engine calls it once per chunk,
    and a call passed every field of the state's arrays (an H200 GEMM and a decode GEMV
    each simulated ~6 % faster inlined, same answers).
    """
    pc_t = state[2]
    pc_i = state[3]

    pc, bank, row = dram_decode(p, addr)
    b = pc * np.int64(p[P_BANKS]) + bank
    frfcfs = p[P_FRFCFS] != 0.0
    nbg = np.int64(p[P_BANK_GROUPS])
    bgrow = b
    if nbg > 1:
        bgrow = pc * np.int64(p[P_BANKS]) + bank % nbg

    g_bytes = np.int64(p[P_ACCESS_BYTES])
    g_shift = np.int64(p[P_ACCESS_SHIFT])
    offset = addr & (np.int64(p[P_INTERLEAVE_BYTES]) - 1)
    if g_shift >= 0:
        n_bursts = ((offset + nbytes - 1) >> g_shift) - (offset >> g_shift) + 1
    else:
        n_bursts = (offset + nbytes - 1) // g_bytes - offset // g_bytes + 1
    slot = p[P_T_SLOT]
    dur = n_bursts * slot

    t_in = _admitted_at(p, pc_t, pc_i, pc, t_ns)
    _wait_for_refresh(p, state, pc, b, t_in)
    cas_ready = _cas_ready(p, state, pc, b, row, bgrow, nbg, frfcfs, t_in, dur)
    return _book_data(p, state, pc, b, bgrow, nbg, frfcfs, t_ns, t_in, cas_ready, n_bursts, dur, nbytes, is_write)
