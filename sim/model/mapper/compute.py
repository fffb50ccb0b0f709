"""Compute side of a mapping: which array runs an op, and cycles per tile.

Number formats reach the array through its per-format rate: an array doing ``r`` MACs
per PE per cycle in a format consumes ``r`` reduction elements per PE per cycle (a small
dot-product unit in each PE), so the reduction dimension is packed by ``r`` before the
dataflow's fold formulas apply; ``r < 1`` (e.g. fp32 on bf16 units at half rate) spreads
each element over several cycles.  A 2:4-sparse B on an array with sparsity units halves
the reduction work the same way (the hardware skips the pruned half); on an array
without them nothing changes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sim.errors import MappingError
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import WIDER_RATE_CLASSES, get_format


@dataclass(frozen=True)
class ArrayChoice:
    name: str
    rows: int
    cols: int
    count: int
    rate_class: str              # rate class actually used (after widening)
    macs_per_pe_per_cycle: float
    sparse_2_4: bool             # 2:4 units used for this op
    dataflow: str
    fold_overlap: bool = False   # next fold's stationary operand loads during the current fold
    sparse_speedup: float = 2.0  # dense-equivalent MACs per MAC slot when sparse_2_4
    sustained_fraction: float = 1.0  # share of the MAC slots kept busy while streaming (ArraySpec)
    pads_edge_folds: bool = False    # an edge fold lasts as long as a full one (ArraySpec.pads_edge_folds)

    @property
    def k_per_pe_cycle(self) -> float:
        return self.macs_per_pe_per_cycle * (self.sparse_speedup if self.sparse_2_4 else 1.0)

    def peak_macs_per_cycle_per_core(self) -> float:
        return self.rows * self.cols * self.count * self.k_per_pe_cycle


def compute_rate_class(dtype: str, weight_dtype: str | None = None) -> str:
    """The rate class an op runs at: the activation format, or - for W8A8/W4A4-style ops
    where both are narrow - the wider of the two. Weight-only quantisation (narrow
    weights, wide activations) computes at the activation rate."""
    a = get_format(dtype)
    if weight_dtype is None:
        return a.rate_class
    b = get_format(weight_dtype)
    if a.bits >= b.bits:
        return a.rate_class
    return b.rate_class


def choose_array(chip: ChipSpec, rate_class: str, sparse_2_4: bool = False, dataflow: str | None = None,
                 array_name: str | None = None) -> ArrayChoice:
    """Pick the array with the highest per-core peak for ``rate_class`` (or the named one)."""
    arrays = chip.cores.arrays
    if array_name is not None:
        arrays = [a for a in arrays if a.name == array_name]
        if not arrays:
            raise MappingError(f"chip '{chip.name}' has no array named '{array_name}' "
                               f"(arrays: {', '.join(a.name for a in chip.cores.arrays)})")
    best: ArrayChoice | None = None
    for arr in arrays:
        rate, used_class = _rate(arr, rate_class)
        if rate is None:
            continue
        df = dataflow or arr.default_dataflow
        if df not in arr.dataflows:
            continue
        sp = bool(sparse_2_4 and arr.sparsity_2_4)
        cand = ArrayChoice(arr.name, arr.rows, arr.cols, arr.count, used_class, float(rate), sp, df,
                           arr.overlaps_folds(df, used_class), float(arr.sparse_2_4_speedup),
                           float(arr.sustained_fraction), bool(arr.pads_edge_folds))
        if best is None or _sustained_peak(cand) > _sustained_peak(best):
            best = cand
    if best is None:
        have = sorted({k for a in chip.cores.arrays for k in a.macs_per_pe_per_cycle})
        if dataflow is not None and not any(dataflow in a.dataflows for a in arrays):
            raise MappingError(f"chip '{chip.name}': no array supports dataflow '{dataflow}' "
                               f"(supported: {sorted({d for a in arrays for d in a.dataflows})})")
        raise MappingError(f"chip '{chip.name}' cannot compute in {rate_class}: its arrays have units "
                           f"for {', '.join(have)} and {rate_class} cannot be widened to any of them")
    return best


def _sustained_peak(choice: ArrayChoice) -> float:
    return choice.peak_macs_per_cycle_per_core() * choice.sustained_fraction


def _rate(arr, rate_class: str):
    rates = arr.macs_per_pe_per_cycle
    if rate_class in rates:
        return rates[rate_class], rate_class
    for wider in WIDER_RATE_CLASSES.get(rate_class, ()):
        if wider in rates:
            return rates[wider], wider
    return None, None


def packed_k(k, k_per_pe_cycle: float):
    """Reduction steps a PE needs for ``k`` elements."""
    return np.ceil(np.asarray(k, dtype=np.float64) / k_per_pe_cycle).astype(np.int64)


def gemm_tile_cycles(dataflow_model, choice: ArrayChoice, mt, nt, kt, split: str = "n"):
    """Cycles for one core to compute an (mt, nt, kt) GEMM tile on its arrays, fill and
    drain included (the tile is computed on its own).

    The tile is shared by the core's ``count`` identical arrays along ``split`` (m or n);
    the slowest share sets the time.  Vectorised over NumPy arrays of tile sizes.
    """
    step, tail = gemm_step_cycles(dataflow_model, choice, mt, nt, kt, split)
    return step + tail


def gemm_step_cycles(dataflow_model, choice: ArrayChoice, mt, nt, kt, split: str = "n"):
    """(step, tail) cycles of one k-step of an output tile.

    On an array with ``fold_overlap`` the k-steps of one output tile chain like its folds:
    the next step's MMAs (or stationary loads) issue behind the current ones, so a step
    costs only its streaming and the fill/drain (and the first stationary load) is paid
    once per output tile, as ``tail``, after its last k-step.  Without overlap every step
    is a SCALE-Sim schedule of its own and ``tail`` is 0.
    """
    mt = np.asarray(mt, dtype=np.int64)
    nt = np.asarray(nt, dtype=np.int64)
    kp = packed_k(kt, choice.k_per_pe_cycle)
    if choice.count > 1:
        if split == "n":
            nt = -(-nt // choice.count)
        else:
            mt = -(-mt // choice.count)
    if not choice.fold_overlap:
        if choice.pads_edge_folds:
            cyc = np.asarray(dataflow_model.compute_cycles(mt, kp, nt, choice.rows, choice.cols))
        else:
            cyc = np.asarray(dataflow_model.trimmed_compute_cycles(mt, kp, nt, choice.rows, choice.cols))
        return _sustained(cyc, choice), np.zeros_like(cyc)
    parts = overlapped_parts if choice.pads_edge_folds else trimmed_overlapped_parts
    step, tail = parts(dataflow_model, mt, kp, nt, choice.rows, choice.cols)
    return _sustained(step, choice), tail


def _sustained(cycles, choice: ArrayChoice):
    """A step's cycles at the array's ``sustained_fraction`` of its MAC slots (unchanged,
    integer, at 1)."""
    if choice.sustained_fraction == 1.0:
        return cycles
    return np.asarray(cycles, dtype=np.float64) / choice.sustained_fraction


def overlapped_parts(dataflow_model, m, k, n, rows, cols):
    """(streaming, tail) cycles when folds overlap: while one fold streams, the next
    fold's stationary operand is loaded, so every fold costs max(its stream, the next
    load), and an output tile's chain of folds pays once (``tail``) the first load and the
    last fill/drain - less what its last fold saved by having no next load to wait for:
    ``load + stream - max(stream, load)``, i.e. ``min(load, stream)``.  A chain of one
    fold thus costs load + stream + fill/drain, exactly SCALE-Sim's schedule.

    From SCALE-Sim's per-fold schedule ``load + stream + fill/drain`` (WS/IS: load R,
    stream T, fill/drain R + C - 2; OS: no load, stream T (k), fill/drain R + C - 2; RS:
    load R·L, stream L·T)."""
    rep = dataflow_model.fold_report(m, k, n, rows, cols)
    L = np.asarray(rep.row_length)
    stream = np.asarray(rep.T) * L
    stationary = dataflow_model.spec.stationary_operand
    R = np.asarray(rows)
    load = np.zeros_like(stream) if stationary == "output" else R * L
    cpf = np.asarray(rep.cycles_per_fold)
    fill_drain = cpf - stream - load
    folds = np.asarray(rep.folds)
    return folds * np.maximum(stream, load), np.minimum(load, stream) + fill_drain


def fold_classes(dataflow_model, m, k, n, rows, cols):
    """A GEMM's folds as four classes of identical folds, each with the rows and columns it
    uses, stacked on a new first axis (so one call of the dataflow's formula prices all four).

    Along the array rows the extent mapped there (``spatial_rows``; ``k`` packed ``L`` words
    a PE under row-stationary) splits into whole folds of ``rows`` (× L) and a remainder that
    uses ``ceil(rem / L)`` rows; along the columns likewise.  Returns ``(m, k, n, R, C, folds,
    live)``, each of shape ``(4,) + shape``, in fold order (full rows and columns, column
    remainder, row remainder, both): the sub-problem whose folds are exactly that class's,
    the rows and columns one of its folds uses, how many folds it has, and a 0/1 mask where
    the class is empty (its dims then read 1, harmlessly)."""
    spec = dataflow_model.spec
    L = int(getattr(dataflow_model, "row_length", 1) or 1) if spec.is_row_stationary else 1
    dims = {"m": np.asarray(m, dtype=np.int64), "k": np.asarray(k, dtype=np.int64),
            "n": np.asarray(n, dtype=np.int64)}
    *mkn, R, C = np.broadcast_arrays(dims["m"], dims["k"], dims["n"], np.asarray(rows, dtype=np.int64),
                                     np.asarray(cols, dtype=np.int64))
    dims = dict(zip("mkn", mkn))
    er, ec = dims[spec.spatial_rows], dims[spec.spatial_cols]
    r_full = er // (R * L) * (R * L)
    c_full = ec // C * C
    r_rem, c_rem = er - r_full, ec - c_full
    # (extent, rows or columns used, folds) of the full and the remainder part, per axis
    e_r = np.stack([r_full, r_full, r_rem, r_rem])
    e_c = np.stack([c_full, c_rem, c_full, c_rem])
    used_r = np.stack([R, R, -(-r_rem // L), -(-r_rem // L)])
    used_c = np.stack([C, c_rem, C, c_rem])
    folds = np.stack([r_full // (R * L), r_full // (R * L), np.ones_like(R), np.ones_like(R)]) \
        * np.stack([c_full // C, np.ones_like(C), c_full // C, np.ones_like(C)])
    live = ((e_r > 0) & (e_c > 0)).astype(np.int64)
    out = {d: np.broadcast_to(v, e_r.shape) for d, v in dims.items()}
    out[spec.spatial_rows] = np.where(live > 0, e_r, 1)
    out[spec.spatial_cols] = np.where(live > 0, e_c, 1)
    return (out["m"], out["k"], out["n"], np.where(live > 0, np.maximum(used_r, 1), 1),
            np.where(live > 0, np.maximum(used_c, 1), 1), folds * live, live)


def _output_path_cycles(dataflow_model, rows, used_rows):
    """Cycles a fold's results spend below its last used row: under a reduction down the
    columns (WS, IS, RS) the bottom used PE's sums travel the column's output path to the
    array's bottom edge, one row a cycle (the PE reference's output path); an
    output-stationary PE writes its result where it is."""
    if not dataflow_model.spec.reduction_on_rows:
        return 0
    return np.asarray(rows, dtype=np.int64) - used_rows


def trimmed_overlapped_parts(dataflow_model, m, k, n, rows, cols):
    """:func:`overlapped_parts` with edge folds trimmed to the rows and columns they use:
    each class of folds streams behind the next one's stationary load (``max(stream,
    load)`` a fold, its load that of the rows it uses), and the chain's tail is that of
    its last fold - the last non-empty class in fold order - with the output path below
    its rows."""
    cm, ck, cn, R, C, _folds, live = fold_classes(dataflow_model, m, k, n, rows, cols)
    step, tail = overlapped_parts(dataflow_model, cm, ck, cn, R, C)
    tail = np.asarray(tail + _output_path_cycles(dataflow_model, rows, R), dtype=np.int64)
    last = 3 - np.argmax(live[::-1], axis=0)            # the last live class
    return ((live * step).sum(axis=0),
            np.take_along_axis(tail, last[np.newaxis], axis=0)[0])


def vector_cycles(chip: ChipSpec, ops) -> np.ndarray:
    """Cycles for one core's vector unit to do ``ops`` lane operations."""
    vu = chip.cores.vector_unit
    per_cycle = vu.lanes * vu.ops_per_lane_per_cycle
    return np.ceil(np.asarray(ops, dtype=np.float64) / per_cycle)


def special_cycles(chip: ChipSpec, ops) -> np.ndarray:
    """Cycles for transcendental ops (exp, reciprocal) on one core's vector unit."""
    vu = chip.cores.vector_unit
    per_cycle = vu.special_ops_per_cycle or max(1.0, vu.lanes / 4)
    return np.ceil(np.asarray(ops, dtype=np.float64) / per_cycle)
