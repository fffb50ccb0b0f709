"""The parameters of a sweep spec as axes of the point product (:class:`Axis`,
:func:`parse_axes`): value lists, ``{from, to, step|num, log}`` ranges, ``zip`` groups, and
the checks that report a bad path, range or name against the spec's file and line.

Turning the ``parameters:`` mapping into axes is its own small language, separate from the
schema of the file (:mod:`sim.apps.sweep.spec_schema`) and from loading it;
:mod:`sim.apps.sweep.spec` re-exports every name.
"""
from __future__ import annotations

import difflib
import math
import types
import typing
from dataclasses import dataclass
from typing import Any, Literal, Union

from sim.apps.serving.schedulers import SCHEDULERS
from sim.apps.sweep.spec_schema import WORKLOAD_PREFIX, SweepSpec, WorkloadSpec
from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import YamlDoc

# --------------------------------------------------------------------------- axes


@dataclass(frozen=True)
class Axis:
    """One axis of the product: one path, or several varied together (a zip group)."""

    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]   # per step: one value per path
    loc: tuple[Any, ...]                  # where it is in the spec (for error lines)

    def __len__(self) -> int:
        return len(self.values)



def _clean_float(v: float) -> float:
    return float(f"{v:.12g}")


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _number(v: Any) -> bool:
    return (isinstance(v, (int, float)) and not isinstance(v, bool)) and math.isfinite(v)


def _expand_range(r: dict, where: str) -> list[Any]:
    keys = set(r)
    allowed = {"from", "to", "step", "num", "log"}
    unknown = keys - allowed
    if unknown:
        k = sorted(map(str, unknown))[0]  # a key may be any YAML scalar ({from: 1, to: 8, 4} has the key 4)
        close = difflib.get_close_matches(k, sorted(allowed), n=1)
        raise ValueError(f"unknown range key '{k}'" + (f"; did you mean '{close[0]}'?" if close else "")
                         + " (a range is {from, to, step} or {from, to, num, log})")
    if "from" not in r or "to" not in r:
        raise ValueError("a range needs 'from' and 'to' (and 'step' or 'num')")
    a, b = r["from"], r["to"]
    if not (_number(a) and _number(b)):
        raise ValueError(f"range 'from' and 'to' must be numbers, got {a!r} and {b!r}")
    log = r.get("log", False)
    if not isinstance(log, bool):
        raise ValueError(f"range 'log' must be true or false, got {log!r}")
    if ("step" in r) == ("num" in r):
        raise ValueError("a range needs exactly one of 'step' or 'num'")
    whole = _is_int(a) and _is_int(b)
    if "step" in r:
        s = r["step"]
        if log:
            raise ValueError("'log: true' goes with 'num', not 'step'")
        if not _number(s) or s <= 0:
            raise ValueError(f"range 'step' must be a number > 0, got {s!r}")
        if b < a:
            raise ValueError(f"range 'to' ({b}) is below 'from' ({a})")
        steps = (b - a) / s
        if not math.isfinite(steps) or steps >= 100_000:
            raise ValueError(f"range from {a} to {b} in steps of {s} has {steps + 1:,.3g} values; more than "
                             "100,000 is surely a mistake")
        n = int(math.floor(steps + 1e-9)) + 1
        if n > 100_000:
            raise ValueError(f"range has {n} values; more than 100,000 is surely a mistake")
        whole = whole and _is_int(s)
        vals = [a + i * s for i in range(n)]
    else:
        n = r["num"]
        if not _is_int(n) or n < 1:
            raise ValueError(f"range 'num' must be a whole number >= 1, got {n!r}")
        if n > 100_000:
            raise ValueError(f"range has {n} values; more than 100,000 is surely a mistake")
        if log and (a <= 0 or b <= 0):
            raise ValueError("a log range needs 'from' and 'to' > 0")
        if n == 1:
            vals = [a]
        elif log:
            vals = [a * (b / a) ** (i / (n - 1)) for i in range(n)]
        else:
            vals = [a + (b - a) * i / (n - 1) for i in range(n)]
    if whole:
        out = [int(round(v)) for v in vals]
        if len(set(out)) != len(out):
            dup = next(v for i, v in enumerate(out) if v in out[:i])
            shown = out if len(out) <= 12 else out[:12] + ["..."]
            raise ValueError(f"range gives repeated values after rounding to whole numbers ({dup} twice; "
                             f"{len(out):,} values: {', '.join(map(str, shown))}); use fewer values or a float range")
        return out
    return [_clean_float(float(v)) for v in vals]


def _axis_values(value: Any, where: str) -> list[Any]:
    if isinstance(value, dict):
        return _expand_range(value, where)
    if isinstance(value, list):
        if not value:
            raise ValueError("an empty list of values")
        for v in value:
            if isinstance(v, dict):
                raise ValueError("list values must be plain values (numbers, strings, true/false)")
        return list(value)
    return [value]  # one fixed value


