"""The DRAM kernels' array layouts: the parameter vector ``p`` (``P_*``), the state tuple
(``ST_*``: per-bank ``B_*`` / ``BI_*`` columns, per-pseudo-channel ``C_*`` / ``I_*`` columns,
the ``S_*`` counters) and the model's fixed sizes (``N_*``).  Plain integers, folded by
Numba as compile-time constants; :class:`sim.model.memory.dram_parameters.DramParams`
fills the arrays by these names (see :mod:`sim.model.kernels.dram`).
"""
from __future__ import annotations

import numpy as np

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
