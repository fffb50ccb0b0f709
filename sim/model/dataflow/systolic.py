"""Weight-, output- and input-stationary systolic arrays: SCALE-Sim v2/v3's fold model, exactly.

SCALE-Sim (``scalesim/compute/systolic_compute_{os,ws,is}.py``) maps ``Sr`` onto the R array
rows, ``Sc`` onto the C columns and streams ``T`` in time, in
``row_folds · col_folds = ceil(Sr/R) · ceil(Sc/C)`` folds run back to back.  Every fold, edge
folds included, is padded to the full array, so every fold lasts the same:

* output-stationary (rows m, cols n, time k): ``R + C + T - 2``
* weight- and input-stationary (rows k): ``2R + C + T - 2`` (R cycles to shift the stationary
  operand in, then the skewed stream, then the drain)

SCALE-Sim reports ``folds · cycles_per_fold - 1``.  Access counts are defined in
docs/dataflows.md and checked against the PE-level reference in :mod:`sim.model.reference`.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from sim.model.dataflow.base import Dataflow
from sim.model.dataflow.report import cdiv, fold_sum, safe_ratio


def _tri(u: Any) -> Any:
    """u(u+1)/2: register writes to shift u stationary words down a column (row i: i+1)."""
    return u * (u + 1) // 2


def _tri_hops(u: Any) -> Any:
    """u(u-1)/2: PE-to-PE hops to shift u stationary words down a column."""
    return u * (u - 1) // 2


class SystolicDataflow(Dataflow):
    """WS, OS, IS (and any other declaration of the same families, see DataflowSpec)."""

    @classmethod
    def handles(cls, spec) -> bool:
        return not spec.is_row_stationary

    def _extents(self, m, k, n):
        d = {"m": m, "k": k, "n": n}
        s = self.spec
        return d[s.spatial_rows], d[s.spatial_cols], d[s.temporal]

    def _cycles(self, m, k, n, R, C):
        Sr, Sc, T = self._extents(m, k, n)
        folds = cdiv(Sr, R) * cdiv(Sc, C)
        per = (R + C + T - 2) if not self.spec.reduction_on_rows else (2 * R + C + T - 2)
        return folds * per

    def _trimmed_cycles(self, m, k, n, R, C):
        # per fold: OS ur + uc + T - 2; WS/IS ur (load) + T + (R - 1) (skew and output path)
        # + (uc - 1); summed over the folds, the used rows add up to Sr and the columns to Sc
        Sr, Sc, T = self._extents(m, k, n)
        rf, cf = cdiv(Sr, R), cdiv(Sc, C)
        per_fold = (T - 2) if not self.spec.reduction_on_rows else (T + R - 2)
        return cf * Sr + rf * Sc + rf * cf * per_fold

    def _values(self, m, k, n, R, C) -> dict[str, Any]:
        s = self.spec
        Sr, Sc, T = self._extents(m, k, n)
        row_folds = cdiv(Sr, R)
        col_folds = cdiv(Sc, C)
        folds = row_folds * col_folds
        output_stationary = not s.reduction_on_rows
        per = (R + C + T - 2) if output_stationary else (2 * R + C + T - 2)
        cycles = folds * per
        macs = m * k * n
        outputs = m * n
        acc: dict[str, Any] = {}
        if output_stationary:
            # the operand indexed by (Sr, k) enters at the left edge, once per column fold;
            # the one indexed by (k, Sc) enters at the top, once per row fold
            row_op = "input" if s.spatial_rows == "m" else "weight"
            col_op = "weight" if row_op == "input" else "input"
            acc[f"sram_reads_{row_op}"] = col_folds * Sr * T
            acc[f"sram_reads_{col_op}"] = row_folds * Sc * T
            acc["sram_writes_output"] = outputs
            acc["sram_reads_psum"] = np.zeros_like(macs)
            for op in ("input", "weight"):
                acc[f"rf_reads_{op}"] = macs
                acc[f"rf_writes_{op}"] = macs
            acc[f"hops_{row_op}"] = T * Sr * (Sc - col_folds)
            acc[f"hops_{col_op}"] = T * Sc * (Sr - row_folds)
            acc["hops_psum"] = np.zeros_like(macs)
            ss_out = outputs + folds * (R + C)  # SCALE-Sim adds shape[0]+shape[1] per fold
        else:
            stat = "input" if s.stationary_operand == "input" else "weight"
            stream = "weight" if stat == "input" else "input"
            # Sr == k; the stationary operand is k x Sc, the streamed one T x k
            acc[f"sram_reads_{stat}"] = k * Sc
            acc[f"sram_reads_{stream}"] = col_folds * T * k
            acc["sram_writes_output"] = row_folds * outputs
            acc["sram_reads_psum"] = (row_folds - 1) * outputs
            acc[f"rf_reads_{stat}"] = macs
            acc[f"rf_writes_{stat}"] = Sc * fold_sum(k, R, _tri)
            acc[f"rf_reads_{stream}"] = macs
            acc[f"rf_writes_{stream}"] = macs
            acc[f"hops_{stat}"] = Sc * fold_sum(k, R, _tri_hops)
            acc[f"hops_{stream}"] = T * k * (Sc - col_folds)
            acc["hops_psum"] = T * Sc * (k - row_folds)
            ss_out = acc["sram_writes_output"]
        acc["rf_reads_psum"] = macs - acc["sram_writes_output"]
        acc["rf_writes_psum"] = macs - acc["sram_writes_output"]
        return dict(
            dataflow=s.name, rows=R, cols=C, m=m, k=k, n=n, row_length=np.ones_like(m),
            Sr=Sr, Sc=Sc, T=T, row_folds=row_folds, col_folds=col_folds,
            passes=np.ones_like(m), folds=folds,
            cycles_per_fold=per, compute_cycles=cycles, scalesim_cycles=cycles - 1, macs=macs,
            mapping_efficiency=safe_ratio(Sr * Sc, folds * R * C),
            utilization=safe_ratio(macs, cycles * R * C),
            scalesim_overall_utilization=safe_ratio(macs, (cycles - 1) * R * C),
            # SCALE-Sim's "Compute Util %" takes a WS/IS fold as 2R + 2C + T - 3 cycles (the
            # unskewed filter demand's rows + cols - 1), one C - 1 more than it simulates
            scalesim_compute_utilization=safe_ratio(
                macs, folds * (per if output_stationary else per + C - 1) * R * C),
            scalesim_sram_reads_input=acc["sram_reads_input"],
            scalesim_sram_reads_weight=acc["sram_reads_weight"],
            scalesim_sram_writes_output=ss_out,
            **acc,
        )
