"""The package carries its data: a wheel installed outside the repository finds its chips.

This is the smoke test CI runs on every change: build the wheel as a user would
(`pip wheel .`), install it into a fresh folder, and run the quick-tour commands from a
working directory outside the checkout, with nothing of the checkout on the path.
"""
from __future__ import annotations

import fcntl
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

import sim.spec.catalog as catalog
from sim import list_chips
from sim.spec.registry import load_chip
from sim.model.workload.models import list_models

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("wheel")
    build = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp / "dist"), str(REPO)]
    if importlib.util.find_spec("setuptools") is not None:
        build.insert(4, "--no-build-isolation")
    # pip builds in the checkout's build/ folder: two pytest-xdist workers building at once
    # collide there ("File exists: build/bdist..."), so one builds at a time
    with open(tmp_path_factory.getbasetemp().parent / "sim-wheel-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        built = subprocess.run(build, capture_output=True, text=True, timeout=300)
    assert built.returncode == 0, f"pip wheel failed:\n{built.stdout[-2000:]}\n{built.stderr[-4000:]}"
    wheels = list((tmp / "dist").glob("sim-*.whl"))
    assert len(wheels) == 1, wheels
    site = tmp / "site"
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(site), str(wheels[0])],
                   check=True, capture_output=True, text=True, timeout=300)
    return site


