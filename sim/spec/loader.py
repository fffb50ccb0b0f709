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

from sim.errors import ConfigError, ConfigProblem
from sim.spec.model_spec import ModelSpec

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


#: limits that keep a hostile or mistaken file from hanging the loader: values (nodes) after
#: alias expansion, nesting depth, file size
MAX_NODES = 250_000
MAX_DEPTH = 64
MAX_FILE_BYTES = 16 << 20


class LimitError(ConfigError):
    """A YAML document over :data:`MAX_NODES`, :data:`MAX_DEPTH` or :data:`MAX_FILE_BYTES`."""


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0
        self.active: set[int] = set()


def _walk(node: yaml.Node, loader: _Loader, loc: Loc, lines: dict[Loc, int], problems: list[ConfigProblem],
          source: str, budget: _Budget | None = None) -> Any:
    budget = budget if budget is not None else _Budget()
    budget.nodes += 1
    line = node.start_mark.line + 1
    if budget.nodes > MAX_NODES:
        raise LimitError(ConfigProblem(source, line, _dotted(loc),
                                       f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)"))
    if len(loc) > MAX_DEPTH:
        raise LimitError(ConfigProblem(source, line, _dotted(loc[:MAX_DEPTH]),
                                       f"nested more than {MAX_DEPTH} levels deep"))
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if id(node) in budget.active:
            raise LimitError(ConfigProblem(source, line, _dotted(loc), "a recursive alias (a value that contains itself)"))
        budget.active.add(id(node))
    try:
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                kline = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode):
                    what = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                    problems.append(ConfigProblem(source, kline, _dotted(loc),
                                                  f"a key must be a plain name, not a {what}"))
                    continue
                key = loader.construct_object(key_node, deep=True)
                try:
                    hash(key)
                except TypeError:  # pragma: no cover - scalars are hashable
                    problems.append(ConfigProblem(source, kline, _dotted(loc), "a key must be a plain name"))
                    continue
                if key in out:
                    problems.append(ConfigProblem(source, kline, _dotted(loc + (key,)), "duplicate key"))
                lines[loc + (key,)] = kline
                out[key] = _walk(value_node, loader, loc + (key,), lines, problems, source, budget)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                lines[loc + (i,)] = item.start_mark.line + 1
                items.append(_walk(item, loader, loc + (i,), lines, problems, source, budget))
            return items
        return loader.construct_object(node, deep=True)
    finally:
        budget.active.discard(id(node))


def _nul_problem(text: str, source: str) -> ConfigProblem | None:
    i = text.find("\0")
    if i < 0:
        return None
    return ConfigProblem(source, text.count("\n", 0, i) + 1, "", "the file contains a NUL byte (is it a binary file?)")


def parse_yaml_text(text: str, source: str) -> YamlDoc:
    """Parse YAML text; ``source`` names it in error messages.

    Bounded: at most :data:`MAX_NODES` values after alias expansion and :data:`MAX_DEPTH`
    levels of nesting (a :class:`LimitError` otherwise); recursive aliases, keys that are
    lists or mappings and NUL bytes are clear errors.
    """
    nul = _nul_problem(text, source)
    if nul is not None:
        raise ConfigError(nul)
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
    except RecursionError:
        raise LimitError(ConfigProblem(source, 0, "", f"nested too deeply (more than {MAX_DEPTH} levels)")) from None
    finally:
        loader.dispose()
    if problems:
        raise ConfigError(problems)
    return YamlDoc(data, lines, source)


