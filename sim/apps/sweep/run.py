"""Running a sweep: plan the points, skip the ones already stored, evaluate the rest on a
local process pool or a Dask cluster, store each finished point, and assemble the table.

The table never depends on the order in which points finish: rows are sorted by point
index and built from the stored rows, so a process pool, a Dask cluster and a resumed run
all give the same DataFrame, bit for bit.
"""
from __future__ import annotations

import fnmatch
import logging
import multiprocessing as mp
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Optional

from sim.apps.interrupt import sigterm_as_interrupt, stop_pool
from sim.apps.store import STRING_COLUMNS, ResultStore, canonical_json, simulator_version, write_table_files
from sim.apps.sweep.evaluate import evaluate_point, worker_init
from sim.apps.sweep.plan import Point, expand
from sim.apps.sweep.spec import BREAKDOWN_PREFIXES, LoadedSpec, SweepSpec, load_sweep_spec, sweep_spec_from_dict
from sim.errors import SimError

__all__ = ["sweep", "run_sweep", "plan", "SweepStats", "assemble", "load_spec", "SweepFailedError",
           "check_not_all_failed"]

#: a point's row is written to the store at most this many seconds after it finishes
#: (``SIM_SWEEP_FLUSH_SECONDS`` changes it; 0 writes every point as soon as it finishes)
FLUSH_SECONDS = float(os.environ.get("SIM_SWEEP_FLUSH_SECONDS", "2.0"))
FLUSH_ROWS = 200
#: more parts than this are merged into one at the end of a sweep
COMPACT_PARTS = 64
#: errors that say nothing about the point (infrastructure): shown, never stored
_TRANSIENT = "transient: "


class SweepFailedError(SimError):
    """Every point of a sweep failed: nothing was simulated successfully.  ``df`` holds the
    table (one row per point, each with its ``error``), ``stats`` the run's statistics."""

    def __init__(self, message: str, df=None, stats=None):
        super().__init__(message)
        self.df, self.stats = df, stats


def check_not_all_failed(df, name: str, stats=None, where: str | None = None) -> None:
    """Raise :class:`SweepFailedError` when every row of a sweep's table has an ``error``."""
    if not len(df) or not df["error"].notna().all():
        return
    distinct: list[str] = []
    for point, err in zip(df["point"], df["error"]):
        text = f"point {point}: {err}"
        if all(not d.endswith(f": {err}") for d in distinct):
            distinct.append(text)
    shown = "\n  ".join(distinct[:3])
    more = f"\n  ... and {len(distinct) - 3} other error(s) (see the 'error' column)" if len(distinct) > 3 else ""
    saved = f"; the table with each point's error is in {where}" if where else ""
    raise SweepFailedError(f"sweep {name}: all {len(df)} point(s) failed{saved}:\n  {shown}{more}", df, stats)


@dataclass
class SweepStats:
    name: str = ""
    points: int = 0
    unique: int = 0
    reused: int = 0
    new: int = 0
    failed: int = 0
    invalid: int = 0
    seconds: float = 0.0
    backend: str = ""
    store: Optional[str] = None
    files: list[str] = field(default_factory=list)


def load_spec(spec: Any) -> LoadedSpec:
    """A spec from a path, a dict, a :class:`SweepSpec` or an already loaded spec."""
    if isinstance(spec, LoadedSpec):
        return spec
    if isinstance(spec, (str, os.PathLike)):
        return load_sweep_spec(spec)
    if isinstance(spec, SweepSpec):
        return sweep_spec_from_dict(spec.model_dump(by_alias=True, exclude_unset=True))
    if isinstance(spec, dict):
        return sweep_spec_from_dict(spec)
    raise SimError(f"a sweep spec is a YAML path, a dict or a SweepSpec, got {type(spec).__name__}")


# --------------------------------------------------------------------------- assembling


def _component_rank(col: str) -> tuple:
    comp = col.split(".", 1)[1] if "." in col else col
    order = {"registers": 0, "mac": 1, "vector": 2, "noc": 8, "static": 9}
    return (order.get(comp, 5), comp)


def _metric_columns(metrics: Iterable[str], available: list[str]) -> list[str]:
    cols: list[str] = []
    for m in metrics:
        if any(ch in m for ch in "*?["):
            matched = [c for c in available if fnmatch.fnmatchcase(c, m)]
            by_prefix: dict[str, list[str]] = {}
            for c in matched:
                pre = next((p for p in BREAKDOWN_PREFIXES if c.startswith(p)), "")
                by_prefix.setdefault(pre, []).append(c)
            for pre in sorted(by_prefix, key=lambda p: (p != "", p)):
                for c in sorted(by_prefix[pre], key=_component_rank if pre else (lambda c: c)):
                    if c not in cols:
                        cols.append(c)
        elif m not in cols:
            cols.append(m)
    return cols


