"""The model layer: from an op on a chip to cycles, bytes and energy.

* :mod:`~sim.model.workload` - model specs -> op traces (the LLM trace builder, trace I/O, torch capture);
* :mod:`~sim.model.stacks` - software-stack profiles: a model op -> the kernels a stack launches;
* :mod:`~sim.model.dataflow` - dataflow families (WS/OS/IS systolic, row-stationary) and their closed forms;
* :mod:`~sim.model.mapper` - tile / loop-order / distribution search, compute cycles per tile;
* :mod:`~sim.model.engine` - lowering (op -> tile problem -> arrays), the run (memo, extrapolation,
  disk cache), DVFS, and :func:`~sim.model.engine.simulate.simulate_op`, the layer's entry point;
* :mod:`~sim.model.kernels` - every Numba kernel (the event engine, the DRAM timing model);
* :mod:`~sim.model.memory` - the DRAM model's Python side;
* :mod:`~sim.model.cost` - energy, area and the power/DVFS model (pure functions of results);
* :mod:`~sim.model.reference` - the PE-level reference simulator (ground truth for small arrays);
* :mod:`~sim.model.numerics` - numerical error of number formats (torch, optional).

Imports :mod:`sim.ir`, :mod:`sim.spec` and :mod:`sim.errors`, never :mod:`sim.apps` or :mod:`sim.cli`.
"""
