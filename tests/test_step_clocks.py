"""The in-step clock measurements (validation/gpu/micro_step_clocks.py, micro_vector_clock.py) and
the reader (validation/step_clocks.py): the GPU scripts' CPU paths run, and the reader gives the
stored results' measured clocks from the stored probes."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_gpu_script_places_its_probes_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(ROOT / "validation" / "gpu" / "micro_step_clocks.py"), "--dry-run",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    sys.path.insert(0, str(ROOT / "validation" / "gpu"))
    from micro_step_clocks import STEPS

    lines = [ln for ln in proc.stdout.splitlines() if "probe points" in ln]
    assert [ln.split()[0] for ln in lines] == [name for name, *_ in STEPS]
    # two layers on the CPU, a probe after each of the first layer's four weight GEMMs
    assert all("4 probe points" in ln and "'L0.qkv', 'L0.o', 'L0.gu', 'L0.down'" in ln for ln in lines)


def test_vector_clock_script_runs_its_kernels_on_the_cpu(tmp_path):
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(ROOT / "validation" / "gpu" / "micro_vector_clock.py"), "--dry-run",
                           "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [ln.split()[0] for ln in proc.stdout.splitlines() if "dry run" in ln]
    assert names == ["rmsnorm", "residual_add", "silu_mul", "rope_q", "kv_copy"]


def test_reader_gives_the_stored_measured_clocks():
    pytest.importorskip("pandas")
    sys.path.insert(0, str(ROOT / "validation"))
    from step_clocks import measured_clocks

    got = measured_clocks("h100")
    stored = json.loads((ROOT / "validation" / "results" / "h100_step_clocks.json").read_text())["steps"]
    for name, row in stored.items():
        m = row["measured"]
        assert got[name]["sm_mhz"] == m["sm_mhz"] and got[name]["step_ms"] == m["step_ms"]
        assert got[name]["sm_mhz_by_gemm"] == m["sm_mhz_by_gemm"]
