"""sim: a cycle-level simulator of AI accelerators for LLM inference.

Public API (this facade; everything else is an implementation module):

* :func:`load_chip` - a chip from ``arch_configs/`` (name) or a YAML path, with ``--set``-style overrides
* :func:`simulate` / :func:`simulate_gemm` - one op on a chip -> :class:`OpResult`
* :func:`run_llm` - a model's prefill / decode / generation on a chip -> :class:`LlmRun` (frozen, typed
  metrics and op rows; ``to_dict()`` is ``sim run --json``; a read-only mapping for dict-style code),
  its ops lowered to kernels by the chip's software stack (``stack=``; :mod:`sim.model.stacks`); the
  model edited first with ``model_set=["max_context=131072"]`` or ``{"max_context": 131072}``, as
  ``sim run --model-set`` (:func:`serve` takes ``model_set=`` too; a sweep workload ``model_set:``)
* :func:`run_network` - a convolutional network's layers (``networks/``, e.g. ``alexnet``) on a chip at a
  batch size -> :class:`~sim.apps.cnn.NetworkResult` (frames/s, DRAM accesses per MAC, energy, a
  DataFrame of layers; ``to_dict()`` is ``sim conv --json``)
* :func:`sweep` - a design-space sweep (YAML spec or dict) -> pandas DataFrame; :func:`run_sweep` -
  the same with the run's statistics (points simulated, reused from the store, failed);
  :func:`pareto_front` - its non-dominated rows; :func:`read_results` / :func:`export_csv` - a
  results store's table, as a DataFrame or a CSV file
* :func:`design_point` - power (W), area (mm²), perf/W and perf/mm² of an LLM run on its chip;
  :func:`energy_by_op` - the run's energy (J) per op; the run's ``energy_components_j`` splits it
  by memory level and unit
* :mod:`sim.plot` - figures to PNG files in a folder you choose: ``roofline``, ``breakdown``,
  ``pareto``, ``heatmap``, ``validation_scatter`` (loaded on first use)
* :func:`validate` - predicted vs measured GPU cases -> pandas DataFrame
* :func:`serve` - request-level serving (SimPy) on a chip -> per-request and per-iteration DataFrames
* op types: :class:`Gemm`, :class:`Conv2d`, :class:`Attention`, :class:`VectorOp`, :class:`Copy`, :class:`Collective`

The layers below import one way (docs/architecture.md): :mod:`sim.cli` (one module per command)
-> :mod:`sim.apps` (inference, validation, sweeps, serving, plots) -> :mod:`sim.model` (stacks,
dataflows, mapper, engine, Numba kernels, cost) -> :mod:`sim.ir` (ops, results) -> :mod:`sim.spec`
(schemas, loader, catalog) -> :mod:`sim.errors`.

Where things go: a new chip is a YAML file in ``arch_configs/`` (or ``~/.config/sim/arch_configs``);
a new dataflow a file in ``dataflows/`` (or the user folder), which any chip may then list (a new
dataflow family a :class:`sim.model.dataflow.base.Dataflow` subclass, registered by defining it); a new model a file in ``workloads/``; a new software stack
a file in ``stacks/``; a vendor library's kernel menu (tile menus, split-K, clusters) a file in
``kernel_libraries/`` that chips name with ``kernel_library:``; a new DRAM technology (an HBM4, a
GDDR7) a file in ``dram_technologies/``; a convolutional network a file in ``networks/``; a new memory level kind a ``LevelKind`` in
:data:`sim.spec.memory_spec.LEVEL_KINDS` plus its timing in the engine; a new op kind its type in :mod:`sim.ir.ops`, its lowering in
:mod:`sim.model.engine.lower` and its kernels in :mod:`sim.model.stacks`; a new serving scheduler
one module in ``sim/apps/serving/schedulers/``; a new command one module in ``sim/cli/``.

``sweep``, ``serve`` and ``validate`` import their apps when called, so that ``import sim`` does not
load Dask or SimPy; :mod:`sim.plot` is imported on first use.  Everything a notebook or a script
needs is a name here; modules below (``sim.apps``, ``sim.model``, ...) are implementation and may
change.
"""
from __future__ import annotations

from sim.apps.cnn import run_network
from sim.apps.inference import run_llm
from sim.apps.results import LlmRun, PhaseResult
from sim.apps.single_op import simulate, simulate_gemm
from sim.errors import ConfigError, MappingError, ShapeError, SimError, WorkloadError
from sim.ir.ops import Attention, Collective, Conv2d, Copy, Gemm, VectorOp
from sim.ir.results import OpResult, results_dataframe
from sim.spec.registry import list_chips, load_chip
from sim.version import __version__


def sweep(spec, **kwargs):
    """Run a design-space sweep (see :func:`sim.apps.sweep.sweep`); returns a pandas DataFrame."""
    from sim.apps.sweep import sweep as _sweep

    return _sweep(spec, **kwargs)


