"""The typed seam between Python and the event engine: what :func:`~sim.model.kernels.engine.run_tiled`
and :func:`~sim.model.kernels.probe.run_tiled_probed` read (:class:`KernelInputs`) and the
buffers they fill (:class:`KernelOutputs`, :class:`ProbeSamples`).

Each is a ``typing.NamedTuple`` of NumPy arrays: Numba types it as a heterogeneous named
tuple, so the kernels take it as one argument and reach its fields by name, and the
on-disk cache keys a compiled kernel by the tuple's class and field types (the classes live
here, at module level, so a fresh process finds them by name and loads the cached code).
The slots of each array are named in :mod:`~sim.model.kernels.layout` (``G_*``, ``D_*``,
``F_*``, ``S_*``).  Times are core clock cycles unless a slot says otherwise.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

from sim.model.kernels.layout import G_P, S_LEN


class KernelInputs(NamedTuple):
    """Everything one engine run reads besides the DRAM model's parameters and state; built
    by :func:`sim.model.engine.arrays.kernel_arrays`.  The kernel is a pure function of these
    arrays (and the DRAM parameters), so a run is remembered by a digest of their bytes, in
    field order (:func:`sim.model.engine.kernel_run._digest`)."""

    #: int64 [G_LEN]: the problem and mapping - mode (block/cyclic), active cores
    #: (``G_P``), instances, m/n/k in elements, tile sizes in elements, loop order, causal
    #: mask, ideal memory, chip cache sets and ways, outstanding DRAM requests per core,
    #: DRAM access granularity and interleave in bytes, buffer stages, tile limit, ...
    geo: np.ndarray
    #: int64 [3, D_LEN]: the operand descriptors, rows A, B, C - present, the loop dims its
    #: tile rows and contiguous run follow, a fixed extent in elements, instances sharing one
    #: copy, cacheable in the chip cache, resident in the core buffer
    desc: np.ndarray
    #: int64 [P, 6]: block mode, core c's sub-problem as half-open element ranges
    #: (instance lo, hi, m lo, hi, n lo, hi); cyclic mode, zeros (tiles are dealt)
    ranges: np.ndarray
    #: float64 [P or 1, 16]: compute cycles of one step for each full/edge (m, k, n) tile
    #: shape (column em*4 + ek*2 + en), then the tail cycles a step pays when it ends an
    #: output-tile visit (column + 8); one row shared by every core, or one per core
    ctab: np.ndarray
    #: float64 [F_LEN]: bytes per element of A, B, C and partial sums; ns per cycle; NoC,
    #: fill-port and chip-cache bandwidths in bytes/cycle; latencies in cycles; operand base
    #: addresses in bytes; the reorder quantum and multicast window in cycles; bytes per
    #: chip-cache set; the probed run's steady-state tolerance (a fraction)
    fp: np.ndarray

    @property
    def P(self) -> int:
        """Active cores (block slots) of the run: ``geo[G_P]``."""
        return int(self.geo[G_P])


class KernelOutputs(NamedTuple):
    """The buffers :func:`~sim.model.kernels.engine.run_tiled` fills; :meth:`zeros` makes
    them for P cores."""

    #: float64 [P, S_LEN]: per-core counters (cycles, bytes, counts), indexed by ``S_*``
    stats: np.ndarray
    #: int64 [P, 8]: steps run per full/edge (m, k, n) tile shape (index em*4 + ek*2 + en)
    hist: np.ndarray
    #: float64 [1]: the makespan in cycles; negative (-1 - the cycle it stopped at) when
    #: the progress guard found a livelock
    out_time: np.ndarray

    @classmethod
    def zeros(cls, P: int) -> "KernelOutputs":
        return cls(np.zeros((P, S_LEN)), np.zeros((P, 8), dtype=np.int64), np.zeros(1))


class ProbeSamples(NamedTuple):
    """The buffers :func:`~sim.model.kernels.probe.run_tiled_probed` fills, one entry per
    probe (n probes, P cores); :meth:`zeros` makes them."""

    #: float64 [n, P, S_LEN]: each sample's per-core counters
    stats: np.ndarray
    #: int64 [n, P, 8]: each sample's steps per tile shape
    hist: np.ndarray
    #: float64 [n]: each sample's makespan in cycles
    makespan: np.ndarray
    #: float64 [n, len]: each sample's DRAM statistics (``sim.model.kernels.dram.S_*``)
    dram_stats: np.ndarray
    #: float64 [1]: the run's own end; negative (-1 - the cycle it stopped at) when it or a
    #: sample's drain hit the progress guard
    out_time: np.ndarray

    @classmethod
    def zeros(cls, n: int, P: int, dram_len: int) -> "ProbeSamples":
        return cls(np.zeros((n, P, S_LEN)), np.zeros((n, P, 8), dtype=np.int64), np.zeros(n),
                   np.zeros((n, dram_len)), np.zeros(1))
