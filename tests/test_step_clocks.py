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


def test_what_if_scales_only_the_vector_time_and_only_below_the_idle_clock():
    sys.path.insert(0, str(ROOT / "validation"))
    from step_clocks import vector_clock_sensitivity, what_if

    row = {"measured": {"sm_mhz": 1500.0, "step_ms": 10.0, "kernels": None},
           "at_measured_clock": {"gemm_ms": 6.0, "vector_ms": 3.0, "attention_ms": 1.0}}
    assert what_if(row, 0.0)["vector_ms"] == 3.0 and what_if(row, 0.0)["kernels_ms"] == 10.0
    assert what_if(row, 1.0)["vector_ms"] == 3.96          # 3.0 * 1980 / 1500, all of it clock-bound
    assert what_if(dict(row, measured=dict(row["measured"], sm_mhz=1980.0)), 0.7)["vector_ms"] == 3.0
    s = vector_clock_sensitivity("h100")
    assert s is not None and 0.0 < s < 1.0   # the stored kernels: part of their time follows the clock


def test_model_step_clock_is_the_highest_grid_clock_whose_step_fits_the_limit(monkeypatch):
    """The step-level clock search, on a step whose modelled power rises with the clock (a
    stand-in for the simulator: P = 200 W + 0.3 W per MHz): the answer is the highest 15 MHz
    grid clock with at most tdp_w (700 W -> 1,665 MHz, where 1,680 draws 704 W), found in a
    handful of priced clocks; a step that fits at the boost clock gets the boost clock."""
    sys.path.insert(0, str(ROOT / "validation"))
    import step_clocks

    priced = []

    def fake(chip_name, kw, overrides):
        f = float(overrides[-1].split("=")[1])
        priced.append(f)
        return {"avg_w": kw["base_w"] + 0.3 * f, "step_ms": 1e4 / f}

    monkeypatch.setattr(step_clocks, "model_step", fake)
    got = step_clocks.model_step_clock("h100_sxm", {"base_w": 200.0})
    assert got["clock_mhz"] == 1665.0 and got["avg_w"] <= 700.0
    assert 200.0 + 0.3 * (got["clock_mhz"] + 15) > 700.0
    assert len(set(priced)) <= 8
    priced.clear()
    light = step_clocks.model_step_clock("h100_sxm", {"base_w": 0.0})
    assert light["clock_mhz"] == 1980.0 and priced == [1980.0]


def test_refit_what_if_prices_the_candidate_at_the_probed_clock(monkeypatch):
    """The refit what-if asks for the measured-quantities candidate (its L2 and array rates, not
    its boost clock) at the probed clock with DVFS off, and scales only the vector time."""
    sys.path.insert(0, str(ROOT / "validation"))
    import step_clocks

    asked = []

    def fake(chip_name, kw, overrides):
        asked.append(overrides)
        return {"gemm_ms": 6.0, "attention_ms": 1.0, "vector_ms": 3.0, "avg_w": 650.0, "step_ms": 10.0}

    monkeypatch.setattr(step_clocks, "model_step", fake)
    got = step_clocks.what_if_refit("h100_sxm", {}, {"sm_mhz": 1500.0, "step_ms": 10.0}, 1.0)
    ov = asked[-1]
    assert ov[-2:] == ["power.dvfs=false", "clock_mhz=1500.0"]
    assert not any(o.startswith("clock_mhz=1980") for o in ov)
    assert any(o.startswith("memory.levels.l2.bytes_per_cycle=") for o in ov)
    assert any(o.startswith("cores.arrays.0.sustained_fraction=") for o in ov)
    assert got["vector_ms"] == 3.96 and got["kernels_ms"] == 10.96 and got["error_vs_step"] == 0.096
