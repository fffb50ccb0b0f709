"""Row-stationary (Eyeriss) adapted to GEMM, with a row length L.

Each PE holds, in its weight register file, a segment of L consecutive k of one weight
column.  Array row i of a fold covers k indices ``k0 + i·L … k0 + i·L + L - 1``; array column
j covers weight column ``n0 + j``; tokens (m) stream in time.  For every token a PE does L
MACs over L cycles, accumulating locally; in its last cycle it also adds the partial sum of
the PE above and passes the result down (or out of the array at the bottom).

* folds = ceil(k / (R·L)) · ceil(n / C)
* cycles per fold = R·L (weight load, one word per column per cycle)
  + L·T (T tokens, L cycles each) + (R - 1) (psum skew down) + (C - 1) (input skew across)

With L = 1 this is the weight-stationary model exactly (2R + C + T - 2).  A larger L
divides the reduction folds - hence the partial sums written and read back, and the fill
and drain paid per fold - by up to L, at the price of L weight words per PE (see
docs/dataflows.md for the cycle trade-off).  In the last fold the k segment may be short;
a partly filled PE keeps its valid weights in its *last* slots ("right-aligned"), so its
final cycle is a real MAC.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sim.model.dataflow.base import Dataflow
from sim.model.dataflow.report import cdiv, fold_sum, safe_ratio


def _used_pes(ku: Any, L: int) -> Any:
    return cdiv(ku, L)


def _weight_writes(ku: Any, L: int) -> Any:
    """Register writes to load ku valid weight slots into one column (PE row i: i + 1 each)."""
    ur = _used_pes(ku, L)
    last = ku - (ur - 1) * L
    return L * (ur - 1) * ur // 2 + last * ur


def _weight_hops(ku: Any, L: int) -> Any:
    ur = _used_pes(ku, L)
    last = ku - (ur - 1) * L
    return L * (ur - 1) * (ur - 2) // 2 + last * (ur - 1)


class RowStationaryDataflow(Dataflow):
    """RS on GEMMs (``row_length`` from the spec, overridable per call)."""

    @classmethod
    def handles(cls, spec) -> bool:
        return spec.is_row_stationary

    def _cycles(self, m, k, n, R, C):
        L = self.spec.row_length
        return cdiv(k, R * L) * cdiv(n, C) * (R * L + L * m + R + C - 2)

    def _trimmed_cycles(self, m, k, n, R, C):
        # per fold: ur·L (load into the used rows) + L·m + (R - 1) (psum skew and output
        # path) + (uc - 1); a fold's used rows are R, the last one's ceil(k_rem / L)
        L = self.spec.row_length
        cap = R * L
        rf, cf = cdiv(k, cap), cdiv(n, C)
        used_rows = k // cap * R + cdiv(k % cap, L)
        return cf * L * used_rows + rf * n + rf * cf * (L * m + R - 2)

    def _values(self, m, k, n, R, C) -> dict[str, Any]:
        s = self.spec
        L = s.row_length
        cap = R * L
        row_folds = cdiv(k, cap)
        col_folds = cdiv(n, C)
        folds = row_folds * col_folds
        per = R * L + L * m + R + C - 2
        cycles = folds * per
        macs = m * k * n
        outputs = row_folds * m * n
        used_rows = fold_sum(k, cap, lambda ku: np.where(ku > 0, _used_pes(ku, L), 0))
        acc = dict(
            sram_reads_weight=k * n,
            sram_reads_input=col_folds * m * k,
            sram_writes_output=outputs,
            sram_reads_psum=(row_folds - 1) * m * n,
            rf_reads_input=macs,
            rf_writes_input=macs,
            rf_reads_weight=macs,
            rf_writes_weight=n * fold_sum(k, cap, lambda ku: np.where(ku > 0, _weight_writes(ku, L), 0)),
            rf_reads_psum=macs - outputs,
            rf_writes_psum=macs - outputs,
            hops_input=m * k * (n - col_folds),
            hops_weight=n * fold_sum(k, cap, lambda ku: np.where(ku > 0, _weight_hops(ku, L), 0)),
            hops_psum=m * n * (used_rows - row_folds),
        )
        return dict(
            dataflow=s.name, rows=R, cols=C, m=m, k=k, n=n, row_length=np.full_like(m, L),
            Sr=k, Sc=n, T=m, row_folds=row_folds, col_folds=col_folds,
            passes=np.ones_like(m), folds=folds,
            cycles_per_fold=per, compute_cycles=cycles, scalesim_cycles=cycles - 1, macs=macs,
            mapping_efficiency=safe_ratio(k * n, folds * R * L * C),
            utilization=safe_ratio(macs, cycles * R * C),
            scalesim_overall_utilization=safe_ratio(macs, (cycles - 1) * R * C),
            scalesim_compute_utilization=safe_ratio(macs, cycles * R * C),
            scalesim_sram_reads_input=acc["sram_reads_input"],
            scalesim_sram_reads_weight=acc["sram_reads_weight"],
            scalesim_sram_writes_output=acc["sram_writes_output"],
            **acc,
        )
