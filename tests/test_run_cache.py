"""The on-disk cache of engine runs: identical answers, safe sharing, bounded size."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import sim
from sim.model.engine import run as R
from sim.model.engine import run_cache
from sim.model.kernels import engine as K

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SIM_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("SIM_NO_CACHE", raising=False)
    monkeypatch.setitem(run_cache._state, "unwritable", False)
    R.clear_cache()
    yield tmp_path / "cache"
    R.clear_cache()


def _fields(r) -> dict:
    keep = ("cycles", "compute_cycles", "stall_cycles", "seconds", "dram_read_bytes", "dram_write_bytes", "energy_pj")
    return {k: getattr(r, k) for k in keep}


def test_a_stored_run_gives_the_identical_answer_without_running_the_engine(cache, monkeypatch):
    chip = sim.load_chip("h200_sxm")
    first = sim.simulate_gemm(chip, m=512, k=1024, n=768)
    stored = list(cache.rglob("*.npz"))
    assert stored, "the run was written to disk"
    R.clear_cache()  # a new process: nothing in memory

    def no_engine(*a, **k):
        raise AssertionError("the engine ran although every run was on disk")

    monkeypatch.setattr(K, "run_tiled", no_engine)
    again = sim.simulate_gemm(chip, m=512, k=1024, n=768)
    assert _fields(again) == _fields(first)
    assert again.to_json() == first.to_json()


def test_a_stored_probed_run_gives_the_identical_extrapolation_without_running_the_engine(cache, monkeypatch):
    """A wave-extrapolated op's samples come from one probed run; stored, they answer alone."""
    import sim.model.kernels.probe as KP

    chip = sim.load_chip("h200_sxm")
    first = sim.simulate_gemm(chip, m=32768, k=1024, n=8192)
    assert first.details["extrapolated"]["dim"] == "waves"
    R.clear_cache()

    def no_engine(*a, **k):
        raise AssertionError("the engine ran although every run was on disk")

    monkeypatch.setattr(K, "run_tiled", no_engine)
    monkeypatch.setattr(KP, "run_tiled_probed", no_engine)
    again = sim.simulate_gemm(chip, m=32768, k=1024, n=8192)
    assert again.to_json() == first.to_json()


def test_no_cache_runs_the_engine_and_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("SIM_NO_CACHE", "1")
    sim.simulate_gemm("npu_128x128", m=256, k=256, n=256)
    assert not list(cache.rglob("*.npz"))


def test_a_damaged_file_is_a_miss_and_is_replaced(cache):
    chip = sim.load_chip("npu_128x128")
    good = sim.simulate_gemm(chip, m=300, k=200, n=100)
    for f in cache.rglob("*.npz"):
        f.write_bytes(b"not a zip file")
    R.clear_cache()
    again = sim.simulate_gemm(chip, m=300, k=200, n=100)
    assert _fields(again) == _fields(good)
    for f in cache.rglob("*.npz"):
        with np.load(f) as z:
            assert "stats" in z.files


def test_a_new_physics_version_never_reads_old_runs(cache, monkeypatch):
    chip = sim.load_chip("npu_128x128")
    sim.simulate_gemm(chip, m=128, k=128, n=128)
    old = {p.parent.parent.name for p in cache.rglob("*.npz")}
    monkeypatch.setattr(run_cache, "kernel_source_hash", lambda: "another-kernel")
    R.clear_cache()
    calls = []
    real = K.run_tiled
    monkeypatch.setattr(K, "run_tiled", lambda *a: (calls.append(1), real(*a))[1])
    sim.simulate_gemm(chip, m=128, k=128, n=128)
    assert calls, "the engine ran again under the new version"
    assert {p.parent.parent.name for p in cache.rglob("*.npz")} == old | {"another-kernel"}


def test_least_recently_used_runs_are_evicted_past_the_bound(cache):
    cache.mkdir(parents=True)
    folder = cache / "v" / "aa"
    folder.mkdir(parents=True)
    for i in range(10):
        p = folder / f"{i:02d}.npz"
        p.write_bytes(b"x" * 1000)
        os.utime(p, (1000 + i, 1000 + i))
    assert run_cache._evict(limit_bytes=5000) > 0
    left = sorted(p.name for p in folder.iterdir())
    assert sum((folder / n).stat().st_size for n in left) <= 0.75 * 5000
    assert left == [f"{i:02d}.npz" for i in range(10 - len(left), 10)], "the newest files stay"


