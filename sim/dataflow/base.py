"""The common face of every dataflow model: a frozen spec plus closed-form evaluators."""
from __future__ import annotations

from typing import Any

import numpy as np

from ..config.dataflow_spec import DataflowSpec
from .report import ACCESS_FIELDS, FoldReport, IntLike, as_dims, finish_report


class Dataflow:
    """A dataflow model.  Obtain one with :func:`sim.dataflow.get_dataflow`.

    All evaluators take GEMM dimensions ``m, k, n`` (C[m×n] = A[m×k]·B[k×n]) and the array
    size ``rows × cols``, as ints or broadcastable NumPy integer arrays.
    """

    def __init__(self, spec: DataflowSpec):
        self.spec = spec

    # -- identity ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def row_length(self) -> int:
        return self.spec.row_length

    def __repr__(self) -> str:
        extra = f", row_length={self.spec.row_length}" if self.spec.is_row_stationary else ""
        return f"{type(self).__name__}({self.spec.name!r}{extra})"

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and other.spec == self.spec  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash((type(self).__name__, self.spec))

    def with_options(self, overrides: dict[str, Any] | list[str] | None = None, **options: Any) -> "Dataflow":
        """A copy with spec fields changed (``row_length=4``, or dotted ``overrides``)."""
        from .registry import get_dataflow

        return get_dataflow(self.spec, overrides=overrides, **options)

    # -- evaluators -------------------------------------------------------------------
    def _values(self, m: np.ndarray, k: np.ndarray, n: np.ndarray, R: np.ndarray, C: np.ndarray) -> dict[str, Any]:
        raise NotImplementedError

    def _cycles(self, m: np.ndarray, k: np.ndarray, n: np.ndarray, R: np.ndarray, C: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def fold_report(self, m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike) -> FoldReport:
        """Full schedule and access counts of GEMM (m, k, n) on a rows×cols array."""
        (m_, k_, n_, R, C), scalar = as_dims(m=m, k=k, n=n, rows=rows, cols=cols)
        return finish_report(self._values(m_, k_, n_, R, C), scalar)

    def compute_cycles(self, m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike) -> IntLike:
        """Stall-free duration in cycles (folds × cycles per fold)."""
        (m_, k_, n_, R, C), scalar = as_dims(m=m, k=k, n=n, rows=rows, cols=cols)
        out = self._cycles(m_, k_, n_, R, C)
        return int(out) if scalar else out

    def accesses(self, m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike) -> dict[str, IntLike]:
        """Access counts in words, keyed as in :data:`sim.dataflow.ACCESS_FIELDS`."""
        (m_, k_, n_, R, C), scalar = as_dims(m=m, k=k, n=n, rows=rows, cols=cols)
        v = self._values(m_, k_, n_, R, C)
        return {f: (int(v[f]) if scalar else v[f]) for f in ACCESS_FIELDS}

    def conv_report(self, conv: Any, rows: int, cols: int, **options: Any) -> FoldReport:
        """Schedule and accesses of a :class:`~sim.workload.ops.Conv2d` (see :mod:`sim.dataflow.conv`)."""
        from .conv import conv_report

        return conv_report(self, conv, rows, cols, **options)
