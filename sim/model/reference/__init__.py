"""PE-level reference simulator (slow, exact): the ground truth for :mod:`sim.model.dataflow`.

``pe_array`` (GEMM entry point, results), ``pe_cycles`` (the cycle loops), ``pe_conv``
(convolutions)."""
from sim.model.reference.pe_array import ReferenceResult, simulate_gemm
from sim.model.reference.pe_conv import direct_conv, im2col, simulate_conv

__all__ = ["ReferenceResult", "direct_conv", "im2col", "simulate_conv", "simulate_gemm"]
