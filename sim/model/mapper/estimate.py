"""The terms of the mapper's analytic estimate: the compute cycles summed over every tile
shape of a sub-problem (:func:`_sum_compute`, :func:`_sum_compute_parts`), the visits of an
output tile under a loop order (:func:`_visits`), and :class:`MemoryBudget`, what the
estimate and the fit check know of a chip's memory (SRAM per core, bandwidths, the DRAM
model and the rate each tile pattern sustains on it).

The search (:mod:`sim.model.mapper.search`) combines these terms to rank candidates; they
are kept apart from the ranking itself.  :mod:`sim.model.mapper.search` re-exports every name.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import numpy as np

from sim.ir.lowered import TileProblem
from sim.model.mapper.tiling import _reload_factor, operand_pattern, stage_requests
from sim.model.memory.dram import stream_efficiency


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
    # the 8 (full/edge m, n, k) tile shapes in one vectorised call, stacked on axis 0 as
    # m part x 4 + n part x 2 + k part (each dim's sizes set through a (2, 2, 2) view:
    # six small-array operations, not 24)
    counts, visits = [], []
    sms, sns, sks = (np.empty((2, 2, 2) + shape, dtype=np.int64) for _ in range(3))
    for half, ((_, sm), (_, sn), (_, sk)) in enumerate(zip(*parts)):
        sms[half], sns[:, half], sks[:, :, half] = sm, sn, sk
    sms, sns, sks = (sizes.reshape((8,) + shape) for sizes in (sms, sns, sks))
    for cm, _ in parts[0]:
        for cn, _ in parts[1]:
            cmn = cm * cn
            for j, (ck, _) in enumerate(parts[2]):
                counts.append(cmn * ck)
                visits.append(cmn * last_k[j])
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
    back (k inside every loop over C's dims), else the trips of the loops between.  A
    sequence of orders gives one row per order (see :func:`_reload_factor`)."""
    if not prob.reduction:
        return np.ones(np.broadcast(mt, nt, kt).shape)
    trips = {"m": np.ceil(mm / mt), "n": np.ceil(nn / nt), "k": np.ceil(kk / kt)}
    return _reload_factor(order, prob.c_dims, trips)


def _distinct_rows(columns: list[np.ndarray]) -> tuple[list[tuple[int, ...]], np.ndarray]:
    """The distinct rows of integer ``columns`` (one array per column), in ascending order
    as Python ints, and each row's index among them: ``np.unique(..., axis=1,
    return_inverse=True)`` without its sort of structured rows, which costs more than the
    estimate it serves on a few hundred candidates."""
    order = np.lexsort(columns[::-1])
    ordered = [c[order] for c in columns]
    starts = np.empty(len(order), dtype=bool)
    starts[:1] = True
    starts[1:] = np.logical_or.reduce([c[1:] != c[:-1] for c in ordered])
    inverse = np.empty(len(order), dtype=np.int64)
    inverse[order] = np.cumsum(starts) - 1
    return list(zip(*(c[starts].tolist() for c in ordered))), inverse


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
    fill_bytes_per_cycle: float = 0.0  # the core's fill port alone, before the request limit (0: port_bytes_per_cycle)
    #: the chip-file key that sizes the tile buffer, named when no tile fits it
    sram_key: str = ""

    def core_port(self, prob: TileProblem) -> float:
        """The rate one core's tiles arrive at: the fill port capped by Little's law on the
        DRAM level's request limit - except for a kernel whose bytes in flight follow its
        pipeline's stages (``prob.inflight_from_stages``, as the engine counts them in
        sim.model.engine.arrays.kernel_arrays): there no request limit applies, and what
        the stages keep in flight is the estimate's latency term."""
        if prob.inflight_from_stages and self.fill_bytes_per_cycle > 0:
            port = self.fill_bytes_per_cycle  # (shared_by divided it among a core's blocks)
        else:
            port = self.port_bytes_per_cycle
        if prob.port_bytes_per_cycle > 0:   # the kernel's own fill port
            port = min(port, prob.port_bytes_per_cycle / max(1, prob.blocks_per_core))
        return port

    def window_chunks(self, prob: TileProblem, cores: int, step_bytes=None, buffers=None):
        """DRAM chunks the cores keep in flight, counted as the engine counts them: each
        core's requests (the kernel's own limit or the DRAM level's, shared by the blocks
        on a core) in interleave-block chunks (sim.model.kernels.engine.run_tiled), so
        tile rows shorter than a block hold fewer bytes in flight.  A kernel whose bytes in
        flight follow its stages keeps (stages - 1) steps of ``step_bytes`` in flight: an
        array, one window per candidate."""
        if self.dram is None:
            return None
        d = self.dram
        chunk = max(d.interleave_bytes, d.access_bytes)
        blocks = max(1, prob.blocks_per_core)
        if prob.inflight_from_stages and step_bytes is not None:
            per_core = np.maximum(1, stage_requests(buffers, step_bytes, d.access_bytes) // blocks)
            return max(1, cores) * np.maximum(1, per_core * d.access_bytes // chunk).astype(np.int64)
        per_core = max(1, (prob.max_outstanding or d.max_outstanding_requests_per_core) // blocks)
        return max(1, cores) * max(1, per_core * d.access_bytes // chunk)

    def dram_efficiency(self, prob: TileProblem, which: str, mt, nt, kt, in_flight: int | None = None) -> np.ndarray:
        """Fraction of the DRAM peak operand ``which`` is read at with each candidate
        tile (:func:`operand_pattern` through :func:`sim.model.memory.dram.stream_efficiency`)
        with ``in_flight`` chunks in flight (None: plenty)."""
        seg, stride = operand_pattern(prob, which, mt, nt, kt)
        if self.dram is None:
            return np.ones(seg.shape)
        columns = [seg.ravel(), stride.ravel()]
        if in_flight is not None and np.ndim(in_flight) > 0:
            # one window per candidate: the distinct (segment, stride, window) triples
            columns.append(np.broadcast_to(np.asarray(in_flight), seg.shape).ravel())
            patterns, inv = _distinct_rows(columns)
            vals = np.array([stream_efficiency(self.dram, a, b, w) for a, b, w in patterns])
        else:
            patterns, inv = _distinct_rows(columns)
            vals = np.array([stream_efficiency(self.dram, a, b, in_flight) for a, b in patterns])
        return vals[inv].reshape(seg.shape)

    def shared_by(self, blocks: int) -> "MemoryBudget":
        """One block's share when ``blocks`` run on a core at once: its SRAM (each
        partition) and fill port divided among them."""
        if blocks <= 1:
            return self
        part = None if self.partition is None else tuple(x / blocks for x in self.partition)
        return dataclasses.replace(self, sram_bytes=self.sram_bytes / blocks, partition=part,
                                   port_bytes_per_cycle=self.port_bytes_per_cycle / blocks,
                                   fill_bytes_per_cycle=self.fill_bytes_per_cycle / blocks)
