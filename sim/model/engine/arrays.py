"""A tile problem plus its mapping → the arrays the Numba engine
(:func:`sim.model.kernels.engine.run_tiled`) reads, as a
:class:`~sim.model.kernels.io.KernelInputs`: geometry, operand descriptors, per-core ranges,
the compute table and the float parameters."""
from __future__ import annotations

import math

import numpy as np

import sim.model.kernels.engine as K
from sim.ir.lowered import TileProblem
from sim.model.engine.lower import raster_group
from sim.model.kernels.io import KernelInputs
from sim.model.mapper.search import b_copies_group, block_ranges
from sim.model.mapper.tiling import stage_requests, step_bytes
from sim.spec.chip import ChipSpec

#: chip-level cache geometry in the engine: each set holds this many of the largest tiles
#: (bytes are counted, so smaller tiles share a set's room), with at most this many ways
L2_TILES_PER_SET = 4
L2_MAX_WAYS = 256
#: event-ordering quantum, see kernel_arrays
REORDER_QUANTUM_CYCLES = 32.0

_DIM_CODE = {"m": 0, "n": 1, "k": 2}
_ALIGN = 1 << 21


def _align(x: float) -> float:
    return float(math.ceil(x / _ALIGN) * _ALIGN)


def operand_bases(prob: TileProblem) -> tuple[float, float, float, float]:
    """Byte addresses of A, B, C and the partial-sum scratch: disjoint, aligned regions
    of one flat address space, in that order."""
    a_total = prob.count * prob.m * max(1, prob.k if "k" in prob.a_dims else 1) * max(1, prob.a_fixed) * prob.layout.a
    b_total = -(-prob.count // b_copies_group(prob)) * max(1, prob.n if "n" in prob.b_dims else 1) * prob.k * max(
        1, prob.b_fixed) * max(prob.layout.b, 1e-9)
    c_total = prob.count * prob.m * prob.n * max(1, prob.c_fixed) * prob.layout.c
    base_b = _align(a_total)
    base_c = base_b + _align(b_total)
    return 0.0, base_b, base_c, base_c + _align(c_total)