def _run_outside(site: Path, tmp_path: Path, *args: str, **extra_env: str) -> subprocess.CompletedProcess:
    # a new user's environment: no SIM_ setting but where the caches live (the session's run
    # cache holds the same engine runs tests/test_readme.py made from the checkout)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SIM_") or k in ("SIM_NUMBA_CACHE_DIR",
                                                                                      "SIM_CACHE_DIR")}
    env["PYTHONPATH"] = str(site)
    env["SIM_USER_DIR"] = str(tmp_path / "no-user-folder")
    env.update(extra_env)
    return subprocess.run([sys.executable, *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)


def test_wheel_ships_chips_dataflows_and_models(installed_wheel, tmp_path):
    probe = _run_outside(installed_wheel, tmp_path, "-c",
                         "import sim, json; import sim.spec.catalog as catalog; from sim.model.workload.models import list_models; "
                         "from sim.model.dataflow import list_dataflows; print(json.dumps([sim.__file__, "
                         "str(catalog.shipped_dir('chips')), sim.list_chips(), list_models(), list_dataflows()]))")
    assert probe.returncode == 0, probe.stderr
    import json

    where, chips_at, chips, models, dataflows = json.loads(probe.stdout.strip().splitlines()[-1])
    assert Path(where).is_relative_to(installed_wheel), "the installed copy, not the checkout, was imported"
    assert Path(chips_at).is_relative_to(installed_wheel)
    assert chips == list_chips() and "npu_128x128" in chips
    assert models == list_models()
    assert dataflows == ["is", "os", "rs", "ws"]


def test_wheel_runs_quick_tour_commands_outside_the_repo(installed_wheel, tmp_path, compiled_kernels):
    listed = _run_outside(installed_wheel, tmp_path, "-m", "sim", "list", "chips")
    assert listed.returncode == 0, listed.stderr
    assert "npu_128x128" in listed.stdout.split()
    gemm = _run_outside(installed_wheel, tmp_path, "-m", "sim", "gemm", "npu_128x128",
                        "--m", "256", "--k", "256", "--n", "256", "--json")
    assert gemm.returncode == 0, gemm.stderr
    # a chip that names a kernel library finds it in the wheel too
    libs = _run_outside(installed_wheel, tmp_path, "-m", "sim", "list", "libraries")
    assert libs.returncode == 0 and "cublas_sm90" in libs.stdout.split(), libs.stderr
    # ... and networks (networks/*.yaml) for `sim conv`
    nets = _run_outside(installed_wheel, tmp_path, "-m", "sim", "list", "networks")
    assert nets.returncode == 0 and "alexnet" in nets.stdout.split(), nets.stderr
    h200 = _run_outside(installed_wheel, tmp_path, "-c", "import sim; print(sim.load_chip('h200_sxm').mapping.tile_k_bytes)")
    assert h200.returncode == 0 and h200.stdout.split()[-1] == "128", h200.stderr
    import json

    from sim import simulate_gemm

    assert json.loads(gemm.stdout.strip().splitlines()[-1])["cycles"] == \
        simulate_gemm("npu_128x128", m=256, k=256, n=256).cycles
    # the wheel's kernels are the checkout's sources: they load from the kernel cache the
    # checkout filled (tests/conftest.py's compile process, waited for) instead of compiling again (~60 s); the
    # disk cache of runs and DRAM probes off, or nothing would need a kernel at all
    probe = _run_outside(installed_wheel, tmp_path, "-c", "from sim import simulate_gemm; "
                         "simulate_gemm('npu_128x128', m=64, k=64, n=64)", NUMBA_DEBUG_CACHE="1", SIM_NO_CACHE="1")
    assert probe.returncode == 0, probe.stderr
    assert "data loaded" in probe.stdout + probe.stderr and "data saved" not in probe.stdout + probe.stderr
    unknown = _run_outside(installed_wheel, tmp_path, "-m", "sim", "gemm", "no_such_chip", "--m", "8", "--k", "8",
                           "--n", "8")
    assert unknown.returncode == 2
    assert "npu_128x128" in unknown.stderr  # the valid names are listed, not "(valid: )"


def test_user_folder_adds_chips_found_by_name_and_overrides_shipped_ones(tmp_path, monkeypatch):
    user = tmp_path / "user"
    (user / "arch_configs").mkdir(parents=True)
    text = (catalog.shipped_dir("chips") / "npu_128x128.yaml").read_text()
    (user / "arch_configs" / "my_npu.yaml").write_text(text)
    monkeypatch.setenv("SIM_USER_DIR", str(user))
    assert "my_npu" in list_chips() and "npu_128x128" in list_chips()
    assert load_chip("my_npu").source_path == user / "arch_configs" / "my_npu.yaml"
    # the user folder is searched first: a user file of a shipped name overrides it
    (user / "arch_configs" / "tpu_v1.yaml").write_text(text)
    assert load_chip("tpu_v1").source_path == user / "arch_configs" / "tpu_v1.yaml"
    monkeypatch.delenv("SIM_USER_DIR")
    assert "my_npu" not in list_chips() or (Path.home() / ".config/sim/arch_configs/my_npu.yaml").is_file()
    assert "llama3-8b" in list_models()


def _quick_tour_commands() -> list[list[str]]:
    """The README quick tour's `sim ...` lines that name no file of the checkout (those run
    from the checkout in tests/test_readme.py)."""
    import re
    import shlex

    text = (REPO / "README.md").read_text()
    block = text[text.index("## Quick tour"):]
    block = block[block.index("```bash") + len("```bash"):]
    block = block[:block.index("```")]
    out = []
    for line in block.strip().splitlines():
        line = line.split("#", 1)[0].strip()
        if not line.startswith("sim ") or re.search(r"[\w.-]+/|\.ya?ml\b|\.csv\b|\.cfg\b|--out\b", line):
            continue
        out.append(shlex.split(line)[1:])
    return out


def test_wheel_runs_every_self_contained_quick_tour_command(installed_wheel, tmp_path):
    """A fresh install, outside the checkout, runs the quick tour as the README writes it."""
    commands = _quick_tour_commands()
    assert len(commands) >= 6, commands  # list, show, gemm x4, run x2 at the time of writing
    for args in commands:
        proc = _run_outside(installed_wheel, tmp_path, "-m", "sim", *args, "-q")
        assert proc.returncode == 0, (args, proc.stderr[-1500:])
        assert proc.stdout.strip(), args
