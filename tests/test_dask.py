"""The Dask backend: a real scheduler and workers on 127.0.0.1 give the same table as the
local process pool, bit for bit; an unreachable scheduler is a clear error within seconds."""
from __future__ import annotations

import logging
import os
import socket
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

distributed = pytest.importorskip("distributed")

from sim.cli import main  # noqa: E402
from sim.errors import SimError  # noqa: E402
from sim.apps.sweep import run_sweep, sweep  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
name: dask-test
chip: npu_128x128
workloads:
  - {model: tiny, phase: decode, batch: 2, context_len: 64}
  - {kind: gemm, m: 64, k: 256, n: 256}
parameters:
  memory.levels.hbm.data_rate_gbps_per_pin: [3.2, 6.4, 9.6]
  cores.arrays.0.rows: [64, 128]
metrics: [seconds, tokens_per_s, tflops, energy_j, area_mm2, "energy_j.*"]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def cluster():
    os.environ["PYTHONPATH"] = str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    lc = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
                                  dashboard_address=None, silence_logs=logging.ERROR)
    try:
        yield lc
    finally:
        lc.close()


def test_dask_equals_process_pool(tmp_path, cluster):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    pool = sweep(p, jobs=2, progress=False)
    df, st = run_sweep(p, out=tmp_path / "store", scheduler=cluster.scheduler_address, progress=False)
    assert st.backend.startswith("Dask")
    assert len(df) == 12 and df["error"].isna().all(), df["error"].tolist()
    pd.testing.assert_frame_equal(pool, df, check_exact=True)
    # resuming on Dask reuses the stored points
    df2, st2 = run_sweep(p, out=tmp_path / "store", scheduler=cluster.scheduler_address, progress=False)
    assert (st2.new, st2.reused) == (0, 12)
    pd.testing.assert_frame_equal(df, df2, check_exact=True)


def test_unreachable_scheduler_is_a_clear_error_within_seconds(tmp_path, capsys):
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC)
    addr = f"tcp://127.0.0.1:{_free_port()}"
    t0 = time.monotonic()
    with pytest.raises(SimError) as ei:
        sweep(p, scheduler=addr, progress=False, connect_timeout=2)
    assert time.monotonic() - t0 < 15
    assert "cannot reach the Dask scheduler" in str(ei.value) and addr in str(ei.value)
    assert main(["sweep", str(p), "--out", str(tmp_path / "o"), "--scheduler", addr, "--connect-timeout", "2"]) == 2
    assert "cannot reach the Dask scheduler" in capsys.readouterr().err
