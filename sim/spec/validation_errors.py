"""Pydantic validation errors as config problems: :func:`validation_problems` turns each
error into a :class:`~sim.errors.ConfigProblem` with the file's line, the dotted path of keys
(union markers and tagged-union tags removed), the valid keys at that place, "did you mean"
hints, and exact messages for keys that belong elsewhere (:data:`HF_MODEL_KEYS`, a model key
given to a chip).  Where a value may take several forms (an untagged union: a kernel entry is a
list or a mapping), only the problems of the form it was written in are reported
(:func:`_prune_union_branches`), not one per form pydantic tried.

Walking a model's annotations along an error location is most of the loader's code and
needs none of the reading or override logic, so it lives on its own;
:mod:`sim.spec.loader` re-exports every name.
"""
from __future__ import annotations

import difflib
import re
import types
import typing
from typing import Any

from pydantic import BaseModel, ValidationError

from sim.errors import ConfigProblem, quoted
from sim.spec.model_spec import ModelSpec
from sim.spec.yaml_reader import Loc, YamlDoc, _dotted

# --------------------------------------------------------------------------- validation


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
        if _union_marker(current, part):
            continue
        member = _member_named(current, part)
        if member is not None:  # an untagged union's member, by its class name: not a key
            current = [member]
            continue
        current, is_tag = _step(current, part)
        if not is_tag:
            clean.append(part)
    return tuple(clean), current


def _union_marker(current: list[Any], part: Any) -> bool:
    """Whether ``part`` names a member of an untagged union at ``current`` by its type
    (``tuple[int, int, int]``, ``function-after[...]``), not a key: only where ``current``
    is such a union, since a key in a file may hold a ``[`` too (``schem[a_version: 1``)."""
    if not isinstance(part, str) or not ("[" in part or part.startswith(("function-", "constrained-"))):
        return False
    if part == "[key]":  # pydantic's marker of a mapping's key (not its value) being wrong
        return True
    return len([c for cand in current for c in _unwrap(cand)]) > 1


def _member_named(current: list[Any], part: Any) -> type | None:
    """The member called ``part`` of an untagged union in ``current`` (pydantic names a
    member by its class, ``int`` or ``LengthSpec``, in error locations), else None."""
    if not isinstance(part, str):
        return None
    members = [c for cand in current for c in _unwrap(cand)]
    if len(members) < 2:
        return None
    for c in members:
        if isinstance(c, type) and c.__name__ == part:
            return c
    return None


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


def _union_branch(model: Any, loc: Loc) -> int | None:
    """The position in a raw error location of the member tag of an untagged union (a type
    such as ``tuple[int, int, int]``, or a model's class name), if the location has one:
    pydantic tries each member and reports every member's errors."""
    current: list[Any] = [model]
    for i, part in enumerate(loc):
        if _union_marker(current, part):
            return i
        if _member_named(current, part) is not None:
            return i
        current, _ = _step(current, part)
    return None


_ARITY = ("too_long", "too_short")


def _tuple_arity(tag: str) -> int:
    """Values a ``tuple[a, b, c]`` member takes (0 for any other member)."""
    if not tag.startswith("tuple[") or "..." in tag:
        return 0
    depth, count = 0, 1
    for ch in tag[len("tuple["):-1]:
        depth += ch == "["
        depth -= ch == "]"
        count += ch == "," and depth == 0
    return count


def _kind_in_words(tag: str) -> str:
    """What a union member's tag asks for, in a file's terms."""
    inner = re.findall(r"\w+", tag.split("[", 1)[1]) if "[" in tag and tag.startswith("function-") else []
    if tag.startswith(("tuple[", "list[")):
        return "a list of values"
    if tag[:1].isupper() or tag.startswith("dict[") or (inner and inner[-1][:1].isupper()):
        return "a mapping of keys"
    base = tag.rsplit("-", 1)[-1]
    return {"int": "an integer", "float": "a number", "str": "a string", "bool": "true or false"}.get(base, tag)


