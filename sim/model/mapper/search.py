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

This module keeps the search and its ranking rules (:func:`search`, :func:`search_top`,
:data:`RANK_TIE`, the chosen :class:`Mapping`); the tile geometry and byte counts live in
:mod:`~sim.model.mapper.tiling` and the estimate's terms (compute sums, :class:`MemoryBudget`)
in :mod:`~sim.model.mapper.estimate`.  Every name is re-exported here.
"""
from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any, NamedTuple

import numpy as np

from sim.errors import MappingError
from sim.ir.lowered import TileProblem
from sim.model.mapper.estimate import MemoryBudget, _sum_compute, _sum_compute_parts, _visits
from sim.model.mapper.tiling import (_ceil, _reload_factor, _reload_loops, _split, b_copies_group, block_ranges, block_traffic,
                                     block_traffic_parts, footprint_bytes, operand_pattern, partitions,
                                     partitions_with_fewer_cores,
                                     pipeline_stages, tile_candidates, tile_sram_bytes, tiles_fit)
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


def search(prob: TileProblem, cores: int, mem: MemoryBudget, allow_cyclic: bool = True) -> Mapping:
    """Choose distribution, tiles and loop order for ``prob``; raise MappingError if no
    tile fits the SRAM."""
    return search_top(prob, cores, mem, 1, allow_cyclic)[0]


#: one ranked candidate: ((estimated cycles, DRAM bytes, -tile volume), distribution,
#: partition, tile_m, tile_n, tile_k, loop order, SRAM bytes per core, cores used, stages)
_Entry = tuple[tuple[float, float, float], str, tuple[int, int, int], int, int, int, str, int, int, int]


class _Candidates(NamedTuple):
    """The tile candidates that fit the per-core SRAM, as parallel arrays (one element per
    candidate), with the share of the DRAM's peak each operand's tiles are read at."""

    MT: np.ndarray
    NT: np.ndarray
    KT: np.ndarray
    buffers: np.ndarray       # tile buffers per operand (pipeline stages)
    sram: np.ndarray          # SRAM bytes per core, all buffers included
    eff_a: np.ndarray
    eff_b: np.ndarray
    eff_c: np.ndarray
    # bytes of one tile of each operand (B: None when the problem has none) and of one
    # pipeline step's loads (an A and a B tile), computed once for every split and order
    tile_a_bytes: np.ndarray
    tile_b_bytes: np.ndarray | None
    tile_c_bytes: np.ndarray
    step_bytes: np.ndarray
    tiles: list[tuple[int, int, int]]   # each candidate's (m, n, k), to tell distinct tiles
    volume: np.ndarray        # elements of each candidate tile


def search_top(prob: TileProblem, cores: int, mem: MemoryBudget, top: int = 1,
               allow_cyclic: bool = True) -> list[Mapping]:
    """The ``top`` best mappings by the analytic estimate (distinct tile shapes and
    distributions), best first."""
    if mem.ideal:
        return [_ideal_mapping(prob, cores, mem)]
    cand = _candidates(prob, cores, mem)
    if prob.distribution == "cyclic":
        allow_cyclic = True
    pool, evaluated = _block_entries(prob, cores, mem, cand, top)
    # the cyclic distribution is tried where it may win: over several cores, or where no
    # block split exists
    if allow_cyclic and prob.distribution != "block" and (cores > 1 or not pool):
        cyclic, n = _cyclic_entries(prob, cores, mem, cand, top)
        pool += cyclic
        evaluated += n
    return _ranked(pool, mem, evaluated, top)


def _tile_grid(prob: TileProblem, mem: MemoryBudget) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every candidate tile (m, n, k) and its stages, before the SRAM check: a library's
    kernel list or menus where the problem has them, else every tile the units allow."""
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
        return MT, NT, KT, buffers
    MT, NT, KT = np.meshgrid(np.array(m_c), np.array(n_c), np.array(k_c), indexing="ij")
    MT, NT, KT = MT.ravel(), NT.ravel(), KT.ravel()
    if prob.fixed_tiles is None and (prob.tile_side_multiple or prob.tile_max_elements):
        MT, NT, KT = _library_shapes(prob, MT, NT, KT)
    return MT, NT, KT, pipeline_stages(prob, MT, NT, KT, mem.buffers)


