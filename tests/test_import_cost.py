"""`import sim` loads what a simulation needs and no more: pandas (~0.3 s of a fresh process)
is loaded when a table is made (a network's layers, a sweep, printed output), torch never.
(That a network's layers are still a DataFrame, tests/test_cnn.py checks.)"""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_import_sim_loads_neither_pandas_nor_torch():
    code = ("import sys, sim\n"
            "print(sorted(m for m in ('pandas', 'torch', 'matplotlib') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]", out.stdout

