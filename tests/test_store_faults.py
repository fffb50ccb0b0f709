"""The results store under faults the bad-input campaign found: two sweeps creating one new
folder, two sweeps sharing one store (no point simulated twice), SIGTERM in the middle of a
sweep (finished points kept), a corrupted part reported the same way every time (exit 2)."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from sim.apps.store import ResultStore, StoreError

ROOT = Path(__file__).resolve().parents[1]

SPEC = """\
name: faults
chip: npu_128x128
workloads:
  - {kind: gemm, m: 64, k: 256, n: 256}
parameters:
  cores.arrays.0.rows: {from: 16, to: 128, num: N}
metrics: [seconds]
"""


def _spec(tmp_path: Path, n: int) -> Path:
    p = tmp_path / "spec.yaml"
    p.write_text(SPEC.replace("num: N", f"num: {n}"))
    return p


def _env(**extra) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SIM_NO_CACHE": "1", **extra}
    env.pop("SIM_DEBUG", None)
    return env


def test_many_processes_creating_one_new_store_all_open_it(tmp_path):
    """A store is assembled aside and renamed into place, so a racing creator never sees
    `parts/` without the manifest (it was "not a results store" in 2 of 5 campaign runs)."""
    for trial in range(25):
        target = tmp_path / f"new-{trial}"
        barrier = threading.Barrier(8)
        errors: list[BaseException] = []

        def create():
            barrier.wait()
            try:
                ResultStore(target)
            except BaseException as exc:  # noqa: BLE001 - collected and asserted below
                errors.append(exc)

        threads = [threading.Thread(target=create) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert (target / "store.json").is_file()
        assert not [p for p in tmp_path.iterdir() if p.name.startswith(".tmp-")], "temporary folders left behind"


def test_a_claim_is_held_by_a_live_process_and_taken_over_from_a_dead_one(tmp_path):
    store = ResultStore(tmp_path / "s")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        (store.claims_dir / "h1").write_text(str(other.pid))
        mine, held = store.claim(["h1", "h2"])
        assert mine == {"h2"} and held == {"h1": other.pid}
    finally:
        other.kill()
        other.wait()
    mine, held = store.claim(["h1"])  # its claimant died: taken over
    assert mine == {"h1"} and held == {}
    store.release(["h1", "h2"])
    assert list(store.claims_dir.iterdir()) == []


def test_two_sweeps_on_one_store_never_simulate_a_point_twice(tmp_path):
    spec = _spec(tmp_path, 12)
    out = tmp_path / "store"
    code = ("import json, sys; from sim.apps.sweep import run_sweep; "
            "df, st = run_sweep(sys.argv[1], out=sys.argv[2], jobs=1, progress=False); "
            "print(json.dumps({'new': st.new, 'rows': len(df), 'failed': int(df['error'].notna().sum())}))")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(spec), str(out)], env=_env(), cwd=tmp_path,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    results = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-2000:]
        results.append(json.loads(stdout.strip().splitlines()[-1]))
    assert all(r["rows"] == 12 and r["failed"] == 0 for r in results), results
    assert sum(r["new"] for r in results) == 12, f"points simulated twice: {results}"
    assert list((out / "claims").iterdir()) == []


def test_rows_finished_between_reading_the_store_and_claiming_are_not_simulated_again(tmp_path, monkeypatch):
    """The race CI hit: a second sweep read the store before the first one finished, then
    claimed the points after the first had written its rows and dropped its claims. Rows
    present at claim time count as reused."""
    from sim.apps.sweep import run_sweep

    spec = _spec(tmp_path, 3)
    out = tmp_path / "store"
    monkeypatch.setenv("SIM_NO_CACHE", "1")
    _, first = run_sweep(str(spec), out=str(out), jobs=1, progress=False)
    assert first.new == 3
    real_load, real_parts = ResultStore.load, ResultStore.part_files
    calls = {"n": 0, "parts": 0}

    def stale_first_read(self, refresh=False):
        calls["n"] += 1
        return {} if calls["n"] == 1 else real_load(self, refresh=refresh)

    def parts_before_the_first_sweep_wrote(self):
        calls["parts"] += 1
        return [] if calls["parts"] == 1 else real_parts(self)

    monkeypatch.setattr(ResultStore, "load", stale_first_read)
    monkeypatch.setattr(ResultStore, "part_files", parts_before_the_first_sweep_wrote)
    df, second = run_sweep(str(spec), out=str(out), jobs=1, progress=False)
    assert calls["n"] >= 2
    assert second.new == 0 and second.reused == 3, second
    assert len(df) == 3 and df["error"].isna().all()
    assert list((out / "claims").iterdir()) == []


def test_rows_written_while_awaiting_another_sweep_are_not_simulated_again(tmp_path, monkeypatch):
    """The race behind a flaky two-sweep run (11 + 12 new points for 12): a sweep waiting on
    another's points read the store, then the other wrote its rows and dropped its claims,
    then the waiter claimed the points as abandoned and simulated them again."""
    from sim.apps.sweep import run as sweep_run

    store = ResultStore(tmp_path / "store")
    h = "a" * 16
    other = os.getppid()  # a live process that is not this one
    (store.claims_dir / h).write_text(str(other))
    real_claim = ResultStore.claim

    def other_sweep_finishes_first(self, hashes):
        hashes = list(hashes)
        if (self.claims_dir / h).exists():  # the other sweep writes its row, then releases
            self.append([{"hash": h, "seconds": 1.0, "error": None}])
            (self.claims_dir / h).unlink()
        return real_claim(self, hashes)

    monkeypatch.setattr(ResultStore, "claim", other_sweep_finishes_first)
    simulated, arrived = [], []

    class Sink:
        def flush(self):
            pass

    sweep_run._await_points(store, {h: other}, {h: {"chip": {}}}, simulated.append, Sink(),
                            lambda: arrived.append(1))
    assert simulated == [] and arrived == [1]
    assert list(store.claims_dir.iterdir()) == []


def test_sigterm_keeps_every_finished_point(tmp_path):
    """SIGTERM ends a sweep as Ctrl-C does: the points it reports finished are in the store
    (the default action dropped up to FLUSH_SECONDS of them)."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(SPEC.replace("m: 64, k: 256, n: 256", "m: 1024, k: 2048, n: 2048")
                    .replace("{from: 16, to: 128, num: N}", "{from: 8, to: 256, step: 1}"))
    out = tmp_path / "store"
    proc = subprocess.Popen([sys.executable, "-m", "sim", "sweep", str(spec), "--out", str(out), "-j", "1"],
                            env=_env(SIM_SWEEP_FLUSH_SECONDS="3600"), cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 300
    while not (out / "store.json").is_file() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
    time.sleep(5.0)  # some points finish, none flushed (the flush interval is an hour)
    if proc.poll() is not None:
        pytest.skip("the sweep finished before it could be interrupted")
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr[-2000:]
    m = re.search(r"interrupted: (\d+) finished point\(s\) saved", stderr)
    assert m, stderr[-2000:]
    stored = len(ResultStore(out, create=False).load())
    assert stored == int(m.group(1)) and stored > 0


def test_a_corrupted_part_is_reported_the_same_way_every_time(tmp_path):
    spec = _spec(tmp_path, 3)
    out = tmp_path / "store"
    run = [sys.executable, "-m", "sim", "sweep", str(spec), "--out", str(out), "-q"]
    assert subprocess.run(run + ["-j", "1"], env=_env(), cwd=tmp_path, capture_output=True).returncode == 0
    part = sorted((out / "parts").iterdir())[0]
    part.write_bytes(b"")
    for jobs in ("1", "2", "1", "2", "1"):
        proc = subprocess.run(run + ["-j", jobs], env=_env(), cwd=tmp_path, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 2, (proc.returncode, proc.stderr[-1500:])
        assert part.name in proc.stderr and "corrupted" in proc.stderr and "Traceback" not in proc.stderr
    with pytest.raises(StoreError):
        ResultStore(out).load()


def _descendants(pid: int) -> set[int]:
    """Every live process below ``pid`` (from /proc: children of each thread)."""
    out, todo = set(), [pid]
    while todo:
        p = todo.pop()
        for task in Path(f"/proc/{p}/task").glob("*"):
            try:
                kids = (task / "children").read_text().split()
            except OSError:
                continue
            for k in map(int, kids):
                if k not in out:
                    out.add(k)
                    todo.append(k)
    return out


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs /proc to list child processes")
def test_sigterm_ends_validate_and_every_worker_it_started(tmp_path):
    """`timeout` or a scheduler's SIGTERM on `sim validate -j 2`: exit 130 with the finished
    cases in the checkpoint, and no pool worker left running without its parent (before,
    the workers of a killed run computed on as orphans)."""
    cases = Path(__file__).resolve().parents[1] / "validation" / "ci_cases.csv"
    out = tmp_path / "v"
    proc = subprocess.Popen([sys.executable, "-m", "sim", "validate", "h200_sxm", str(cases), "--out", str(out),
                             "-j", "2"], env=_env(), cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    deadline = time.monotonic() + 120
    workers: set[int] = set()
    while len(workers) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.2)
        workers = _descendants(proc.pid)
    assert proc.poll() is None and len(workers) >= 2, "the pool never started"
    time.sleep(2.0)  # the workers are importing or computing their first cases
    proc.send_signal(signal.SIGTERM)
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr[-2000:]
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr[-2000:]
    deadline = time.monotonic() + 15
    while any(map(_alive, workers)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not any(map(_alive, workers)), f"workers still running: {sorted(filter(_alive, workers))}"
    # the checkpoint holds whole lines only (a header and the cases finished before the signal)
    lines = (out / "predictions.partial.jsonl").read_text().splitlines()
    assert lines and all(line.startswith("{") and line.endswith("}") for line in lines)
