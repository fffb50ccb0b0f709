"""The intermediate representation: what flows between the layers.

* :mod:`sim.ir.ops` - the op types (Gemm, Conv2d, Attention, VectorOp, Copy, Collective): frozen,
  validated on construction, one protocol (``flops``, ``macs``, min DRAM bytes);
* :mod:`sim.ir.results` - :class:`~sim.ir.results.OpResult`, the typed result of one op, and its
  DataFrame / JSON forms;
* :mod:`sim.ir.lowered` - an op lowered for the engine: its tile problem
  (:class:`~sim.ir.lowered.TileProblem`) and what the lowering chose
  (:class:`~sim.ir.lowered.LoweredOp`, one typed class per kind).

Imports only :mod:`sim.spec` (number formats), :mod:`sim.errors` and NumPy.
"""
