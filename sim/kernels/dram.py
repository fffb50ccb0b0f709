"""Off-chip DRAM (HBM / DDR / LPDDR) timing kernels.

The event engine calls :func:`dram_access` once per DMA chunk; every other function here
is a convenience built on it.  Kernels see only NumPy arrays and scalars:

``p``      float64 parameter vector, filled by :meth:`sim.memory.dram.DramParams.to_array`
           and indexed by the ``P_*`` constants below.  Times are nanoseconds.
``state``  tuple of arrays made by :meth:`sim.memory.dram.DramParams.new_state`::

               (bank_row   int64[n_banks]          open row per bank, -1 = closed
                bank_t     float64[n_banks, 4]     per-bank times, ``B_*`` columns
                pc_t       float64[n_pc, 8]        per-pseudo-channel times, ``C_*`` columns
                pc_i       int64[n_pc, 3]          per-pseudo-channel integers, ``I_*`` columns
                stats      float64[N_STATS]        counters, ``S_*`` indices)

           ``n_pc`` = channels x pseudo-channels per channel (all stacks);
           ``n_banks`` = n_pc x banks per pseudo-channel; bank ``b`` of pseudo-channel
           ``pc`` lives at row ``pc * banks + b``.

The model (see docs/dram_model.md for the full description and its sources):

* Address mapping, channel first: ``addr = [row | bank | column block | pseudo-channel |
  offset]`` where ``offset`` spans one interleave block.  Consecutive interleave blocks go
  to consecutive pseudo-channels, then to the next column block of the same row, then to
  the next bank, then the next row.  With hashing on (default) the pseudo-channel index is
  rotated by a multiplicative hash of the upper address bits and the bank index is XORed
  with the low row bits (permutation interleaving) - both are bijections, so a sequential
  stream still visits every pseudo-channel once per ``n_pc`` blocks and stays in an open
  row, while power-of-two strides no longer pile onto one channel or bank.
* Per bank: open-page policy, FCFS.  Row hit = CAS only; row empty = ACT (+tRCD);
  row conflict = PRE (not before tRAS after the ACT, tRTP after the last read CAS, tWR
  after the last write data) + tRP, then ACT + tRCD.
* Per pseudo-channel: ACTs spaced by tRRD and at most four in any tFAW window (ACTs are
  issued in arrival order); one shared data bus on which bursts are serialised in arrival
  order, each access-granularity burst taking ``max(burst time, tCCD)``; read data start
  tCL after the CAS, write data tCWL after it; read<->write turnaround (tRTW bubble,
  tWTR + tCL bubble) paid at most once per batch of ``write_batch`` write bursts, the way
  a controller drains its write queue; all-bank refresh every tREFI, staggered across
  pseudo-channels, which waits for in-flight work, precharges, blocks the pseudo-channel
  for tRFC and closes every row.
* A read completes when its last data beat is delivered plus the fixed controller/PHY
  latency; a write completes when its last data beat is on the bus (posted).
"""
from __future__ import annotations

import numpy as np

from .jit import kernel

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
P_T_RFC = 24
P_T_REFI = 25                # <= 0 disables refresh
P_T_WR = 26
P_T_RTP = 27
P_T_WTR = 28
P_T_RTW = 29                 # read->write data-bus bubble, ns
P_CTRL_LATENCY = 30          # added to every read's completion, ns
P_WRITE_BATCH = 31           # write bursts per read/write turnaround pair
P_READ_PJ_PER_BYTE = 32      # 0 when unknown
P_WRITE_PJ_PER_BYTE = 33
P_PEAK_BYTES_PER_NS = 34
P_MAX_OUTSTANDING = 35       # per core, access-granularity requests (engine-side)
N_PARAMS = 36

# --------------------------------------------------------------------------------------
# State layout.
# --------------------------------------------------------------------------------------
ST_BANK_ROW = 0
ST_BANK_T = 1
ST_PC_T = 2
ST_PC_I = 3
ST_STATS = 4

# bank_t columns
B_ACT = 0          # time of the last ACT
B_CAS_READY = 1    # earliest CAS to the open row (ACT + tRCD)
B_PRE_READY = 2    # earliest PRE (tRAS, tRTP, tWR)
B_ACT_READY = 3    # earliest ACT while closed (after refresh)
N_BANK_T = 4

