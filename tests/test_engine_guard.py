"""The engine's progress guard: a livelock (a core woken again and again at one instant with
nothing it can do - one hung every Mixtral-8x7B prefill step before it was fixed) stops the
run with a clear error instead of hanging.  The guard's bound is far above any real instant
(tested on shipped chips: no real run trips it); a bound of one event per instant forces it
to trip, which checks the stop, the message and that a stopped run is never cached."""
from __future__ import annotations

import numpy as np
import pytest

import sim.model.engine.kernel_run as kernel_run
import sim.model.kernels.engine as K
from sim.apps.single_op import simulate_gemm
from sim.model.engine.run import clear_cache
from sim.spec.registry import load_chip


def _forced(monkeypatch, limit: int) -> None:
    real = kernel_run.kernel_arrays

    def arrays(*a, **kw):
        inputs = real(*a, **kw)
        inputs.geo[K.G_STALL_LIMIT] = limit
        return inputs

    monkeypatch.setattr(kernel_run, "kernel_arrays", arrays)
    monkeypatch.setenv("SIM_NO_CACHE", "1")
    clear_cache()


@pytest.mark.parametrize("chip", ["npu_128x128", "h200_sxm"])
def test_a_run_that_stalls_at_one_instant_stops_with_a_clear_error(monkeypatch, chip):
    _forced(monkeypatch, 1)  # every core starts at cycle 0: the second event there trips it
    with pytest.raises(kernel_run.EngineStall) as ei:
        simulate_gemm(load_chip(chip), m=512, k=512, n=512)
    msg = str(ei.value)
    assert "stopped making progress" in msg and "at cycle 0" in msg and "simulator bug" in msg
    assert not kernel_run._RUN_CACHE, "a stopped run must not be remembered"
    clear_cache()


def test_the_default_bound_never_trips_on_real_runs(monkeypatch):
    """The default bound and an explicit bound far above it give the same cycles."""
    chip = load_chip("h200_sxm")
    monkeypatch.setenv("SIM_NO_CACHE", "1")
    clear_cache()
    base = simulate_gemm(chip, m=4096, k=4096, n=4096).cycles
    _forced(monkeypatch, 1 << 40)
    assert simulate_gemm(chip, m=4096, k=4096, n=4096).cycles == base
    assert np.isfinite(base) and base > 0
    clear_cache()
