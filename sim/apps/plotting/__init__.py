"""Plots (matplotlib, Agg backend, PNG): rooflines, latency/energy breakdowns, Pareto
fronts and heat maps of sweeps, the validation scatter.  Every figure has a title and axis
labels with units.

Plot functions take plain data (results, DataFrames) and a path, and return the path;
they never simulate.  ``sim plot KIND RESULTS...`` is the command-line front end
(`sim plot`, in :mod:`sim.cli.plot`).

Where things are: :mod:`.style` (colours, axis labels with units, saving),
:mod:`.run_figures` (one run: :func:`roofline`, :func:`breakdown`), :mod:`.sweep_figures`
(a sweep: :func:`pareto`, :func:`heatmap`), :mod:`.validation_figures`
(:func:`validation_scatter`) and :mod:`.tables` (reading results for ``sim plot``).  A new
figure goes in the module of the data it shows and is exported here.
"""
from __future__ import annotations

from sim.apps.plotting.run_figures import breakdown, roofline
from sim.apps.plotting.style import METRIC_LABELS, _save, label_for, pd_num  # noqa: F401  (_save: tests spy on it)
from sim.apps.plotting.sweep_figures import NARROW_SPREAD, heatmap, heatmap_axes, pareto, swept_parameters
from sim.apps.plotting.tables import filter_rows, read_run_json, read_tables
from sim.apps.plotting.validation_figures import validation_scatter

__all__ = ["METRIC_LABELS", "NARROW_SPREAD", "breakdown", "filter_rows", "heatmap", "heatmap_axes", "label_for",
           "pareto", "pd_num", "read_run_json", "read_tables", "roofline", "swept_parameters", "validation_scatter"]