def assemble(loaded: LoadedSpec, points: list[Point], rows: dict[str, dict], metrics=None):
    """The sweep's table: one row per point (sorted by point index) with its workload,
    chip, every parameter, the kept metrics, ``error`` and ``hash``."""
    import numpy as np
    import pandas as pd

    metrics = list(metrics if metrics is not None else loaded.metrics)
    param_cols: list[str] = []
    for ax in loaded.axes:
        for p in ax.paths:
            if p not in param_cols and p != "chip":
                param_cols.append(p)
    # columns with a value in at least one row (a key's presence depends on how rows were
    # stored - a Parquet part has the union of its rows' keys - its values do not)
    available = sorted({k for p in points if p.hash in rows for k, v in rows[p.hash].items()
                        if k not in STRING_COLUMNS and v is not None and v == v})
    mcols = _metric_columns(metrics, available)
    data: dict[str, list] = {"point": [], "workload": [], "chip": []}
    for c in param_cols:
        data[c] = []
    mvals = {c: [] for c in mcols}
    errors, hashes = [], []
    for p in sorted(points, key=lambda q: q.index):
        data["point"].append(p.index)
        data["workload"].append(p.workload)
        data["chip"].append(p.chip)
        for c in param_cols:
            data[c].append(p.params.get(c))
        row = rows.get(p.hash) if p.hash else None
        err = p.error if p.error is not None else (row.get("error") if row is not None else "not evaluated")
        if isinstance(err, str) and err.startswith(_TRANSIENT):
            err = err[len(_TRANSIENT):]
        errors.append(err if err else None)
        hashes.append(p.hash)
        for c in mcols:
            v = row.get(c) if row is not None else None
            mvals[c].append(np.nan if v is None else float(v))
    df = pd.DataFrame(data)
    df["point"] = df["point"].astype("int64")
    for c in mcols:
        df[c] = np.asarray(mvals[c], dtype="float64")
    df["error"] = pd.Series(errors, dtype="object")
    df["hash"] = pd.Series(hashes, dtype="object")
    df.attrs = {"sweep": loaded.name, "parameters": param_cols, "metrics": mcols}
    return df


# --------------------------------------------------------------------------- sinks


class _Sink:
    """Collects finished rows; writes them to the store in small atomic parts."""

    def __init__(self, store: Optional[ResultStore], meta: dict[str, dict]):
        self.store = store
        self.meta = meta
        self.rows: dict[str, dict] = {}
        self.buffer: list[dict] = []
        self.last = time.monotonic()
        self.failed = 0

    def add(self, row: dict) -> None:
        h = row["hash"]
        err = row.get("error")
        if err:
            self.failed += 1
        self.rows[h] = row
        if self.store is not None and not (isinstance(err, str) and err.startswith(_TRANSIENT)):
            self.buffer.append({**self.meta.get(h, {}), **row})
            if len(self.buffer) >= FLUSH_ROWS or time.monotonic() - self.last >= FLUSH_SECONDS:
                self.flush()

    def flush(self) -> None:
        if self.store is not None and self.buffer:
            self.store.append(self.buffer)
            self.buffer = []
        self.last = time.monotonic()


# --------------------------------------------------------------------------- backends


