"""The first hour of a new user: the Python API from a plain script or stdin, commands that
must work as written, discoverable options, readable results (issue 14)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def sim(*args: str, check: bool = True, timeout: float = 600, cwd=ROOT) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, env=_env(),
                          cwd=cwd, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sim {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def python(code: str, *, stdin: bool, tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` as a user would: piped to ``python -`` or as a plain script file."""
    code = textwrap.dedent(code)
    if stdin:
        return subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, env=_env(),
                              cwd=tmp_path, timeout=timeout)
    script = tmp_path / "script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                          timeout=timeout)


# --------------------------------------------------------------------------- 1. sweeps from plain scripts

SMALL_SWEEP = """
    import sim
    spec = {"name": "plain", "chip": "scalesim_32x32",
            "workloads": [{"name": "g", "kind": "gemm", "m": 64, "k": 64, "n": 64, "memory": "ideal",
                           "dtype": "%s"}],
            "parameters": {"cores.arrays.0.rows": [16, 32, 64]}, "metrics": ["cycles"]}
    df = sim.sweep(spec, jobs=2, progress=False)   # no `if __name__ == "__main__":` guard
    print("ROWS", len(df), int(df["error"].isna().sum()), list(df["cycles"]))
"""


@pytest.mark.parametrize("stdin", [True, False], ids=["stdin", "script"])
def test_sweep_from_a_plain_script_without_main_guard(tmp_path, stdin):
    proc = python(SMALL_SWEEP % "int8", stdin=stdin, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ROWS"))
    assert line.startswith("ROWS 3 3 "), line
    cycles = json.loads(line.split(" ", 3)[3])
    assert all(c > 0 for c in cycles) and cycles[0] > cycles[2]  # a smaller array takes longer


def test_sweep_whose_every_point_failed_is_an_error(tmp_path):
    code = SMALL_SWEEP % "bf16"  # scalesim_32x32 has int8 units only: every point fails
    code = code.replace("df = sim.sweep", "try:\n        df = sim.sweep").replace(
        '    print("ROWS"', '''    except sim.SimError as exc:
        print("SIMERROR", type(exc).__name__, len(exc.df), str(exc).splitlines()[0])
        raise SystemExit(0)
    print("ROWS"''')
    proc = python(code, stdin=True, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "SIMERROR SweepFailedError 3 sweep plain: all 3 point(s) failed" in proc.stdout, proc.stdout


def test_cli_sweep_whose_every_point_failed_exits_2(tmp_path):
    spec = tmp_path / "fail.yaml"
    spec.write_text("name: allfail\nchip: scalesim_32x32\n"
                    "workloads: [{name: g, kind: gemm, m: 64, k: 64, n: 64, memory: ideal, dtype: bf16}]\n"
                    "parameters:\n  cores.arrays.0.rows: [16, 32]\n")
    for quiet in ([], ["-q"]):
        proc = sim("sweep", str(spec), "--out", str(tmp_path / f"out{len(quiet)}"), "-j", "1", *quiet, check=False)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert "all 2 point(s) failed" in proc.stderr and "cannot compute in bf16" in proc.stderr
        assert "Traceback" not in proc.stderr