def _named_choices() -> dict[str, tuple]:
    """Workload fields whose values are names (Literal fields, the scheduler) -> the names."""
    out: dict[str, tuple] = {"scheduler": tuple(SCHEDULERS)}
    for f, info in WorkloadSpec.model_fields.items():
        stack, names = [info.annotation], []
        while stack:
            t = stack.pop()
            if typing.get_origin(t) is Literal:
                names.extend(typing.get_args(t))
            elif typing.get_origin(t) in (Union, types.UnionType):
                stack.extend(typing.get_args(t))
        if names:
            out[f] = tuple(names)
    return out


def _check_names(path: str, values: list) -> str | None:
    """A name no workload field accepts (a misspelt scheduler, router, phase...): every point
    with it would fail, so it is reported against the spec, not per point."""
    field = path[len(WORKLOAD_PREFIX):] if path.startswith(WORKLOAD_PREFIX) else None
    allowed = _named_choices().get(field) if field else None
    if allowed is None:
        return None
    for v in values:
        key = v.replace("-", "_") if field == "scheduler" and isinstance(v, str) else v
        if key in allowed:
            continue
        close = difflib.get_close_matches(str(v), [str(a) for a in allowed], n=1)
        return (f"{path} = {v!r}: not a {field}" + (f"; did you mean '{close[0]}'?" if close else "")
                + f" ({field}: {', '.join(map(str, allowed))})")
    return None


def parse_axes(spec: SweepSpec, doc: YamlDoc | None) -> list[Axis]:
    """The spec's parameters as axes; problems name the spec file, line and key."""
    source = doc.source if doc is not None else "<sweep spec>"
    problems: list[ConfigProblem] = []

    def line(loc) -> int:
        return doc.line_of(loc) if doc is not None else 0

    axes: list[Axis] = []
    seen: dict[str, tuple] = {}

    def add_path(path: str, loc: tuple) -> bool:
        if not isinstance(path, str) or not path or path.startswith(".") or path.endswith(".") or ".." in path:
            problems.append(ConfigProblem(source, line(loc), ".".join(map(str, loc)),
                                          f"'{path}' is not a dotted parameter path"))
            return False
        if path in seen:
            problems.append(ConfigProblem(source, line(loc), ".".join(map(str, loc)),
                                          f"parameter '{path}' is varied twice"))
            return False
        seen[path] = loc
        if path.startswith(WORKLOAD_PREFIX):
            field = path[len(WORKLOAD_PREFIX):]
            valid = [f for f in WorkloadSpec.model_fields if f not in ("name", "kind")]
            if field not in valid:
                close = difflib.get_close_matches(field, valid, n=1)
                problems.append(ConfigProblem(
                    source, line(loc), ".".join(map(str, loc)),
                    f"unknown workload field '{field}'" + (f"; did you mean 'workload.{close[0]}'?" if close else ""),
                    tuple(valid)))
                return False
        return True

    for key, value in spec.parameters.items():
        loc = ("parameters", key)
        if key == "zip":
            groups = value if isinstance(value, list) else [value]
            for gi, group in enumerate(groups):
                gloc = loc + ((gi,) if isinstance(value, list) else ())
                if not isinstance(group, dict) or not group:
                    problems.append(ConfigProblem(source, line(gloc), ".".join(map(str, gloc)),
                                                  "zip holds a mapping of parameter paths to values "
                                                  "(or a list of such mappings)"))
                    continue
                paths, cols, ok = [], [], True
                for p, v in group.items():
                    ploc = gloc + (p,)
                    if not add_path(p, ploc):
                        ok = False
                        continue
                    try:
                        cols.append(_axis_values(v, ".".join(map(str, ploc))))
                        paths.append(p)
                        bad = _check_names(p, cols[-1])
                        if bad:
                            raise ValueError(bad)
                    except ValueError as exc:
                        problems.append(ConfigProblem(source, line(ploc), ".".join(map(str, ploc)), str(exc)))
                        ok = False
                if not ok:
                    continue
                lengths = {p: len(c) for p, c in zip(paths, cols)}
                if len(set(lengths.values())) > 1:
                    problems.append(ConfigProblem(
                        source, line(gloc), ".".join(map(str, gloc)),
                        "zipped parameters need the same number of values, got "
                        + ", ".join(f"{p}: {n}" for p, n in lengths.items())))
                    continue
                axes.append(Axis(tuple(paths), tuple(zip(*cols)), gloc))
            continue
        if not add_path(key, loc):
            continue
        try:
            vals = _axis_values(value, key)
            bad = _check_names(key, vals)
            if bad:
                raise ValueError(bad)
        except ValueError as exc:
            problems.append(ConfigProblem(source, line(loc), ".".join(map(str, loc)), str(exc)))
            continue
        axes.append(Axis((key,), tuple((v,) for v in vals), loc))
    if problems:
        raise ConfigError(problems)
    return axes