def _kib(n_bytes: float) -> str:
    """``n_bytes`` in KiB to one decimal, in bytes below 0.1 KiB (where 0.0 KiB would hide it)."""
    return f"{n_bytes / 1024:.1f} KiB" if n_bytes >= 102.4 else f"{n_bytes:.4g} B"


def _candidates(prob: TileProblem, cores: int, mem: MemoryBudget) -> _Candidates:
    """The candidate tiles that fit the SRAM; raise MappingError when none does."""
    MT, NT, KT, buffers = _tile_grid(prob, mem)
    a_b, b_b, c_b = tile_sram_bytes(prob, MT, NT, KT, buffers)
    fits = tiles_fit(mem, a_b, b_b, c_b)
    if not fits.any():
        smallest = float((a_b + b_b + c_b).min())
        raise MappingError(
            f"op '{prob.name}': no tile fits the per-core SRAM ({_kib(mem.sram_bytes)}"
            + (", partitioned" if mem.partition else "") + (f", {mem.sram_key}" if mem.sram_key else "")
            + f"); the smallest candidate needs {_kib(smallest)}")
    MT, NT, KT, buffers = MT[fits], NT[fits], KT[fits], buffers[fits]
    sram = (a_b + b_b + c_b)[fits]
    # the DRAM rate each operand's tiles are read at (a tile's rows: its contiguous length
    # at the tensor's row pitch, with the chunks the cores keep in flight); partial sums
    # and results go out at the C tile's
    tile_a = footprint_bytes(prob, "a", MT, NT, KT, 1)
    tile_b = footprint_bytes(prob, "b", MT, NT, KT, 1) if prob.has_b else None
    tile_c = footprint_bytes(prob, "c", MT, NT, KT, 1)
    step = tile_a + (tile_b if prob.has_b else 0.0)   # = tiling.step_bytes
    window = mem.window_chunks(prob, cores, step, buffers)
    eff_a = mem.dram_efficiency(prob, "a", MT, NT, KT, window)
    eff_b = mem.dram_efficiency(prob, "b", MT, NT, KT, window) if prob.has_b else np.ones(len(MT))
    eff_c = mem.dram_efficiency(prob, "c", MT, NT, KT, window)
    return _Candidates(MT, NT, KT, buffers, sram, eff_a, eff_b, eff_c, tile_a, tile_b, tile_c, step,
                       list(zip(MT.tolist(), NT.tolist(), KT.tolist())), MT * NT * KT)


def _block_entries(prob: TileProblem, cores: int, mem: MemoryBudget, cand: _Candidates,
                   top: int) -> tuple[list[_Entry], int]:
    """The best ``top`` candidates of every block split and loop order, and how many
    (split, order, tile) points were estimated."""
    MT, NT, KT = cand.MT, cand.NT, cand.KT
    pool: list[_Entry] = []
    evaluated = 0
    orders = [prob.fixed_order] if prob.fixed_order else list(ORDERS)
    # the splits of every core the work allows, then, where the op may be placed on fewer
    # cores (TileProblem.fewer_cores), of fewer (halvings): see partitions_with_fewer_cores
    split = partitions_with_fewer_cores if prob.fewer_cores else partitions
    parts = [] if prob.distribution == "cyclic" else split(
        cores, prob.count, _ceil(prob.m, prob.unit_m), _ceil(prob.n, prob.unit_n))
    # loop orders that reload every operand by the same loops have the same estimate: each
    # such class is estimated once, by its first order (row ``rows[o]`` for order ``o``)
    firsts, rows = _order_classes(prob, orders)
    for part in parts:
        ranges = block_ranges(prob, part, prob.unit_m, prob.unit_n)
        # every loop order of the split at once: one row of est and traffic per order class
        est, traffic = _block_estimate(prob, mem, cand, firsts, _core_shares(ranges), len(ranges))
        picks_of = _pick_many(est, traffic, cand, top)
        for order, row in zip(orders, rows):
            evaluated += len(MT)
            for i in picks_of[row]:
                pool.append(((float(est[row, i]), float(traffic[row, i]), -float(MT[i] * NT[i] * KT[i])), "block",
                             part, int(MT[i]), int(NT[i]), int(KT[i]), order, int(cand.sram[i]), len(ranges),
                             int(cand.buffers[i])))
    return pool, evaluated


