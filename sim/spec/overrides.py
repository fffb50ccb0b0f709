"""``--set dotted.path=value`` edits of parsed YAML: :func:`parse_override` splits one
(the value read as YAML) and :func:`apply_overrides` applies them to a
:class:`~sim.spec.yaml_reader.YamlDoc`, creating missing mappings and addressing list items by
index or by ``name``.

Editing the raw data is separate from reading it (:mod:`sim.spec.yaml_reader`) and from
validating it (:mod:`sim.spec.validation_errors`); chips (``--set``), models (``--model-set``),
dataflows and sweeps share it.  :mod:`sim.spec.loader` re-exports every name.
"""
from __future__ import annotations

import re
from typing import Any

from sim.errors import ConfigError, ConfigProblem
from sim.spec.yaml_reader import LimitError, YamlDoc, _dotted, parse_yaml_text

# --------------------------------------------------------------------------- overrides


def parse_override(text: str, flag: str = "--set") -> tuple[str, Any]:
    """Split ``dotted.path=value``; the value is read as YAML (numbers, lists, booleans).
    ``flag`` names the option in error messages (``--set``, ``--model-set``)."""
    if not isinstance(text, str):
        raise ConfigError(ConfigProblem(flag, 0, repr(text), "expected a 'dotted.path=value' string"))
    if "=" not in text:
        raise ConfigError(ConfigProblem(flag, 0, text, "expected dotted.path=value"))
    path, raw = text.split("=", 1)
    path = path.strip()
    if not path:
        raise ConfigError(ConfigProblem(flag, 0, text, "empty key path"))
    try:
        value = parse_yaml_text(raw, f"{flag} {text}").data if raw.strip() else ""
    except LimitError:
        raise
    except ConfigError:
        value = raw
    return path, value


def apply_overrides(doc: YamlDoc, overrides: dict[str, Any] | list[str] | None, flag: str = "--set") -> YamlDoc:
    """Return a copy of ``doc`` with ``dotted.path=value`` overrides applied.

    Intermediate mappings are created when missing (so optional blocks can be set);
    list items are addressed by index or by their ``name`` field.  ``flag`` names the
    option in error messages (``--set`` for chips, ``--model-set`` for models).
    """
    if not overrides:
        return doc
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, (list, tuple)):
        overrides = dict(parse_override(o, flag) for o in overrides)
    import copy

    data = copy.deepcopy(doc.data)
    lines = dict(doc.lines)
    origins = dict(doc.origins)
    for dotted, value in overrides.items():
        steps = str(dotted).split(".")
        node = data
        loc: list[Any] = []
        for i, step in enumerate(steps):
            last = i == len(steps) - 1
            if isinstance(node, list):
                idx = _list_index(node, step)
                if idx is None:
                    names = [str(x.get("name")) for x in node if isinstance(x, dict) and "name" in x]
                    raise ConfigError(ConfigProblem(
                        f"{flag} {dotted}", 0, _dotted(loc),
                        f"no list item '{step}' (use an index 0..{len(node) - 1}"
                        + (f" or a name: {', '.join(names)})" if names else ")")))
                loc.append(idx)
                if last:
                    node[idx] = value
                else:
                    node = node[idx]
            elif isinstance(node, dict):
                loc.append(step)
                if last:
                    node[step] = value
                else:
                    if step not in node or node[step] is None:
                        node[step] = {}
                    node = node[step]
            else:
                raise ConfigError(ConfigProblem(
                    f"{flag} {dotted}", 0, _dotted(loc), "cannot descend into a plain value"))
        lines.setdefault(tuple(loc), 0)
        # a value set here is no longer the merged-in file's (YamlDoc.origins)
        origins = {k: v for k, v in origins.items() if tuple(loc[:len(k)]) != k}
    return YamlDoc(data, lines, doc.source + f" (with {flag} overrides)", origins)


def _list_index(items: list, step: str) -> int | None:
    if re.fullmatch(r"-?\d+", step):
        idx = int(step)
        return idx if -len(items) <= idx < len(items) else None
    for i, item in enumerate(items):
        if isinstance(item, dict) and str(item.get("name")) == step:
            return i
    return None
