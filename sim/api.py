"""The public Python API: a few functions over the modules that do the work.

>>> import sim
>>> chip = sim.load_chip("npu_128x128", overrides=["clock_mhz=1400"])
>>> r = sim.simulate_gemm(chip, m=2048, k=4096, n=4096, dtype="bf16")
>>> r.cycles, r.utilization, r.dram_read_bytes
"""
from __future__ import annotations

from typing import Iterable

from .config.registry import load_chip
from .engine.lower import Options
from .engine.run import clear_cache, simulate_op
from .errors import MappingError, ShapeError
from .results import OpResult, results_dataframe
from .workload.ops import Attention, Conv2d, Copy, Gemm, VectorOp


def _chip(chip, overrides=None):
    if isinstance(chip, str) or hasattr(chip, "__fspath__"):
        return load_chip(chip, overrides=overrides)
    if overrides:
        from .config.registry import load_chip as _lc

        src = getattr(chip, "source_path", None)
        if src is None:
            raise ShapeError("overrides need a chip loaded from a file (pass a name or path)")
        return _lc(src, overrides=list(chip.overrides or ()) + list(overrides))
    return chip


def simulate(chip, op, *, dataflow: str | None = None, memory: str = "modeled", array: str | None = None,
             row_length: int | None = None, overrides: Iterable[str] | None = None,
             fidelity: str = "high") -> OpResult:
    """Simulate one op (Gemm, Conv2d, Attention, VectorOp, Copy, Collective) on a chip
    (a ChipSpec, a name from arch_configs/ or a path).  ``fidelity="fast"`` samples large
    problems more briefly (for big sweeps)."""
    chip = _chip(chip, overrides)
    return simulate_op(chip, op, Options(dataflow=dataflow, memory=memory, array=array, row_length=row_length,
                                         fidelity=fidelity))


def simulate_gemm(chip, m: int, k: int, n: int, *, count: int = 1, dtype: str = "bf16",
                  weight_dtype: str | None = None, sparsity: str | None = None, dataflow: str | None = None,
                  memory: str = "modeled", array: str | None = None, row_length: int | None = None,
                  overrides: Iterable[str] | None = None, name: str = "gemm", fidelity: str = "high") -> OpResult:
    """C[m×n] = A[m×k]·B[k×n] on ``chip``."""
    op = Gemm(name, m=m, k=k, n=n, count=count, dtype=dtype, weight_dtype=weight_dtype, sparsity=sparsity)
    return simulate(chip, op, dataflow=dataflow, memory=memory, array=array, row_length=row_length,
                    overrides=overrides, fidelity=fidelity)
