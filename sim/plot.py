"""Figures of results - the public plotting API (``sim.plot.roofline(...)``; ``sim plot KIND`` on
the command line draws the same figures).

Each function takes plain data - a run's result, a sweep's DataFrame, ``sim.validate``'s table -
and the path of the PNG to write (its folder is created), draws with matplotlib's Agg backend and
returns that path as a :class:`pathlib.Path`; none of them simulates.  Every axis is labelled with
its unit: seconds, joules, FLOP/s, FLOP per DRAM byte, mm², tokens/s, W (the unit of a sweep
metric is in its name: ``area_mm2``, ``energy_per_token_j``, ``tokens_per_s``).

Write figures to a folder you choose (a notebook's, a report's), never inside the installed
package.
"""
from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from sim.apps import plotting as _plotting

__all__ = ["breakdown", "heatmap", "pareto", "roofline", "validation_scatter"]


def _ops(results):
    """The op rows of an LLM run (an :class:`~sim.LlmRun` or its ``to_dict()``), else ``results``."""
    if isinstance(results, Mapping) and "ops" in results:
        return list(results["ops"])
    return results


def _out(path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def roofline(results, chip, path, title: str | None = None) -> Path:
    """A roofline of ``chip`` (peak FLOP/s per number format, DRAM bandwidth in bytes/s) with each
    op placed at its arithmetic intensity (FLOP per DRAM byte its simulated mapping moves) and its
    achieved FLOP/s; a marker's area is the op's share of the run's time.

    ``results``: an :class:`~sim.LlmRun` (from :func:`sim.run_llm`; its ``ops`` are placed), its
    ``ops``, or :class:`~sim.OpResult` objects (from :func:`sim.simulate`); ``chip``: a
    :func:`sim.load_chip` chip.  Returns the PNG's path."""
    return _plotting.roofline(_ops(results), chip, _out(path), title=title)


def breakdown(result, path, title: str | None = None, top: int = 12,
              components_j: Mapping[str, float] | None = None) -> Path:
    """Where an LLM run's time (s) and energy (J) go: by op (summed over layers; the ``top`` largest,
    the rest as "other") and by component - each memory level, ``mac``, ``vector``, ``noc``.

    ``result``: an :class:`~sim.LlmRun` (or its ``to_dict()``, as ``sim run --json`` writes it);
    ``components_j``: energy by component in J (default: the run's ``energy_components_j``).
    Returns the PNG's path."""
    return _plotting.breakdown(result, _out(path), title=title, top=top, components_j=components_j)


def pareto(df, path, x: str = "area_mm2", y: str = "tokens_per_s", color: str | None = None,
           title: str | None = None, annotate: int = 6) -> Path:
    """A sweep's points, metric ``x`` against metric ``y`` (columns of :func:`sim.sweep`'s
    DataFrame, in the units their names carry), with the Pareto front (:func:`sim.pareto_front`)
    drawn as a line; each metric's direction is its usual one (more tokens/s, less area, energy
    or latency is better).  ``color``: a parameter column to colour the points by; ``annotate``:
    label up to this many front points.  Failed points are left out.  Returns the PNG's path."""
    return _plotting.pareto(df, _out(path), x=x, y=y, color=color, title=title, annotate=annotate)


def heatmap(df, path, x: str, y: str, z: str = "tokens_per_s", title: str | None = None,
            agg: str = "best") -> Path:
    """A sweep as a heat map: parameter ``x`` across, parameter ``y`` down (columns of
    :func:`sim.sweep`'s DataFrame: dotted chip paths such as ``cores.arrays.0.rows``), metric ``z``
    as colour, its values written in the cells that fit them.  Where other parameters vary too, a
    cell shows the ``agg`` over them: ``best`` (the max, or the min of a cost such as latency or
    energy), ``mean``, ``min`` or ``max``.  Returns the PNG's path."""
    return _plotting.heatmap(df, _out(path), x=x, y=y, z=z, title=title, agg=agg)


def validation_scatter(df, path, title: str = "Predicted vs measured") -> Path:
    """Predicted against measured time (ms) of :func:`sim.validate`'s cases, with the ±10 % and
    ±25 % bands, one colour per kind and one marker per number format, and the median, p90 and
    signed mean error.  Returns the PNG's path."""
    return _plotting.validation_scatter(df, _out(path), title)

