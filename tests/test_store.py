"""The Parquet results store: atomic parts, checksums, corruption reports, resume, kill -9."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

import sim
from sim.apps.store import ResultStore, StoreError, content_hash, export_csv, read_results, simulator_version
from sim.apps.sweep import run_sweep, sweep

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
name: kill-test
chip: npu_128x128
workloads:
  - {model: tiny, phase: decode, batch: 2, context_len: 64}
parameters:
  memory.levels.hbm.data_rate_gbps_per_pin: {from: 3.2, to: 9.6, num: N}
  workload.batch: [1, 2]
metrics: [tokens_per_s, energy_per_token_j, area_mm2]
"""


def spec(tmp_path: Path, n: int = 3) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC.replace("num: N", f"num: {n}"))
    return p


def rows(n: int, start: int = 0, **extra):
    return [{"hash": f"h{i:04d}", "error": None, "x": float(i), **extra} for i in range(start, start + n)]


def test_content_hash_is_canonical():
    a = content_hash({"b": 1, "a": [1.0, 2]}, {"w": 8.0}, "1")
    assert a == content_hash({"a": [1, 2], "b": 1.0}, {"w": 8}, "1")
    assert a != content_hash({"a": [1, 2], "b": 1.0}, {"w": 8}, "2")  # the simulator version is part of the key
    assert a != content_hash({"a": [1, 2], "b": 2}, {"w": 8}, "1")


def test_append_load_and_later_parts_win(tmp_path):
    st = ResultStore(tmp_path / "s")
    st.append(rows(3))
    st.append([{"hash": "h0001", "error": "retried", "x": 9.0}])
    again = ResultStore(tmp_path / "s")
    got = again.load()
    assert sorted(got) == ["h0000", "h0001", "h0002"]
    assert got["h0001"]["x"] == 9.0 and got["h0001"]["error"] == "retried"
    assert len(again.part_files()) == 2
    again.compact()
    assert len(again.part_files()) == 1
    assert ResultStore(tmp_path / "s").load(refresh=True) == got


