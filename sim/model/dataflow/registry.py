"""Find, load and cache the dataflows declared in ``dataflows/*.yaml``.

The folders are the shipped ``dataflows/`` (the repository's, or the copy inside an
installed package) and, searched first, those named by the environment variable
``SIM_DATAFLOW_DIR`` and the user folder ``~/.config/sim/dataflows`` (:mod:`sim.spec.catalog`):
a user file of a shipped name overrides it.  Files are
parsed through :mod:`sim.spec.loader`, so every error names the file, line and key.
"""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import sim.model.dataflow.row_stationary  # noqa: F401  (registers the row-stationary family)
import sim.model.dataflow.systolic  # noqa: F401  (registers the systolic WS/OS/IS family)
import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.model.dataflow.base import Dataflow, merge_edits, model_for
from sim.spec.dataflow_spec import DataflowSpec
from sim.spec.loader import YamlDoc, apply_overrides, read_yaml, validate

ENV_VAR = catalog.KINDS["dataflows"].env_var

_lock = threading.Lock()
# (resolved file, mtime_ns) -> parsed YAML document
_docs: dict[tuple[str, int], YamlDoc] = {}
# (resolved file, mtime_ns, overrides) -> model
_models: dict[tuple[Any, ...], Dataflow] = {}


def dataflow_dir() -> Path:
    """The shipped folder of dataflow files; ``SIM_DATAFLOW_DIR`` and the user folder are
    searched before it (:func:`sim.spec.catalog.search_dirs`)."""
    return catalog.shipped_dir("dataflows")


_listings: dict[tuple[tuple[str, int], ...], dict[str, Path]] = {}


def _mtime_ns(folder: Path) -> int:
    """The folder's modification time, ns; -1 when it is missing."""
    try:
        return folder.stat().st_mtime_ns
    except OSError:
        return -1


def _files() -> dict[str, Path]:
    # a folder $SIM_DATAFLOW_DIR names that does not exist is an error here (catalog.env_dirs)
    folders = catalog.search_dirs("dataflows")
    # a listing is reused until a folder changes (a file added, removed or renamed)
    key = tuple((str(folder), _mtime_ns(folder)) for folder in folders)
    with _lock:
        files = _listings.get(key)
    if files is None:
        files = {}
        for folder in reversed(folders):  # the first folder wins: a user file overrides a shipped one
            if folder.is_dir():
                files.update({p.stem: p for p in sorted(folder.glob("*.yaml"))})
        with _lock:
            _listings[key] = files
    return files


def list_dataflows() -> list[str]:
    """Names of the declared dataflows, sorted."""
    return sorted(_files())


def clear_cache() -> None:
    """Forget every parsed file and model (files are also re-read when they change)."""
    with _lock:
        _docs.clear()
        _models.clear()
        _listings.clear()


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(sorted((str(k), _freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_freeze(v) for v in value)
    return value


def _lookup(name: str) -> Path:
    files = _files()
    key = name.strip().lower()
    if key in files:
        return files[key]
    # accept the full name too ("weight-stationary")
    for stem, path in files.items():
        try:
            doc = _doc(path)
        except ConfigError:
            continue
        full = doc.data.get("full_name") if isinstance(doc.data, dict) else None
        if isinstance(full, str) and full.strip().lower() == key:
            return path
    raise UnknownNameError("dataflow", name, sorted(files))


def _doc(path: Path) -> YamlDoc:
    stat = path.stat()
    key = (str(path), stat.st_mtime_ns)
    with _lock:
        doc = _docs.get(key)
    if doc is None:
        doc = read_yaml(path)
        with _lock:
            _docs[key] = doc
    return doc


def get_dataflow(name_or_spec: str | DataflowSpec | Dataflow,
                 overrides: dict[str, Any] | list[str] | None = None,
                 **options: Any) -> Dataflow:
    """Return the dataflow model for a name (``"ws"``, ``"weight-stationary"``), a spec or a model.

    ``options`` change top-level spec fields (``row_length=4``); ``overrides`` are dotted
    edits as accepted by ``--set`` (``{"register_file_words.weight": 32}`` or
    ``["row_length=4"]``).  Either way the result is validated again, so an impossible
    combination raises :class:`~sim.errors.ConfigError` stating the rule.  An unknown name
    raises :class:`~sim.errors.UnknownNameError` listing the valid ones.
    """
    edits = merge_edits(overrides, options)
    if isinstance(name_or_spec, Dataflow):
        if not edits:
            return name_or_spec
        name_or_spec = name_or_spec.spec
    if isinstance(name_or_spec, DataflowSpec):
        if not edits:
            return model_for(name_or_spec)
        doc = YamlDoc(name_or_spec.model_dump(mode="python"), {}, f"dataflow '{name_or_spec.name}'")
        return model_for(validate(DataflowSpec, apply_overrides(doc, edits)))
    if not isinstance(name_or_spec, str):
        raise TypeError(f"get_dataflow expects a name, a DataflowSpec or a Dataflow, got {type(name_or_spec).__name__}")
    path = _lookup(name_or_spec)
    try:
        key = (str(path), path.stat().st_mtime_ns, _freeze(edits))
    except OSError:
        raise ConfigError(ConfigProblem(str(path), 0, "", "file not found")) from None
    with _lock:
        model = _models.get(key)
    if model is not None:
        return model
    doc = _doc(path)
    spec = validate(DataflowSpec, apply_overrides(doc, edits))
    if spec.name != path.stem:
        raise ConfigError(ConfigProblem(str(path), doc.line_of(("name",)), "name",
                                        f"name '{spec.name}' must equal the file name '{path.stem}'"))
    model = model_for(spec)
    with _lock:
        _models[key] = model
    return model
