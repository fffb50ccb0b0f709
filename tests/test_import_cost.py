"""`import sim` loads what a simulation needs and no more: pandas (~0.3 s of a fresh process)
is loaded when a table is made (a network's layers, a sweep, printed output), torch never."""
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


def test_a_network_still_returns_its_layers_as_a_dataframe():
    import pandas as pd

    import sim

    r = sim.run_network("eyeriss", "alexnet", batch=1)
    assert isinstance(r.layers, pd.DataFrame) and len(r.layers) == 5