def test_foreign_folder_is_refused(tmp_path):
    d = tmp_path / "mine"
    d.mkdir()
    (d / "thesis.tex").write_text("precious")
    with pytest.raises(StoreError, match="not a sim results store"):
        ResultStore(d)
    assert (d / "thesis.tex").read_text() == "precious"


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_corrupted_part_is_reported_and_left_alone(tmp_path, damage):
    st = ResultStore(tmp_path / "s")
    st.append(rows(2))
    part = st.append(rows(2, start=2))
    data = bytearray(part.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0xFF
    else:
        data = data[: len(data) // 2]
    part.write_bytes(bytes(data))
    with pytest.raises(StoreError) as ei:
        ResultStore(tmp_path / "s").load()
    assert part.name in str(ei.value) and "corrupted" in str(ei.value)
    assert part.read_bytes() == bytes(data)  # never rewritten or deleted


def test_corrupted_store_stops_the_sweep(tmp_path):
    p = spec(tmp_path, 2)
    out = tmp_path / "out"
    run_sweep(p, out=out, jobs=1, progress=False)
    part = ResultStore(out).part_files()[0]
    part.write_bytes(b"garbage")
    before = sorted(x.name for x in (out / "parts").iterdir())
    with pytest.raises(StoreError, match="corrupted"):
        run_sweep(p, out=out, jobs=1, progress=False)
    assert sorted(x.name for x in (out / "parts").iterdir()) == before
    bad_manifest = tmp_path / "out2"
    run_sweep(p, out=bad_manifest, jobs=1, progress=False)
    (bad_manifest / "store.json").write_text("{not json")
    with pytest.raises(StoreError, match="manifest is corrupted"):
        run_sweep(p, out=bad_manifest, jobs=1, progress=False)


def test_temporaries_are_ignored_and_cleaned(tmp_path):
    st = ResultStore(tmp_path / "s")
    st.append(rows(2))
    dead = 2**22 + 12345  # no such process
    tmp = tmp_path / "s" / "parts" / f".tmp-{dead}-abcd-part-x.parquet"
    tmp.write_bytes(b"half a file")
    assert len(ResultStore(tmp_path / "s").load()) == 2
    assert ResultStore(tmp_path / "s").clean_temporaries() == 1
    assert not tmp.exists()


def test_resume_after_losing_a_part_and_csv_export(tmp_path):
    p = spec(tmp_path, 3)
    out = tmp_path / "out"
    full, st = run_sweep(p, out=out, jobs=1, progress=False)
    assert st.new == 6
    # rows written, then one part lost: only its points are simulated again
    ResultStore(out).compact()
    one = ResultStore(out).part_files()[0]
    keep = [r for r in ResultStore(out).load().values()][:4]
    one.unlink()
    ResultStore(out).append(keep)
    again, st2 = run_sweep(p, out=out, jobs=1, progress=False)
    assert (st2.new, st2.reused) == (2, 4)
    pd.testing.assert_frame_equal(full, again)
    csv = export_csv(out, tmp_path / "r.csv")
    back = pd.read_csv(csv)
    assert list(back["point"]) == list(range(6)) and list(back.columns) == list(full.columns)
    assert read_results(out).attrs["parameters"] == full.attrs["parameters"]
    assert set(ResultStore(out).dataframe()["sim_version"]) == {simulator_version()}
    assert simulator_version().startswith(sim.__version__ + "+")


def test_the_version_digest_covers_the_physics_and_skips_plots_and_sweep_machinery():
    """A stored point is reused only by the code that computed it: every module that can
    change a result is digested; figures, the store and the sweep planner are not (a new
    plot must not throw a finished sweep away)."""
    from sim.apps.store import physics_files

    root = Path(sim.__file__).resolve().parent
    rel = {p.relative_to(root.parent).as_posix() for p in physics_files()}
    for must in ("sim/model/engine/run.py", "sim/model/kernels/engine.py", "sim/spec/chip.py", "sim/apps/inference.py",
                 "sim/model/stacks.py", "sim/apps/sweep/evaluate.py"):
        assert must in rel, must
    assert not any(r.startswith("sim/apps/plotting/") for r in rel)
    assert "sim/apps/store.py" not in rel and "sim/apps/sweep/plan.py" not in rel
    assert "sim/apps/store_keys.py" not in rel  # split from store.py
    assert not any(r.startswith("sim/apps/sweep/spec") for r in rel)  # spec.py and the modules split from it
    assert "sim/apps/sweep/backends.py" not in rel and "sim/apps/sweep/table.py" not in rel  # split from run.py
    assert any(r.startswith("dataflows/") for r in rel)


def test_retry_errors(tmp_path):
    p = spec(tmp_path, 1)
    out = tmp_path / "out"
    df, _ = run_sweep(p, out=out, jobs=1, progress=False)
    st = ResultStore(out)
    h = df["hash"].iloc[0]
    st.append([{"hash": h, "error": "stale failure"}])
    df2, s2 = run_sweep(p, out=out, jobs=1, progress=False)
    assert df2["error"].iloc[0] == "stale failure" and s2.new == 0
    df3, s3 = run_sweep(p, out=out, jobs=1, progress=False, retry_errors=True)
    assert s3.new == 1
    pd.testing.assert_frame_equal(df, df3)


def test_kill_9_then_resume(tmp_path):
    """kill -9 a sweep mid-run (driver and workers), resume: no lost, duplicated or
    corrupted rows, and the same table as an uninterrupted run."""
    p = spec(tmp_path, 30)  # 60 points
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIM_SWEEP_FLUSH_SECONDS": "0"}
    proc = subprocess.Popen([sys.executable, "-m", "sim.cli", "sweep", str(p), "--out", str(out), "-j", "2", "-q"],
                            cwd=tmp_path, env=env, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE)
    parts = out / "parts"
    deadline = time.time() + 60
    try:
        while time.time() < deadline:
            if parts.is_dir() and len([x for x in parts.iterdir() if x.name.startswith("part-")]) >= 8:
                break
            if proc.poll() is not None:
                break
            time.sleep(0.02)
        assert proc.poll() is None, "the sweep finished before it could be killed: " + proc.stderr.read().decode()
        os.killpg(proc.pid, signal.SIGKILL)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stderr.close()
    done_before = len(ResultStore(out).load())
    assert 8 <= done_before < 60
    resumed, st = run_sweep(p, out=out, jobs=2, progress=False)
    assert st.reused == done_before and st.new == 60 - done_before
    reference = sweep(p, jobs=1, progress=False)  # in process: the table does not depend on the pool
    pd.testing.assert_frame_equal(reference, resumed)
    stored = ResultStore(out).dataframe()
    assert len(stored) == 60 and stored["hash"].is_unique
    assert resumed["error"].isna().all()
