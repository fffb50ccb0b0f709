"""sim: a cycle-level simulator of AI accelerators for LLM inference.

Public API (this facade; everything else is an implementation module):

* :func:`load_chip` - a chip from ``arch_configs/`` (name) or a YAML path, with ``--set``-style overrides
* :func:`simulate` / :func:`simulate_gemm` - one op on a chip -> :class:`OpResult`
* :func:`run_llm` - a model's prefill / decode / generation on a chip -> :class:`LlmRun` (frozen, typed
  metrics and op rows; ``to_dict()`` is ``sim run --json``; a read-only mapping for dict-style code),
  its ops lowered to kernels by the chip's software stack (``stack=``; :mod:`sim.model.stacks`); the
  model edited first with ``model_set=["max_context=131072"]`` or ``{"max_context": 131072}``, as
  ``sim run --model-set`` (:func:`serve` takes ``model_set=`` too; a sweep workload ``model_set:``)
* :func:`sweep` - a design-space sweep (YAML spec or dict) -> pandas DataFrame
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
a file in ``stacks/``; a new op kind its type in :mod:`sim.ir.ops`, its lowering in
:mod:`sim.model.engine.lower` and its kernels in :mod:`sim.model.stacks`; a new serving scheduler
one module in ``sim/apps/serving/schedulers/``; a new command one module in ``sim/cli/``.

``sweep``, ``serve`` and ``validate`` import their apps when called, so that ``import sim`` does not
load Dask or SimPy.
"""
from __future__ import annotations

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


def validate(chip, cases_path, progress: bool = False):
    """Predict measured cases (see :func:`sim.apps.validation.validate`); returns a DataFrame."""
    from sim.apps.validation import validate as _validate

    return _validate(chip, cases_path, progress=progress)


__all__ = [
    "Attention", "Collective", "ConfigError", "Conv2d", "Copy", "Gemm", "LlmRun", "MappingError", "OpResult",
    "PhaseResult", "ShapeError",
    "SimError", "VectorOp", "WorkloadError", "__version__", "list_chips", "load_chip", "results_dataframe",
    "run_llm", "serve", "simulate", "simulate_gemm", "sweep", "validate",
]