def read_text_checked(path: str | Path, max_bytes: int | None = None) -> str:
    """A config file's text: only regular files (no FIFOs, devices such as ``/dev/zero``,
    folders), at most ``max_bytes`` (default :data:`MAX_FILE_BYTES`), UTF-8."""
    import os
    import stat

    path = Path(path)
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(ConfigProblem(str(path), 0, "", "file not found")) from None
    except OSError as exc:
        raise ConfigError(ConfigProblem(str(path), 0, "", f"cannot read file: {exc.strerror or exc}")) from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(ConfigProblem(str(path), 0, "", "is a folder, not a file"))
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(ConfigProblem(str(path), 0, "", "not a regular file (a device, FIFO or socket); "
                                                          "give the path of a config file"))
    if st.st_size > limit:
        raise LimitError(ConfigProblem(str(path), 0, "", f"the file is {st.st_size:,} bytes; config files are limited "
                                                         f"to {limit:,} bytes"))
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(ConfigProblem(str(path), 0, "", f"cannot read file: {exc.strerror or exc}")) from None
    if len(raw) > limit:
        raise LimitError(ConfigProblem(str(path), 0, "", f"the file is over the limit of {limit:,} bytes"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(ConfigProblem(str(path), line, "", f"not UTF-8 text (byte {exc.start:,}: {exc.reason})")) from None


def read_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file (errors name the file; see :func:`read_text_checked`)."""
    return parse_yaml_text(read_text_checked(path), str(Path(path)))


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
    return YamlDoc(data, lines, doc.source + f" (with {flag} overrides)")


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


#: Hugging Face config.json keys -> the model YAML's key (None: not needed by the simulator)
HF_MODEL_KEYS: dict[str, str | None] = {
    "num_hidden_layers": "num_layers", "n_layer": "num_layers", "num_attention_heads": "num_heads",
    "n_head": "num_heads", "num_key_value_heads": "num_kv_heads", "intermediate_size": "ffn_size",
    "n_inner": "ffn_size", "n_embd": "hidden_size", "max_position_embeddings": "max_context",
    "n_positions": "max_context", "tie_word_embeddings": "tied_embeddings", "hidden_act": "activation",
    "activation_function": "activation", "num_local_experts": "num_experts", "num_experts_per_tok": "experts_per_token",
    "rms_norm_eps": "norm", "layer_norm_eps": "norm", "layer_norm_epsilon": "norm",
    "rope_theta": None, "rope_scaling": None, "torch_dtype": None, "architectures": None, "model_type": None,
    "bos_token_id": None, "eos_token_id": None, "pad_token_id": None, "initializer_range": None,
    "attention_dropout": None, "use_cache": None, "transformers_version": None, "pretraining_tp": None,
    "sliding_window": None, "rope_type": None, "hidden_dropout": None,
}


def _foreign_key_hint(model: Any, loc: Loc, doc: YamlDoc) -> str | None:
    """An exact message for an unknown key that belongs elsewhere: a Hugging Face
    config.json key in a model file, or a model key given to a chip (``--set``)."""
    key = str(loc[-1]) if loc else ""
    name = getattr(model, "__name__", "")
    if name == "ModelSpec" and len(loc) == 1 and key in HF_MODEL_KEYS:
        ours = HF_MODEL_KEYS[key]
        if ours is None:
            return (f"'{key}' is a Hugging Face config.json key the simulator does not use; remove it "
                    "(`sim import-model config.json` converts a whole config)")
        return (f"'{key}' is the Hugging Face name; this file calls it '{ours}' "
                "(`sim import-model config.json` converts a whole config)")
    if name == "ChipSpec" and len(loc) == 1:
        if key in ModelSpec.model_fields and key not in model.model_fields:
            return (f"unknown key '{key}': it is a model key, not a chip key; set it with "
                    f"--model-set {key}=VALUE (`sim run`)")
    return None


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
            msg = _foreign_key_hint(model, loc, doc)
            if msg is None:
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


def load_model(model: type[M], path: str | Path, overrides: dict[str, Any] | list[str] | None = None,
               flag: str = "--set") -> M:
    """Read ``path`` as YAML, apply overrides (``flag`` names them in errors), validate as ``model``."""
    doc = apply_overrides(read_yaml(path), overrides, flag)
    return validate(model, doc)
