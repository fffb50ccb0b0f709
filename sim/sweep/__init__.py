"""Design-space exploration: sweeps over chip parameters and workloads.

``sim.sweep(spec, out=DIR)`` (or ``sim sweep SPEC.yaml --out DIR``) runs every point of a
spec - a base chip, one or more workloads, parameters varied by the dotted paths of
``--set`` (lists, ranges, products and zips), the metrics to keep - on a local process pool
or a Dask cluster, stores finished points in a resumable Parquet store
(:mod:`sim.store`) and returns one row per point as a pandas DataFrame.  See
:mod:`sim.sweep.spec` for the spec format and docs/sweeps.md for a walk-through.

The module is callable: ``sim.sweep(...)`` and ``sim.sweep.sweep(...)`` are the same.
"""
from __future__ import annotations

import sys as _sys
import types as _types

from .analysis import objectives_for, pareto_front
from .cli import add_sweep_parser, cmd_sweep
from .evaluate import evaluate_point
from .run import SweepFailedError, SweepStats, assemble, load_spec, plan, run_sweep, sweep
from .spec import METRICS, SweepSpec, WorkloadSpec, load_sweep_spec

__all__ = ["sweep", "run_sweep", "plan", "load_spec", "load_sweep_spec", "SweepSpec", "WorkloadSpec", "METRICS",
           "evaluate_point", "pareto_front", "SweepFailedError", "objectives_for", "assemble", "SweepStats", "add_sweep_parser",
           "cmd_sweep"]


class _CallableModule(_types.ModuleType):
    def __call__(self, *args, **kwargs):
        return sweep(*args, **kwargs)


_sys.modules[__name__].__class__ = _CallableModule
