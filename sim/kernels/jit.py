"""The one place that owns the JIT flags.

``cache=True`` keeps compiled kernels on disk next to the sources, so a warm process pays
no compilation.  ``SIM_DISABLE_JIT=1`` runs the kernels as plain Python (for debugging and
coverage); results must be identical either way.
"""
from __future__ import annotations

import os

_DISABLED = os.environ.get("SIM_DISABLE_JIT", "") not in ("", "0")

if _DISABLED:  # pragma: no cover - debugging aid
    def kernel(fn=None, **_kwargs):
        if fn is None:
            return lambda f: f
        return fn
else:
    import numba

    def kernel(fn=None, **kwargs):
        """``@kernel`` = ``numba.njit(cache=True, nogil=True)`` (deterministic: no fastmath)."""
        opts = dict(cache=True, nogil=True)
        opts.update(kwargs)
        if fn is None:
            return numba.njit(**opts)
        return numba.njit(**opts)(fn)
