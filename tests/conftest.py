"""`make test` skips nothing silently.

`make test` installs every extra (torch, Dask, SimPy, the notebook kernel, import-linter), so
a test that skips there is a test that did not run: a missing tool, a broken install.  With
``SIM_TEST_NO_SKIPS=1`` (the Makefile's ``test`` target sets it) every skip is listed at the
end of the run, and one whose reason is not in :data:`EXPECTED_SKIPS` fails the run.  Without
the variable (a developer's `pytest tests/test_x.py` on a partial environment) skips are
reported by ``-ra`` as usual and do not fail.

Two set-ups make a developer's run what CI's clean clone runs, and keep it inside the
suite's time budget:

* the engine-run disk cache is a fresh folder for the session (shared by the xdist workers
  and every subprocess a test starts), so no test leans on runs a developer's earlier
  commands left in ``~/.cache/sim/runs``;
* the compiled kernels are built once: a cold Numba compile of the engine takes ~45-60 s of
  one core (benchmarks/bench_compile.py), and every worker or subprocess that started before
  the on-disk kernel cache existed used to pay it again, at once.  The controller starts a
  process that compiles them and goes on; a worker or subprocess that needs a kernel first
  waits for the cache folder's compile lock (``sim.model.kernels.jit``) and then loads it, so
  the tests that need no kernel run meanwhile (the controller used to compile before any
  worker started, one core idle for that minute).
"""
from __future__ import annotations

import os
import tempfile

import pytest

#: skips that are not a missing tool: the case does not apply, and why
EXPECTED_SKIPS = {
    # tests/test_knobs.py: the L2-capacity knob on chips that have no chip-level SRAM
    "no chip-level SRAM": "the knob does not exist on that chip",
    # tests/test_store_faults.py: the interrupt came after the sweep's last point
    "the sweep finished before it could be interrupted": "a race the test cannot lose by design",
}
ENV = "SIM_TEST_NO_SKIPS"

_skips: list[tuple[str, str]] = []


def pytest_configure(config):
    if hasattr(config, "workerinput"):  # an xdist worker: the controller set the environment up
        return
    if "SIM_CACHE_DIR" not in os.environ:
        os.environ["SIM_CACHE_DIR"] = config._sim_runs_dir = tempfile.mkdtemp(prefix="sim-test-runs-")
    if COMPILED_ENV in os.environ:
        return  # a pytest run inside a test (tests/test_no_silent_skips.py): the outer run compiles
    # the compile process writes this file when it is done (the workers inherit the variable)
    os.environ[COMPILED_ENV] = os.path.join(tempfile.mkdtemp(prefix="sim-test-kernels-"), "compiled")
    config._sim_compiler = _compile_kernels()


def pytest_unconfigure(config):
    import shutil

    compiler = getattr(config, "_sim_compiler", None)
    if compiler is not None:
        compiler.wait()
        shutil.rmtree(os.path.dirname(os.environ[COMPILED_ENV]), ignore_errors=True)
    runs = getattr(config, "_sim_runs_dir", None)
    if runs is not None:
        shutil.rmtree(runs, ignore_errors=True)


#: each compiled entry point once: a GEMM on modelled memory with an L2, the DRAM stream probes
#: the mapper uses, and the probed engine run (one probe of a small GPU GEMM's first cyclic run,
#: found as tests/test_probed_samples.py finds it; argv[1] is this folder)
_COMPILE = """
import os
import sys

sys.path.insert(0, sys.argv[1])
import sim.model.engine.kernel_run as KR
from sim.apps.single_op import simulate_gemm
from sim.model.engine.arrays import operand_bases
from sim.spec.registry import load_chip
from test_probed_samples import _cyclic_problem

for chip in ("npu_128x128", "h200_sxm"):
    simulate_gemm(load_chip(chip), m=64, k=64, n=64)
chip = load_chip("h200_sxm")
prob, mapping = _cyclic_problem(chip, 1024, 256, 1024)
KR.run_kernel_probed(chip, prob, mapping, False, operand_bases(prob), (KR.Probe(mapping.cores_used),))
open(os.environ["SIM_TEST_KERNELS_COMPILED"], "w").close()
"""
#: names the file the compile process writes when every kernel is in the cache
COMPILED_ENV = "SIM_TEST_KERNELS_COMPILED"


