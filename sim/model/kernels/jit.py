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
``SIM_NUMBA_PLAIN_INLINER=1`` leaves Numba's inliner as it ships (see
``SharedScopeBlockCopy``: the same machine code, compiled in about 1.6x the time).
"""
from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

_DISABLED = os.environ.get("SIM_DISABLE_JIT", "") not in ("", "0")


@functools.lru_cache(maxsize=None)
def source_hash(folder: str) -> str:
    """Hash of the names and bytes of every ``*.py`` in ``folder``, read once per process (the
    code a process runs is what it imported): the version of what is cached from that code."""
    h = hashlib.sha256()
    for p in sorted(Path(folder).glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


_HERE = str(Path(__file__).resolve().parent)


def kernel_source_hash() -> str:
    """Hash of every ``*.py`` in this package (the cache key; the disk cache's physics version)."""
    return source_hash(_HERE)


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

    class SharedScopeBlockCopy:
        """Stands in for the ``copy`` module inside Numba's ``inline_closurecall``, which
        compiles every ``inline='always'`` call by copying the callee's IR one block at a time
        (``copy.deepcopy(block)``, twice per call site).  Every block refers to the function's
        one ``Scope``, which holds every variable, so each block's copy copied the whole scope
        again: quadratic in the size of the inlined function, and our event loop inlines the
        DRAM model, the L2 and the transfer logic through several levels.  Here consecutive
        blocks of one scope are copied with one shared memo, so the scope and the variables
        the blocks share are copied once and stay shared in the copy, as they are in the
        original; a block seen again (a second copy of the same IR) starts a fresh memo, so
        two copies never share an object.  Numba keeps only the first of the per-block scope
        copies anyway (it deduplicates them by equality), so the inlined IR, and the machine
        code, are the same: the LLVM IR of every kernel was compared, identical but for the
        names Python's randomised string hash gives constant strings.  A fresh process's cold
        compile on the 2-core build machine: 94-99 s -> 59-62 s (``benchmarks/bench_compile.py``;
        its first GEMM, which compiles the event loop, 78-82 s -> 43-46 s).  Anything but a memo-less deepcopy of a block goes to ``copy``.
        Numba compiles under its global compiler lock, so one instance serves every thread.  It
        serves every Numba compile in the process, a user's own kernels included: the copy it
        makes is the same for any function."""

        def __init__(self, copy_module, block_type):
            self._copy = copy_module
            self._block = block_type
            self._scope = None
            self._memo: dict = {}
            self._seen: set = set()

        def deepcopy(self, x, memo=None):
            if memo is not None or not isinstance(x, self._block):
                return self._copy.deepcopy(x, memo)
            if x.scope is not self._scope or id(x) in self._seen:
                # (the memo keeps every copied original alive, so an id is never reused)
                self._scope, self._memo, self._seen = x.scope, {}, set()
            self._seen.add(id(x))
            return self._copy.deepcopy(x, self._memo)

        def __getattr__(self, name):
            return getattr(self._copy, name)

    def _install_shared_scope_block_copy() -> None:
        """Use :class:`SharedScopeBlockCopy` in Numba's inliner when the inliner is what this
        expects (a module-level ``copy`` and ``ir.Block`` blocks with a ``scope``); otherwise
        leave Numba as it is (slower cold compiles, the same kernels)."""
        try:
            import copy as copy_module

            from numba.core import inline_closurecall, ir
        except ImportError:  # pragma: no cover - a Numba without these modules
            return
        current = getattr(inline_closurecall, "copy", None)
        if isinstance(current, SharedScopeBlockCopy):
            return
        if current is not copy_module or not hasattr(ir, "Block") or not hasattr(ir, "Scope"):
            return  # pragma: no cover - a Numba whose inliner differs
        inline_closurecall.copy = SharedScopeBlockCopy(copy_module, ir.Block)

    if os.environ.get("SIM_NUMBA_PLAIN_INLINER", "") in ("", "0"):
        _install_shared_scope_block_copy()

    import threading

    _compiling = threading.RLock()
    _depth = [0]
    _LOCK_WAIT_S = 900.0

    def _lock_file():
        """An exclusive lock on the cache folder's ``.compile.lock`` (None without a cache
        folder or ``fcntl``): while one process compiles a kernel into the cache, another
        that needs it waits, then loads it, instead of compiling the same machine code at
        the same time.  A holder that keeps it past ``_LOCK_WAIT_S`` (a stopped process) is
        not waited for: the kernel is compiled as before."""
        if not _dir:
            return None
        try:
            import fcntl
            import time

            fh = open(Path(_dir) / ".compile.lock", "a")
        except (ImportError, OSError):
            return None
        deadline = time.monotonic() + _LOCK_WAIT_S
        while True:
            try:
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return fh
            except OSError:
                if time.monotonic() > deadline:
                    fh.close()
                    return None
                time.sleep(0.05)

    def _in_cache(dispatcher) -> bool:
        """Whether the kernel's cache index exists (Numba writes it after the machine code,
        atomically): then its first call only loads, and waits for nobody."""
        try:
            return os.path.exists(dispatcher._cache._cache_file._index_path)
        except AttributeError:  # not a caching dispatcher, or a Numba that files it elsewhere
            return False

    def _one_compile_at_a_time(compile_, dispatcher=None):
        """``Dispatcher.compile`` (a kernel's first call with its argument types: compile,
        or load from the disk cache), holding the cache folder's lock for the outermost call
        of this process unless the kernel is already cached (a process that only loads does
        not wait for one compiling another kernel); a kernel compiled as part of another
        (its callee) is inside its caller's lock."""
        @functools.wraps(compile_)
        def compile(sig):
            with _compiling:
                fh = _lock_file() if _depth[0] == 0 and not _in_cache(dispatcher) else None
                _depth[0] += 1
                try:
                    return compile_(sig)
                finally:
                    _depth[0] -= 1
                    if fh is not None:
                        fh.close()  # releases the lock
        return compile

    def _njit(fn, opts):
        dispatcher = numba.njit(**opts)(fn)
        if opts.get("cache"):
            # Numba caches per process and keeps no lock: processes started together on an
            # empty cache (sweep workers, `sim validate -j N`, pytest-xdist) each compiled
            # every kernel, ~60 s of a core apiece
            dispatcher.compile = _one_compile_at_a_time(dispatcher.compile, dispatcher)
        return dispatcher

    def kernel(fn=None, **kwargs):
        """``@kernel`` = ``numba.njit(cache=True, nogil=True)`` (deterministic: no fastmath)."""
        opts = dict(cache=bool(_dir), nogil=True)
        opts.update(kwargs)
        if fn is None:
            return lambda f: _njit(f, opts)
        return _njit(fn, opts)