def serve(chip, model, requests=None, **kwargs):
    """Simulate request-level serving (see :func:`sim.apps.serving.simulator.serve`); returns a
    :class:`~sim.apps.serving.ServingResult` (DataFrames per request and per iteration, a summary)."""
    from sim.apps.serving import serve as _serve

    return _serve(chip, model, requests, **kwargs)


def run_sweep(spec, **kwargs):
    """:func:`sweep` plus the run's statistics: ``(DataFrame, stats)``.  ``stats`` has ``points``,
    ``unique``, ``new`` (simulated now), ``reused`` (read from the store ``out=``), ``invalid``,
    ``failed``, ``backend``, ``seconds`` (wall time, s), ``store`` and ``files`` (the
    ``results.parquet`` / ``results.csv`` written there).  Unlike :func:`sweep` it does not raise
    when every point failed (each row's ``error`` says why).  Keywords as :func:`sweep`'s."""
    from sim.apps.sweep import run_sweep as _run_sweep

    return _run_sweep(spec, **kwargs)


def pareto_front(df, objectives=None, *, x: str | None = None, y: str | None = None):
    """The rows of a sweep's DataFrame that no other row beats on every objective: a boolean
    Series (``df[sim.pareto_front(df, x="area_mm2", y="tokens_per_s")]``).

    ``x`` / ``y``: two metric columns, each in its usual direction (less area, energy, latency or
    power is better, more tokens/s is better); or ``objectives``: ``{column: "min" | "max"}``.
    Rows with an error or a missing value are never on the front; equal rows are all kept."""
    from sim.apps.sweep.analysis import pareto_front as _pareto_front

    return _pareto_front(df, objectives, x=x, y=y)


def read_results(path):
    """A sweep's results as a pandas DataFrame: from a results store (the folder given as ``out=`` /
    ``--out``), its ``results.parquet``, or a ``.csv`` file."""
    from sim.apps.store import read_results as _read_results

    return _read_results(path)


def export_csv(source, path):
    """Write a sweep's results as CSV at ``path`` (its folder is created; written atomically) and
    return the path: ``source`` is a DataFrame, a results store folder or a ``.parquet`` file."""
    from sim.apps.store import export_csv as _export_csv

    return _export_csv(source, path)


def design_point(chip, result) -> dict:
    """Energy and area of an LLM run's design point - what a sweep's metrics call them: ``power_w``
    (W, the run's energy over its time), ``area_mm2`` (and ``mac_area_mm2``, ``sram_area_mm2``,
    ``other_area_mm2``), ``tokens_per_s_per_w`` (= ``tokens_per_j``), ``tokens_per_s_per_mm2``,
    ``dram_gb_per_s`` (peak, GB/s), ``pes``, ``sram_mib``, and per component of the run's
    ``energy_components_j``: ``energy_j.<component>`` (J per run) and
    ``energy_per_token_j.<component>`` (J per token).

    ``chip``: the chip the run ran on (:func:`load_chip`); ``result``: :func:`run_llm`'s
    :class:`LlmRun` (or its ``to_dict()``)."""
    from sim.model.cost.energy import design_point_metrics

    return design_point_metrics(chip, result, dict(result.get("energy_components_j") or {}) or None)


def energy_by_op(result):
    """An LLM run's energy per op as a pandas DataFrame, largest first: ``op``, ``kind``,
    ``energy_j`` (J per run, summed over layers), ``total_seconds`` (s), ``energy_per_token_j``
    (J per token) and ``energy_share`` (0..1).  ``result``: :func:`run_llm`'s :class:`LlmRun`."""
    from sim.model.cost.energy import op_energy_table

    return op_energy_table(result)


def __getattr__(name):
    # sim.plot (matplotlib figures) is imported on first use
    if name == "plot":
        import importlib

        return importlib.import_module("sim.plot")
    raise AttributeError(f"module 'sim' has no attribute {name!r}")


def validate(chip, cases_path, progress: bool = False):
    """Predict measured cases (see :func:`sim.apps.validation.validate`); returns a DataFrame."""
    from sim.apps.validation import validate as _validate

    return _validate(chip, cases_path, progress=progress)


__all__ = [
    "Attention", "Collective", "ConfigError", "Conv2d", "Copy", "Gemm", "LlmRun", "MappingError", "OpResult",
    "PhaseResult", "ShapeError",
    "SimError", "VectorOp", "WorkloadError", "__version__", "design_point", "energy_by_op", "export_csv",
    "list_chips", "load_chip", "pareto_front", "plot", "read_results", "results_dataframe", "run_llm", "run_network",
    "run_sweep",
    "serve", "simulate", "simulate_gemm", "sweep", "validate",
]
