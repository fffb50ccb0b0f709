"""Applications over the model layer, each returning typed data (OpResult, LlmRun, dicts, DataFrames):

* :mod:`~sim.apps.single_op` - one op on a chip (``simulate``, ``simulate_gemm``), chip summary;
* :mod:`~sim.apps.inference` - LLM prefill / decode / generation (``run_llm``), returning the
  typed results of :mod:`~sim.apps.results` (``LlmRun``, ``PhaseResult``);
* :mod:`~sim.apps.energy_report` - an LLM run's energy and power split by memory level and unit;
* :mod:`~sim.apps.validation` - measured GPU cases -> the same lowering `sim run` uses -> errors;
  :mod:`~sim.apps.validation_cases` reads the case files, :mod:`~sim.apps.kernel_harness` prices
  a kernel case at the clock the GPU harness ran it;
* :mod:`~sim.apps.sweep` and :mod:`~sim.apps.store` - design-space sweeps, Dask, resumable Parquet;
* :mod:`~sim.apps.serving` - request-level serving (SimPy), one module per scheduler;
* :mod:`~sim.apps.plotting` - figures (one module per kind: run, sweep, validation); :mod:`~sim.apps.check` - `sim check`; :mod:`~sim.apps.demo`;
  :mod:`~sim.apps.scalesim_compat` - SCALE-Sim .cfg / topology front end.

Nothing here prints tables or parses arguments: that is :mod:`sim.cli`.
"""
