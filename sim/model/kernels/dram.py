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
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.jit import kernel

# --------------------------------------------------------------------------------------
# Parameter vector (float64).  Integers are stored exactly (all < 2**53).
# --------------------------------------------------------------------------------------
P_CHANNELS = 0               # independent channels, whole device
P_PCS_PER_CHANNEL = 1        # pseudo-channels per channel
P_NUM_PC = 2                 # channels * pseudo-channels per channel
P_BANKS = 3                  # banks per pseudo-channel
P_ACCESS_BYTES = 4           # access granularity = bus_width_bits * burst_length / 8
P_INTERLEAVE_BYTES = 5       # power of two
P_ROW_BYTES = 6              # row (page) size per pseudo-channel
P_BLOCKS_PER_ROW = 7         # row_bytes / interleave_bytes
P_ACCESS_SHIFT = 8           # log2(access bytes), or -1 if not a power of two
P_IL_SHIFT = 9               # log2(interleave bytes)
P_PC_SHIFT = 10              # log2(num pc), or -1
P_BPR_SHIFT = 11             # log2(blocks per row), or -1
P_BANK_SHIFT = 12            # log2(banks), or -1
P_ADDRESS_HASH = 13          # 1.0 = hash pseudo-channel and bank bits, 0.0 = plain
P_T_BURST = 14               # one burst on the data bus, ns
P_T_CCD = 15                 # column-to-column spacing, ns
P_T_SLOT = 16                # bus time per burst = max(T_BURST, T_CCD), ns
P_T_RCD = 17
P_T_RP = 18
P_T_CL = 19
P_T_CWL = 20
P_T_RAS = 21
P_T_RRD = 22
P_T_FAW = 23
P_T_RFC = 24                 # all-bank refresh
P_T_REFI = 25                # <= 0 disables refresh
P_T_WR = 26
P_T_RTP = 27
P_T_WTR = 28
P_T_RTW = 29                 # read->write data-bus bubble, ns
P_CTRL_LATENCY = 30          # added to every read's completion, ns
P_WRITE_BATCH = 31           # write bursts drained per read/write turnaround pair
P_READ_PJ_PER_BYTE = 32      # 0 when unknown
P_WRITE_PJ_PER_BYTE = 33
P_PEAK_BYTES_PER_NS = 34
P_MAX_OUTSTANDING = 35       # per core, access-granularity requests (engine-side)
P_REFRESH_PER_BANK = 36      # 1.0 = per-bank refresh (REFpb / REFsb), 0.0 = all-bank
P_T_RFC_PB = 37              # per-bank refresh duration, ns
P_T_REFI_PB = 38             # tREFI / banks: one bank refresh per pseudo-channel this often
P_T_ACT_SLOT = 39            # max(tRRD, tFAW / 4): ACT calendar slot width, ns
P_FRFCFS = 40                # 1.0 = FR-FCFS approximation, 0.0 = strict FCFS
P_WINDOW_NS = 41             # controller look-ahead per pseudo-channel: queued bus work, ns
P_ROW_HIT_CAP = 42           # most hits one row batch may take past an older conflict
P_PC_POLY = 43               # 6 values: the pseudo-channel hash polynomial (see _gf2_hash):
                             # k1, k2, k3 (poly = x**shift + x**k3 + x**k2 + x**k1 + 1; 0 =
                             # absent), fold period, fold rounds, reduction steps
P_BANK_POLY = 49             # same for the bank hash
P_T_TURN_PER_WRITE = 55      # (tRTW + tWTR + tCL) / write batch: bubble share per write burst
P_RW_HORIZON = 56            # a read this recent (ns before a write) puts reads in the mix
P_BANK_GROUPS = 57           # bank groups per pseudo-channel (bank b is in group b % groups); 1 = none
P_T_CCD_L = 58               # CAS to CAS in one bank group (tCCD_L), ns
P_T_RRD_L = 59               # ACT to ACT in one bank group (tRRD_L), ns
N_PARAMS = 60

# --------------------------------------------------------------------------------------
# State layout.
# --------------------------------------------------------------------------------------
ST_BANK_ROW = 0
ST_BANK_T = 1
ST_PC_T = 2
ST_PC_I = 3
ST_BANK_I = 4
ST_STATS = 5           # always last: the engine reads state[-1]

N_RECENT = 3           # recently displaced rows remembered per bank
N_HOLES = 2            # free intervals remembered per calendar (data bus, ACT)

# bank_t columns
B_ACT = 0          # time of the last ACT
B_CAS_READY = 1    # earliest CAS to the open row (ACT + tRCD)
B_PRE_READY = 2    # earliest PRE (tRAS, tRTP, tWR)
B_ACT_READY = 3    # earliest ACT while closed (after refresh)
B_CLOSE0 = 4       # B_CLOSE0 .. +N_RECENT-1: when each remembered row was closed (extended)
# bank-group state, kept in the row of bank g of the pseudo-channel for group g:
B_BG_DATA = B_CLOSE0 + N_RECENT      # earliest data start of the group's next chunk (tCCD_L)
B_BG_ACT = B_BG_DATA + 1             # the group's last ACT (tRRD_L)
N_BANK_T = B_BG_ACT + 1

