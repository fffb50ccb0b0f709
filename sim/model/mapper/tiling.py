"""Tile geometry and byte counts of a :class:`~sim.ir.lowered.TileProblem`: the tile sizes
worth trying along a dim, the block-mode core splits and each core's sub-problem, operand
footprints and the DRAM traffic of a loop order, the DMA pattern of a tile's rows, pipeline
stages and the per-core SRAM a tile needs.

These are exact counting rules shared by the mapper's search (:mod:`sim.model.mapper.search`)
and the engine, which builds its arrays and fit checks from the same functions; they are kept
apart from the search so that the engine's use of them does not depend on how candidates are
ranked.  :mod:`sim.model.mapper.search` re-exports every name.
"""
from __future__ import annotations

import functools

import numpy as np

from sim.ir.lowered import TileProblem


def _ceil(a, b):
    return -(-a // b)


def tile_candidates(size: int, unit: int, limit: int = 12) -> list[int]:
    """Tile sizes worth trying along one dim: the full size, multiples of the array
    dimension doubling up, powers of two, and near-equal splits (no tiny edge tile)."""
    return list(_tile_sizes(int(size), int(unit), int(limit)))


@functools.lru_cache(maxsize=4096)
def _tile_sizes(size: int, unit: int, limit: int) -> tuple[int, ...]:
    """:func:`tile_candidates`, remembered: every point of a sweep asks for the same few
    dims (each op's m, n, k and array units)."""
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
    return tuple(out)


def partitions(P: int, count: int, m_units: int, n_units: int, max_options: int = 24) -> list[tuple[int, int, int]]:
    """(instance, m, n) splits using as many cores as the work allows (most cores first)."""
    # no split uses more than count x m_units x n_units cores, and for a given rest = pm x pn
    # only pm in [rest / n_units, m_units] can fit: the same splits in the same order as
    # trying every used <= P and every pm <= rest, without the O(P^2) walk (a 64^3 GEMM on
    # 16,384 cores spent 8 s here)
    for used in range(min(P, count * m_units * n_units), 0, -1):
        found = _splits_of(used, count, m_units, n_units)
        if found:
            return found[:max_options]
    return [(1, 1, 1)]


def _splits_of(used: int, count: int, m_units: int, n_units: int) -> list[tuple[int, int, int]]:
    """Every (instance, m, n) split of exactly ``used`` cores that fits the work."""
    found = []
    for pc in range(1, min(used, count) + 1):
        if used % pc:
            continue
        rest = used // pc
        for pm in range(max(1, -(-rest // n_units)), min(rest, m_units) + 1):
            if rest % pm:
                continue
            found.append((pc, pm, rest // pm))
    return found


def partitions_with_fewer_cores(P: int, count: int, m_units: int, n_units: int,
                                max_options: int = 24) -> list[tuple[int, int, int]]:
    """:func:`partitions` (the most cores the work allows, U), then the splits of fewer
    cores: every halving of U and of the chip's P below U, down to one core.

    Spreading an op over every core is not always fastest: on a chip without a shared
    cache, splitting m makes every core read all of B from DRAM (TPU v1 with two matrix
    units ran a 512x1024x256 int8 GEMM at 0.57x the speed of one unit, which it could have
    used alone).  A chip with twice the cores can always run the op on as many cores as
    the smaller chip did, so with the halvings of P among the splits, doubling the cores
    never leaves the mapper without the smaller chip's split (issue 12, "more of anything
    never slows a run")."""
    out = partitions(P, count, m_units, n_units, max_options)
    most = out[0][0] * out[0][1] * out[0][2]
    fewer = set()
    for start in (most, P):
        u = start
        while u >= 1:
            if u < most:
                fewer.add(u)
            u //= 2
    for used in sorted(fewer, reverse=True):
        out.extend(_splits_of(used, count, m_units, n_units)[:max_options])
    return out


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


def footprint_bytes(prob: TileProblem, which: str, mm, nn, kk, count, tile=None) -> np.ndarray:
    """Bytes of one operand over a (count, mm, nn, kk) sub-problem (or one tile).  A
    convolution's A (``prob.conv``) counts the ifmap pixels under the windows, as DMA moves
    them: those of the whole extent, or - ``tile=(mt, kt)`` - of its tiles loaded one by one
    (halos between neighbouring tiles fetched by each)."""
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
    if which == "a" and prob.conv is not None:
        bpe = bpe * (prob.a_dram_fraction(mm, kk) if tile is None else prob.a_dram_fraction(*tile))
    return n_el * bpe * inst


def _reload_factor(order, dims: tuple[str, ...], trips: dict[str, np.ndarray]) -> np.ndarray:
    """Times an operand's whole footprint is fetched for a loop order: the product of the
    trip counts of loops that do not index it and sit outside its innermost indexing loop
    (a buffer holding one tile is reloaded whenever one of its indices changes).  ``order``
    may be a sequence of loop orders: then one row per order (the mapper estimates every
    order of a block split in one pass; orders that reload by the same loops share one
    product)."""
    if isinstance(order, str):
        return _trip_product(_reload_loops(order, tuple(dims)), trips)
    products: dict[tuple[str, ...], np.ndarray] = {}
    rows = []
    for one in order:
        loops = _reload_loops(one, tuple(dims))
        if loops not in products:
            products[loops] = _trip_product(loops, trips)
        rows.append(products[loops])
    return np.stack(rows)


@functools.lru_cache(maxsize=None)
def _reload_loops(order: str, dims: tuple[str, ...]) -> tuple[str, ...]:
    """The loops of ``order`` whose trips multiply an operand's reloads (see
    :func:`_reload_factor`), outer first; a few dozen (order, dims) pairs exist."""
    inner = max((order.index(d) for d in dims), default=-1)
    return tuple(order[pos] for pos in range(inner) if order[pos] not in dims)


def _trip_product(loops: tuple[str, ...], trips: dict[str, np.ndarray]) -> np.ndarray:
    f = np.ones_like(trips["m"])
    for d in loops:
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
    written) bytes.  With a sequence of loop orders for ``order``, the terms that depend
    on it gain a leading axis, one row per order (see :func:`_reload_factor`)."""
    trips = {"m": np.ceil(mm / mt), "n": np.ceil(nn / nt), "k": np.ceil(kk / kt)}
    a = footprint_bytes(prob, "a", mm, nn, kk, count, tile=(mt, kt)) * _reload_factor(order, prob.a_dims, trips)
    b = (footprint_bytes(prob, "b", mm, nn, kk, count) * _reload_factor(order, prob.b_dims, trips)
         if prob.has_b else np.zeros_like(a))
    visits = _reload_factor(order, prob.c_dims, trips) if prob.reduction else np.ones_like(trips["m"])
    c_final = footprint_bytes(prob, "c", mm, nn, kk, count)
    c_psum = c_final / prob.layout.c * prob.layout.psum
    c_rd, c_wr = (visits - 1) * c_psum, c_final + (visits - 1) * c_psum
    # operands held in the core's buffer between ops move no DRAM bytes (the engine's rule)
    if "a" in prob.resident:
        a = np.zeros_like(a)
    if "b" in prob.resident:
        b = np.zeros_like(b)
    if "c" in prob.resident:
        c_rd, c_wr = np.zeros_like(c_rd), np.zeros_like(c_wr)
    return a, b, c_rd, c_wr


def operand_pattern(prob: TileProblem, which: str, mt, nt, kt):
    """How the engine's DMA reads (or writes) one tile of an operand, per candidate tile:
    (segment bytes, stride bytes).  A tile is rows along the operand's first dim, each a
    contiguous run of its last dim at the tensor's row pitch
    (``sim.model.kernels.transfers._make_transfer``); a tile spanning the whole last dim, or an
    operand whose rows are an untiled fixed extent, is one contiguous run (stride 0)."""
    dims = getattr(prob, f"{which}_dims")
    bpe = getattr(prob.layout, which)
    shape = np.broadcast(mt, nt, kt).shape
    if len(dims) < 2:
        return np.full(shape, 1, dtype=np.int64), np.zeros(shape, dtype=np.int64)
    ext = {"m": np.asarray(mt), "n": np.asarray(nt), "k": np.asarray(kt)}[dims[-1]]
    full = {"m": prob.m, "n": prob.n, "k": prob.k}[dims[-1]]
    if which == "a" and prob.conv is not None:
        bpe = bpe * prob.a_dram_fraction(mt, kt)     # as the engine's DMA lays A's rows out
    seg = np.broadcast_to(np.ceil(np.minimum(ext, full) * bpe), shape).astype(np.int64)
    stride = np.where(np.broadcast_to(ext, shape) >= full, 0, np.ceil(full * np.broadcast_to(bpe, shape)))
    return np.maximum(seg, 1), stride.astype(np.int64)


def step_bytes(prob: TileProblem, mt, nt, kt):
    """Bytes one pipeline step loads: an A tile and (when the problem has one) a B tile
    (vectorised)."""
    return footprint_bytes(prob, "a", mt, nt, kt, 1) + (footprint_bytes(prob, "b", mt, nt, kt, 1)
                                                          if prob.has_b else 0.0)


def stage_requests(stages, step_bytes_, access_bytes: int):
    """DRAM requests a multistage pipeline keeps in flight: (stages - 1) steps of
    ``step_bytes_`` (at least one step) in requests of ``access_bytes`` - the same count for
    the mapper's estimate (MemoryBudget.window_chunks) and the engine's request window
    (sim.model.engine.arrays.kernel_arrays).  Vectorised."""
    return np.ceil(np.maximum(np.asarray(stages) - 1, 1) * np.asarray(step_bytes_, dtype=np.float64) / access_bytes)


def pipeline_stages(prob: TileProblem, mt, nt, kt, default: int):
    """Tile buffers per operand for each candidate tile: the problem's fixed count, or -
    for a library that fills shared memory with as many stages as fit - the count that
    fills ``stage_fill_bytes`` (vectorised)."""
    base = prob.stages or default
    if prob.stage_fill_bytes <= 0:
        return np.full(np.shape(mt), base, dtype=np.int64)
    fill = np.floor(prob.stage_fill_bytes / np.maximum(step_bytes(prob, mt, nt, kt), 1.0)).astype(np.int64)
    return np.clip(fill, 2, max(2, prob.max_stages or 2))


def tile_sram_bytes(prob: TileProblem, mt, nt, kt, buffers):
    """Per-core SRAM (A, B, C) for one tile of each operand: the input tiles times the
    pipeline depth, the C accumulator (at accumulator precision) at most twice - it is
    drained once per output tile, not streamed per step - and once where a library's
    accumulator budget holds only one tile's (:func:`accumulator_sets`)."""
    a = footprint_bytes(prob, "a", mt, nt, kt, 1) * buffers
    b = footprint_bytes(prob, "b", mt, nt, kt, 1) * buffers if prob.has_b else 0.0 * a
    sets = np.minimum(buffers, accumulator_sets(prob.accumulator_elements, mt, nt))
    c = footprint_bytes(prob, "c", mt, nt, kt, 1) / prob.layout.c * max(prob.layout.psum, prob.layout.c) * sets
    return a, b, c


def accumulator_sets(accumulator_elements: int, mt, nt):
    """Output tiles whose accumulators a core holds at once: two (one drains while the next
    accumulates), or one where a library's accumulator budget (``accumulator_elements``,
    :class:`~sim.ir.lowered.TileProblem`) is less than twice the tile, its sides rounded up
    to 8 as the library's tile rule rounds them (a Hopper cooperative kernel: 256x128 and
    320x128 tiles take 128-160 KiB of the 256 KiB register file; ping-pong kernels' tiles at
    most half of the 160 KiB budget).  ``accumulator_elements`` 0: no budget, two."""
    if not accumulator_elements:
        return 2
    elements = (-(-np.asarray(mt) // 8) * 8) * (-(-np.asarray(nt) // 8) * 8)
    return np.where(2 * elements > accumulator_elements, 1, 2)


def tiles_fit(mem: "MemoryBudget", a_b, b_b, c_b):
    """Whether tile buffers of (A, B, C) bytes fit one core's SRAM (each its partition,
    when the SRAM is partitioned)."""
    if mem.partition is None:
        return (a_b + b_b + c_b) <= mem.sram_bytes
    pi, pw, po = mem.partition
    return (a_b <= pi) & (b_b <= pw) & (c_b <= po)
