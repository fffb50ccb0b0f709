"""Find and load model descriptions (``workloads/*.yaml``) by name or path."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import sim.spec.catalog as catalog
from sim.errors import UnknownNameError
from sim.spec.loader import load_model
from sim.spec.model_spec import ModelSpec

ENV_WORKLOAD_DIR = catalog.KINDS["models"].env_var


def workloads_dir() -> Path:
    """The folder of model YAML files: ``$SIM_WORKLOAD_DIR`` if set, else the shipped ``workloads/``."""
    return catalog.primary_dir("models")


def list_models() -> list[str]:
    """Names of the model descriptions in :func:`workloads_dir` and the user folder (sorted)."""
    return catalog.names("models")


def load_model_spec(name_or_path: str | Path | ModelSpec,
                    overrides: dict[str, Any] | list[str] | None = None) -> ModelSpec:
    """Load a :class:`ModelSpec` by name (``"llama3-8b"``) or by path to a YAML file.

    ``overrides`` are ``{"dotted.key": value}`` or ``["key=value", ...]`` edits applied
    before validation (e.g. ``{"num_layers": 2}``).  Errors name the file and line; an
    unknown name raises :class:`~sim.errors.UnknownNameError` listing the known ones.
    """
    if isinstance(name_or_path, ModelSpec):
        if overrides:
            data = name_or_path.model_dump()
            for key, value in (overrides.items() if isinstance(overrides, dict) else
                               (o.split("=", 1) for o in overrides)):
                data[key] = value
            return ModelSpec.model_validate(data)
        return name_or_path
    text = str(name_or_path)
    path = Path(text)
    looks_like_path = path.suffix in (".yaml", ".yml") or os.sep in text or "/" in text
    if looks_like_path or path.is_file():
        return load_model(ModelSpec, path, overrides)
    found = catalog.find("models", text)
    if found is not None:
        return load_model(ModelSpec, found, overrides)
    raise UnknownNameError("model", text, list_models())
