"""The result object of the fold models, plus the shape checks and small integer helpers.

Everything here accepts Python ints or NumPy integer arrays (broadcast together), because the
mapper evaluates thousands of candidate tiles in one call.  A :class:`FoldReport` built from
plain ints holds plain ints and floats; one built from arrays holds arrays.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Union

import numpy as np

from sim.errors import ShapeError

IntLike = Union[int, np.integer, np.ndarray]

#: access-count fields, in words; see docs/dataflows.md for the exact definitions
ACCESS_FIELDS: tuple[str, ...] = (
    "sram_reads_input",
    "sram_reads_weight",
    "sram_writes_output",
    "sram_reads_psum",
    "rf_reads_input",
    "rf_writes_input",
    "rf_reads_weight",
    "rf_writes_weight",
    "rf_reads_psum",
    "rf_writes_psum",
    "hops_input",
    "hops_weight",
    "hops_psum",
)

#: what SCALE-Sim 3.0.0 reports for the same layer (SRAM IFMAP Reads, SRAM Filter Reads,
#: SRAM OFMAP Writes); they differ from ours only for OS ofmap writes (see docs)
SCALESIM_FIELDS: tuple[str, ...] = (
    "scalesim_sram_reads_input",
    "scalesim_sram_reads_weight",
    "scalesim_sram_writes_output",
)


@dataclass(frozen=True)
class FoldReport:
    """Closed-form schedule and access counts of one GEMM (or lowered convolution) on one array.

    ``Sr``/``Sc``/``T`` are the extents mapped to array rows, array columns and time.  For the
    row-stationary dataflow ``row_length`` (L) k-indices share one PE, so one array row covers
    L of ``Sr``.  ``passes`` repeats the whole fold grid in time (the filters of an Eyeriss-
    style row-stationary convolution; 1 otherwise), so ``folds = passes * row_folds *
    col_folds``.

    ``compute_cycles`` is the true duration (folds back to back, every fold padded to the full
    array as SCALE-Sim does); ``scalesim_cycles = compute_cycles - 1`` is SCALE-Sim's
    "Total Cycles" (the index of the last cycle, counted from 0).
    """

    dataflow: str
    rows: IntLike
    cols: IntLike
    m: IntLike
    k: IntLike
    n: IntLike
    row_length: IntLike
    Sr: IntLike
    Sc: IntLike
    T: IntLike
    row_folds: IntLike
    col_folds: IntLike
    passes: IntLike
    folds: IntLike
    cycles_per_fold: IntLike
    compute_cycles: IntLike
    scalesim_cycles: IntLike
    macs: IntLike
    mapping_efficiency: Any
    utilization: Any
    scalesim_overall_utilization: Any
    scalesim_compute_utilization: Any
    sram_reads_input: IntLike
    sram_reads_weight: IntLike
    sram_writes_output: IntLike
    sram_reads_psum: IntLike
    rf_reads_input: IntLike
    rf_writes_input: IntLike
    rf_reads_weight: IntLike
    rf_writes_weight: IntLike
    rf_reads_psum: IntLike
    rf_writes_psum: IntLike
    hops_input: IntLike
    hops_weight: IntLike
    hops_psum: IntLike
    scalesim_sram_reads_input: IntLike
    scalesim_sram_reads_weight: IntLike
    scalesim_sram_writes_output: IntLike

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def accesses(self) -> dict[str, IntLike]:
        """The access counts only (words), keyed as in :data:`ACCESS_FIELDS`."""
        return {f: getattr(self, f) for f in ACCESS_FIELDS}

    @property
    def sram_reads(self) -> IntLike:
        """All SRAM reads: inputs, weights and partial sums read back."""
        return self.sram_reads_input + self.sram_reads_weight + self.sram_reads_psum

    @property
    def sram_writes(self) -> IntLike:
        return self.sram_writes_output


def finish_report(values: dict[str, Any], scalar: bool) -> FoldReport:
    """Build a FoldReport; with ``scalar`` every NumPy value becomes a Python int/float."""
    if scalar:
        out: dict[str, Any] = {}
        for f in fields(FoldReport):
            v = values[f.name]
            if isinstance(v, np.ndarray):
                v = v.item()
            elif isinstance(v, np.generic):
                v = v.item()
            out[f.name] = v
        values = out
    return FoldReport(**values)


# --------------------------------------------------------------------------- shape checks


def as_dims(**dims: Any) -> tuple[list[np.ndarray], bool]:
    """Check and broadcast positive integer dimensions.

    Returns the int64 arrays (broadcast to one shape) and whether every input was a scalar.
    Zero, negative, non-integer or non-numeric values raise :class:`ShapeError` naming the
    dimension (and the first offending index for arrays).
    """
    if all(type(v) is int and v >= 1 for v in dims.values()):
        # the common case (plain positive ints): nothing to check or broadcast
        return [np.array(v, dtype=np.int64) for v in dims.values()], True
    vals = list(dims.values())
    if all(type(v) is int or (type(v) is np.ndarray and v.dtype == np.int64) for v in vals):
        # the mapper's case (int64 arrays and ints): one check for all, then broadcast
        if all((v >= 1) if type(v) is int else bool((v >= 1).all()) for v in vals):
            try:
                out = np.broadcast_arrays(*[np.asarray(v) for v in vals])
            except ValueError:
                pass  # the general path below reports it
            else:
                return [np.array(a) for a in out], not any(type(v) is np.ndarray and v.ndim for v in vals)
    arrays = []
    scalar = True
    for name, value in dims.items():
        if isinstance(value, (bool, np.bool_)):
            raise ShapeError(f"dimension {name} must be a positive integer, got {value!r}")
        try:
            arr = np.asarray(value)
        except Exception:  # pragma: no cover - exotic objects
            raise ShapeError(f"dimension {name} must be a positive integer, got {value!r}") from None
        if arr.ndim:
            scalar = False
        if arr.dtype.kind == "b" or arr.dtype.kind not in "iuf":
            raise ShapeError(f"dimension {name} must be a positive integer, got {value!r}")
        if arr.dtype.kind == "f":
            if not np.all(np.isfinite(arr)) or np.any(arr != np.floor(arr)):
                raise ShapeError(f"dimension {name} must be a whole number, got {value!r}")
            if np.any(np.abs(arr) > 2**62):
                raise ShapeError(f"dimension {name} is too large: {value!r}")
        arr = arr.astype(np.int64)
        bad = arr < 1
        if np.any(bad):
            if arr.ndim:
                idx = tuple(int(i) for i in np.argwhere(bad)[0])
                raise ShapeError(
                    f"dimension {name} must be >= 1, got {int(arr[idx])} at index {idx}")
            raise ShapeError(f"dimension {name} must be >= 1, got {int(arr)}")
        arrays.append(arr)
    try:
        arrays = list(np.broadcast_arrays(*arrays))
    except ValueError as exc:
        shapes = ", ".join(f"{n}{np.shape(a)}" for n, a in zip(dims, arrays))
        raise ShapeError(f"dimension arrays do not broadcast together: {shapes}") from exc
    return [np.array(a, dtype=np.int64) for a in arrays], scalar


def cdiv(a: Any, b: Any) -> Any:
    """Ceiling division of positive integers (works on arrays)."""
    return -(-a // b)


def fold_sum(extent: Any, capacity: Any, f) -> Any:
    """Σ over the folds of ``extent`` in chunks of ``capacity`` of ``f(used)``.

    Every fold but the last uses ``capacity``; the last uses ``extent % capacity`` when that
    is not zero.  ``f`` must accept arrays and return 0 for nothing.
    """
    full = extent // capacity
    rem = extent % capacity
    return full * f(capacity) + np.where(rem > 0, f(rem), 0)


def safe_ratio(num: Any, den: Any) -> Any:
    """num / den as float, NaN where den is 0."""
    num = np.asarray(num, dtype=np.float64)
    den = np.asarray(den, dtype=np.float64)
    out = np.full(np.broadcast(num, den).shape, np.nan)
    np.divide(num, den, out=out, where=den != 0)
    return out