def kernel_arrays(chip: ChipSpec, prob: TileProblem, mapping, ideal: bool, bases=None) -> KernelInputs:
    """Everything :func:`sim.model.kernels.engine.run_tiled` reads besides the DRAM model,
    as NumPy arrays in a :class:`~sim.model.kernels.io.KernelInputs` (its ``P``: the cores
    the run uses, ``geo[G_P]``).

    ``bases`` fixes the operand addresses (a shortened copy of a problem keeps the full
    problem's layout, so DRAM bank and row behaviour is the same)."""
    cyclic = mapping.distribution == "cyclic"
    if cyclic:
        P = mapping.cores_used
        ranges = np.zeros((P, 6), dtype=np.int64)
    else:
        ranges = block_ranges(prob, mapping.partition, prob.unit_m, prob.unit_n)
        P = len(ranges)
    geo = np.zeros(K.G_LEN, dtype=np.int64)
    geo[K.G_MODE] = 1 if cyclic else 0
    geo[K.G_P] = P
    geo[K.G_COUNT] = prob.count
    geo[K.G_M], geo[K.G_N], geo[K.G_K] = prob.m, prob.n, prob.k
    geo[K.G_MT], geo[K.G_NT], geo[K.G_KT] = mapping.tile_m, mapping.tile_n, mapping.tile_k
    for i, ch in enumerate(mapping.loop_order):
        geo[K.G_ORDER0 + i] = _DIM_CODE[ch]
    geo[K.G_CAUSAL] = 1 if prob.causal else 0
    geo[K.G_CAUSAL_PAST] = prob.causal_past
    geo[K.G_CAUSAL_GROUP] = max(1, prob.causal_group)
    geo[K.G_IDEAL] = 1 if ideal else 0
    geo[K.G_GROUP_M] = raster_group(mapping.cores_used) if cyclic else 0
    geo[K.G_CLUSTER] = max(1, prob.cluster)
    dram = chip.memory.dram
    outstanding = prob.max_outstanding or dram.max_outstanding_requests_per_core
    if prob.inflight_from_stages:
        # a multistage cp.async pipeline: (stages - 1) k-steps of A and B tiles in flight
        stages = mapping.stages or prob.stages or chip.memory.core_srams[-1].buffers
        outstanding = int(stage_requests(stages, step_bytes(prob, mapping.tile_m, mapping.tile_n, mapping.tile_k),
                                         dram.access_bytes))
    geo[K.G_OUTSTANDING] = max(1, outstanding // max(1, prob.blocks_per_core))
    geo[K.G_GRAN] = dram.access_bytes
    geo[K.G_INTERLEAVE] = dram.interleave_bytes
    geo[K.G_STAGES] = mapping.stages or prob.stages or chip.memory.core_srams[-1].buffers
    l2_levels = chip.memory.chip_srams
    l2_bytes = sum(s.capacity_bytes for s in l2_levels)
    desc = np.zeros((3, K.D_LEN), dtype=np.int64)
    max_tile = 1.0
    min_tile = float("inf")
    for row, which in enumerate(("a", "b", "c")):
        dims = getattr(prob, f"{which}_dims")
        fixed = getattr(prob, f"{which}_fixed")
        present = bool(dims) and (which != "b" or prob.has_b)
        desc[row, K.D_PRESENT] = 1 if present else 0
        if not present:
            continue
        desc[row, K.D_DIM1] = _DIM_CODE[dims[0]]
        if len(dims) > 1:
            desc[row, K.D_DIM2] = _DIM_CODE[dims[1]]
        else:
            desc[row, K.D_DIM2] = 3
            desc[row, K.D_EXTENT2] = max(1, fixed)
        desc[row, K.D_SHARED] = b_copies_group(prob) if which == "b" else 1
        desc[row, K.D_CACHEABLE] = 1 if which != "c" else 0
        desc[row, K.D_RESIDENT] = 1 if which in prob.resident else 0
        ext = {"m": mapping.tile_m, "n": mapping.tile_n, "k": mapping.tile_k}
        n_el = max(1, fixed) if len(dims) == 1 else 1
        for dd in dims:
            n_el *= ext[dd]
        max_tile = max(max_tile, n_el * getattr(prob.layout, which))
        min_tile = min(min_tile, n_el * getattr(prob.layout, which))
    cacheable = any(desc[r, K.D_PRESENT] and not desc[r, K.D_RESIDENT] for r in (0, 1))
    l2_set_bytes = 0.0
    if l2_bytes > 0 and not ideal and cacheable:
        # The cache holds whole tiles and counts bytes: a set holds any mix of tile sizes
        # up to its share of the capacity (LRU within the set).  Sets hold at least
        # L2_TILES_PER_SET of the largest tiles (so the set index spreads tiles like a real
        # cache's address bits do); ways are enough for the smallest tiles (4 KiB floor).
        sets = max(1, int(l2_bytes // (L2_TILES_PER_SET * max(max_tile, 4096.0))))
        l2_set_bytes = l2_bytes / sets
        ways = int(min(L2_MAX_WAYS, max(16, math.ceil(l2_set_bytes / max(min(min_tile, max_tile), 4096.0)))))
        sets = min(sets, max(1, (1 << 20) // ways))
        l2_set_bytes = l2_bytes / sets
        geo[K.G_L2_SETS] = sets
        geo[K.G_L2_WAYS] = ways
    fp = np.zeros(K.F_LEN, dtype=np.float64)
    # a convolution's A tiles move the ifmap pixels under their windows (TileProblem.conv)
    fp[K.F_BPE_A] = prob.layout.a * float(prob.a_dram_fraction(mapping.tile_m, mapping.tile_k))
    fp[K.F_BPE_B], fp[K.F_BPE_C] = max(prob.layout.b, 1e-9), prob.layout.c
    fp[K.F_BPE_PSUM] = prob.layout.psum
    fp[K.F_CYCLE_NS] = 1e9 / chip.clock_hz
    fp[K.F_L2_SET_BYTES] = l2_set_bytes
    fp[K.F_NOC_BYTES_PER_CYCLE] = chip.noc.bandwidth_bytes_per_cycle
    buf = chip.memory.core_srams[-1]
    port = min(buf.bytes_per_cycle, prob.port_bytes_per_cycle or buf.bytes_per_cycle)
    fp[K.F_PORT_BYTES_PER_CYCLE] = port / max(1, prob.blocks_per_core)
    # the tile buffer's access latency, where a pipelined schedule cannot hide it: the
    # array's first read of a tile that just landed (kernels/engine.py); ideal memory has
    # none, as SCALE-Sim's stall-free numbers have none
    fp[K.F_SRAM_LATENCY_CYCLES] = 0.0 if ideal else float(buf.latency_cycles)
    if l2_levels:
        fp[K.F_L2_BYTES_PER_CYCLE] = chip.memory.chip_sram_bytes_per_core_cycle(chip.clock_mhz)
        fp[K.F_L2_LATENCY_CYCLES] = max(s.latency_cycles for s in l2_levels)
    else:
        fp[K.F_L2_BYTES_PER_CYCLE] = 1.0
    fp[K.F_BASE_A], fp[K.F_BASE_B], fp[K.F_BASE_C], fp[K.F_BASE_PSUM] = bases or operand_bases(prob)
    fp[K.F_NOC_LATENCY_CYCLES] = chip.noc.latency_cycles
    fp[K.F_DMA_ISSUE_CYCLES] = 0.0  # issue rate is bounded by the port bandwidth
    # cores are interleaved in global time order to within this many cycles (requests
    # from different cores less than a quantum apart may reach the DRAM out of order)
    fp[K.F_QUANTUM_CYCLES] = REORDER_QUANTUM_CYCLES
    # cluster partners work in lockstep: requests for one tile within the L2's own
    # latency of each other are served by one multicast pull
    fp[K.F_MULTICAST_WINDOW] = 4.0 * max(fp[K.F_L2_LATENCY_CYCLES], 64.0)
    ctab = compute_table(prob, mapping, ranges if not cyclic else None)
    return KernelInputs(geo=geo, desc=desc, ranges=ranges, ctab=ctab, fp=fp)


def compute_table(prob: TileProblem, mapping, ranges) -> np.ndarray:
    """[cores or 1, 16] compute cycles of one step for every (m, k, n) full/edge combination
    (columns 0-7, entry em * 4 + ek * 2 + en), then the tail each pays when it is the last
    step of an output-tile visit (columns 8-15; 0 without ``prob.tail_fn``)."""
    def row(mm, nn, kk):
        # the 8 (full/edge m, k, n) tile shapes, evaluated in one vectorised call
        sms, sns, sks = [], [], []
        pad = prob.pad_edge_tiles   # edge tiles computed at the full tile's shape
        for em in (0, 1):
            for ek in (0, 1):
                for en in (0, 1):
                    sms.append(mapping.tile_m if em == 0 or pad else (mm % mapping.tile_m or mapping.tile_m))
                    sns.append(mapping.tile_n if en == 0 or pad else (nn % mapping.tile_n or mapping.tile_n))
                    sks.append(mapping.tile_k if ek == 0 or pad else (kk % mapping.tile_k or mapping.tile_k))
        shapes = (np.array(sms), np.array(sns), np.array(sks))
        step = np.asarray(prob.cycles_fn(*shapes), dtype=np.float64)
        tail = np.asarray(prob.tail_fn(*shapes), dtype=np.float64) if prob.tail_fn is not None else np.zeros(8)
        return np.concatenate([step, tail])

    if ranges is None:
        return row(prob.m, prob.n, prob.k)[None, :]
    tab = np.zeros((len(ranges), 16))
    cache: dict = {}
    for i, r in enumerate(ranges):
        key = ((r[3] - r[2]) % mapping.tile_m, (r[5] - r[4]) % mapping.tile_n)
        if key not in cache:
            cache[key] = row(r[3] - r[2], r[5] - r[4], prob.k)
        tab[i] = cache[key]
    return tab
