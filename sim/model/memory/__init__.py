"""Memory models: the off-chip DRAM timing model (plain-Python side).

The compiled kernels live in :mod:`sim.model.kernels.dram`; this package turns a DRAM spec into
their parameter and state arrays and offers a small Python API for tests and benchmarks.
"""
from sim.model.memory.dram import EXAMPLE_DEVICES, DramModel, DramParams, example_spec

__all__ = ["DramModel", "DramParams", "EXAMPLE_DEVICES", "example_spec"]
