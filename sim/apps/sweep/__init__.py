"""Design-space exploration: sweeps over chip parameters and workloads.

``sim.sweep(spec, out=DIR)`` (or ``sim sweep SPEC.yaml --out DIR``) runs every point of a
spec - a base chip, one or more workloads, parameters varied by the dotted paths of
``--set`` (lists, ranges, products and zips), the metrics to keep - on a local process pool
or a Dask cluster, stores finished points in a resumable Parquet store
(:mod:`sim.apps.store`) and returns one row per point as a pandas DataFrame.  See
:mod:`sim.apps.sweep.spec` for the spec format and docs/sweeps.md for a walk-through.

``sim.sweep`` (the facade's function) calls :func:`sim.apps.sweep.sweep`; the package and the
function no longer share a name.
"""
from __future__ import annotations

from sim.apps.sweep.analysis import objectives_for, pareto_front
from sim.apps.sweep.evaluate import evaluate_point
from sim.apps.sweep.run import SweepFailedError, SweepStats, assemble, load_spec, plan, run_sweep, sweep
from sim.apps.sweep.spec import METRICS, SweepSpec, WorkloadSpec, load_sweep_spec

__all__ = ["sweep", "run_sweep", "plan", "load_spec", "load_sweep_spec", "SweepSpec", "WorkloadSpec", "METRICS",
           "evaluate_point", "pareto_front", "SweepFailedError", "objectives_for", "assemble", "SweepStats"]