def _order_classes(prob: TileProblem, orders: list[str]) -> tuple[list[str], list[int]]:
    """The loop orders that reload A, B and C by distinct loops (the first order of each
    class, in ``orders``' order), and each order's class: the estimate depends on a loop
    order only through those reloads (:func:`_reload_factor`), so orders of one class are
    estimated once (a GEMM's six orders make three classes: mnk and nmk, mkn and kmn, nkm
    and knm)."""
    firsts: list[str] = []
    seen: dict[tuple, int] = {}
    rows = []
    for order in orders:
        key = tuple(_reload_loops(order, tuple(dims)) for dims in (prob.a_dims, prob.b_dims, prob.c_dims))
        if key not in seen:
            seen[key] = len(firsts)
            firsts.append(order)
        rows.append(seen[key])
    return firsts, rows


def _core_shares(ranges: np.ndarray) -> list[tuple[tuple, int]]:
    """The distinct (instances, m, n) shares of a block split that hold work, in ascending
    order, each with how many cores get it."""
    shares = np.stack([ranges[:, 1] - ranges[:, 0], ranges[:, 3] - ranges[:, 2], ranges[:, 5] - ranges[:, 4]],
                      axis=1)
    cores_per_share = Counter(tuple(share) for share in shares.tolist())
    return [(share, cores_per_share[share]) for share in sorted(cores_per_share)
            if share[0] > 0 and share[1] > 0 and share[2] > 0]


