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
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from ..errors import ConfigError, ConfigProblem

M = TypeVar("M", bound=BaseModel)
Loc = tuple[Any, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.2 floats (``1e9``, ``2.5E-3``) as floats."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


class YamlDoc:
    """Parsed YAML data plus the line (1-based) of every key / list item, by location tuple."""

    def __init__(self, data: Any, lines: dict[Loc, int], source: str):
        self.data = data
        self.lines = lines
        self.source = source

    def line_of(self, loc: Loc) -> int:
        """Line of ``loc`` or of its nearest ancestor that has one (0 if none)."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), 0)


def _walk(node: yaml.Node, loader: _Loader, loc: Loc, lines: dict[Loc, int], problems: list[ConfigProblem], source: str) -> Any:
    if isinstance(node, yaml.MappingNode):
        out: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            key = loader.construct_object(key_node, deep=True)
            line = key_node.start_mark.line + 1
            if key in out:
                problems.append(ConfigProblem(source, line, _dotted(loc + (key,)), "duplicate key"))
            lines[loc + (key,)] = line
            out[key] = _walk(value_node, loader, loc + (key,), lines, problems, source)
        return out
    if isinstance(node, yaml.SequenceNode):
        items = []
        for i, item in enumerate(node.value):
            lines[loc + (i,)] = item.start_mark.line + 1
            items.append(_walk(item, loader, loc + (i,), lines, problems, source))
        return items
    return loader.construct_object(node, deep=True)


def parse_yaml_text(text: str, source: str) -> YamlDoc:
    """Parse YAML text; ``source`` names it in error messages."""
    loader = _Loader(text)
    problems: list[ConfigProblem] = []
    try:
        node = loader.get_single_node()
        if node is None:
            raise ConfigError(ConfigProblem(source, 1, "", "the file is empty"))
        lines: dict[Loc, int] = {(): node.start_mark.line + 1}
        data = _walk(node, loader, (), lines, problems, source)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        msg = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(ConfigProblem(source, line, "", f"YAML syntax error: {msg}")) from None
    finally:
        loader.dispose()
    if problems:
        raise ConfigError(problems)
    return YamlDoc(data, lines, source)


def read_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file (errors name the file)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(ConfigProblem(str(path), 0, "", "file not found")) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(ConfigProblem(str(path), 0, "", f"cannot read file: {exc}")) from None
    return parse_yaml_text(text, str(path))


# --------------------------------------------------------------------------- overrides


def parse_override(text: str) -> tuple[str, Any]:
    """Split ``dotted.path=value``; the value is read as YAML (numbers, lists, booleans)."""
    if "=" not in text:
        raise ConfigError(ConfigProblem("--set", 0, text, "expected dotted.path=value"))
    path, raw = text.split("=", 1)
    path = path.strip()
    if not path:
        raise ConfigError(ConfigProblem("--set", 0, text, "empty key path"))
    try:
        value = parse_yaml_text(raw, f"--set {text}").data if raw.strip() else ""
    except ConfigError:
        value = raw
    return path, value


def apply_overrides(doc: YamlDoc, overrides: dict[str, Any] | list[str] | None) -> YamlDoc:
    """Return a copy of ``doc`` with ``dotted.path=value`` overrides applied.

    Intermediate mappings are created when missing (so optional blocks can be set);
    list items are addressed by index or by their ``name`` field.
    """
    if not overrides:
        return doc
    if isinstance(overrides, (list, tuple)):
        overrides = dict(parse_override(o) for o in overrides)
    import copy

    data = copy.deepcopy(doc.data)
    lines = dict(doc.lines)
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
                        f"--set {dotted}", 0, _dotted(loc),
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
                    f"--set {dotted}", 0, _dotted(loc), "cannot descend into a plain value"))
        lines.setdefault(tuple(loc), 0)
    return YamlDoc(data, lines, doc.source + " (with --set overrides)")


def _list_index(items: list, step: str) -> int | None:
    if re.fullmatch(r"-?\d+", step):
        idx = int(step)
        return idx if -len(items) <= idx < len(items) else None
    for i, item in enumerate(items):
        if isinstance(item, dict) and str(item.get("name")) == step:
            return i
    return None


# --------------------------------------------------------------------------- validation


def _dotted(loc: Loc) -> str:
    return ".".join(str(p) for p in loc)


def _unwrap(annotation: Any) -> list[Any]:
    """The candidate model/container types inside Optional/Union/Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        out: list[Any] = []
        for arg in typing.get_args(annotation):
            if arg is not type(None):
                out.extend(_unwrap(arg))
        return out
    return [annotation]


def _tagged_union(annotation: Any) -> tuple[str, dict[Any, Any]] | None:
    """(discriminator key, {tag: member model}) when ``annotation`` is a tagged union."""
    if typing.get_origin(annotation) is not typing.Annotated:
        return None
    inner, *meta = typing.get_args(annotation)
    for m in meta:
        disc = getattr(m, "discriminator", None)
        if isinstance(disc, str):
            tags: dict[Any, Any] = {}
            for member in _unwrap(inner):
                if isinstance(member, type) and issubclass(member, BaseModel):
                    f = member.model_fields.get(disc)
                    if f is not None and typing.get_origin(f.annotation) is typing.Literal:
                        for value in typing.get_args(f.annotation):
                            tags[value] = member
            return disc, tags
    return None


def _step(current: list[Any], step: Any) -> tuple[list[Any], bool]:
    """Candidate annotations after one location step; True when the step was a union tag.

    Pydantic puts the tag of a tagged (discriminated) union into error locations
    (``levels.1.sram.capacity_kib``); such a step selects the member model and is not a key.
    """
    if isinstance(step, str):
        for cand in current:
            tu = _tagged_union(cand)
            if tu is not None and step in tu[1]:
                return [tu[1][step]], True
    nxt: list[Any] = []
    for cand in current:
        for c in _unwrap(cand):
            origin = typing.get_origin(c)
            if isinstance(c, type) and issubclass(c, BaseModel):
                field = c.model_fields.get(step) if isinstance(step, str) else None
                if field is None and isinstance(step, str):
                    for f in c.model_fields.values():
                        if f.alias == step:
                            field = f
                if field is not None:
                    ann = field.annotation
                    if getattr(field, "discriminator", None):  # Field(discriminator=...) on the field itself
                        ann = typing.Annotated[ann, field]
                    nxt.append(ann)
            elif origin in (list, tuple, set, frozenset) and isinstance(step, int):
                args = typing.get_args(c)
                if args:
                    nxt.append(args[0])
            elif origin is dict:
                args = typing.get_args(c)
                if len(args) == 2:
                    nxt.append(args[1])
    return nxt, False


def _walk_loc(model: Any, loc: Loc) -> tuple[Loc, list[Any]]:
    """(location without union markers and tags, candidate annotations at its end)."""
    current: list[Any] = [model]
    clean: list[Any] = []
    for part in loc:
        if isinstance(part, str) and ("[" in part or part.startswith("function-")):
            continue
        current, is_tag = _step(current, part)
        if not is_tag:
            clean.append(part)
    return tuple(clean), current


def _model_at(model: Any, loc: Loc) -> type[BaseModel] | None:
    """The pydantic model class that owns the keys at ``loc`` (None if not a model).

    ``loc`` is a raw pydantic error location: tagged-union tags in it select the member.
    """
    _, current = _walk_loc(model, loc)
    for cand in current:
        tu = _tagged_union(cand)
        if tu is not None:
            continue
        for c in _unwrap(cand):
            if isinstance(c, type) and issubclass(c, BaseModel):
                return c
    return None


def _clean_loc(loc: Loc, model: Any = None) -> Loc:
    """Drop pydantic's union markers from an error location, and (given the model) the
    tags of tagged unions, so that the location is the path of keys in the file."""
    if model is not None:
        return _walk_loc(model, loc)[0]
    out = []
    for part in loc:
        if isinstance(part, str) and ("[" in part or part.startswith("function-")):
            continue
        out.append(part)
    return tuple(out)


def _tagged_union_tags(model: Any, loc: Loc) -> list[Any]:
    """The tags of the tagged union at ``loc`` (empty if there is none)."""
    for cand in _walk_loc(model, loc)[1]:
        tu = _tagged_union(cand)
        if tu is not None:
            return list(tu[1])
    return []


def _quoted(text: str) -> list[str]:
    return re.findall(r"'([^']*)'", text)


def validation_problems(model: type[BaseModel], exc: ValidationError, doc: YamlDoc) -> list[ConfigProblem]:
    """Convert pydantic errors to problems with line, dotted path, valid keys and hints."""
    problems: list[ConfigProblem] = []
    seen: set[tuple[str, str]] = set()
    for err in exc.errors(include_url=False):
        raw = err["loc"]
        loc = _clean_loc(raw, model)
        kind = err["type"]
        ctx = err.get("ctx") or {}
        valid: tuple[str, ...] = ()
        if kind in ("extra_forbidden", "missing"):
            parent = _model_at(model, raw[:-1])
            if parent is not None:
                valid = tuple(f.alias or name for name, f in parent.model_fields.items())
        if kind == "extra_forbidden":
            close = difflib.get_close_matches(str(loc[-1]), list(valid), n=1)
            msg = f"unknown key '{loc[-1]}'" + (f"; did you mean '{close[0]}'?" if close else "")
        elif kind == "missing":
            msg = "missing required key"
        elif kind in ("union_tag_invalid", "union_tag_not_found"):
            # tagged union (e.g. a memory level's ``kind``): point at the tag key itself
            disc = str(ctx.get("discriminator", "kind")).strip("'")
            tags = [str(t) for t in (_tagged_union_tags(model, raw) or _quoted(str(ctx.get("expected_tags", ""))))]
            loc = loc + (disc,)
            if kind == "union_tag_not_found":
                msg = f"missing required key '{disc}' (one of: {', '.join(tags)})"
            else:
                tag = str(ctx.get("tag", ""))
                close = difflib.get_close_matches(tag, tags, n=1)
                msg = (f"unknown {disc} '{tag}'" + (f"; did you mean '{close[0]}'?" if close else "")
                       + f" (valid: {', '.join(tags)})")
        elif kind in ("model_type", "model_attributes_type", "dict_type"):
            msg = "expected a mapping of keys" + ("" if isinstance(err.get("input"), dict) else f" (got {err.get('input')!r})")
        else:
            msg = err["msg"]
            if msg.startswith("Value error, "):
                msg = msg[len("Value error, "):]
            if kind == "tuple_type":  # frozen models store YAML lists as tuples
                msg = "Input should be a list"
            if kind == "literal_error":
                # a value outside a fixed set (dataflow, rate class, scope...): suggest the nearest
                close = difflib.get_close_matches(str(err.get("input")), _quoted(str(ctx.get("expected", ""))), n=1)
                if close:
                    msg += f"; did you mean '{close[0]}'?"
            if "input" in err and kind not in ("model_type",) and not isinstance(err["input"], (dict, list)):
                msg += f" (got {err['input']!r})"
        key = (_dotted(loc), msg)
        if key in seen:
            continue
        seen.add(key)
        problems.append(ConfigProblem(doc.source, doc.line_of(loc), _dotted(loc), msg, valid))
    problems.sort(key=lambda p: (p.line, p.path))
    return problems


def validate(model: type[M], doc: YamlDoc, context: dict[str, Any] | None = None) -> M:
    """Validate ``doc.data`` as ``model``; raise one ConfigError listing every problem."""
    if not isinstance(doc.data, dict):
        raise ConfigError(ConfigProblem(doc.source, doc.line_of(()), "",
                                        f"expected a mapping of keys at the top level, got {type(doc.data).__name__}"))
    try:
        return model.model_validate(doc.data, context=context)
    except ValidationError as exc:
        raise ConfigError(validation_problems(model, exc, doc)) from None


def load_model(model: type[M], path: str | Path, overrides: dict[str, Any] | list[str] | None = None) -> M:
    """Read ``path`` as YAML, apply overrides, validate as ``model``."""
    doc = apply_overrides(read_yaml(path), overrides)
    return validate(model, doc)