def _bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm

    tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
    return tqdm(total=total, initial=initial, desc=desc, unit="pt", file=sys.stderr, disable=not enabled,
                dynamic_ncols=True, smoothing=0.05, mininterval=0.5 if tty else 10.0,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")


#: worker processes of the local pool are named so; their start never runs the parent's ``__main__``
_WORKER_NAME = "SimSweepWorker"


def _skip_main_in_workers() -> None:
    """Make the pool's workers start without re-running the parent's ``__main__``.

    Under the ``spawn`` and ``forkserver`` start methods a new process first re-imports the
    parent's main module: a script without an ``if __name__ == "__main__":`` guard would run
    its sweep again inside every worker (which then dies in multiprocessing's bootstrap
    check), and ``python - < script.py`` names a main file ``<stdin>`` that does not exist.
    The workers only need :func:`evaluate_point` (in this package) and plain-data tasks, so
    the main module is left out of the preparation data of processes named
    :data:`_WORKER_NAME` - every other process of the program starts as before.
    """
    from multiprocessing import spawn

    if getattr(spawn.get_preparation_data, "_sim_skips_main", False):
        return
    original = spawn.get_preparation_data

    def get_preparation_data(name, _original=original):
        data = _original(name)
        if str(name).startswith(_WORKER_NAME):
            data.pop("init_main_from_path", None)
            data.pop("init_main_from_name", None)
        return data

    get_preparation_data._sim_skips_main = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = get_preparation_data


def _named(base):
    class _Worker(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self._name = f"{_WORKER_NAME}-{':'.join(str(i) for i in self._identity)}"

    return _Worker


if "forkserver" in mp.get_all_start_methods():
    from multiprocessing.context import ForkServerContext as _FSC
    from multiprocessing.context import ForkServerProcess as _FSP

    class _ForkServerWorker(_named(_FSP)):  # type: ignore[misc]
        pass

    class _ForkServerContext(_FSC):
        Process = _ForkServerWorker
else:  # pragma: no cover - Windows
    _ForkServerContext = None  # type: ignore[assignment]

from multiprocessing.context import SpawnContext as _SC  # noqa: E402
from multiprocessing.context import SpawnProcess as _SP


class _SpawnWorker(_named(_SP)):  # type: ignore[misc]
    pass


class _SpawnContext(_SC):
    Process = _SpawnWorker


def _mp_context():
    """The pool's start method: forkserver where there is one (fast, no inherited threads),
    else spawn; neither re-runs the caller's main module (:func:`_skip_main_in_workers`),
    so ``sim.sweep(...)`` works from a plain script, stdin, ``python -c`` and notebooks."""
    _skip_main_in_workers()
    if _ForkServerContext is not None:
        ctx = _ForkServerContext()
        ctx.set_forkserver_preload(["sim.apps.sweep.evaluate", "sim.apps.inference"])
        return ctx
    return _SpawnContext()


def _run_inline(tasks: list[dict], add: Callable[[dict], None]) -> None:
    for t in tasks:
        add(evaluate_point(t))


def _run_pool(tasks: list[dict], jobs: int, add: Callable[[dict], None]) -> None:
    """A local process pool.  A worker that dies (segfault, OOM kill) breaks the pool: the
    unfinished points are retried in a new pool; after a second break they run one at a
    time, so that only the point that kills its worker is recorded as failed."""
    ctx = _mp_context()
    pending = {t["hash"]: t for t in tasks}
    breaks = 0
    while pending:
        isolate = breaks >= 2
        workers = 1 if isolate else max(1, min(jobs, len(pending)))
        ex = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=worker_init)
        broken = False
        try:
            if isolate:
                for h in list(pending):
                    try:
                        row = ex.submit(evaluate_point, pending[h]).result()
                    except BrokenProcessPool:
                        row = {"hash": h, "error": "the worker process died while simulating this point "
                                                   "(crash or out of memory)"}
                        broken = True
                    pending.pop(h)
                    add(row)
                    if broken:
                        break
            else:
                futs = {ex.submit(evaluate_point, t): h for h, t in pending.items()}
                for f in as_completed(futs):
                    h = futs[f]
                    try:
                        row = f.result()
                    except BrokenProcessPool:
                        broken = True
                        continue
                    except Exception as exc:  # e.g. a task that cannot be pickled
                        row = {"hash": h, "error": f"internal error: {type(exc).__name__}: {exc}"}
                    pending.pop(h, None)
                    add(row)
        except BaseException:
            stop_pool(ex)
            raise
        ex.shutdown(wait=not broken, cancel_futures=True)
        if broken and not isolate:
            breaks += 1


def _connect_dask(scheduler: str, jobs: int, timeout: float):
    try:
        from distributed import Client, LocalCluster
    except ImportError:  # pragma: no cover - optional dependency
        raise SimError("the Dask backend needs the 'distributed' package: pip install 'sim[sweep]'") from None
    if scheduler == "local":
        cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True, host="127.0.0.1",
                               dashboard_address=None, silence_logs=logging.ERROR)
        return Client(cluster, timeout=f"{max(timeout, 30)}s"), cluster
    addr = scheduler if "://" in scheduler else f"tcp://{scheduler}"
    try:
        client = Client(addr, timeout=f"{timeout}s")
    except (OSError, TimeoutError, ValueError) as exc:
        raise SimError(f"cannot reach the Dask scheduler at {addr} within {timeout:g} s ({exc}); start one with "
                       f"`dask scheduler` and workers with `dask worker {addr}` (with sim installed), or use "
                       "--scheduler local") from None
    try:
        client.wait_for_workers(1, timeout=max(timeout, 10.0))
    except (TimeoutError, OSError) as exc:
        client.close()
        raise SimError(f"the Dask scheduler at {addr} has no workers ({type(exc).__name__}); start some with "
                       f"`dask worker {addr}`") from None
    return client, None


