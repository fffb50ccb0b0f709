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



def test_sim_run_and_sim_show_print_their_tables_without_pandas():
    """The commands a first hour runs most print their tables in plain Python: loading pandas
    for them cost ~0.25 s of a ~1.3 s `sim run` (2-core build machine)."""
    code = ("import sys, contextlib, io\n"
            "from sim.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()) as out:\n"
            "    assert main(['run', 'npu_128x128', 'tiny', '--phase', 'decode', '-q']) == 0\n"
            "    assert main(['show', 'h200_sxm']) == 0\n"
            "text = out.getvalue()\n"
            "assert 'biggest ops:' in text and 'memories (inner to outer):' in text, text\n"
            "print(sorted(m for m in ('pandas', 'torch', 'matplotlib') if m in sys.modules))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip().splitlines()[-1] == "[]", out.stdout
