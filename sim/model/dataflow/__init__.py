"""Dataflows: how a GEMM or convolution is laid onto a systolic array, in closed form.

The four built-in dataflows are declared as data in ``dataflows/*.yaml`` (ws, os, is, rs)
and evaluated here:

>>> from sim.model.dataflow import get_dataflow, gemm_compute_cycles
>>> get_dataflow("os").fold_report(4, 4, 4, 4, 4).compute_cycles   # SCALE-Sim reports 9
10
>>> gemm_compute_cycles(64, 128, 96, 32, 32, dataflow="rs", row_length=2)
1524

Every evaluator accepts NumPy integer arrays (broadcast together) as well as ints.  The
definitions of every count are in docs/dataflows.md; :mod:`sim.model.reference` is the PE-level
simulator they are tested against.
"""
from __future__ import annotations

from typing import Any

from sim.model.dataflow.base import Dataflow
from sim.model.dataflow.conv import ConvGemm, conv_report, rs_conv_report, scalesim_conv_gemm
from sim.model.dataflow.registry import clear_cache, dataflow_dir, get_dataflow, list_dataflows
from sim.model.dataflow.report import ACCESS_FIELDS, SCALESIM_FIELDS, FoldReport, IntLike
from sim.model.dataflow.row_stationary import RowStationaryDataflow
from sim.model.dataflow.systolic import SystolicDataflow

__all__ = [
    "ACCESS_FIELDS",
    "SCALESIM_FIELDS",
    "ConvGemm",
    "Dataflow",
    "FoldReport",
    "RowStationaryDataflow",
    "SystolicDataflow",
    "clear_cache",
    "conv_report",
    "dataflow_dir",
    "fold_report",
    "gemm_accesses",
    "gemm_compute_cycles",
    "get_dataflow",
    "list_dataflows",
    "rs_conv_report",
    "scalesim_conv_gemm",
]


def fold_report(m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike, *,
                dataflow: str | Dataflow, **options: Any) -> FoldReport:
    """:meth:`Dataflow.fold_report` of ``get_dataflow(dataflow, **options)``."""
    return get_dataflow(dataflow, **options).fold_report(m, k, n, rows, cols)


def gemm_compute_cycles(m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike, *,
                        dataflow: str | Dataflow, **options: Any) -> IntLike:
    """Stall-free cycles of GEMM (m, k, n) on rows×cols arrays; vectorised over all arguments."""
    return get_dataflow(dataflow, **options).compute_cycles(m, k, n, rows, cols)


def gemm_accesses(m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike, *,
                  dataflow: str | Dataflow, **options: Any) -> dict[str, IntLike]:
    """Access counts (words) keyed as in :data:`ACCESS_FIELDS`; vectorised like the cycles."""
    return get_dataflow(dataflow, **options).accesses(m, k, n, rows, cols)
