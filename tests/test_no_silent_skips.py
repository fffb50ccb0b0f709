"""`make test` fails on a skip it does not expect (tests/conftest.py), with and without xdist."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def _pytest(tmp_path: Path, body: str, strict: bool, *args: str) -> subprocess.CompletedProcess:
    shutil.copy(HERE / "conftest.py", tmp_path / "conftest.py")
    (tmp_path / "test_probe.py").write_text("import pytest\n" + body)
    env = {k: v for k, v in os.environ.items() if k != "SIM_TEST_NO_SKIPS"}
    if strict:
        env["SIM_TEST_NO_SKIPS"] = "1"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-ra", *args, str(tmp_path)],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


MISSING_TOOL = "def test_needs_a_tool():\n    pytest.importorskip('no_such_module_for_sim_tests')\n"
EXPECTED = "def test_no_l2():\n    pytest.skip('no chip-level SRAM')\n"
PASSES = "def test_ok():\n    assert True\n"


@pytest.mark.parametrize("xdist", [False, True])
def test_an_unexpected_skip_fails_make_test(tmp_path, xdist):
    args = ("-n", "2") if xdist else ()
    proc = _pytest(tmp_path, MISSING_TOOL + EXPECTED + PASSES, True, *args)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "UNEXPECTED" in proc.stdout and "test_needs_a_tool" in proc.stdout
    assert "expected   " in proc.stdout and "test_no_l2" in proc.stdout


def test_expected_skips_pass_and_a_partial_environment_only_reports(tmp_path):
    assert _pytest(tmp_path, EXPECTED + PASSES, True).returncode == 0
    relaxed = _pytest(tmp_path, MISSING_TOOL + PASSES, False)
    assert relaxed.returncode == 0 and "SKIPPED" in relaxed.stdout
