"""The mapper: how one tiled op is laid onto a chip.

Every op the engine simulates is a :class:`TileProblem`: ``count`` instances of a
three-loop nest over (m, n, k), with operands A, B (read) and C (written, accumulated over
k when ``reduction``).  For a problem the mapper chooses, within the per-core SRAM (double
buffering included):

* how the work is split over cores: ``block`` (each core owns a contiguous sub-problem,
  split over instances, m and/or n) or ``cyclic`` (output tiles dealt in order to
  whichever core frees first, as a GPU deals thread blocks to SMs - tiles that run at the
  same time share fetches through the chip-level cache);
* the tile sizes (m, n, k) and the loop order of the three tile loops.

Candidates are ranked by an analytic estimate - compute cycles from the dataflow's
closed form for every tile shape that occurs, DRAM bytes from the loop order's reuse, and
the memory bandwidths as bounds; the event engine then simulates the chosen one.  The
search space size, the chosen mapping and its estimate are reported.

The DRAM term charges each operand's bytes at the rate the DRAM sustains for the way its
tiles are read (:func:`operand_pattern`: rows of the tile's contiguous length at the
tensor's row pitch), measured on the DRAM kernel itself
(:func:`sim.model.memory.dram.stream_efficiency`): 64-byte rows 8 KiB apart reach half
of what 128-byte rows do on a DDR3 channel pair, and the estimate has to see that to rank
a GEMV's tiles.
"""
from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from sim.errors import MappingError
from sim.ir.lowered import TileProblem
from sim.model.memory.dram import stream_efficiency

ORDERS = ("mnk", "nmk", "mkn", "nkm", "kmn", "knm")


@dataclass(frozen=True)
class Mapping:
    """The chosen mapping of one op (plain data; ``to_dict`` for JSON)."""

    distribution: str                 # block | cyclic
    cores_used: int
    partition: tuple[int, int, int]   # (instances, m, n) splits in block mode
    tile_m: int
    tile_n: int
    tile_k: int
    loop_order: str                   # outer -> inner
    sram_bytes: int                   # tile buffers needed per core, double buffering included
    sram_capacity_bytes: int
    search_space: int
    estimated_cycles: float
    estimated_dram_bytes: float
    compute: dict = field(default_factory=dict)   # array / dataflow / rate details
    stages: int = 0                   # tile buffers per operand (0: the problem's or the chip's)

    def to_dict(self) -> dict[str, Any]:
        # fields by hand: dataclasses.asdict deep-copies recursively and is slow in sweeps
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["partition"] = list(self.partition)
        d["compute"] = copy.deepcopy(self.compute)
        return d


