"""The engine's array layouts: what each slot of the arrays that cross the Python/kernel
boundary holds (geometry ``G_*``, operand descriptors ``D_*``, float parameters ``F_*``, the
event loop's resumable scalars ``L_*``, per-core statistics ``S_*``) and the fixed sizes of
its internal rings.  Plain integers, so Numba folds them as compile-time constants; the
lowering (:mod:`sim.model.engine.arrays`) fills the arrays by these names and the result
assembly reads the statistics by them.
"""
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
