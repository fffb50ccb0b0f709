"""Engine runs remembered on disk, across processes, sweeps and Dask workers.

The compiled engine is a pure function of its input arrays (fresh DRAM state, no
randomness; :func:`sim.model.engine.kernel_run.run_kernel`), and more than nine tenths of a whole-model
answer is spent inside it (``benchmarks/profile_time.py``).  So a run is stored under

    <cache dir>/<physics version>/<first 2 hex digits>/<input digest>.npz

where the input digest is the BLAKE2b digest of exactly the arrays the kernel reads and
the physics version is :func:`sim.model.kernels.jit.kernel_source_hash` (a hash of every kernel
source file): a changed kernel never reads an old run.  A stored run is byte-for-byte the
arrays the kernel wrote, so cached and uncached answers are identical (tested).

* Safe under concurrent writers: each file is written to a temporary name in the same
  folder and renamed into place (atomic on POSIX); a reader sees a whole file or none,
  and a damaged file is treated as a miss and removed.
* Size-bounded: when the folder grows past ``SIM_CACHE_MAX_MB`` (default 1024) the least
  recently used files (by modification time; a hit touches its file) are deleted down to
  three quarters of the bound.
* ``SIM_CACHE_DIR`` chooses the folder (default ``~/.cache/sim/runs``); ``SIM_NO_CACHE=1``
  (or ``sim --no-cache ...``) turns the disk cache off; ``sim cache info|clear``.
"""
from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sim.model.kernels.jit import kernel_source_hash

__all__ = ["CacheInfo", "cache_dir", "enabled", "load", "store", "load_value", "store_value", "info", "clear"]

DIR_ENV = "SIM_CACHE_DIR"
OFF_ENV = "SIM_NO_CACHE"
MAX_MB_ENV = "SIM_CACHE_MAX_MB"
DEFAULT_MAX_MB = 1024
#: the folder's size is re-measured after this many stores (a scan costs a directory walk)
_RESCAN_EVERY = 64

_state = {"stores": 0, "unwritable": False}


def enabled() -> bool:
    """Whether runs are read from and written to disk (``SIM_NO_CACHE`` unset or 0)."""
    return os.environ.get(OFF_ENV, "") in ("", "0") and not _state["unwritable"]