def _ceil(a, b):
    return -(-a // b)


def tile_candidates(size: int, unit: int, limit: int = 12) -> list[int]:
    """Tile sizes worth trying along one dim: the full size, multiples of the array
    dimension doubling up, powers of two, and near-equal splits (no tiny edge tile)."""
    cands = {size}
    u = max(1, unit)
    v = u
    while v < size:
        cands.add(v)
        v *= 2
    p = 8
    while p < size:
        cands.add(p)
        p *= 2
    for parts in (2, 3, 4, 6, 8, 12, 16):
        if size > parts:
            t = _ceil(size, parts)
            cands.add(_ceil(t, u) * u if t > u else t)
    out = sorted(c for c in cands if 1 <= c <= size)
    if len(out) > limit:
        # thin evenly in log(size), not by list position: position-based thinning kept the
        # dense small powers of two and dropped every tile between 512 and size/16 for a
        # large dim (M = 1e5 lost 1024-4096, the sizes a 128-row weight-stationary array
        # streams efficiently)
        logs = np.log(np.asarray(out, dtype=np.float64))
        keep = {int(np.argmin(np.abs(logs - t))) for t in np.linspace(logs[0], logs[-1], limit)}
        out = sorted({out[i] for i in keep} | {size})
    return out


def partitions(P: int, count: int, m_units: int, n_units: int, max_options: int = 24) -> list[tuple[int, int, int]]:
    """(instance, m, n) splits using as many cores as the work allows (most cores first)."""
    # no split uses more than count x m_units x n_units cores, and for a given rest = pm x pn
    # only pm in [rest / n_units, m_units] can fit: the same splits in the same order as
    # trying every used <= P and every pm <= rest, without the O(P^2) walk (a 64^3 GEMM on
    # 16,384 cores spent 8 s here)
    for used in range(min(P, count * m_units * n_units), 0, -1):
        found = []
        for pc in range(1, min(used, count) + 1):
            if used % pc:
                continue
            rest = used // pc
            for pm in range(max(1, -(-rest // n_units)), min(rest, m_units) + 1):
                if rest % pm:
                    continue
                found.append((pc, pm, rest // pm))
        if found:
            return found[:max_options]
    return [(1, 1, 1)]


def _split(total: int, parts: int, i: int) -> tuple[int, int]:
    """Bounds of part ``i`` of ``total`` split as evenly as possible (larger parts first)."""
    base, extra = divmod(total, parts)
    lo = i * base + min(i, extra)
    return lo, lo + base + (1 if i < extra else 0)


def block_ranges(prob: TileProblem, part: tuple[int, int, int], unit_m: int = 1, unit_n: int = 1) -> np.ndarray:
    """[cores, 6] (inst0, inst1, m0, m1, n0, n1) of each core's sub-problem.  Splits of m
    and n fall on multiples of ``unit`` so no core gets a sliver of an array."""
    pc, pm, pn = part
    rows = []
    mu = _ceil(prob.m, unit_m)
    nu = _ceil(prob.n, unit_n)
    for ic in range(pc):
        i0, i1 = _split(prob.count, pc, ic)
        for im in range(pm):
            a, b = _split(mu, pm, im)
            m0, m1 = min(a * unit_m, prob.m), min(b * unit_m, prob.m)
            for jn in range(pn):
                c, d = _split(nu, pn, jn)
                n0, n1 = min(c * unit_n, prob.n), min(d * unit_n, prob.n)
                rows.append((i0, i1, m0, m1, n0, n1))
    return np.array(rows, dtype=np.int64)


def b_copies_group(prob: TileProblem) -> int:
    """Consecutive instances that read one copy of B."""
    return max(1, prob.count) if prob.b_shared else max(1, prob.b_share_group)


def footprint_bytes(prob: TileProblem, which: str, mm, nn, kk, count) -> np.ndarray:
    """Bytes of one operand over a (count, mm, nn, kk) sub-problem (or one tile)."""
    ext = {"m": np.asarray(mm, dtype=np.float64), "n": np.asarray(nn, dtype=np.float64),
           "k": np.asarray(kk, dtype=np.float64)}
    dims = getattr(prob, f"{which}_dims")
    fixed = getattr(prob, f"{which}_fixed")
    bpe = getattr(prob.layout, which)
    n_el = np.ones(np.broadcast(ext["m"], ext["n"], ext["k"]).shape)
    for d in dims:
        n_el = n_el * ext[d]
    if fixed:
        n_el = n_el * fixed
    group = b_copies_group(prob) if which == "b" else 1
    inst = count if group == 1 else np.ceil(np.asarray(count, dtype=np.float64) / group)
    return n_el * bpe * inst


def _reload_factor(order: str, dims: tuple[str, ...], trips: dict[str, np.ndarray]) -> np.ndarray:
    """Times an operand's whole footprint is fetched for a loop order: the product of the
    trip counts of loops that do not index it and sit outside its innermost indexing loop
    (a buffer holding one tile is reloaded whenever one of its indices changes)."""
    inner = max((order.index(d) for d in dims), default=-1)
    f = np.ones_like(trips["m"])
    for pos in range(inner):
        d = order[pos]
        if d not in dims:
            f = f * trips[d]
    return f


def block_traffic(prob: TileProblem, order: str, mt, nt, kt, mm, nn, kk, count):
    """DRAM (read, write) bytes of one block-mode core; exact for the engine's reuse rule
    when no chip-level cache catches a re-fetch.  Causal skipping is ignored (an upper
    bound)."""
    a, b, c_rd, c_wr = block_traffic_parts(prob, order, mt, nt, kt, mm, nn, kk, count)
    return a + b + c_rd, c_wr


def block_traffic_parts(prob: TileProblem, order: str, mt, nt, kt, mm, nn, kk, count):
    """:func:`block_traffic` by operand: (A read, B read, partial sums read back, C
    written) bytes."""
    trips = {"m": np.ceil(mm / mt), "n": np.ceil(nn / nt), "k": np.ceil(kk / kt)}
    a = footprint_bytes(prob, "a", mm, nn, kk, count) * _reload_factor(order, prob.a_dims, trips)
    b = (footprint_bytes(prob, "b", mm, nn, kk, count) * _reload_factor(order, prob.b_dims, trips)
         if prob.has_b else np.zeros_like(a))
    visits = _reload_factor(order, prob.c_dims, trips) if prob.reduction else np.ones_like(trips["m"])
    c_final = footprint_bytes(prob, "c", mm, nn, kk, count)
    c_psum = c_final / prob.layout.c * prob.layout.psum
    return a, b, (visits - 1) * c_psum, c_final + (visits - 1) * c_psum


def operand_pattern(prob: TileProblem, which: str, mt, nt, kt):
    """How the engine's DMA reads (or writes) one tile of an operand, per candidate tile:
    (segment bytes, stride bytes).  A tile is rows along the operand's first dim, each a
    contiguous run of its last dim at the tensor's row pitch (sim.model.kernels.engine,
    ``_make_transfer``); a tile spanning the whole last dim, or an operand whose rows are
    an untiled fixed extent, is one contiguous run (stride 0)."""
    dims = getattr(prob, f"{which}_dims")
    bpe = getattr(prob.layout, which)
    shape = np.broadcast(mt, nt, kt).shape
    if len(dims) < 2:
        return np.full(shape, 1, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    ext = {"m": np.asarray(mt), "n": np.asarray(nt), "k": np.asarray(kt)}[dims[-1]]
    full = {"m": prob.m, "n": prob.n, "k": prob.k}[dims[-1]]
    seg = np.broadcast_to(np.ceil(np.minimum(ext, full) * bpe), shape).astype(np.int64)
    stride = np.where(np.broadcast_to(ext, shape) >= full, 0, int(np.ceil(full * bpe)))
    return np.maximum(seg, 1), stride.astype(np.int64)


def pipeline_stages(prob: TileProblem, mt, nt, kt, default: int):
    """Tile buffers per operand for each candidate tile: the problem's fixed count, or -
    for a library that fills shared memory with as many stages as fit - the count that
    fills ``stage_fill_bytes`` (vectorised)."""
    base = prob.stages or default
    if prob.stage_fill_bytes <= 0:
        return np.full(np.shape(mt), base, dtype=np.int64)
    stage = footprint_bytes(prob, "a", mt, nt, kt, 1) + (footprint_bytes(prob, "b", mt, nt, kt, 1)
                                                           if prob.has_b else 0.0)
    fill = np.floor(prob.stage_fill_bytes / np.maximum(stage, 1.0)).astype(np.int64)
    return np.clip(fill, 2, max(2, prob.max_stages or 2))


def tile_sram_bytes(prob: TileProblem, mt, nt, kt, buffers):
    """Per-core SRAM (A, B, C) for one tile of each operand: the input tiles times the
    pipeline depth, the C accumulator (at accumulator precision) at most twice - it is
    drained once per output tile, not streamed per step."""
    a = footprint_bytes(prob, "a", mt, nt, kt, 1) * buffers
    b = footprint_bytes(prob, "b", mt, nt, kt, 1) * buffers if prob.has_b else 0.0 * a
    c = footprint_bytes(prob, "c", mt, nt, kt, 1) / prob.layout.c * max(prob.layout.psum, prob.layout.c) * np.minimum(buffers, 2)
    return a, b, c


def tiles_fit(mem: "MemoryBudget", a_b, b_b, c_b):
    """Whether tile buffers of (A, B, C) bytes fit one core's SRAM (each its partition,
    when the SRAM is partitioned)."""
    if mem.partition is None:
        return (a_b + b_b + c_b) <= mem.sram_bytes
    pi, pw, po = mem.partition
    return (a_b <= pi) & (b_b <= pw) & (c_b <= po)


def _sum_compute(prob: TileProblem, mt, nt, kt, mm, nn, kk, count):
    """Σ compute cycles over every tile of a sub-problem (full and edge tiles), with one
    ``tail_fn`` per output tile (one visit each, as with k innermost)."""
    return sum(_sum_compute_parts(prob, mt, nt, kt, mm, nn, kk, count))


def _sum_compute_parts(prob: TileProblem, mt, nt, kt, mm, nn, kk, count):
    """:func:`_sum_compute` as (steps, tails): the tails are paid once per visit of an
    output tile, so a loop order that leaves an output tile between its k-steps pays them
    once per visit (see :func:`_visits`)."""
    shape = np.broadcast(mt, nt, kt, mm, nn, kk).shape
    parts = []
    for dim_size, t in ((mm, mt), (nn, nt), (kk, kt)):
        full = np.floor(dim_size / t)
        edge = dim_size - full * t
        edge_size = t if prob.pad_edge_tiles else np.where(edge > 0, edge, t)
        parts.append(((full, t), (np.where(edge > 0, 1.0, 0.0), edge_size)))
    k_edge = parts[2][1][0]
    last_k = (1.0 - k_edge, k_edge)   # which k part holds an output tile's last step
    # the 8 (full/edge m, n, k) tile shapes in one vectorised call (stacked on axis 0)
    counts, visits = [], []
    sms, sns, sks = (np.empty((8,) + shape, dtype=np.int64) for _ in range(3))
    i = 0
    for (cm, sm) in parts[0]:
        for (cn, sn) in parts[1]:
            for j, (ck, sk) in enumerate(parts[2]):
                counts.append(cm * cn * ck)
                visits.append(cm * cn * last_k[j])
                sms[i], sns[i], sks[i] = sm, sn, sk
                i += 1
    cyc = prob.cycles_fn(sms, sns, sks)
    tail = prob.tail_fn(sms, sns, sks) if prob.tail_fn is not None else None
    total = np.zeros(shape)
    tails = np.zeros(shape)
    for i in range(8):
        total = total + counts[i] * cyc[i]
        if tail is not None:
            tails = tails + visits[i] * tail[i]
    if prob.causal and prob.k > 1:
        # fraction of (m, k) tile pairs a causal mask keeps, estimated for ranking
        keep = np.clip((prob.causal_past + 0.5 * prob.m / max(1, prob.causal_group)) / prob.k, 0.0, 1.0)
        total = total * keep
        tails = tails * keep
    return total * count, tails * count


def _visits(prob: TileProblem, order: str, mt, nt, kt, mm, nn, kk):
    """Visits of each output tile under a loop order: 1 when its k-steps run back to
    back (k inside every loop over C's dims), else the trips of the loops between."""
    if not prob.reduction:
        return np.ones(np.broadcast(mt, nt, kt).shape)
    trips = {"m": np.ceil(mm / mt), "n": np.ceil(nn / nt), "k": np.ceil(kk / kt)}
    return _reload_factor(order, prob.c_dims, trips)


@dataclass(frozen=True)
class MemoryBudget:
    sram_bytes: float           # per core tile buffer
    partition: tuple[float, float, float] | None   # (input, weight, output) bytes, or None (unified)
    buffers: int                # 2 when double buffered
    dram_bytes_per_cycle: float  # peak, whole chip
    port_bytes_per_cycle: float  # per core fill port
    noc_bytes_per_cycle: float
    l2_bytes: float             # chip-level cache (0 = none)
    ideal: bool
    latency_cycles: float = 0.0  # DRAM round trip of one request, for the pipelining term
    l2_bytes_per_cycle: float = 1e30  # chip-level cache bandwidth
    dram: Any = None            # the DRAM model's parameters (DramParams); None: every pattern at peak

    def window_chunks(self, prob: TileProblem, cores: int) -> int | None:
        """DRAM chunks the cores keep in flight, counted as the engine counts them: each
        core's requests (the kernel's own limit or the DRAM level's, shared by the blocks
        on a core) in interleave-block chunks (sim.model.kernels.engine.run_tiled), so
        tile rows shorter than a block hold fewer bytes in flight."""
        if self.dram is None:
            return None
        d = self.dram
        per_core = max(1, (prob.max_outstanding or d.max_outstanding_requests_per_core) // max(1, prob.blocks_per_core))
        return max(1, cores) * max(1, per_core * d.access_bytes // max(d.interleave_bytes, d.access_bytes))

    def dram_efficiency(self, prob: TileProblem, which: str, mt, nt, kt, in_flight: int | None = None) -> np.ndarray:
        """Fraction of the DRAM peak operand ``which`` is read at with each candidate
        tile (:func:`operand_pattern` through :func:`sim.model.memory.dram.stream_efficiency`)
        with ``in_flight`` chunks in flight (None: plenty)."""
        seg, stride = operand_pattern(prob, which, mt, nt, kt)
        if self.dram is None:
            return np.ones(seg.shape)
        pairs, inv = np.unique(np.stack([seg.ravel(), stride.ravel()]), axis=1, return_inverse=True)
        vals = np.array([stream_efficiency(self.dram, int(a), int(b), in_flight) for a, b in pairs.T])
        return vals[np.asarray(inv).ravel()].reshape(seg.shape)

    def shared_by(self, blocks: int) -> "MemoryBudget":
        """One block's share when ``blocks`` run on a core at once: its SRAM (each
        partition) and fill port divided among them."""
        if blocks <= 1:
            return self
        part = None if self.partition is None else tuple(x / blocks for x in self.partition)
        return dataclasses.replace(self, sram_bytes=self.sram_bytes / blocks, partition=part,
                                   port_bytes_per_cycle=self.port_bytes_per_cycle / blocks)


def search(prob: TileProblem, cores: int, mem: MemoryBudget, allow_cyclic: bool = True) -> Mapping:
    """Choose distribution, tiles and loop order for ``prob``; raise MappingError if no
    tile fits the SRAM."""
    return search_top(prob, cores, mem, 1, allow_cyclic)[0]


def search_top(prob: TileProblem, cores: int, mem: MemoryBudget, top: int = 1,
               allow_cyclic: bool = True) -> list[Mapping]:
    """The ``top`` best mappings by the analytic estimate (distinct tile shapes and
    distributions), best first."""
    if mem.ideal:
        return [_ideal_mapping(prob, cores, mem)]
    best = None
    pool: list = []
    evaluated = 0
    m_c = _menu(prob.m, prob.tile_menu_m) if prob.tile_menu_m else tile_candidates(prob.m, prob.unit_m)
    n_c = _menu(prob.n, prob.tile_menu_n) if prob.tile_menu_n else tile_candidates(prob.n, prob.unit_n)
    if prob.fixed_k:
        k_c = [min(prob.k, prob.fixed_k)]
    elif prob.tile_menu_k:
        k_c = _menu(prob.k, prob.tile_menu_k)
    else:
        k_c = tile_candidates(prob.k, prob.unit_k)
    if prob.fixed_tiles is not None:
        m_c, n_c, k_c = [prob.fixed_tiles[0]], [prob.fixed_tiles[1]], [prob.fixed_tiles[2]]
    if prob.tile_kernels and prob.fixed_tiles is None:
        # a fixed kernel list: its tiles (a dim shorter than a tile runs padded) and stages
        kern = [(a, b, st, kk) if prob.pad_edge_tiles else (min(prob.m, a), min(prob.n, b), st, kk)
                for a, b, st, kk in prob.tile_kernels]
        kern = [(a, b, kk, st) for a, b, st, k_own in dict.fromkeys(kern)
                for kk in ([min(prob.k, k_own)] if k_own else k_c)]
        MT, NT, KT, buffers = (np.array(col, dtype=np.int64) for col in zip(*kern))
    else:
        MT, NT, KT = np.meshgrid(np.array(m_c), np.array(n_c), np.array(k_c), indexing="ij")
        MT, NT, KT = MT.ravel(), NT.ravel(), KT.ravel()
        if prob.fixed_tiles is None and (prob.tile_side_multiple or prob.tile_max_elements):
            MT, NT, KT = _library_shapes(prob, MT, NT, KT)
        buffers = pipeline_stages(prob, MT, NT, KT, mem.buffers)
    a_b, b_b, c_b = tile_sram_bytes(prob, MT, NT, KT, buffers)
    fits = tiles_fit(mem, a_b, b_b, c_b)
    if not fits.any():
        smallest = float((a_b + b_b + c_b).min())
        raise MappingError(
            f"op '{prob.name}': no tile fits the per-core SRAM ({mem.sram_bytes / 1024:.1f} KiB"
            + (", partitioned" if mem.partition else "") + f"); the smallest candidate needs "
            f"{smallest / 1024:.1f} KiB")
    MT, NT, KT, buffers = MT[fits], NT[fits], KT[fits], buffers[fits]
    sram = (a_b + b_b + c_b)[fits]
    orders = [prob.fixed_order] if prob.fixed_order else list(ORDERS)
    peak = mem.dram_bytes_per_cycle
    # the DRAM rate each operand's tiles are read at (a tile's rows: its contiguous length
    # at the tensor's row pitch, with the chunks the cores keep in flight); partial sums
    # and results go out at the C tile's
    window = mem.window_chunks(prob, cores)
    eff_a = mem.dram_efficiency(prob, "a", MT, NT, KT, window)
    eff_b = mem.dram_efficiency(prob, "b", MT, NT, KT, window) if prob.has_b else np.ones(len(MT))
    eff_c = mem.dram_efficiency(prob, "c", MT, NT, KT, window)

    if prob.distribution == "cyclic":
        allow_cyclic = True

    # ---- block distributions
    parts = [] if prob.distribution == "cyclic" else partitions(cores, prob.count, _ceil(prob.m, prob.unit_m), _ceil(prob.n, prob.unit_n))
    for part in parts:
        ranges = block_ranges(prob, part, prob.unit_m, prob.unit_n)
        # the busiest core bounds the time; all cores' traffic shares the DRAM
        sizes = np.unique(np.stack([ranges[:, 1] - ranges[:, 0], ranges[:, 3] - ranges[:, 2],
                                    ranges[:, 5] - ranges[:, 4]], axis=1), axis=0)
        mult = {tuple(s): int(np.sum(np.all(np.stack([ranges[:, 1] - ranges[:, 0], ranges[:, 3] - ranges[:, 2],
                                                        ranges[:, 5] - ranges[:, 4]], axis=1) == s, axis=1)))
                for s in sizes}
        comp_parts = [(mm, nn, _sum_compute_parts(prob, MT, NT, KT, mm, nn, prob.k, cnt))
                      for (cnt, mm, nn) in mult if cnt > 0 and mm > 0 and nn > 0]
        for order in orders:
            # the busiest core bounds compute; an output tile left between its k-steps pays
            # its array's fill/drain (tail) at every visit
            comp_max = np.zeros(len(MT))
            for mm, nn, (steps_c, tails_c) in comp_parts:
                comp_max = np.maximum(comp_max, steps_c + tails_c * _visits(prob, order, MT, NT, KT, mm, nn, prob.k))
            rd = np.zeros(len(MT))
            wr = np.zeros(len(MT))
            dram_time = np.zeros(len(MT))
            classes = []
            for (cnt, mm, nn), times in mult.items():
                if cnt <= 0 or mm <= 0 or nn <= 0:
                    continue
                a, b, c_rd, c_wr = block_traffic_parts(prob, order, MT, NT, KT, mm, nn, prob.k, cnt)
                rd = rd + (a + b + c_rd) * times
                wr = wr + c_wr * times
                dram_time = dram_time + (a / eff_a + b / eff_b + (c_rd + c_wr) / eff_c) * times / peak
                classes.append((cnt, mm, nn, a + b + c_rd + c_wr))
            # all cores' traffic shares the DRAM at the rate its patterns sustain
            dram_bw = (rd + wr) / np.maximum(dram_time, 1e-30)
            core_bw = np.minimum(mem.port_bytes_per_cycle, dram_bw / len(ranges))
            per_core_max = np.zeros(len(MT))
            for cnt, mm, nn, moved in classes:
                steps = cnt * np.ceil(mm / MT) * np.ceil(nn / NT) * np.ceil(prob.k / KT)
                # double buffering keeps at most `buffers` steps' loads in flight, so each
                # step costs at least (latency + its bytes / bandwidth) / buffers
                step_bytes = moved / steps
                per_step = np.maximum(step_bytes / core_bw, (mem.latency_cycles + step_bytes / core_bw) / buffers)
                per_core_max = np.maximum(per_core_max, steps * per_step)
            mem_time = np.maximum(dram_time, per_core_max)
            mem_time = np.maximum(mem_time, (rd + wr) / mem.noc_bytes_per_cycle)
            # prologue and epilogue: the first tiles arrive before compute starts, the
            # last output tile leaves after it ends
            first = (footprint_bytes(prob, "a", MT, NT, KT, 1)
                     + (footprint_bytes(prob, "b", MT, NT, KT, 1) if prob.has_b else 0.0)) / core_bw
            last = footprint_bytes(prob, "c", MT, NT, KT, 1) / core_bw
            est = np.maximum(comp_max, mem_time) + first + last + mem.latency_cycles
            evaluated += len(MT)
            for i in _pick_many(est, rd + wr, MT, NT, KT, top):
                cand = (float(est[i]), float(rd[i] + wr[i]), -float(MT[i] * NT[i] * KT[i]))
                entry = (cand, "block", part, int(MT[i]), int(NT[i]), int(KT[i]), order, int(sram[i]), len(ranges),
                         int(buffers[i]))
                pool.append(entry)
                if best is None or cand < best[0]:
                    best = entry

    # ---- cyclic distribution (k innermost, output tiles dealt in order as cores free up)
    if allow_cyclic and prob.distribution != "block" and (cores > 1 or best is None):
        tm_ = np.ceil(prob.m / MT)
        tn_ = np.ceil(prob.n / NT)
        tiles_out = prob.count * tm_ * tn_
        used = np.minimum(tiles_out, cores)
        waves = np.ceil(tiles_out / cores)
        per_tile = _sum_compute(prob, MT, NT, KT, MT, NT, prob.k, 1)
        comp = waves * per_tile
        # every output tile streams its A row panel and B column panel through the core's
        # fill port, from the chip-level cache when a wave's panels fit there
        a_panel = footprint_bytes(prob, "a", MT, NT, prob.k, 1)
        b_panel = footprint_bytes(prob, "b", MT, NT, prob.k, 1) if prob.has_b else 0.0 * a_panel
        c_tile = footprint_bytes(prob, "c", MT, NT, prob.k, 1)
        per_core = waves * (a_panel + b_panel + c_tile)
        port_time = per_core / mem.port_bytes_per_cycle
        fetched = tiles_out * (a_panel + b_panel)
        if prob.cluster > 1:
            # cluster partners share one operand's panel (multicast)
            fetched = tiles_out * (a_panel + b_panel - np.minimum(a_panel, b_panel) * (1 - 1 / prob.cluster))
        a_all = footprint_bytes(prob, "a", prob.m, prob.n, prob.k, prob.count)
        b_all = footprint_bytes(prob, "b", prob.m, prob.n, prob.k, prob.count) if prob.has_b else 0.0
        c_all = footprint_bytes(prob, "c", prob.m, prob.n, prob.k, prob.count)
        if mem.l2_bytes > 0:
            # a wave is a block of about g rows x used/g columns of tiles (grouped
            # rasterisation, g ~ sqrt(cores)): its distinct panels
            g = max(1, int(round(np.sqrt(cores))))
            rows_in_wave = np.minimum(tm_, g)
            cols_in_wave = np.minimum(tn_, np.ceil(used / rows_in_wave))
            wave_ws = rows_in_wave * a_panel + cols_in_wave * b_panel
            reuse = np.clip(mem.l2_bytes / np.maximum(wave_ws, 1.0), 0.0, 1.0)
            dram_rd = (a_all + b_all) + (fetched - a_all - b_all).clip(min=0) * (1 - reuse)
            l2_time = fetched / mem.l2_bytes_per_cycle
        else:
            dram_rd = fetched
            l2_time = 0.0 * fetched
        traffic = dram_rd + c_all
        # DRAM time at the rate each operand's pattern sustains (A and B in the shares
        # their panels are fetched in)
        share_a = tiles_out * a_panel / np.maximum(tiles_out * (a_panel + b_panel), 1e-30)
        dram_time = (dram_rd * (share_a / eff_a + (1 - share_a) / eff_b) + c_all / eff_c) / peak
        # Little's law per core: at most `buffers` steps' loads are in flight, so a step
        # takes at least (round trip + its bytes through the port) / buffers
        step_bytes = footprint_bytes(prob, "a", MT, NT, KT, 1) + (footprint_bytes(prob, "b", MT, NT, KT, 1)
                                                                  if prob.has_b else 0.0)
        latency_time = waves * np.ceil(prob.k / KT) * (mem.latency_cycles + step_bytes / mem.port_bytes_per_cycle) / buffers
        mem_time = np.maximum.reduce([dram_time, port_time, l2_time, traffic / mem.noc_bytes_per_cycle,
                                      latency_time])
        first = (footprint_bytes(prob, "a", MT, NT, KT, 1) + (footprint_bytes(prob, "b", MT, NT, KT, 1)
                                                              if prob.has_b else 0.0)) / mem.port_bytes_per_cycle
        est = np.maximum(comp, mem_time) + first + mem.latency_cycles
        evaluated += len(MT)
        for i in _pick_many(est, traffic, MT, NT, KT, top):
            cand = (float(est[i]), float(traffic[i]), -float(MT[i] * NT[i] * KT[i]))
            entry = (cand, "cyclic", (1, 1, 1), int(MT[i]), int(NT[i]), int(KT[i]), "mnk", int(sram[i]),
                     int(used[i]), int(buffers[i]))
            pool.append(entry)
            if best is None or cand < best[0]:
                best = entry

    pool.sort(key=lambda e: e[0])
    # the same rule across distributions, partitions and loop orders as within each: of
    # the candidates the estimate cannot tell apart (within _RANK_TIE of the best), the
    # one moving the fewest DRAM bytes, then the largest tile
    if pool:
        est_all = np.array([e[0][0] for e in pool])
        best = pool[_pick(est_all, np.array([e[0][1] for e in pool]), -np.array([e[0][2] for e in pool]))]
    out: list[Mapping] = []
    seen = set()
    for (est_c, est_bytes, _), dist, part, mt, nt, kt, order, sram_b, used, stages in [best] + pool:
        key = (dist, tuple(part), mt, nt, kt, order)
        if key in seen:
            continue
        seen.add(key)
        out.append(Mapping(distribution=dist, cores_used=used, partition=tuple(part), tile_m=mt, tile_n=nt,
                           tile_k=kt, loop_order=order, sram_bytes=sram_b, sram_capacity_bytes=int(mem.sram_bytes),
                           search_space=evaluated, estimated_cycles=est_c, estimated_dram_bytes=est_bytes,
                           stages=stages))
        if len(out) >= top:
            break
    return out


#: candidates whose estimate is within this factor of the best count as equally fast, and
#: the one moving the fewest DRAM bytes wins (the estimate is a bound, traffic is exact);
#: on chips without a kernel library the engine simulates the distinct tiles in this band
#: and keeps the fastest (sim.model.engine.run; tests/test_mapper_pick.py)
RANK_TIE = 1.03
_RANK_TIE = RANK_TIE


def _pick_many(est, traffic, MT, NT, KT, top: int) -> list[int]:
    """The best candidate (see :func:`_pick`) and, when ``top`` > 1, the next best by
    estimate with distinct tiles (tiles of one volume but another shape are distinct:
    they read their operands in other patterns)."""
    first = _pick(est, traffic, MT * NT * KT)
    if top <= 1:
        return [first]
    order = np.argsort(est, kind="stable")
    out = [first]
    seen = {(int(MT[first]), int(NT[first]), int(KT[first]))}
    for i in order:
        if len(out) >= top:
            break
        key = (int(MT[i]), int(NT[i]), int(KT[i]))
        if key not in seen:
            out.append(int(i))
            seen.add(key)
    return out


def _library_shapes(prob: TileProblem, MT, NT, KT):
    """The candidate tiles a library offers (see TileProblem.tile_side_multiple): a tile
    smaller than the menu's step is padded to it, as the hardware pads it."""
    pm, pn = -(-MT // 8) * 8, -(-NT // 8) * 8
    keep = np.ones(len(MT), dtype=bool)
    if prob.tile_side_multiple:
        q = prob.tile_side_multiple
        keep &= (pm % q == 0) | (pn % q == 0)
        # both dims shorter than q: the one whole-problem tile runs, padded to q on one side
        keep |= (pm < q) & (pn < q) & (MT == MT.max()) & (NT == NT.max())
    if prob.tile_max_elements:
        keep &= pm * pn <= prob.tile_max_elements
    if not keep.any():
        return MT, NT, KT
    return MT[keep], NT[keep], KT[keep]


def _menu(size: int, menu: tuple[int, ...]) -> list[int]:
    """Tile sizes from a library's menu; sizes above the dim collapse to the dim (one
    tile, padded by the array's folds as the hardware pads it)."""
    return sorted({min(size, t) for t in menu})


def _pick(est, traffic, volume) -> int:
    """Index of the best candidate: about the least time, then least traffic, then the
    largest tile."""
    near = est <= est.min() * _RANK_TIE
    idx = np.flatnonzero(near)
    order = np.lexsort((est[idx], -volume[idx], traffic[idx]))
    return int(idx[order[0]])


def _ideal_mapping(prob: TileProblem, cores: int, mem: MemoryBudget) -> Mapping:
    """Ideal memory: no SRAM limit, so each core computes its whole share as one tile and
    the stall-free compute time is that of the untiled problem (SCALE-Sim's number on a
    single-core chip)."""
    best = None
    parts = partitions(cores, prob.count, _ceil(prob.m, prob.unit_m), _ceil(prob.n, prob.unit_n))
    for part in parts:
        ranges = block_ranges(prob, part, prob.unit_m, prob.unit_n)
        worst = 0.0
        for r in ranges:
            cnt, mm, nn = r[1] - r[0], r[3] - r[2], r[5] - r[4]
            if cnt <= 0 or mm <= 0 or nn <= 0:
                continue
            c = float(_sum_compute(prob, np.array([mm]), np.array([nn]), np.array([prob.k]), mm, nn, prob.k, cnt)[0])
            worst = max(worst, c)
        if best is None or worst < best[0]:
            best = (worst, part, len(ranges))
    worst, part, used = best
    ranges = block_ranges(prob, part, prob.unit_m, prob.unit_n)
    mt = int(max(r[3] - r[2] for r in ranges))
    nt = int(max(r[5] - r[4] for r in ranges))
    return Mapping(distribution="block", cores_used=used, partition=tuple(part), tile_m=max(1, mt),
                   tile_n=max(1, nt), tile_k=prob.k, loop_order="mnk", sram_bytes=0,
                   sram_capacity_bytes=int(mem.sram_bytes), search_space=len(parts),
                   estimated_cycles=worst, estimated_dram_bytes=0.0)