def test_an_unwritable_cache_folder_does_not_stop_a_simulation(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("SIM_CACHE_DIR", str(blocker / "cache"))  # a folder inside a file: cannot exist
    monkeypatch.setitem(run_cache._state, "unwritable", False)
    R.clear_cache()
    r = sim.simulate_gemm("npu_128x128", m=64, k=64, n=64)
    assert r.cycles > 0
    R.clear_cache()


_CHILD = """
import json, sys
import sim
r = sim.simulate_gemm("h200_sxm", m=int(sys.argv[1]), k=1024, n=1024)
print(json.dumps([r.cycles, r.dram_read_bytes, r.energy_pj]))
"""


def test_concurrent_processes_share_the_cache_and_agree(cache):
    env = {**os.environ, "SIM_CACHE_DIR": str(cache), "PYTHONPATH": str(REPO)}
    env.pop("SIM_NO_CACHE", None)
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, "640"], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    answers = {o[0].strip().splitlines()[-1] for o in outs}
    assert len(answers) == 1
    assert not list(cache.rglob(".tmp-*")), "no half-written file is left behind"
    uncached = subprocess.run([sys.executable, "-c", _CHILD, "640"], env={**env, "SIM_NO_CACHE": "1"},
                              capture_output=True, text=True, timeout=600)
    assert json.loads(uncached.stdout.strip().splitlines()[-1]) == json.loads(answers.pop())


def test_cli_cache_info_and_clear(cache, capsys):
    from sim.cli import main

    sim.simulate_gemm("npu_128x128", m=96, k=96, n=96)
    assert main(["cache", "info", "--json"]) == 0
    info = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert info["runs"] >= 1 and info["folder"] == str(cache) and info["enabled"]
    assert main(["cache", "clear"]) == 0
    assert "removed" in capsys.readouterr().out
    assert not list(cache.rglob("*.npz"))
    assert main(["--no-cache", "gemm", "npu_128x128", "--m", "32", "--k", "32", "--n", "32", "--json"]) == 0
    assert not list(cache.rglob("*.npz"))


def test_cli_flags_leave_no_environment_behind(cache):
    """-q and --no-cache set variables for the command (and its workers) only."""
    from sim.cli import main

    before = {k: os.environ.get(k) for k in ("SIM_NO_CACHE", "TQDM_DISABLE")}
    assert main(["--no-cache", "gemm", "npu_128x128", "--m", "32", "--k", "32", "--n", "32", "-q"]) == 0
    assert {k: os.environ.get(k) for k in before} == before


def test_dram_pattern_probes_are_stored_and_read_back_identically(cache, monkeypatch):
    """The mapper's DRAM transfer-pattern probes (stream_efficiency) are kept on disk beside the
    runs: a fresh process reads the measured number instead of running the probe again, a
    damaged file is measured again, and a different pattern or device is a different entry."""
    from sim.model.memory import dram as D

    p = D.dram_params(sim.load_chip("h200_sxm").memory.dram)
    D.stream_efficiency.cache_clear()
    first = D.stream_efficiency(p, 384, 8192, 12)
    stored = list(cache.rglob("*.npy"))
    assert len(stored) == 1
    assert run_cache.info().values == 1
    D.stream_efficiency.cache_clear()  # a new process: nothing in memory

    def no_probe(*a, **k):
        raise AssertionError("the probe ran although its result was on disk")

    monkeypatch.setattr(D, "_measure_stream_efficiency", no_probe)
    assert D.stream_efficiency(p, 384, 8192, 12) == first
    monkeypatch.undo()
    monkeypatch.setenv("SIM_CACHE_DIR", str(cache))  # (undo also restored the fixture's settings)
    monkeypatch.delenv("SIM_NO_CACHE", raising=False)
    # another pattern, another device: measured and stored under their own digests
    D.stream_efficiency.cache_clear()
    other = D.stream_efficiency(p, 384, 16384, 12)
    slower = D.dram_params(sim.load_chip("h200_sxm", overrides=["memory.levels.hbm3e.data_rate_gbps_per_pin=4.8"]).memory.dram)
    D.stream_efficiency(slower, 384, 8192, 12)
    assert len(list(cache.rglob("*.npy"))) == 3
    # a torn file is forgotten and measured again, to the same number
    stored[0].write_bytes(b"torn")
    D.stream_efficiency.cache_clear()
    assert D.stream_efficiency(p, 384, 8192, 12) == first
    assert other == D._measure_stream_efficiency(p, 384, 16384, 12)
    D.stream_efficiency.cache_clear()


def test_dram_pattern_probes_are_not_stored_with_the_cache_off(cache, monkeypatch):
    from sim.model.memory import dram as D

    monkeypatch.setenv("SIM_NO_CACHE", "1")
    p = D.dram_params(sim.load_chip("h200_sxm").memory.dram)
    D.stream_efficiency.cache_clear()
    D.stream_efficiency(p, 256, 4096, 8)
    D.stream_efficiency.cache_clear()
    assert not list(cache.rglob("*.npy"))
