"""Find, load and cache the dataflows declared in ``dataflows/*.yaml``.

The folder is the shipped ``dataflows/`` (the repository's, or the copy inside an
installed package), or the folder named by the environment variable ``SIM_DATAFLOW_DIR``;
a user folder ``~/.config/sim/dataflows`` adds to either (:mod:`sim.spec.catalog`).  Files are
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
    """The folder the registry reads (``SIM_DATAFLOW_DIR`` replaces the shipped folder)."""
    return catalog.primary_dir("dataflows")


_listings: dict[tuple[str, int], dict[str, Path]] = {}


def _files() -> dict[str, Path]:
    folder = dataflow_dir()
    try:
        mtime = folder.stat().st_mtime_ns
    except OSError:
        mtime = -1
    if mtime < 0:
        raise ConfigError(ConfigProblem(str(folder), 0, "",
                                        f"dataflow folder not found (set {ENV_VAR} to use another)"))
    key = (str(folder), mtime)
    with _lock:
        files = _listings.get(key)
    if files is None:
        if not folder.is_dir():
            raise ConfigError(ConfigProblem(str(folder), 0, "", f"not a folder (set {ENV_VAR} to use another)"))
        files = {}
        for extra in reversed(catalog.search_dirs("dataflows")):  # the primary folder wins
            if extra.is_dir():
                files.update({p.stem: p for p in sorted(extra.glob("*.yaml"))})
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
