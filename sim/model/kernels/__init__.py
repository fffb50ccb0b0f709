"""Every Numba-compiled function of the simulator lives in this package.

Kernels see only NumPy arrays and scalars (no Python objects, no closures; the entry
points' arrays come grouped in the named tuples of :mod:`~sim.model.kernels.io`), so the
on-disk cache (``cache=True``) is reused across processes.  Orchestration - building the
arrays from typed specs and turning results back into objects - stays in plain Python in
:mod:`sim.model.engine` and :mod:`sim.model.memory`.
"""
