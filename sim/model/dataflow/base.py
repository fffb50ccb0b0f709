"""The common face of every dataflow model: a frozen spec plus closed-form evaluators."""
from __future__ import annotations

from typing import Any

import numpy as np

from sim.model.dataflow.conv import conv_report as _conv_report
from sim.model.dataflow.report import ACCESS_FIELDS, FoldReport, IntLike, as_dims, finish_report
from sim.spec.dataflow_spec import DataflowSpec
from sim.spec.loader import YamlDoc, apply_overrides, parse_override, validate

#: the dataflow families (each a subclass of :class:`Dataflow`, registered by defining it):
#: a validated spec is modelled by the first family whose ``handles(spec)`` is true
FAMILIES: list[type["Dataflow"]] = []


class Dataflow:
    """A dataflow model.  Obtain one with :func:`sim.model.dataflow.get_dataflow`.

    All evaluators take GEMM dimensions ``m, k, n`` (C[m×n] = A[m×k]·B[k×n]) and the array
    size ``rows × cols``, as ints or broadcastable NumPy integer arrays.
    """

    def __init__(self, spec: DataflowSpec):
        self.spec = spec

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        FAMILIES.append(cls)

    @classmethod
    def handles(cls, spec: DataflowSpec) -> bool:
        """Whether this family models ``spec`` (a new family says which specs are its own)."""
        raise NotImplementedError

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
        edits = merge_edits(overrides, options)
        if not edits:
            return self
        doc = YamlDoc(self.spec.model_dump(mode="python"), {}, f"dataflow '{self.spec.name}'")
        return model_for(validate(DataflowSpec, apply_overrides(doc, edits)))

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

    def _trimmed_cycles(self, m: np.ndarray, k: np.ndarray, n: np.ndarray, R: np.ndarray, C: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def trimmed_compute_cycles(self, m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike) -> IntLike:
        """Stall-free duration when every edge fold spans only the rows and columns it uses
        (a chip's ``pads_edge_folds: false``; docs/dataflows.md): the stationary load fills
        the used rows, the stream skews across the used columns, and a reduction's sums
        still take the output path to the bottom edge.  Equal to :meth:`compute_cycles` when
        the problem fills the array, never longer; the PE reference with
        ``trim_edge_folds`` runs exactly this schedule (tests/test_edge_folds.py)."""
        (m_, k_, n_, R, C), scalar = as_dims(m=m, k=k, n=n, rows=rows, cols=cols)
        out = self._trimmed_cycles(m_, k_, n_, R, C)
        return int(out) if scalar else out

    def accesses(self, m: IntLike, k: IntLike, n: IntLike, rows: IntLike, cols: IntLike) -> dict[str, IntLike]:
        """Access counts in words, keyed as in :data:`sim.model.dataflow.ACCESS_FIELDS`."""
        (m_, k_, n_, R, C), scalar = as_dims(m=m, k=k, n=n, rows=rows, cols=cols)
        v = self._values(m_, k_, n_, R, C)
        return {f: (int(v[f]) if scalar else v[f]) for f in ACCESS_FIELDS}

    def conv_report(self, conv: Any, rows: int, cols: int, **options: Any) -> FoldReport:
        """Schedule and accesses of a :class:`~sim.ir.ops.Conv2d` (see :mod:`sim.model.dataflow.conv`)."""
        return _conv_report(self, conv, rows, cols, **options)


def model_for(spec: DataflowSpec) -> Dataflow:
    """The model object for a validated spec: the first registered family that handles it."""
    for family in FAMILIES:
        if family.handles(spec):
            return family(spec)
    raise ValueError(f"no dataflow family models {spec.name!r} (families: "
                     f"{', '.join(f.__name__ for f in FAMILIES)})")  # a programming error: families cover every spec


def merge_edits(overrides: dict[str, Any] | list[str] | None, options: dict[str, Any]) -> dict[str, Any] | list[str] | None:
    """Dotted ``overrides`` (a mapping or ``--set`` strings) and top-level ``options`` as one edit set."""
    if not options:
        return overrides
    if overrides is None:
        return dict(options)
    if isinstance(overrides, dict):
        return {**overrides, **options}
    return {**dict(parse_override(o) for o in overrides), **options}
