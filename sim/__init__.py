"""sim: a cycle-level simulator of AI accelerators for LLM inference.

Public API (everything else is an implementation module; see README "Where things live"):

* :func:`load_chip` - a chip from ``arch_configs/`` (name) or a YAML path, with ``--set``-style overrides
* :func:`simulate` / :func:`simulate_gemm` - one op on a chip -> :class:`OpResult`
* :func:`run_llm` - a model's prefill / decode / generation on a chip -> dict of metrics and ops,
  its ops lowered to kernels by the chip's software stack (``stack=``; :mod:`sim.stacks`)

Where things go: a new chip is a YAML file in ``arch_configs/`` (or ``~/.config/sim/arch_configs``);
a new dataflow a file in ``dataflows/``; a new model a file in ``workloads/``; a new software
stack a file in ``stacks/`` (:mod:`sim.stacks` lowers ops with it); a new serving scheduler one
module in ``sim/apps/serving/schedulers/`` registered there.
* :func:`sweep` - a design-space sweep (YAML spec or dict) -> pandas DataFrame
* :func:`validate` - predicted vs measured GPU cases -> pandas DataFrame
* :func:`serve` - request-level serving (SimPy) on a chip -> per-request and per-iteration DataFrames
* op types: :class:`Gemm`, :class:`Conv2d`, :class:`Attention`, :class:`VectorOp`, :class:`Copy`, :class:`Collective`
"""
from __future__ import annotations

__version__ = "0.1.0"

from .api import simulate, simulate_gemm
from .config.registry import list_chips, load_chip
from .errors import ConfigError, MappingError, ShapeError, SimError, WorkloadError
from .inference import run_llm
from .results import OpResult, results_dataframe
from .workload.ops import Attention, Collective, Conv2d, Copy, Gemm, VectorOp


def sweep(spec, **kwargs):
    """Run a design-space sweep (see :func:`sim.sweep.sweep`); returns a pandas DataFrame."""
    from .sweep import sweep as _sweep

    return _sweep(spec, **kwargs)


def serve(chip, model, requests=None, **kwargs):
    """Simulate request-level serving (see :func:`sim.apps.serving.simulator.serve`); returns a
    :class:`~sim.apps.serving.ServingResult` (DataFrames per request and per iteration, a summary)."""
    from .apps.serving import serve as _serve

    return _serve(chip, model, requests, **kwargs)


def validate(chip, cases_path, progress: bool = False):
    """Predict measured cases (see :func:`sim.validation.validate`); returns a DataFrame."""
    from .validation import validate as _validate

    return _validate(chip, cases_path, progress=progress)


__all__ = [
    "Attention", "Collective", "ConfigError", "Conv2d", "Copy", "Gemm", "MappingError", "OpResult", "ShapeError",
    "SimError", "VectorOp", "WorkloadError", "__version__", "list_chips", "load_chip", "results_dataframe",
    "run_llm", "serve", "simulate", "simulate_gemm", "sweep", "validate",
]