def cache_dir() -> Path:
    """The root folder (``$SIM_CACHE_DIR`` or ``~/.cache/sim/runs``)."""
    env = os.environ.get(DIR_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "sim" / "runs"


def _version_dir() -> Path:
    return cache_dir() / kernel_source_hash()


def _path(digest: bytes) -> Path:
    h = digest.hex()
    return _version_dir() / h[:2] / f"{h}.npz"


def _value_path(digest: bytes) -> Path:
    h = digest.hex()
    return _version_dir() / h[:2] / f"{h}.npy"


def _max_bytes() -> int:
    try:
        mb = float(os.environ.get(MAX_MB_ENV, DEFAULT_MAX_MB))
    except ValueError:
        mb = DEFAULT_MAX_MB
    return int(max(mb, 0.0) * 2**20)


#: fields every stored run has (a probed run's are one array per sample, with its "tiles");
#: the scalar ones and their types (the rest are arrays)
_REQUIRED = ("stats", "hist", "makespan", "dram_stats", "P", "geo", "ranges")
_SCALARS = {"P": int}


def _forget(path: Path) -> None:
    """Remove a torn or foreign file (the caller simulates or measures again)."""
    try:
        path.unlink()
    except OSError:
        pass


def _touch(path: Path) -> None:
    """Mark ``path`` recently used: last to be evicted."""
    try:
        os.utime(path)
    except OSError:
        pass


def _write_atomically(path: Path, suffix: str, write) -> bool:
    """``write(f)`` into a temporary file beside ``path``, renamed into place (a reader sees a
    whole file or none); False, and the cache off for this process, where the folder cannot be
    written (a read-only home or a full disk must not stop a simulation)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=suffix)
        try:
            with os.fdopen(fd, "wb") as f:
                write(f)
            os.replace(tmp, path)
        except BaseException:
            _forget(Path(tmp))
            raise
    except OSError:
        _state["unwritable"] = True
        return False
    return True


def load(digest: bytes) -> dict | None:
    """The stored run for ``digest``, or None (a miss, or an unreadable file)."""
    if not enabled():
        return None
    path = _path(digest)
    try:
        with np.load(path, allow_pickle=False) as z:
            run = {name: z[name] for name in z.files}
            if any(name not in run for name in _REQUIRED):
                raise KeyError("not a stored run")  # a foreign file: forgotten below
            for name, kind in _SCALARS.items():
                run[name] = kind(run[name])
            if "tiles" not in run:
                run["makespan"] = float(run["makespan"])
    except FileNotFoundError:
        return None
    except Exception:  # a torn or foreign file: forget it, simulate again
        _forget(path)
        return None
    _touch(path)
    return run


def store(digest: bytes, run: dict) -> None:
    """Write ``run`` (the fields of a :class:`sim.model.engine.kernel_run.KernelRun`, as
    :func:`sim.model.engine.kernel_run.run_kernel` passes them) under ``digest``."""
    if not enabled():
        return
    if not _write_atomically(_path(digest), ".npz",
                             lambda f: np.savez(f, **{name: np.asarray(value) for name, value in run.items()})):
        return
    _state["stores"] += 1
    if _state["stores"] % _RESCAN_EVERY == 1:
        _evict(_max_bytes())


def load_value(digest: bytes) -> float | None:
    """A number stored by :func:`store_value` under ``digest`` (None: a miss, or an unreadable
    file, which is removed).  Beside the runs: a measurement made by running the kernels in
    Python, such as the DRAM model's transfer-pattern probes
    (:func:`sim.model.memory.dram.stream_efficiency`), whose digest then names every input it
    depends on, the Python source of the procedure included."""
    if not enabled():
        return None
    path = _value_path(digest)
    try:
        value = np.load(path, allow_pickle=False)
        if value.shape != () or value.dtype != np.float64:
            raise ValueError("not a stored value")
    except FileNotFoundError:
        return None
    except Exception:  # a torn or foreign file: forget it, measure again
        _forget(path)
        return None
    _touch(path)
    return float(value)


def store_value(digest: bytes, value: float) -> None:
    """Write one number under ``digest``, atomically, as :func:`store` writes a run."""
    if enabled():
        _write_atomically(_value_path(digest), ".npy", lambda f: np.save(f, np.float64(value), allow_pickle=False))


def _files(root: Path) -> list[tuple[float, int, Path]]:
    out = []
    if not root.is_dir():
        return out
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            p = Path(dirpath) / name
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((st.st_mtime, st.st_size, p))
    return out


def _evict(limit_bytes: int) -> int:
    """Delete least recently used files until the cache is under 3/4 of ``limit_bytes``."""
    files = _files(cache_dir())
    total = sum(size for _t, size, _p in files)
    if total <= limit_bytes:
        return 0
    removed = 0
    for _t, size, p in sorted(files):
        if total <= 0.75 * limit_bytes:
            break
        try:
            p.unlink()
            total -= size
            removed += 1
        except OSError:
            continue
    return removed


@dataclass(frozen=True)
class CacheInfo:
    """What ``sim cache info`` prints."""

    folder: str
    physics_version: str
    enabled: bool
    runs: int
    runs_this_version: int
    #: stored measurements (:func:`store_value`: DRAM transfer-pattern probes), every version
    values: int
    size_bytes: int
    limit_bytes: int
    oldest_s_ago: float | None


def info() -> CacheInfo:
    every = [f for f in _files(cache_dir()) if f[2].suffix in (".npz", ".npy")]
    files = [f for f in every if f[2].suffix == ".npz"]
    version = kernel_source_hash()
    now = time.time()
    return CacheInfo(folder=str(cache_dir()), physics_version=version, enabled=enabled(), runs=len(files),
                     runs_this_version=sum(1 for f in files if f[2].parent.parent.name == version),
                     values=len(every) - len(files), size_bytes=sum(f[1] for f in every), limit_bytes=_max_bytes(),
                     oldest_s_ago=(now - min(f[0] for f in files)) if files else None)


def clear() -> int:
    """Delete every stored run (all physics versions); returns how many files went."""
    removed = 0
    for _t, _size, p in _files(cache_dir()):
        try:
            p.unlink()
            removed += 1
        except OSError:
            pass
    return removed
