"""PE-level reference simulator (slow, exact): the ground truth for :mod:`sim.model.dataflow`."""
from sim.model.reference.pe_array import ReferenceResult, direct_conv, im2col, simulate_conv, simulate_gemm

__all__ = ["ReferenceResult", "direct_conv", "im2col", "simulate_conv", "simulate_gemm"]
