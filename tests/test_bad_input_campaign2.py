"""Bad input, campaign 2 of issue 14: what a second round of mutated chips, models, stacks,
sweeps, serving options, traces, case files and plots found, each exiting 2 with one message
naming the file, line and key (or the option) - never an internal error, a hang or a silent
nonsense result."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SECONDS = 45  # interpreter start and imports included; generous for a loaded 2-core machine


def sim(*args: str, cwd=ROOT, timeout: float = 120) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    env.pop("SIM_DEBUG", None)
    t0 = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=timeout)
    proc.seconds = time.monotonic() - t0  # type: ignore[attr-defined]
    return proc


def refused(proc, *needles: str) -> None:
    """Exit 2, no traceback, no internal error, quickly, and every needle in stderr."""
    err = proc.stderr
    assert proc.returncode == 2, (proc.returncode, proc.stdout[-2000:], err[-2000:])
    assert "Traceback" not in err and "internal error" not in err, err
    assert proc.seconds < SECONDS, proc.seconds
    for n in needles:
        assert n in err, (n, err)


# --------------------------------------------------------------------------- stack profiles

STACK_LINE = "{name: a_fp32, op: copy, read: m*k*eb, write: m*k*4, elements: m*k, source: \"A.to(float)\"}"


@pytest.mark.parametrize("edit, needles", [
    ("read: m*k*, ", ["read:", "'m*k*' is not an arithmetic expression"]),
    ("read: '', ", ["read:", "an empty expression"]),
    ("read: m*k/0, ", ["read:", "divides by zero"]),
    ("read: \"__import__('os').system('true')\", ", ["read:", "is not arithmetic over names"]),
    ("read: m.__class__, ", ["read:", "is not arithmetic over names"]),
    ("read: .nan, ", ["read:", "finite number"]),
], ids=["trailing-op", "empty", "div0", "import", "attribute", "nan"])
def test_bad_kernel_expressions_in_a_stack_are_refused_when_read(tmp_path, edit, needles):
    text = (ROOT / "stacks" / "eager_pytorch.yaml").read_text()
    assert STACK_LINE in text
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if STACK_LINE in ln)
    d = tmp_path / "stacks"
    d.mkdir()
    f = d / "eager_pytorch.yaml"
    f.write_text(text.replace("read: m*k*eb, ", edit, 1))
    refused(sim("check", str(f), "-q"), f"eager_pytorch.yaml:{line}: gemm.weight_only.int8.before.0.read",
            *needles[1:])