# bank_i columns
BI_ROW0 = 0                   # remembered rows (-1 = none)
BI_DEF0 = BI_ROW0 + N_RECENT  # hits each remembered row took after it was closed
N_BANK_I = BI_DEF0 + N_RECENT

# pc_t columns
C_BUS_FREE = 0         # data bus frontier: free from this time on
C_NEXT_REFRESH = 1     # next nominal refresh (all-bank) or bank refresh (per-bank)
C_LAST_WRITE_END = 2   # end of the last write data on the bus
C_LAST_READ_END = 3    # end of the last read data on the bus
C_ACT_FREE = 4         # ACT calendar frontier
C_BUS_HOLES = 5        # N_HOLES (start, end) pairs: free intervals before C_BUS_FREE
C_ACT_HOLES = C_BUS_HOLES + 2 * N_HOLES   # same for the ACT calendar
N_PC_T = C_ACT_HOLES + 2 * N_HOLES

# pc_i columns
I_REF_BANK = 0         # round-robin pointer of the per-bank refresh
I_REF_DONE = 1         # bit mask of the banks refreshed in the current round (per-bank)
I_BUS_HOLES = 2        # data-bus holes in use
I_ACT_HOLES = 3        # ACT-calendar holes in use
N_PC_I = 4

# stats indices (all float64; counts are exact integers)
S_REQUESTS = 0          # dram_access calls (chunks)
S_BURSTS = 1            # access-granularity bursts on the data buses
S_BYTES_READ = 2
S_BYTES_WRITTEN = 3
S_ROW_HITS = 4          # includes S_REORDERED_HITS
S_ROW_EMPTY = 5         # bank closed: ACT needed
S_ROW_CONFLICTS = 6     # another row open: PRE + ACT needed
S_ACTIVATES = 7
S_REFRESHES = 8         # refresh commands (all-bank: per pseudo-channel; per-bank: per bank)
S_REFRESH_STALL_NS = 9  # time requests waited for a refresh to end
S_BUS_BUSY_NS = 10      # summed over pseudo-channels
S_TURNAROUNDS = 11      # read<->write bubbles paid
S_LATENCY_SUM_NS = 12   # sum of (completion - arrival)
S_FIRST_ARRIVAL_NS = 13
S_LAST_DONE_NS = 14
S_ENERGY_PJ = 15        # bytes x pJ/byte (0 when the spec gives no energy)
S_REORDERED_HITS = 16   # hits to a row already closed by a younger conflict (FR-FCFS batching)
S_HOLE_FILLS = 17       # chunks whose data went into a gap left on the bus (served out of order)
N_STATS = 18

_NEG = -1.0e300
_HASH_MUL = np.int64(-7046029254386353131)  # 0x9E3779B97F4A7C15 as int64 (golden ratio)


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


# --------------------------------------------------------------------------------------
# Calendars: a frontier plus up to N_HOLES remembered free intervals before it.
# --------------------------------------------------------------------------------------
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


@kernel(_nrt=False)
def dram_access(p, state, addr, nbytes, t_ns, is_write):
    """Serve one chunk arriving at the controller at ``t_ns``; return its completion time.

    ``nbytes`` must not exceed ``dram_chunk_bytes(p, addr, nbytes)``.  Reads complete when
    their last beat is delivered plus the controller latency; writes when their last beat
    is on the bus.  Updates ``state`` in place; allocates nothing.  ``is_write`` may be a
    bool or an int.  Completion times already returned are never revised.

    Compiled without Numba's reference counting (``_nrt=False``): the function never
    allocates, and the atomic increfs/decrefs of the state arrays otherwise cost more
    than the model itself.
    """
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    pc_i = state[3]
    bank_i = state[4]
    stats = state[5]

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
def _slots_wait(buf, meta, r, k, m, in_order, t):
    """Earliest time >= t at which requester r has k free request slots (of m).

    In-order (``in_order``): slots retire in issue order, so the k oldest slots of the
    ring must have completed.  Otherwise any completed slot is free: the k earliest
    completions are popped from r's min-heap when it is full.
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
        # pop the minimum
        top = buf[r, 0]
        if top > t:
            t = top
        size -= 1
        last = buf[r, size]
        i = 0
        while True:
            c = 2 * i + 1
            if c >= size:
                break
            if c + 1 < size and buf[r, c + 1] < buf[r, c]:
                c += 1
            if buf[r, c] < last:
                buf[r, i] = buf[r, c]
                i = c
            else:
                break
        if size > 0:
            buf[r, i] = last
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
        i = size
        size += 1
        while i > 0:
            par = (i - 1) >> 1
            if buf[r, par] > d:
                buf[r, i] = buf[r, par]
                i = par
            else:
                break
        buf[r, i] = d
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
    size0 = meta[r, 1]
    need = size0 + k - m
    if need <= 0:
        return t
    # pop `need` minima into scratch, then push them back
    for q in range(need):
        scratch[q] = buf[r, 0]
        _slots_wait(buf, meta, r, 1, meta[r, 1], in_order, t)
    for q in range(need):
        _slots_fill(buf, meta, r, 1, m, in_order, scratch[q])
    if scratch[need - 1] > t:
        t = scratch[need - 1]
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