# pc_t columns
C_BUS_FREE = 0         # data bus free from this time
C_NEXT_REFRESH = 1     # next nominal refresh
C_LAST_WRITE_END = 2   # end of the last write data on the bus
C_LAST_READ_END = 3    # end of the last read data on the bus
C_ACT0 = 4             # C_ACT0..C_ACT0+3: ring of the last four ACT times
N_PC_T = 8

# pc_i columns
I_ACT_PTR = 0          # ring slot of the oldest of the last four ACTs
I_LAST_DIR = 1         # 0 = idle, 1 = read, 2 = write
I_WRITE_CREDIT = 2     # write bursts left in the current write batch
N_PC_I = 3

DIR_NONE = 0
DIR_READ = 1
DIR_WRITE = 2

# stats indices (all float64; counts are exact integers)
S_REQUESTS = 0          # dram_access calls (chunks)
S_BURSTS = 1            # access-granularity bursts on the data buses
S_BYTES_READ = 2
S_BYTES_WRITTEN = 3
S_ROW_HITS = 4
S_ROW_EMPTY = 5         # bank closed: ACT needed
S_ROW_CONFLICTS = 6     # another row open: PRE + ACT needed
S_ACTIVATES = 7
S_REFRESHES = 8
S_REFRESH_STALL_NS = 9  # sum of (refresh end - max(arrival, bus free)) over chunks that met one
S_BUS_BUSY_NS = 10      # summed over pseudo-channels
S_TURNAROUNDS = 11      # read<->write bubbles paid
S_LATENCY_SUM_NS = 12   # sum of (completion - arrival)
S_FIRST_ARRIVAL_NS = 13
S_LAST_DONE_NS = 14
S_ENERGY_PJ = 15        # bytes x pJ/byte (0 when the spec gives no energy)
N_STATS = 16

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
        # pseudo-channel rotation by a multiplicative hash of the bits above it
        h = ((rest * _HASH_MUL) >> 33) & np.int64(0x3FFFFFFF)
        if pc_shift >= 0:
            pc = (pc + h) & (npc - 1)
        else:
            pc = (pc + h) % npc
        # permutation-based bank interleaving: XOR with the low row bits
        if bank_shift >= 0:
            bank = bank ^ (row & (nb - 1))
        else:
            bank = (bank + row) % nb
    return pc, bank, row


@kernel(_nrt=False, inline='always')
def _refresh(p, state, pc, t_check):
    """Apply the refreshes of pseudo-channel ``pc`` that are due by ``t_check``.

    Called only when one is due.  The last due refresh starts once the data already on
    the bus and every open bank's precharge constraints allow, precharges (tRP) if a row
    is open, and lasts tRFC; earlier due refreshes fell in idle time and cost nothing.
    Returns the time the pseudo-channel's banks become usable again.
    """
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    stats = state[4]
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
    pc_t[pc, C_NEXT_REFRESH] = r_nom + trefi
    stats[S_REFRESHES] += k + 1.0
    return end


