"""The table of a sweep (:func:`assemble`): one row per point, sorted by point index, with its
workload, chip, every parameter, the kept metrics (patterns expanded, per-component columns
in a fixed order), ``error`` and ``hash``.

It is built only from the points and the stored rows, never from the order in which points
finished, which is why every backend and a resumed run give the same DataFrame; it is kept
apart from running the points (:mod:`sim.apps.sweep.run`, :mod:`sim.apps.sweep.backends`).
:mod:`sim.apps.sweep.run` re-exports :func:`assemble`.
"""
from __future__ import annotations

import fnmatch
from typing import Iterable

from sim.apps.store import STRING_COLUMNS
from sim.apps.sweep.backends import _TRANSIENT
from sim.apps.sweep.plan import Point
from sim.apps.sweep.spec import BREAKDOWN_PREFIXES, LoadedSpec

# --------------------------------------------------------------------------- assembling


def _component_rank(col: str) -> tuple:
    comp = col.split(".", 1)[1] if "." in col else col
    order = {"registers": 0, "mac": 1, "vector": 2, "noc": 8, "static": 9}
    return (order.get(comp, 5), comp)


def _metric_columns(metrics: Iterable[str], available: list[str]) -> list[str]:
    cols: list[str] = []
    for m in metrics:
        if any(ch in m for ch in "*?["):
            matched = [c for c in available if fnmatch.fnmatchcase(c, m)]
            by_prefix: dict[str, list[str]] = {}
            for c in matched:
                pre = next((p for p in BREAKDOWN_PREFIXES if c.startswith(p)), "")
                by_prefix.setdefault(pre, []).append(c)
            for pre in sorted(by_prefix, key=lambda p: (p != "", p)):
                for c in sorted(by_prefix[pre], key=_component_rank if pre else (lambda c: c)):
                    if c not in cols:
                        cols.append(c)
        elif m not in cols:
            cols.append(m)
    return cols


def assemble(loaded: LoadedSpec, points: list[Point], rows: dict[str, dict], metrics=None):
    """The sweep's table: one row per point (sorted by point index) with its workload,
    chip, every parameter, the kept metrics, ``error`` and ``hash``."""
    import numpy as np
    import pandas as pd

    metrics = list(metrics if metrics is not None else loaded.metrics)
    param_cols: list[str] = []
    for ax in loaded.axes:
        for p in ax.paths:
            if p not in param_cols and p != "chip":
                param_cols.append(p)
    # columns with a value in at least one row (a key's presence depends on how rows were
    # stored - a Parquet part has the union of its rows' keys - its values do not)
    available = sorted({k for p in points if p.hash in rows for k, v in rows[p.hash].items()
                        if k not in STRING_COLUMNS and v is not None and v == v})
    mcols = _metric_columns(metrics, available)
    data: dict[str, list] = {"point": [], "workload": [], "chip": []}
    for c in param_cols:
        data[c] = []
    mvals = {c: [] for c in mcols}
    errors, hashes = [], []
    for p in sorted(points, key=lambda q: q.index):
        data["point"].append(p.index)
        data["workload"].append(p.workload)
        data["chip"].append(p.chip)
        for c in param_cols:
            data[c].append(p.params.get(c))
        row = rows.get(p.hash) if p.hash else None
        err = p.error if p.error is not None else (row.get("error") if row is not None else "not evaluated")
        if isinstance(err, str) and err.startswith(_TRANSIENT):
            err = err[len(_TRANSIENT):]
        errors.append(err if err else None)
        hashes.append(p.hash)
        for c in mcols:
            v = row.get(c) if row is not None else None
            mvals[c].append(np.nan if v is None else float(v))
    df = pd.DataFrame(data)
    df["point"] = df["point"].astype("int64")
    for c in mcols:
        df[c] = np.asarray(mvals[c], dtype="float64")
    df["error"] = pd.Series(errors, dtype="object")
    df["hash"] = pd.Series(hashes, dtype="object")
    df.attrs = {"sweep": loaded.name, "parameters": param_cols, "metrics": mcols}
    return df