def _run_dask(tasks: list[dict], scheduler: str, jobs: int, add: Callable[[dict], None], timeout: float) -> None:
    from distributed import as_completed as d_as_completed

    client, cluster = _connect_dask(scheduler, jobs, timeout)
    try:
        futs = client.map(evaluate_point, tasks, key=[f"sim-point-{t['hash']}" for t in tasks], pure=False)
        owner = {f.key: t["hash"] for f, t in zip(futs, tasks)}
        for f in d_as_completed(futs):
            h = owner[f.key]
            try:
                row = f.result()
            except (ImportError, ModuleNotFoundError) as exc:
                raise SimError(f"Dask workers cannot import the simulator ({exc}); install sim on every worker "
                               "(pip install -e . in the same environment) or start workers with PYTHONPATH "
                               "pointing at it") from None
            except Exception as exc:  # KilledWorker, lost connection...: not the point's fault
                row = {"hash": h, "error": f"{_TRANSIENT}Dask could not run this point ({type(exc).__name__}: "
                                           f"{exc}); re-run the sweep to retry it"}
            f.release()
            add(row)
    finally:
        try:
            client.close()
        finally:
            if cluster is not None:
                cluster.close()


# --------------------------------------------------------------------------- entry points


def plan(spec, overrides: list[str] | None = None):
    """The points of a sweep without running them: a DataFrame with ``point``,
    ``workload``, ``chip``, every parameter, ``hash`` and ``error`` (invalid points)."""
    import pandas as pd

    loaded = load_spec(spec)
    points = expand(loaded, overrides)
    rows = []
    for p in points:
        rows.append({"point": p.index, "workload": p.workload, "chip": p.chip, **p.params, "hash": p.hash,
                     "error": p.error})
    return pd.DataFrame(rows)


#: how often a sweep looks for the rows of points another sweep on its store is simulating
AWAIT_POLL_SECONDS = 0.5


def _await_points(store: ResultStore, held: dict[str, int], tasks: dict[str, dict], add, sink,
                  arrived: Callable[[], None]) -> None:
    """Wait for the rows of points another live sweep claimed (``arrived()`` per row that
    appears in the store); a point whose claimant died, or released it without a row (a
    transient failure), is claimed and simulated here (``add``)."""
    waiting = dict(held)
    while waiting:
        rows = store.load(refresh=True)
        for h in [h for h in waiting if h in rows]:
            arrived()
            del waiting[h]
        if not waiting:
            break
        mine, still = store.claim(waiting)
        for h in mine:  # the other sweep is gone: simulate its point here
            _run_inline([tasks[h]], add)
            del waiting[h]
        sink.flush()
        if waiting:
            time.sleep(AWAIT_POLL_SECONDS)


