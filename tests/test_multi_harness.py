"""The multi-GPU measurement harness (validation/gpu/multi/measure_multi.py) runs end to end
on the CPU (gloo, two processes), so it is ready when a machine with several GPUs is lent."""
from __future__ import annotations

import csv
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
pytest.importorskip("torch")


def test_harness_measures_collectives_and_sends_on_two_cpu_ranks(tmp_path):
    torchrun = shutil.which("torchrun", path=str(Path(sys.executable).parent))
    if torchrun is None:
        pytest.skip("torchrun is not installed beside this Python")
    out = tmp_path / "multi"
    proc = subprocess.run([torchrun, "--standalone", "--nproc-per-node", "2",
                           str(ROOT / "validation" / "gpu" / "multi" / "measure_multi.py"), "--out", str(out), "--cpu",
                           "--quick", "--only", "collectives,pp_send"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    rows = list(csv.DictReader((out / "multi_collectives.csv").open()))
    assert {r["op"] for r in rows} == {"all_reduce", "all_gather", "reduce_scatter", "all_to_all"}
    for r in rows:
        assert int(r["world"]) == 2 and float(r["median_us"]) > 0
        # NCCL-tests' bus-bandwidth convention
        factor = 1.0 if r["op"] == "all_reduce" else 0.5
        assert float(r["busbw_gbps"]) == pytest.approx(float(r["algbw_gbps"]) * factor, abs=2e-3)
    assert len(list(csv.DictReader((out / "multi_pp_send.csv").open()))) == 2
    env = json.loads((out / "multi_env.json").read_text())
    assert env["world"] == 2 and env["nccl_env"]["NCCL_NVLS_ENABLE"] == "0"