def _compile_kernels():
    """Start a process that fills Numba's on-disk cache with every kernel (see the module's
    docstring); it runs while the workers start."""
    import subprocess
    import sys

    return subprocess.Popen([sys.executable, "-c", _COMPILE, os.path.dirname(os.path.abspath(__file__))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


#: test modules that need no compiled kernel (configuration checks, bad input refused before
#: any simulation, imports, traces): each worker starts with its share of them, which runs
#: while the kernels compile (a kernel's first caller waits for the compile, see above).
#: A module listed here that does need a kernel only waits; nothing depends on the list.
KERNEL_FREE_MODULES = ("test_bad_input", "test_stacks.py", "test_layers.py", "test_import_cost.py", "test_config.py",
                       "test_capture.py", "test_llm_trace.py", "test_trace_io.py", "test_workload_models.py",
                       "test_level_kinds.py", "test_model_set_api.py", "test_kernel_io.py")


def pytest_collection_modifyitems(session, config, items):
    """Put a share of :data:`KERNEL_FREE_MODULES`' tests at the head of each worker's first
    batch: pytest-xdist's ``worksteal`` hands worker i the i-th contiguous 1/N of this list."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1") or 1)
    free = [it for it in items if it.path.name.startswith(KERNEL_FREE_MODULES)]
    if workers < 2 or not free or len(free) == len(items):
        return
    rest = [it for it in items if not it.path.name.startswith(KERNEL_FREE_MODULES)]
    total, out = len(items), []
    for i in range(workers):
        size = (i + 1) * total // workers - i * total // workers
        share = free[i::workers][:size]
        out += share + rest[:size - len(share)]
        rest = rest[size - len(share):]
    placed = {id(it) for it in out}
    items[:] = out + [it for it in free if id(it) not in placed] + rest  # (only when a share was cut)


def _reason(report) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        text = str(longrepr[2])
    else:
        text = str(longrepr)
    return text[len("Skipped: "):] if text.startswith("Skipped: ") else text


def pytest_runtest_logreport(report):
    if report.skipped and not hasattr(report, "wasxfail"):
        _skips.append((report.nodeid, _reason(report)))


def _unexpected() -> list[tuple[str, str]]:
    return [(n, r) for n, r in _skips if not any(r.startswith(ok) for ok in EXPECTED_SKIPS)]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if os.environ.get(ENV, "") in ("", "0") or not _skips:
        return
    tr = terminalreporter
    tr.section(f"skipped tests ({ENV}=1)")
    for nodeid, reason in _skips:
        expected = any(reason.startswith(ok) for ok in EXPECTED_SKIPS)
        tr.line(f"{'expected  ' if expected else 'UNEXPECTED'} {nodeid}: {reason}")
    bad = _unexpected()
    if bad:
        tr.line(f"{len(bad)} test(s) skipped for a reason not in tests/conftest.py EXPECTED_SKIPS: "
                "the run fails (install what they need, or record why the skip is expected)", red=True)


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller decides
        return
    if os.environ.get(ENV, "") not in ("", "0") and _unexpected() and session.exitstatus == 0:
        session.exitstatus = 1


@pytest.fixture
def compiled_kernels():
    """Wait until the session's compile process has put every kernel in Numba's cache (for a
    test that checks a process loads them rather than compiling; without the process, at once).
    A compile that failed leaves no file: the wait then ends at its timeout and the test says why."""
    import time

    flag = os.environ.get(COMPILED_ENV)
    deadline = time.monotonic() + 900
    while flag and not os.path.exists(flag):
        if time.monotonic() > deadline:
            pytest.fail("the session's kernel compile (tests/conftest.py) did not finish in 15 minutes")
        time.sleep(0.2)


@pytest.fixture
def no_cache(monkeypatch):
    """Neither the disk cache nor the in-memory memo: every run simulates (speed tests,
    comparisons of two ways of simulating the same op)."""
    from sim.model.engine.run import clear_cache

    monkeypatch.setenv("SIM_NO_CACHE", "1")
    clear_cache()
    yield
    clear_cache()
