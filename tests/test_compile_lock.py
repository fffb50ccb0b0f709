"""Processes that start together on an empty kernel cache compile each kernel once: the first
caller of a kernel holds the cache folder's compile lock while Numba compiles (or loads) it,
and another process that needs a kernel meanwhile waits, then loads what the first one cached
(sim/model/kernels/jit.py).  A kernel compiled inside another (a callee) never waits for its
own process."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

import sim.model.kernels.jit as jit

pytestmark = pytest.mark.skipif(not hasattr(jit, "_one_compile_at_a_time"), reason="SIM_DISABLE_JIT=1")

HOLD = """
import fcntl, sys, time
fh = open(sys.argv[1], "a")
fcntl.flock(fh, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def test_a_compile_waits_for_another_process_holding_the_cache_lock(tmp_path, monkeypatch):
    monkeypatch.setattr(jit, "_dir", str(tmp_path))
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path / ".compile.lock"), "1.5"],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    calls = []

    def compile_(sig):
        calls.append((sig, time.monotonic()))
        return sig

    t0 = time.monotonic()
    assert jit._one_compile_at_a_time(compile_)("sig") == "sig"
    holder.wait()
    assert calls and calls[0][1] - t0 > 1.0, "compiled while another process held the lock"
    # released again: a second compile does not wait
    t1 = time.monotonic()
    jit._one_compile_at_a_time(compile_)("sig2")
    assert time.monotonic() - t1 < 1.0


def test_a_callee_compiled_inside_a_kernel_does_not_wait_for_its_own_process(tmp_path, monkeypatch):
    monkeypatch.setattr(jit, "_dir", str(tmp_path))
    inner = jit._one_compile_at_a_time(lambda sig: ("inner", sig))
    outer = jit._one_compile_at_a_time(lambda sig: ("outer", inner(sig)))
    done = []
    t = threading.Thread(target=lambda: done.append(outer("s")), daemon=True)
    t.start()
    t.join(10)
    assert done == [("outer", ("inner", "s"))], "the nested compile blocked on the lock its caller holds"


def test_without_a_cache_folder_nothing_is_locked(monkeypatch):
    monkeypatch.setattr(jit, "_dir", "")
    assert jit._lock_file() is None
    assert jit._one_compile_at_a_time(lambda sig: sig + 1)(1) == 2


def test_the_engine_kernels_compile_through_the_lock():
    import sim.model.kernels.engine as K

    assert K.run_tiled.compile.__wrapped__.__func__ is type(K.run_tiled).compile
