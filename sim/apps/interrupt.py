"""Ending a long command early without losing what it computed or leaving processes behind.

A scheduler's kill or `timeout` sends SIGTERM, whose default action ends the process at once:
rows not yet written are lost and the workers of a process pool, which never hear of it, run
on as orphans (a `sim validate -j 16` killed this way left 16 workers computing for minutes).
:func:`sigterm_as_interrupt` turns SIGTERM into KeyboardInterrupt, so the command's cleanup
runs as for Ctrl-C, and :func:`stop_pool` ends a pool's workers instead of waiting for them.
"""
from __future__ import annotations

import contextlib
import signal
import threading
from concurrent.futures import ProcessPoolExecutor

__all__ = ["sigterm_as_interrupt", "stop_pool"]


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM raises KeyboardInterrupt in the main thread (elsewhere a
    no-op: only the main thread may set signal handlers)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    old = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and end the workers now: a point or case in flight when
    the command is interrupted would be thrown away anyway, and a worker left to finish it
    outlives its parent."""
    # the worker processes, read before shutdown forgets them (no public accessor)
    workers = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in workers:
        if proc.is_alive():
            proc.terminate()
    for proc in workers:
        proc.join(timeout=5.0)
        if proc.is_alive():
            proc.kill()