def run_sweep(spec, *, out: str | os.PathLike | None = None, jobs: int | None = None, scheduler: str | None = None,
              progress: bool = True, retry_errors: bool = False, overrides: list[str] | None = None,
              connect_timeout: float = 5.0, log: Callable[[str], None] | None = None):
    """:func:`sweep` plus the run's statistics: ``(DataFrame, SweepStats)``."""
    t0 = time.perf_counter()
    loaded = load_spec(spec)
    points = expand(loaded, overrides)
    stats = SweepStats(name=loaded.name, points=len(points))
    store = None
    if out is not None:
        store = ResultStore(out)
        store.clean_temporaries()
        stats.store = str(store.path)
    parts_read = store.part_files() if store is not None else []
    stored = store.load() if store is not None else {}
    tasks: dict[str, dict] = {}
    meta: dict[str, dict] = {}
    for p in points:
        if p.error is not None:
            stats.invalid += 1
            continue
        if p.hash in tasks:
            continue
        row = stored.get(p.hash)
        if row is not None and not (retry_errors and row.get("error")):
            continue
        tasks[p.hash] = p.task
        meta[p.hash] = {"chip": p.task["chip"].get("name"), "sim_version": simulator_version(),
                        "workload": canonical_json({**p.task["workload"],
                                                    "model": (p.task["model"] or {}).get("name")}),
                        "overrides": canonical_json(p.overrides)}
    unique = {p.hash for p in points if p.hash}
    stats.unique = len(unique)
    stats.reused = len(unique) - len(tasks)
    jobs = int(jobs) if jobs else (os.cpu_count() or 1)
    if jobs < 1:
        raise SimError(f"jobs must be >= 1, got {jobs}")
    stats.backend = (f"Dask ({'LocalCluster' if scheduler == 'local' else scheduler})" if scheduler
                     else ("this process" if jobs == 1 or len(tasks) <= 1 else f"{min(jobs, len(tasks))} local processes"))
    if log is not None:
        log(f"sweep {loaded.name}: {len(points)} point(s) - {len(tasks)} to simulate on {stats.backend}, "
            f"{stats.reused} already in the store, {stats.invalid} invalid")
    held: dict[str, int] = {}
    if store is not None and tasks:
        mine, held = store.claim(tasks)
        # Rows another sweep finished between our first read of the store and our claim: that
        # sweep writes its rows before it drops its claims, so they are visible now (read
        # again only when a part was written or compacted since: no new part, nothing new).
        fresh = store.load(refresh=True) if store.part_files() != parts_read else stored
        done = [h for h in mine if h in fresh and not (retry_errors and fresh[h].get("error"))]
        if done:
            store.release(done)
            for h in done:
                del tasks[h]
                del meta[h]
            stats.reused += len(done)
        if held and log is not None:
            log(f"{len(held)} point(s) are being simulated by another sweep on this store "
                f"(pid {', '.join(map(str, sorted(set(held.values()))))}); their rows are awaited, not re-run")
    sink = _Sink(store, meta)
    todo = [task for h, task in tasks.items() if h not in held]
    bar = _bar(total=stats.unique, initial=stats.reused, desc=f"sweep {loaded.name}", enabled=progress and bool(todo))

    def add(row: dict) -> None:
        sink.add(row)
        bar.update(1)
        if sink.failed:
            bar.set_postfix_str(f"{sink.failed} failed", refresh=False)

    try:
        with sigterm_as_interrupt():
            if todo:
                if scheduler:
                    _run_dask(todo, scheduler, jobs, add, connect_timeout)
                elif jobs == 1 or len(todo) == 1:
                    _run_inline(todo, add)
                else:
                    _run_pool(todo, jobs, add)
            sink.flush()
            if held:
                _await_points(store, held, tasks, add, sink, lambda: bar.update(1))
    except KeyboardInterrupt:
        sink.flush()
        bar.close()
        if log is not None and store is not None:
            log(f"interrupted: {len(sink.rows)} finished point(s) saved in {store.path}; run the same command "
                "again to resume")
        raise
    finally:
        sink.flush()
        bar.close()
        if store is not None:
            store.release(tasks)
    stats.new = len(sink.rows)
    if store is not None:
        if len(store.part_files()) > COMPACT_PARTS:
            store.compact()
        rows = store.load(refresh=True)
        for h, r in sink.rows.items():  # transient failures are shown but never stored
            if h not in rows:
                rows[h] = r
    else:
        rows = sink.rows
    df = assemble(loaded, points, rows)
    stats.failed = int(df["error"].notna().sum())
    if store is not None:
        pq_path, csv_path = write_table_files(df, store.path)
        stats.files = [str(pq_path), str(csv_path)]
    stats.seconds = time.perf_counter() - t0
    return df, stats


def sweep(spec, *, out: str | os.PathLike | None = None, jobs: int | None = None, scheduler: str | None = None,
          progress: bool = True, retry_errors: bool = False, overrides: list[str] | None = None,
          connect_timeout: float = 5.0):
    """Run a design-space sweep; returns a pandas DataFrame with one row per point.

    ``spec``: a YAML path, a dict of the same structure, or a :class:`SweepSpec` (see
    :mod:`sim.apps.sweep.spec` for the format).  ``out``: a results-store folder; finished points
    are saved there as they complete and skipped on the next run (``None``: keep nothing).
    ``jobs``: local worker processes (default: all cores; 1 runs in this process).
    ``scheduler``: ``"tcp://HOST:PORT"`` for a Dask cluster, ``"local"`` for a Dask
    LocalCluster of ``jobs`` workers; ``None`` for the local process pool.  ``progress``:
    a tqdm bar with rate and ETA on stderr.  ``retry_errors``: re-simulate stored points
    that failed.  ``overrides``: extra ``dotted.path=value`` edits of the base chip.

    Rows are sorted by ``point``; columns are ``point``, ``workload``, ``chip``, each
    parameter (by its dotted path), each metric, ``error`` (None when the point ran) and
    ``hash`` (its key in the store).  The same spec gives the same DataFrame on every
    backend, fresh or resumed.  A sweep whose every point failed raises
    :class:`SweepFailedError` (a :class:`~sim.errors.SimError`; its ``df`` is the table).
    """
    df, stats = run_sweep(spec, out=out, jobs=jobs, scheduler=scheduler, progress=progress,
                          retry_errors=retry_errors, overrides=overrides, connect_timeout=connect_timeout)
    check_not_all_failed(df, stats.name, stats, stats.store)
    return df
