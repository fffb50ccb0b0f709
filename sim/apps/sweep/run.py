"""Running a sweep: plan the points, skip the ones already stored, evaluate the rest on a
local process pool or a Dask cluster, store each finished point, and assemble the table.

The table never depends on the order in which points finish: rows are sorted by point
index and built from the stored rows, so a process pool, a Dask cluster and a resumed run
all give the same DataFrame, bit for bit.

This module keeps the run itself (:func:`run_sweep`, :func:`sweep`, :func:`plan`, the store
sink, claims and progress); the table is built in :mod:`~sim.apps.sweep.table` and the
points are evaluated by a backend of :mod:`~sim.apps.sweep.backends`.  Every name is
re-exported here.
"""
from __future__ import annotations

import numbers
import os
import sys
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from sim.apps.interrupt import sigterm_as_interrupt, stop_pool
from sim.apps.store import STRING_COLUMNS, ResultStore, canonical_json, simulator_version, write_table_files
from sim.apps.sweep.backends import (_TRANSIENT, _WORKER_NAME, _connect_dask, _ForkServerContext, _mp_context,
                                     _named, _run_dask, _run_inline, _run_pool, _skip_main_in_workers,
                                     _SpawnContext, _SpawnWorker)
from sim.apps.sweep.evaluate import evaluate_point, worker_init
from sim.apps.sweep.plan import Point, expand
from sim.apps.sweep.spec import BREAKDOWN_PREFIXES, LoadedSpec, SweepSpec, load_sweep_spec, sweep_spec_from_dict
from sim.apps.sweep.table import _component_rank, _metric_columns, assemble
from sim.errors import SimError

__all__ = ["sweep", "run_sweep", "plan", "SweepStats", "assemble", "load_spec", "SweepFailedError",
           "check_not_all_failed"]

#: a point's row is written to the store at most this many seconds after it finishes
#: (``SIM_SWEEP_FLUSH_SECONDS`` changes it; 0 writes every point as soon as it finishes)
FLUSH_SECONDS = float(os.environ.get("SIM_SWEEP_FLUSH_SECONDS", "2.0"))
FLUSH_ROWS = 200
#: more parts than this are merged into one at the end of a sweep
COMPACT_PARTS = 64


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


def _bar(total: int, initial: int, desc: str, enabled: bool):
    from tqdm import tqdm

    tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
    return tqdm(total=total, initial=initial, desc=desc, unit="pt", file=sys.stderr, disable=not enabled,
                dynamic_ncols=True, smoothing=0.05, mininterval=0.5 if tty else 10.0,
                bar_format="{l_bar}{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}{postfix}]")


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


def _drop_finished(store: ResultStore, mine, rows: dict, retry_errors: bool = False) -> list[str]:
    """Of the points this sweep just claimed, those another sweep finished meanwhile (its rows
    are in ``rows``, read after the claim: a sweep writes its rows before it drops its claims),
    released again and returned; with ``retry_errors`` a stored error row does not count."""
    done = [h for h in mine if h in rows and not (retry_errors and rows[h].get("error"))]
    if done:
        store.release(done)
    return done


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
        if mine:
            # the other sweep may have written these rows and dropped its claims between our
            # read above and this claim: read again before simulating a point a second time
            for h in _drop_finished(store, mine, store.load(refresh=True)):
                arrived()
                del waiting[h]
                mine.discard(h)
        for h in mine:  # the other sweep is gone, or released the point without a row: simulate it here
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
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, numbers.Integral) or jobs < 1):
        raise SimError(f"jobs must be a whole number >= 1, got {jobs!r}")
    jobs = int(jobs) if jobs else (os.cpu_count() or 1)
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
        done = _drop_finished(store, mine, fresh, retry_errors)
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
