"""The keys of stored sweep points: canonical JSON (:func:`canonical_json`), the simulator
version with a digest of every source file that can change a result (:func:`simulator_version`
over :func:`physics_files`), and a point's content hash (:func:`content_hash`).

Deciding whether a stored result may be reused is a rule of its own, separate from how the
store keeps its files (:mod:`sim.apps.store`, which re-exports every name); like the store, this
module is left out of the digest itself (:data:`_NOT_PHYSICS`).
"""
from __future__ import annotations

import functools
import hashlib
import json
import math
from pathlib import Path
from typing import Any, Mapping

from sim.version import __version__

# --------------------------------------------------------------------------- hashing


def _canon(o: Any) -> Any:
    if isinstance(o, Mapping):
        return {str(k): _canon(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_canon(v) for v in o]
    if isinstance(o, float):
        if math.isnan(o) or math.isinf(o):
            return repr(o)
        if o.is_integer() and abs(o) < 2**53:
            return int(o)  # 8 and 8.0 are the same design point
        return o
    if hasattr(o, "item") and callable(o.item):  # numpy scalars
        return _canon(o.item())
    return o


def canonical_json(obj: Any) -> str:
    """JSON with sorted keys, no whitespace, integral floats written as integers."""
    return json.dumps(_canon(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


#: files (paths below sim/, matched as prefixes: "apps/plotting/" is the whole folder) whose
#: changes cannot change a point's result: the sweep machinery, the store, the plots (and their
#: public facade, sim/plot.py)
_NOT_PHYSICS = ("apps/sweep/__init__.py", "apps/sweep/analysis.py", "apps/sweep/backends.py", "apps/sweep/plan.py",
                "apps/sweep/run.py", "apps/sweep/spec.py", "apps/sweep/spec_axes.py", "apps/sweep/spec_metrics.py",
                "apps/sweep/spec_schema.py", "apps/sweep/table.py", "apps/store.py", "apps/store_keys.py",
                "apps/plotting/", "plot.py")


def physics_files() -> list[Path]:
    """The files :func:`simulator_version` digests: ``sim/**/*.py`` but :data:`_NOT_PHYSICS`,
    and the shipped dataflow YAMLs."""
    pkg = Path(__file__).resolve().parents[1]  # sim/apps/store_keys.py -> sim/
    files = sorted(p for p in pkg.rglob("*.py") if "__pycache__" not in p.parts
                   and not p.relative_to(pkg).as_posix().startswith(_NOT_PHYSICS))
    df_dir = pkg.parent / "dataflows"
    if df_dir.is_dir():
        files += sorted(df_dir.glob("*.yaml"))
    return files


@functools.lru_cache(maxsize=1)
def simulator_version() -> str:
    """``sim.__version__`` plus a digest of the simulator's sources (:func:`physics_files`),
    so that results are never reused across code changes."""
    pkg = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for p in physics_files():
        rel = p.relative_to(pkg.parent).as_posix()
        h.update(rel.encode() + b"\0")
        try:
            h.update(p.read_bytes())
        except OSError:  # pragma: no cover
            pass
        h.update(b"\0")
    return f"{__version__}+{h.hexdigest()[:12]}"


def content_hash(chip: Mapping[str, Any], workload: Mapping[str, Any], version: str | None = None) -> str:
    """SHA-256 (hex) of the canonical JSON of (resolved chip dict, workload dict, simulator
    version - :func:`simulator_version` unless given)."""
    if version is None:
        version = simulator_version()
    text = canonical_json({"chip": chip, "workload": workload, "sim": version})
    return hashlib.sha256(text.encode("ascii")).hexdigest()
