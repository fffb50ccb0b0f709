"""A pseudo-channel's calendars and refresh (DRAM kernels; see :mod:`sim.model.kernels.dram`):
the data-bus and ACT calendars as a frontier plus up to ``N_HOLES`` remembered free
intervals (a younger ready request may take a gap an older blocked one left), ACT
placement under tRRD / tFAW, and all-bank or per-bank refresh.  Inlined into
:func:`~sim.model.kernels.dram.dram_access`; arrays and scalars only.
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.dram_layout import (BI_ROW0, B_ACT_READY, B_CLOSE0, B_PRE_READY, C_ACT_FREE,
                                           C_ACT_HOLES, C_BUS_FREE, C_NEXT_REFRESH, I_ACT_HOLES,
                                           I_REF_BANK, I_REF_DONE, N_HOLES, N_RECENT, P_BANKS,
                                           P_FRFCFS, P_T_ACT_SLOT, P_T_REFI, P_T_REFI_PB, P_T_RFC,
                                           P_T_RFC_PB, P_T_RP, S_REFRESHES, _NEG)
from sim.model.kernels.jit import kernel


@kernel(_nrt=False, inline='always')
def _hole_insert(pc_t, pc_i, pc, col_h, col_n, hs, he, min_len):
    """Remember the free interval [hs, he) if it is at least ``min_len`` long.

    When all slots are taken it replaces the hole that ends first, if that one ends
    before ``he`` (an old hole is the least likely to be usable again).  ``pc_i[pc,
    col_n]`` counts the holes in use."""
    if he - hs < min_len:
        return
    k = 0
    kend = pc_t[pc, col_h + 1]
    for h in range(1, N_HOLES):
        e = pc_t[pc, col_h + 2 * h + 1]
        if e < kend:
            k = h
            kend = e
    if kend < he:
        if kend == _NEG:
            pc_i[pc, col_n] += 1
        pc_t[pc, col_h + 2 * k] = hs
        pc_t[pc, col_h + 2 * k + 1] = he


@kernel(_nrt=False, inline='always')
def _hole_find(pc_t, pc, col_h, ready, dur):
    """Earliest start s >= ready of a [s, s + dur) that fits in a remembered hole.

    Returns (hole index or -1, s)."""
    best = -1
    best_s = 0.0
    for h in range(N_HOLES):
        hs = pc_t[pc, col_h + 2 * h]
        he = pc_t[pc, col_h + 2 * h + 1]
        s = hs if hs > ready else ready
        if s + dur <= he and (best < 0 or s < best_s):
            best = h
            best_s = s
    return best, best_s


@kernel(_nrt=False, inline='always')
def _hole_take(pc_t, pc_i, pc, col_h, col_n, h, s, dur, min_len):
    """Book [s, s + dur) inside hole ``h``; the pieces left on either side stay free."""
    hs = pc_t[pc, col_h + 2 * h]
    he = pc_t[pc, col_h + 2 * h + 1]
    e = s + dur
    if he - e >= min_len:
        pc_t[pc, col_h + 2 * h] = e
    else:
        pc_t[pc, col_h + 2 * h] = _NEG
        pc_t[pc, col_h + 2 * h + 1] = _NEG
        pc_i[pc, col_n] -= 1
    _hole_insert(pc_t, pc_i, pc, col_h, col_n, hs, s, min_len)


@kernel(_nrt=False, inline='always')
def _act_place(p, pc_t, pc_i, pc, ready, t_now):
    """Time of an ACT wanted at ``ready``: the earliest free ACT slot at or after it.

    Every ACT occupies a slot of max(tRRD, tFAW/4) in the pseudo-channel's ACT calendar,
    so any two ACTs are >= tRRD apart and any five span >= tFAW.  With FR-FCFS an ACT
    may take a free slot before younger ACTs already booked (bank-level parallelism:
    a request whose bank is ready is not held behind one waiting for its precharge)."""
    a = p[P_T_ACT_SLOT]
    if pc_i[pc, I_ACT_HOLES] > 0:
        h, s = _hole_find(pc_t, pc, C_ACT_HOLES, ready, a)
        if h >= 0:
            _hole_take(pc_t, pc_i, pc, C_ACT_HOLES, I_ACT_HOLES, h, s, a, a)
            return s
    f = pc_t[pc, C_ACT_FREE]
    s = ready
    if f > s:
        s = f
    elif p[P_FRFCFS] != 0.0:
        if f < t_now:
            f = t_now
        _hole_insert(pc_t, pc_i, pc, C_ACT_HOLES, I_ACT_HOLES, f, s, a)
    pc_t[pc, C_ACT_FREE] = s + a
    return s


# --------------------------------------------------------------------------------------
# Refresh.
# --------------------------------------------------------------------------------------
@kernel(_nrt=False, inline='always')
def _forget_rows(bank_t, bank_i, b):
    for k in range(N_RECENT):
        bank_i[b, BI_ROW0 + k] = -1
        bank_t[b, B_CLOSE0 + k] = _NEG


@kernel(_nrt=False)
def _refresh_all_bank(p, state, pc, t_check):
    """Apply the all-bank refreshes of pseudo-channel ``pc`` that are due by ``t_check``.

    Called only when one is due.  The last due refresh starts once the data already on
    the bus and every open bank's precharge constraints allow, precharges (tRP) if a row
    is open, and lasts tRFC; earlier due refreshes fell in idle time and cost nothing.
    Returns the time the pseudo-channel's banks become usable again.
    """
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    bank_i = state[4]
    stats = state[5]
    trefi = p[P_T_REFI]
    nr = pc_t[pc, C_NEXT_REFRESH]
    k = np.floor((t_check - nr) / trefi)
    r_nom = nr + k * trefi
    start = r_nom
    bus = pc_t[pc, C_BUS_FREE]
    if bus > start:
        start = bus
    nb = np.int64(p[P_BANKS])
    g = pc * nb
    any_open = False
    for b in range(g, g + nb):
        if bank_row[b] >= 0:
            any_open = True
            if bank_t[b, B_PRE_READY] > start:
                start = bank_t[b, B_PRE_READY]
        elif bank_t[b, B_ACT_READY] > start:
            start = bank_t[b, B_ACT_READY]
    if any_open:
        start += p[P_T_RP]
    end = start + p[P_T_RFC]
    for b in range(g, g + nb):
        bank_row[b] = -1
        bank_t[b, B_ACT_READY] = end
        _forget_rows(bank_t, bank_i, b)
    pc_t[pc, C_NEXT_REFRESH] = r_nom + trefi
    stats[S_REFRESHES] += k + 1.0
    return end


@kernel(_nrt=False)
def _refresh_per_bank(p, state, pc, t_check):
    """Apply the per-bank refreshes of pseudo-channel ``pc`` due by ``t_check``.

    One bank refresh is due every tREFI / banks, and every bank is refreshed once per
    round of ``banks`` refreshes.  The controller picks, in round-robin order, the first
    bank not yet refreshed in the current round that has no work scheduled past the due
    time (refreshing idle banks out of order, as DARP does: Chang et al., HPCA 2014);
    if every such bank is busy, the one that frees first.  Round-robin order keeps the
    choice independent of the access pattern (the least recently used bank would be the
    next one a sequential sweep needs).  The refresh due at ``r`` starts at ``r`` or,
    if the bank is still busy, once it may precharge (+ tRP); it blocks only that bank
    for tRFCpb and closes its row.  When more than ``banks`` refreshes are due (idle
    time), only the last ``banks`` of them can still matter.  With more than 64 banks the
    order is plain round robin.
    """
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    pc_i = state[3]
    bank_i = state[4]
    stats = state[5]
    trefi = p[P_T_REFI_PB]
    nr = pc_t[pc, C_NEXT_REFRESH]
    n_due = np.int64(np.floor((t_check - nr) / trefi)) + 1
    nb = np.int64(p[P_BANKS])
    j0 = np.int64(0)
    if n_due > nb:
        j0 = n_due - nb
    g = pc * nb
    done_mask = pc_i[pc, I_REF_DONE]
    for j in range(j0, n_due):
        r = nr + j * trefi
        if nb <= 64:
            if done_mask == _full_mask(nb):
                done_mask = np.int64(0)
            # first bank in round-robin order that is not yet refreshed in this round
            # and has no work scheduled past the due time; else the one that frees first
            ptr = pc_i[pc, I_REF_BANK]
            pick = np.int64(-1)
            pick_t = 0.0
            for kk in range(nb):
                k = ptr + kk
                if k >= nb:
                    k -= nb
                if (done_mask >> k) & 1:
                    continue
                bb = g + k
                busy = bank_t[bb, B_ACT_READY]
                if bank_row[bb] >= 0 and bank_t[bb, B_PRE_READY] > busy:
                    busy = bank_t[bb, B_PRE_READY]
                if busy <= r:
                    pick = k
                    break
                if pick < 0 or busy < pick_t:
                    pick = k
                    pick_t = busy
            pc_i[pc, I_REF_BANK] = pick + 1 if pick + 1 < nb else 0
            done_mask |= np.int64(1) << pick
        else:
            pick = pc_i[pc, I_REF_BANK]
            pc_i[pc, I_REF_BANK] = (pick + 1) % nb
        bb = g + pick
        start = r
        if bank_row[bb] >= 0:
            if bank_t[bb, B_PRE_READY] > start:
                start = bank_t[bb, B_PRE_READY]
            start += p[P_T_RP]
        elif bank_t[bb, B_ACT_READY] > start:
            start = bank_t[bb, B_ACT_READY]
        bank_row[bb] = -1
        bank_t[bb, B_ACT_READY] = start + p[P_T_RFC_PB]
        _forget_rows(bank_t, bank_i, bb)
    pc_i[pc, I_REF_DONE] = done_mask
    pc_t[pc, C_NEXT_REFRESH] = nr + n_due * trefi
    stats[S_REFRESHES] += n_due


@kernel(_nrt=False, inline='always')
def _full_mask(nb):
    if nb >= 64:
        return np.int64(-1)
    return (np.int64(1) << nb) - 1