def _block_estimate(prob: TileProblem, mem: MemoryBudget, cand: _Candidates, orders: list[str],
                    shares: list[tuple[tuple, int]], n_cores: int) -> tuple[np.ndarray, np.ndarray]:
    """Estimated cycles and DRAM bytes of every candidate tile (columns) under one block
    split (``shares``: each (instances, m, n) share with work and how many cores get it)
    and each loop order (rows)."""
    MT, NT, KT, buffers = cand.MT, cand.NT, cand.KT, cand.buffers
    shape = (len(orders), len(MT))
    # the busiest core bounds compute; an output tile left between its k-steps pays
    # its array's fill/drain (tail) at every visit
    parts = []   # (step cycles, tail cycles, output tiles, tail events) of each share
    for (cnt, mm, nn), _ in shares:
        steps_c, tails_c = _sum_compute_parts(prob, MT, NT, KT, mm, nn, prob.k, cnt)
        visits = _visits(prob, orders, MT, NT, KT, mm, nn, prob.k)
        tiles = cnt * np.ceil(mm / MT) * np.ceil(nn / NT)
        parts.append((steps_c, tails_c * visits, tiles, tiles * visits))
    rd = np.zeros(shape)
    wr = np.zeros(shape)
    dram_time = np.zeros(shape)
    peak = mem.dram_bytes_per_cycle
    classes = []
    for (cnt, mm, nn), times in shares:
        a, b, c_rd, c_wr = block_traffic_parts(prob, orders, MT, NT, KT, mm, nn, prob.k, cnt)
        rd = rd + (a + b + c_rd) * times
        wr = wr + c_wr * times
        dram_time = dram_time + (a / cand.eff_a + b / cand.eff_b + (c_rd + c_wr) / cand.eff_c) * times / peak
        classes.append((cnt, mm, nn, a + b + c_rd + c_wr))
    # all cores' traffic shares the DRAM at the rate its patterns sustain
    dram_bw = (rd + wr) / np.maximum(dram_time, 1e-30)
    # (no DRAM traffic at all - every operand held on chip: the port's rate, unused)
    port = mem.core_port(prob)
    core_bw = np.where(rd + wr > 0, np.minimum(port, dram_bw / n_cores), port)
    # a k tile that does not divide k leaves part of each output tile's next load exposed
    # (at the core's share of the DRAM rate, as in _cyclic_entries)
    exposure = _short_step_exposure(prob, mem, cand, core_bw)
    comp_max = np.zeros(shape)
    for steps_c, tails, tiles, _ in parts:
        comp_max = np.maximum(comp_max, steps_c + tails + tiles * exposure)
    per_core_max = np.zeros(shape)
    for (cnt, mm, nn, moved), (steps_c, tails, _, events) in zip(classes, parts):
        steps = cnt * np.ceil(mm / MT) * np.ceil(nn / NT) * np.ceil(prob.k / KT)
        # double buffering keeps at most `buffers` steps' loads in flight, so each
        # step costs at least (latency + its bytes / bandwidth) / buffers
        step_bytes = moved / steps
        per_step = np.maximum(step_bytes / core_bw, (mem.latency_cycles + step_bytes / core_bw) / buffers)
        # the pipeline step by step: each step takes the longer of its compute and its load,
        # and during an output tile's tail (its array's fill/drain, no step computed) no stage
        # frees, so the loads run ahead by the buffers - 1 free stages at most and then wait
        # (a memory-bound GEMM whose many tiles each end in a long drain: tpu_v1's
        # 64x256x512 int8 on a 512-row array was estimated at 3.3k cycles in 64x171x64 tiles
        # and ran 4.7k, against 3.7k for the 64x512x64 tiles ranked ninth)
        per_tail = tails / np.maximum(events, 1.0)
        waits = events * np.maximum(0.0, per_tail - (buffers - 1) * per_step)
        pipeline = steps * np.maximum(steps_c / steps, per_step) + waits
        per_core_max = np.maximum(per_core_max, np.maximum(steps * per_step, pipeline))
    mem_time = np.maximum(dram_time, per_core_max)
    mem_time = np.maximum(mem_time, (rd + wr) / mem.noc_bytes_per_cycle)
    # prologue and epilogue: the first tiles arrive before compute starts, the
    # last output tile leaves after it ends
    first = (cand.tile_a_bytes * ("a" not in prob.resident)
             + (cand.tile_b_bytes * ("b" not in prob.resident) if prob.has_b else 0.0)) / core_bw
    last = cand.tile_c_bytes * ("c" not in prob.resident) / core_bw
    est = np.maximum(comp_max, mem_time) + first + last + mem.latency_cycles
    return est, rd + wr


def _short_step_exposure(prob: TileProblem, mem: MemoryBudget, cand: _Candidates, load_bytes_per_cycle) -> np.ndarray:
    """Cycles per output tile that a k tile not dividing k leaves exposed: each tile's
    last step is short (k mod tile_k deep), and with its stages the core loads the next
    tile's first, full step while it computes only that short step and drains the tile, so
    a compute-bound core waits for the rest of that load (the engine's stall: an fp8
    16x4096x32768 GEMV on npu_128x128 in 16x128 tiles stalls 31,875 of its 439,608 cycles
    with 768-deep k tiles, 1,000 with 512 and 1,898 with 1,024).  0 where tile_k divides k.
    ``load_bytes_per_cycle``: the core's load rate, its share of the DRAM rate at most."""
    KT, MT, NT = cand.KT, cand.MT, cand.NT
    short_k = prob.k - np.floor(prob.k / KT) * KT
    if not prob.reduction or prob.pad_edge_tiles or not np.any(short_k > 0):
        # (a padded last step computes a whole tile: no shorter than the others)
        return np.zeros(np.shape(KT))
    k_eff = np.where(short_k > 0, short_k, KT)
    short = prob.cycles_fn(MT, NT, k_eff)
    if prob.tail_fn is not None:
        short = short + prob.tail_fn(MT, NT, k_eff)
    # the load: a round trip plus its bytes at the core's rate (``load_bytes_per_cycle``)
    load = mem.latency_cycles + cand.step_bytes / np.maximum(load_bytes_per_cycle, 1e-30)
    return np.where(short_k > 0, np.maximum(0.0, load - short), 0.0)


