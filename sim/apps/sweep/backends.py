"""Where a sweep's points are evaluated: in this process (:func:`_run_inline`), on a local
process pool that survives crashing workers (:func:`_run_pool`, whose workers never re-run
the caller's ``__main__``) or on a Dask cluster (:func:`_connect_dask`, :func:`_run_dask`).

Each backend takes plain-data tasks and hands every finished row to a callback, so the run
logic (:mod:`sim.apps.sweep.run`: the store, claims, progress) is the same on all of them;
the process-start machinery lives here, away from that logic.
"""
from __future__ import annotations

import logging
import multiprocessing as mp
import threading
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from typing import Callable

from sim.apps.interrupt import stop_pool
from sim.apps.sweep.evaluate import evaluate_point, worker_init
from sim.errors import SimError

#: errors that say nothing about the point (infrastructure): shown, never stored
_TRANSIENT = "transient: "

# --------------------------------------------------------------------------- backends


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
    # one thread per point: the pool keeps every CPU busy already
    pending = {t["hash"]: dict(t, threads=1) for t in tasks}
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
    # Dask's timeout covers the TCP connect, not its handshake: a process that accepts the
    # connection and never answers held Client() for good (> 90 s seen with a 5 s timeout), so
    # the client is made in a thread this one stops waiting for
    box: dict = {}

    def make() -> None:
        try:
            box["client"] = Client(addr, timeout=f"{timeout}s")
        except BaseException as exc:  # handed to the caller below
            box["exc"] = exc

    maker = threading.Thread(target=make, name="sim-dask-connect", daemon=True)
    maker.start()
    maker.join(timeout + 5.0)
    if maker.is_alive():
        raise SimError(f"the Dask scheduler at {addr} accepted the connection but did not answer within "
                       f"{timeout + 5:g} s (is it a Dask scheduler? `dask scheduler` prints its address); or use "
                       "--scheduler local")
    try:
        if "exc" in box:
            raise box["exc"]
        client = box["client"]
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
        tasks = [dict(t, threads=1) for t in tasks]  # (each worker keeps its CPUs busy already)
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
