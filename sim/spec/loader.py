"""YAML → frozen pydantic models, with every error mapped back to file, line and key.

The one mechanism every config file (chip, dataflow, model, sweep) goes through:

* :func:`read_yaml` parses a file, keeping the line of every key and list item, rejecting
  duplicate keys, and reading numbers such as ``1.2e12`` as numbers (PyYAML's YAML 1.1
  resolver would leave them as strings).
* :func:`apply_overrides` applies ``--set dotted.path=value`` edits to the raw data; list
  items can be addressed by index or by their ``name`` field (``memory.levels.hbm.…``).
* :func:`validate` turns the data into a model and converts pydantic's errors into one
  :class:`~sim.errors.ConfigError` listing every problem with its line, dotted path and the
  valid keys at that place (with a "did you mean" for near misses).

This module keeps the entry points that go from a file to a model (:func:`validate`,
:func:`load_model`); reading lives in :mod:`~sim.spec.yaml_reader`, overrides in
:mod:`~sim.spec.overrides` and the error mapping in :mod:`~sim.spec.validation_errors`.
Every name is re-exported here.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from sim.errors import ConfigError, ConfigProblem
from sim.spec.model_spec import ModelSpec
from sim.spec.overrides import _list_index, apply_overrides, parse_override
from sim.spec.validation_errors import (HF_MODEL_KEYS, _clean_loc, _foreign_key_hint, _model_at, _quoted, _step,
                                        _tagged_union, _tagged_union_tags, _unwrap, _walk_loc, validation_problems)
from sim.spec.yaml_reader import (MAX_DEPTH, MAX_FILE_BYTES, MAX_NODES, LimitError, Loc, YamlDoc, _Budget, _dotted,
                                  _Loader, _nul_problem, _walk, parse_yaml_text, read_text_checked, read_yaml)

M = TypeVar("M", bound=BaseModel)


def validate(model: type[M], doc: YamlDoc, context: dict[str, Any] | None = None) -> M:
    """Validate ``doc.data`` as ``model``; raise one ConfigError listing every problem."""
    if not isinstance(doc.data, dict):
        raise ConfigError(ConfigProblem(doc.source, doc.line_of(()), "",
                                        f"expected a mapping of keys at the top level, got {type(doc.data).__name__}"))
    try:
        return model.model_validate(doc.data, context=context)
    except ValidationError as exc:
        raise ConfigError(validation_problems(model, exc, doc)) from None


def load_model(model: type[M], path: str | Path, overrides: dict[str, Any] | list[str] | None = None,
               flag: str = "--set") -> M:
    """Read ``path`` as YAML, apply overrides (``flag`` names them in errors), validate as ``model``."""
    doc = apply_overrides(read_yaml(path), overrides, flag)
    return validate(model, doc)