def _cyclic_entries(prob: TileProblem, cores: int, mem: MemoryBudget, cand: _Candidates,
                    top: int) -> tuple[list[_Entry], int]:
    """The best ``top`` candidates of the cyclic distribution (k innermost, output tiles
    dealt in order as cores free up), and how many tiles were estimated."""
    MT, NT, KT, buffers = cand.MT, cand.NT, cand.KT, cand.buffers
    peak = mem.dram_bytes_per_cycle
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
    port = mem.core_port(prob)
    port_time = per_core / port
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
        # the cores of one wave walk k together: a panel its tiles share is read from
        # DRAM once while the stages the wave keeps in flight fit in the cache, whatever
        # the panels' whole size (128 tiles of an int8 128x28672x16384 GEMM share one
        # 3.7 MB A panel: 474 MB from DRAM, not 888).  A panel the next wave reads again
        # is still there only when the wave's whole panels fit: a cyclic sweep larger than
        # an LRU cache keeps nothing (with a fraction L2 / working set there, the
        # a100_sxm4_80gb's 4096x8192x8192 in 128x128x64 tiles, 42 MB per wave against
        # 40 MB of L2, came to 299 MB where the engine moves 964 MB; this gives 902)
        b_stage = cand.tile_b_bytes if prob.has_b else 0.0
        wave_stage_ws = (rows_in_wave * cand.tile_a_bytes + cols_in_wave * b_stage) * buffers
        within = np.clip(mem.l2_bytes / np.maximum(wave_stage_ws, 1.0), 0.0, 1.0)
        across = np.where(wave_ws <= mem.l2_bytes, 1.0, 0.0)
        distinct = np.clip(tiles_out / np.maximum(used, 1.0) * wave_ws, a_all + b_all, np.maximum(fetched, a_all + b_all))
        dram_rd = ((a_all + b_all) + (distinct - a_all - b_all) * (1 - across)
                   + (fetched - distinct).clip(min=0) * (1 - within))
        l2_time = fetched / mem.l2_bytes_per_cycle
    else:
        dram_rd = fetched
        l2_time = 0.0 * fetched
    traffic = dram_rd + c_all
    # DRAM time at the rate each operand's pattern sustains (A and B in the shares
    # their panels are fetched in)
    share_a = tiles_out * a_panel / np.maximum(tiles_out * (a_panel + b_panel), 1e-30)
    inv_eff_ab = share_a / cand.eff_a + (1 - share_a) / cand.eff_b   # 1 / the A+B streams' rate share
    dram_time = (dram_rd * inv_eff_ab + c_all / cand.eff_c) / peak
    # Little's law per core: at most `buffers` steps' loads are in flight, so a step
    # takes at least (round trip + its bytes through the port) / buffers
    latency_time = waves * np.ceil(prob.k / KT) * (mem.latency_cycles + cand.step_bytes / port) / buffers
    mem_time = np.maximum.reduce([dram_time, port_time, l2_time, traffic / mem.noc_bytes_per_cycle,
                                  latency_time])
    # the first step: compute starts once it has arrived, and every core of the first wave
    # asks for its first k step at once, so it comes at the port's rate or the DRAM's rate
    # over the distinct bytes the wave asks for (the tiles of one row or column of the wave
    # share their A or B step where a chip-level cache serves the rest), whichever is
    # slower.  The memory-bound time already moves those bytes at the DRAM's rate: there
    # only the port's pass of the first step is added
    eff_ab = 1.0 / inv_eff_ab
    if mem.l2_bytes > 0:
        first_wave_bytes = rows_in_wave * cand.tile_a_bytes + cols_in_wave * (cand.tile_b_bytes if prob.has_b else 0.0)
    else:
        first_wave_bytes = used * cand.step_bytes
    first = cand.step_bytes / port
    first_before_compute = np.maximum(first, first_wave_bytes / (peak * eff_ab))
    # the exposed load gets the core's share of the DRAM rate its patterns sustain (the
    # cores deal equal tiles from one start, so they reach their short steps together)
    # and goes no faster than the core's port
    core_rate = np.minimum(port, peak * eff_ab / used)
    comp = comp + waves * _short_step_exposure(prob, mem, cand, core_rate)
    est = np.maximum(comp + first_before_compute, mem_time + first) + mem.latency_cycles
    entries: list[_Entry] = [((float(est[i]), float(traffic[i]), -float(MT[i] * NT[i] * KT[i])), "cyclic", (1, 1, 1),
                              int(MT[i]), int(NT[i]), int(KT[i]), "mnk", int(cand.sram[i]), int(used[i]),
                              int(buffers[i]))
                             for i in _pick_many(est[None], traffic[None], cand, top)[0]]
    return entries, len(MT)