@kernel(_nrt=False)
def dram_access(p, state, addr, nbytes, t_ns, is_write):
    """Serve one chunk arriving at the controller at ``t_ns``; return its completion time.

    ``nbytes`` must not exceed ``dram_chunk_bytes(p, addr, nbytes)``.  Reads complete when
    their last beat is delivered plus the controller latency; writes when their last beat
    is on the bus.  Updates ``state`` in place; allocates nothing.  ``is_write`` may be a
    bool or an int.

    Compiled without Numba's reference counting (``_nrt=False``): the function never
    allocates, and the atomic increfs/decrefs of the five state arrays otherwise cost
    more than the model itself (about 60 ns -> 25 ns per call).
    """
    bank_row = state[0]
    bank_t = state[1]
    pc_t = state[2]
    pc_i = state[3]
    stats = state[4]

    pc, bank, row = dram_decode(p, addr)
    b = pc * np.int64(p[P_BANKS]) + bank

    # ---- refresh --------------------------------------------------------------------
    if p[P_T_REFI] > 0.0:
        t_check = t_ns
        if pc_t[pc, C_BUS_FREE] > t_check:
            t_check = pc_t[pc, C_BUS_FREE]
        if t_check >= pc_t[pc, C_NEXT_REFRESH]:
            end = _refresh(p, state, pc, t_check)
            if end > t_check:
                stats[S_REFRESH_STALL_NS] += end - t_check

    # ---- row buffer -----------------------------------------------------------------
    open_row = bank_row[b]
    if open_row == row:
        stats[S_ROW_HITS] += 1.0
        cas_ready = bank_t[b, B_CAS_READY]
        if t_ns > cas_ready:
            cas_ready = t_ns
    else:
        if open_row >= 0:
            stats[S_ROW_CONFLICTS] += 1.0
            t_pre = bank_t[b, B_PRE_READY]
            if t_ns > t_pre:
                t_pre = t_ns
            t_act = t_pre + p[P_T_RP]
        else:
            stats[S_ROW_EMPTY] += 1.0
            t_act = bank_t[b, B_ACT_READY]
            if t_ns > t_act:
                t_act = t_ns
        ptr = pc_i[pc, I_ACT_PTR]
        t_rrd = pc_t[pc, C_ACT0 + ((ptr + 3) & 3)] + p[P_T_RRD]
        if t_rrd > t_act:
            t_act = t_rrd
        t_faw = pc_t[pc, C_ACT0 + ptr] + p[P_T_FAW]
        if t_faw > t_act:
            t_act = t_faw
        pc_t[pc, C_ACT0 + ptr] = t_act
        pc_i[pc, I_ACT_PTR] = (ptr + 1) & 3
        bank_row[b] = row
        bank_t[b, B_ACT] = t_act
        cas_ready = t_act + p[P_T_RCD]
        bank_t[b, B_CAS_READY] = cas_ready
        bank_t[b, B_PRE_READY] = t_act + p[P_T_RAS]
        stats[S_ACTIVATES] += 1.0

    # ---- data bus -------------------------------------------------------------------
    g_bytes = np.int64(p[P_ACCESS_BYTES])
    g_shift = np.int64(p[P_ACCESS_SHIFT])
    offset = addr & (np.int64(p[P_INTERLEAVE_BYTES]) - 1)
    if g_shift >= 0:
        n_bursts = ((offset + nbytes - 1) >> g_shift) - (offset >> g_shift) + 1
    else:
        n_bursts = (offset + nbytes - 1) // g_bytes - offset // g_bytes + 1
    slot = p[P_T_SLOT]
    dur = n_bursts * slot
    bus = pc_t[pc, C_BUS_FREE]
    last_dir = pc_i[pc, I_LAST_DIR]
    if is_write:
        ds = cas_ready + p[P_T_CWL]
        if bus > ds:
            ds = bus
        if pc_i[pc, I_WRITE_CREDIT] <= 0:
            if last_dir == DIR_READ:
                t_turn = pc_t[pc, C_LAST_READ_END] + p[P_T_RTW]
                if t_turn > ds:
                    ds = t_turn
                stats[S_TURNAROUNDS] += 1.0
            pc_i[pc, I_WRITE_CREDIT] = np.int64(p[P_WRITE_BATCH])
        pc_i[pc, I_WRITE_CREDIT] -= n_bursts
        de = ds + dur
        pc_t[pc, C_LAST_WRITE_END] = de
        t_pre = de + p[P_T_WR]
        if t_pre > bank_t[b, B_PRE_READY]:
            bank_t[b, B_PRE_READY] = t_pre
        pc_i[pc, I_LAST_DIR] = DIR_WRITE
        done = de
        stats[S_BYTES_WRITTEN] += nbytes
        stats[S_ENERGY_PJ] += nbytes * p[P_WRITE_PJ_PER_BYTE]
    else:
        ds = cas_ready + p[P_T_CL]
        if bus > ds:
            ds = bus
        if last_dir == DIR_WRITE and pc_i[pc, I_WRITE_CREDIT] <= 0:
            t_turn = pc_t[pc, C_LAST_WRITE_END] + p[P_T_WTR] + p[P_T_CL]
            if t_turn > ds:
                ds = t_turn
            stats[S_TURNAROUNDS] += 1.0
        de = ds + dur
        pc_t[pc, C_LAST_READ_END] = de
        t_pre = de - slot - p[P_T_CL] + p[P_T_RTP]   # last CAS + tRTP
        if t_pre > bank_t[b, B_PRE_READY]:
            bank_t[b, B_PRE_READY] = t_pre
        pc_i[pc, I_LAST_DIR] = DIR_READ
        done = de + p[P_CTRL_LATENCY]
        stats[S_BYTES_READ] += nbytes
        stats[S_ENERGY_PJ] += nbytes * p[P_READ_PJ_PER_BYTE]
    pc_t[pc, C_BUS_FREE] = de

    stats[S_REQUESTS] += 1.0
    stats[S_BURSTS] += n_bursts
    stats[S_BUS_BUSY_NS] += dur
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
        d = dram_access(p, state, cur_addr[r], best_c, t, is_write[i])
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