def _one_union_branch(prefix: Loc, branches: dict[str, list[dict]]) -> list[dict]:
    """The errors of the union member the value was meant for (at ``prefix``): members of
    another kind (a mapping where a list was given, or the reverse) are dropped; of the
    rest, one the value's length fits; if it fits none, one error naming the lengths."""
    def at_root(e):
        return len(e["loc"]) == len(prefix) + 1

    def arity(e):
        return ((at_root(e) and e["type"] in _ARITY)
                or (e["type"] == "missing" and len(e["loc"]) == len(prefix) + 2 and isinstance(e["loc"][-1], int)))

    def other_kind(e):  # the value is not of this member's kind at all (a list for a mapping, ...)
        return at_root(e) and (e["type"].endswith(("_type", "_parsing")) or e["type"] == "model_attributes_type")

    every = [e for errs in branches.values() for e in errs]
    same_kind = {t: errs for t, errs in branches.items() if not any(other_kind(e) for e in errs)}
    if not same_kind:
        kinds = sorted({_kind_in_words(t) for t in branches})
        return [dict(every[0], loc=prefix, type="union_kind", msg="expected " + " or ".join(kinds))]
    fitting = {t: errs for t, errs in same_kind.items() if not any(arity(e) for e in errs)}
    if fitting:
        return min(fitting.values(), key=len)
    counts = sorted({_tuple_arity(t) for t in same_kind} - {0})
    got = next((e["input"] for e in every if isinstance(e.get("input"), (list, tuple))), None)
    if not counts or got is None:
        return min(same_kind.values(), key=len)
    told = ", ".join(map(str, counts[:-1])) + (" or " if len(counts) > 1 else "") + str(counts[-1])
    mapping = any(_kind_in_words(t) == "a mapping of keys" for t in branches)
    return [{"type": "union_arity", "loc": prefix,
             "msg": f"takes {told} values{' (or a mapping of keys)' if mapping else ''}, got {len(got)}"}]


def _prune_union_branches(model: Any, errors: list[dict]) -> list[dict]:
    """``errors`` with each untagged union's errors reduced to the member the value was
    meant for (:func:`_one_union_branch`), in their original order."""
    sites: dict[Loc, dict[str, list[dict]]] = {}
    keep: list[tuple[int, dict]] = []
    first_at: dict[Loc, int] = {}
    for n, e in enumerate(errors):
        i = _union_branch(model, tuple(e["loc"]))
        if i is None:
            keep.append((n, e))
            continue
        prefix = tuple(e["loc"][:i])
        first_at.setdefault(prefix, n)
        sites.setdefault(prefix, {}).setdefault(str(e["loc"][i]), []).append(e)
    for prefix, branches in sites.items():
        chosen = [e for errs in branches.values() for e in errs] if len(branches) < 2 else _one_union_branch(prefix, branches)
        keep += [(first_at[prefix], e) for e in chosen]
    return [e for _, e in sorted(keep, key=lambda x: x[0])]


def _clean_loc(loc: Loc, model: Any = None) -> Loc:
    """Drop pydantic's union markers from an error location, and (given the model) the
    tags of tagged unions, so that the location is the path of keys in the file."""
    if model is not None:
        return _walk_loc(model, loc)[0]
    out = []
    for part in loc:
        if isinstance(part, str) and ("[" in part or part.startswith(("function-", "constrained-"))):
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
    for err in _prune_union_branches(model, exc.errors(include_url=False)):
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
        elif kind == "missing" and raw and isinstance(raw[-1], int):
            # a position of a fixed-length list (a tuple), not a key: no key list applies
            msg = f"too few values: nothing at position {raw[-1]} (positions count from 0)"
            valid = ()
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
            msg = "expected a mapping of keys" + ("" if isinstance(err.get("input"), dict) else f" (got {quoted(err.get('input'))})")
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
                msg += f" (got {quoted(err['input'])})"
        key = (_dotted(loc), msg)
        if key in seen:
            continue
        seen.add(key)
        source, line, via = doc.where(loc)  # (a kernel library's key: the library file's line)
        problems.append(ConfigProblem(source, line, _dotted(loc), msg + (f" ({via})" if via else ""), valid))
    problems.sort(key=lambda p: (p.line, p.path))
    return problems
