"""PE-level reference simulator: every PE register, every cycle, real numbers.

This is the ground truth the closed-form models in :mod:`sim.model.dataflow` are tested against.
It is deliberately plain - Python loops over cycles and PEs - and slow: use it on arrays of
at most ~8×8 and dimensions of a few dozen.

What it simulates (docs/dataflows.md has the pictures):

* **Output-stationary** (``_run_output_stationary``): tokens of the row operand enter the
  left edge of array row i at cycle ``t + i`` and move right one PE per cycle; tokens of
  the column operand enter the top of column j at ``t + j`` and move down.  A PE multiplies
  the two tokens it holds, accumulates locally, and sends its result out when its last
  token (``t = T - 1``) has been used.

* **Reduction down the columns** (``_run_reduction``: WS, IS, RS, and the RS convolution):
  the stationary words are first loaded (shifted down the columns, or multicast along the
  rows) in ``R·L`` cycles; then each array row i receives a stream of ``(token, slot)``
  control tokens at its left edge from cycle ``R·L + i`` on, one per cycle, that move right
  one PE per cycle.  A PE does the MAC of the slot it is told, accumulates L slots locally,
  and in the token's last slot adds the partial sum that the PE above left in its output
  register the cycle before.  The bottom valid PE sends the sum down the column's output
  path to the SRAM; the first row reads a partial sum back from the SRAM when a previous
  fold already wrote one for the same output.

Edge folds are padded the way SCALE-Sim pads them: positions outside the problem carry
bubbles that take time but do no work and touch no storage, so every fold lasts as long as
a full one.  With ``trim_edge_folds`` (a chip's ``pads_edge_folds: false``) an edge fold
loads and streams through only the rows and columns it uses, and a reduction's sums still
take the output path to the bottom edge.  A fold ends with its last output slot (the bottom-right PE finishing its last
token); folds run back to back.

Every SRAM read/write and every register-file read/write of a real word is counted, with
the conventions of docs/dataflows.md; bubbles count nothing.  Internal inconsistencies (a
partial sum arriving a cycle late, a weight not loaded in time, two tokens meeting out of
step) raise ``RuntimeError``: that is a bug in this file, never a user error.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np

from sim.errors import ShapeError
from sim.model.dataflow.base import Dataflow
from sim.model.dataflow.registry import get_dataflow
from sim.model.reference.pe_cycles import _Counts, _Fold, _run_output_stationary, _run_reduction


@dataclass
class ReferenceResult:
    """What the reference simulation produced."""

    output: np.ndarray
    compute_cycles: int          # duration: folds back to back, each ending at its last output slot
    fold_cycles: list[int]       # duration of each fold, in the order they ran
    macs: int
    counts: dict[str, int] = field(default_factory=dict)  # keys: sim.model.dataflow.ACCESS_FIELDS

    @property
    def scalesim_cycles(self) -> int:
        """Index of the last cycle (SCALE-Sim's "Total Cycles")."""
        return self.compute_cycles - 1

    @property
    def folds(self) -> int:
        return len(self.fold_cycles)



def _check_matrices(A: np.ndarray, B: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    A = np.asarray(A)
    B = np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ShapeError(f"need A[m×k] and B[k×n], got {A.shape} and {B.shape}")
    if min(A.shape + B.shape) < 1:
        raise ShapeError("empty matrices")
    if int(rows) < 1 or int(cols) < 1:
        raise ShapeError(f"array must be at least 1×1, got {rows}×{cols}")
    return A.astype(object), B.astype(object)


def _stationary_slot(i: int, l: int, k0: int, ku: int, L: int) -> Optional[int]:
    """k index held in slot l of PE row i (right-aligned in a partly filled last PE)."""
    ur = -(-ku // L)
    if i < ur - 1:
        return k0 + i * L + l
    if i == ur - 1:
        last = ku - (ur - 1) * L
        if l >= L - last:
            return k0 + i * L + (l - (L - last))
    return None


def simulate_gemm(dataflow: str | Dataflow, A: np.ndarray, B: np.ndarray, rows: int, cols: int,
                  trim_edge_folds: bool = False, **options: Any) -> ReferenceResult:
    """Simulate C = A·B PE by PE under ``dataflow`` (name or model; ``options`` e.g. row_length).

    ``trim_edge_folds``: an edge fold loads and streams through only the rows and columns
    it uses instead of carrying padding bubbles through the whole array (a chip's
    ``pads_edge_folds: false``); a reduction's sums still take the output path down to the
    bottom edge.  Counts are the same either way (bubbles count nothing)."""
    df = get_dataflow(dataflow, **options)
    A, B = _check_matrices(A, B, rows, cols)
    R, C = int(rows), int(cols)
    m, k = A.shape
    n = B.shape[1]
    spec = df.spec
    cnt = _Counts()
    if not spec.reduction_on_rows:
        if spec.spatial_rows == "m":
            out, fc, macs = _run_output_stationary(A, B, R, C, "input", "weight", cnt, trim=trim_edge_folds)
        else:
            out_t, fc, macs = _run_output_stationary(B.T, A.T, R, C, "weight", "input", cnt, trim=trim_edge_folds)
            out = out_t.T
        return ReferenceResult(np.array(out.tolist(), dtype=np.int64) if _all_int(out) else out,
                               sum(fc), fc, macs, cnt.result())
    L = spec.row_length
    if spec.stationary_operand == "input":     # IS: stationary A^T (k × m), stream B^T
        Z, X, stat, stream = A.T, B.T, "input", "weight"
    else:                                      # WS / RS: stationary B (k × n), stream A
        Z, X, stat, stream = B, A, "weight", "input"
    Sc = Z.shape[1]
    T = X.shape[0]
    folds: list[_Fold] = []
    cap = R * L
    for fc_ in range(-(-Sc // C)):
        for fr in range(-(-k // cap)):
            k0, c0 = fr * cap, fc_ * C
            ku, uc = min(cap, k - k0), min(C, Sc - c0)

            def weight(i, j, l, k0=k0, ku=ku, uc=uc, c0=c0):
                kk = _stationary_slot(i, l, k0, ku, L)
                if kk is None or j >= uc:
                    return None
                return (Z[kk, c0 + j], ("Z", kk, c0 + j))

            def inp(i, j, t, l, k0=k0, ku=ku, uc=uc):
                kk = _stationary_slot(i, l, k0, ku, L)
                if kk is None or j >= uc:
                    return None
                return (X[t, kk], ("X", t, kk))

            def out_addr(j, t, c0=c0, uc=uc):
                return (t, c0 + j) if j < uc else None

            folds.append(_Fold(T, weight, inp, out_addr))
    sram: dict[Any, Any] = {}
    fc, macs = _run_reduction(folds, R, C, L, stat=stat, stream=stream, weight_delivery="column_shift",
                              input_delivery="row_systolic", window=1, cnt=cnt, sram_out=sram,
                              trim=trim_edge_folds)
    out = np.zeros((T, Sc), dtype=object)
    for (t, c), v in sram.items():
        out[t, c] = v
    if stat == "input":
        out = out.T                            # IS produced C^T (n × m)
    return ReferenceResult(np.array(out.tolist(), dtype=np.int64) if _all_int(out) else out,
                           sum(fc), fc, macs, cnt.result())


def _all_int(a: np.ndarray) -> bool:
    return all(isinstance(v, (int, np.integer)) and abs(int(v)) < 2**62 for v in a.flat)


# --------------------------------------------------------------------------- convolutions
