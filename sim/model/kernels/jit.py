"""The one place that owns the JIT flags and the compiled-kernel cache.

``cache=True`` keeps compiled kernels on disk, so a warm process pays no compilation.
Numba keys a cached kernel by its own source file only: a kernel that calls a function
from another module (the engine calls the DRAM model) would keep running stale machine
code after that module changes - with a different state layout, that corrupts memory.
So the cache lives in a folder named after a hash of every kernel source file in this
package: any edit to any kernel starts a fresh cache.

``SIM_NUMBA_CACHE_DIR`` chooses the parent folder (default: ``~/.cache/sim-numba``, or
``<package>/.numba-cache`` when the home folder is not writable).  ``SIM_DISABLE_JIT=1``
runs the kernels as plain Python (for debugging and coverage); results must be identical.
"""
from __future__ import annotations

import hashlib
import os
from pathlib import Path

_DISABLED = os.environ.get("SIM_DISABLE_JIT", "") not in ("", "0")


def kernel_source_hash() -> str:
    """Hash of every ``*.py`` in this package (the cache key)."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for p in sorted(here.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def _cache_dir() -> str:
    parent = os.environ.get("SIM_NUMBA_CACHE_DIR")
    candidates = [Path(parent)] if parent else [Path.home() / ".cache" / "sim-numba",
                                                Path(__file__).resolve().parents[2] / ".numba-cache"]
    for base in candidates:
        target = base / kernel_source_hash()
        try:
            target.mkdir(parents=True, exist_ok=True)
            probe = target / ".write-test"
            probe.write_text("ok")
            probe.unlink()
            return str(target)
        except OSError:
            continue
    return ""


if _DISABLED:  # pragma: no cover - debugging aid
    def kernel(fn=None, **_kwargs):
        if fn is None:
            return lambda f: f
        return fn
else:
    import numba

    _dir = _cache_dir()
    if _dir:
        numba.config.CACHE_DIR = _dir

    def _install_relocatable_locator() -> None:
        """Keep this package's compiled kernels where they are found from any install path.

        Numba files a cached kernel under a folder named after the absolute path of its
        source file, so the same sources installed elsewhere (a wheel in a new venv, a second
        checkout) compiled everything again (~60 s).  The folder above is already named after
        the hash of every kernel source, and Numba checks each file's content hash before it
        loads anything, so this package's kernels are filed in one path-independent folder
        inside it.  Other packages' Numba functions are untouched; if Numba's locator API is
        not what this expects, its default locators are used."""
        try:
            from numba.core import caching
        except ImportError:  # pragma: no cover - a Numba without the module
            return
        base = getattr(caching, "UserProvidedCacheLocator", None) or getattr(caching, "_UserProvidedCacheLocator",
                                                                             None)
        impl = getattr(caching, "CacheImpl", None) or getattr(caching, "_CacheImpl", None)
        if base is None or impl is None or not isinstance(getattr(impl, "_locator_classes", None), list):
            return
        here = str(Path(__file__).resolve().parent)

        class KernelSourceHashLocator(base):
            def __init__(self, py_func, py_file):
                super().__init__(py_func, py_file)
                self._cache_path = str(Path(_dir) / "kernels")

            @classmethod
            def from_function(cls, py_func, py_file):
                if not _dir or str(Path(py_file).resolve().parent) != here:
                    return None
                return super().from_function(py_func, py_file)

        if not any(getattr(c, "__name__", "") == "KernelSourceHashLocator" for c in impl._locator_classes):
            impl._locator_classes.insert(0, KernelSourceHashLocator)

    _install_relocatable_locator()

    def kernel(fn=None, **kwargs):
        """``@kernel`` = ``numba.njit(cache=True, nogil=True)`` (deterministic: no fastmath)."""
        opts = dict(cache=bool(_dir), nogil=True)
        opts.update(kwargs)
        if fn is None:
            return numba.njit(**opts)
        return numba.njit(**opts)(fn)