def _ranked(pool: list[_Entry], mem: MemoryBudget, evaluated: int, top: int) -> list[Mapping]:
    """The pool's ``top`` distinct mappings, best first."""
    pool.sort(key=lambda e: e[0])
    # the same rule across distributions, partitions and loop orders as within each: of
    # the candidates the estimate cannot tell apart (within _RANK_TIE of the best), the
    # one moving the fewest DRAM bytes, then the largest tile
    best = None
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


def _pick_many(est: np.ndarray, traffic: np.ndarray, cand: _Candidates, top: int) -> list[list[int]]:
    """For each row of ``est`` and ``traffic`` (one per loop order, a column per
    candidate): the best candidate (see :func:`_pick`) and, when ``top`` > 1, the next
    best by estimate with distinct tiles (tiles of one volume but another shape are
    distinct: they read their operands in other patterns)."""
    firsts = _pick_rows(est, traffic, cand.volume)
    if top <= 1:
        return [[first] for first in firsts]
    out = []
    for first, by_estimate in zip(firsts, np.argsort(est, axis=1, kind="stable")):
        picks = [first]
        seen = {cand.tiles[first]}
        for i in by_estimate:
            if len(picks) >= top:
                break
            key = cand.tiles[i]
            if key not in seen:
                picks.append(int(i))
                seen.add(key)
        out.append(picks)
    return out


def _pick_rows(est: np.ndarray, traffic: np.ndarray, volume: np.ndarray) -> list[int]:
    """:func:`_pick` of every row of ``est`` and ``traffic`` at once: the rule's three
    keys narrowed one after the other, the first index left (lexsort's stable tie-break)."""
    if np.isnan(est).any() or np.isnan(traffic).any():
        # (NaN orders apart from every number: the row by row rule decides)
        return [_pick(e, t, volume) for e, t in zip(est, traffic)]
    near = est <= est.min(axis=1, keepdims=True) * _RANK_TIE
    least_traffic = np.where(near, traffic, np.inf)
    best = near & (least_traffic == least_traffic.min(axis=1, keepdims=True))
    neg_volume = np.where(best, -volume, np.iinfo(np.int64).max)
    best &= neg_volume == neg_volume.min(axis=1, keepdims=True)
    least_est = np.where(best, est, np.inf)
    best &= least_est == least_est.min(axis=1, keepdims=True)
    return best.argmax(axis=1).tolist()


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
