"""Expanding a sweep spec into points: resolved chips, workloads and content hashes.

Everything here is cheap and runs in the driver: each point's chip is the base chip file
with the overrides applied and validated (so an invalid value is known before anything is
simulated), and its content hash (:func:`sim.apps.store.content_hash`) decides whether a stored
result can be reused.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from sim.apps.store import content_hash
from sim.apps.sweep.spec import NOT_FOR, WORKLOAD_PREFIX, LoadedSpec, WorkloadSpec, format_value
from sim.errors import ConfigError, ConfigProblem, SimError
from sim.model.workload.models import default_prompt_len, load_model_spec
from sim.spec.chip import ChipSpec
from sim.spec.kernel_library import chip_document
from sim.spec.loader import YamlDoc, read_yaml, validate
from sim.spec.stack_catalog import chip_stack_problems
from sim.spec.registry import resolve_chip_path

__all__ = ["Point", "expand", "check_spec"]

_STRUCTURAL = ("unknown key", "no list item", "cannot descend", "expected dotted.path=value", "empty key path")


@dataclass
class Point:
    """One (parameter combination, workload) of a sweep."""

    index: int
    workload: str
    chip: str
    params: dict[str, Any]
    overrides: list[str]
    hash: Optional[str] = None
    task: Optional[dict] = field(default=None, repr=False)
    error: Optional[str] = None          # an invalid point: never simulated, never stored


def _chip_path(value: str, base_dir: Path) -> Path:
    p = Path(value).expanduser()
    if not p.is_absolute() and (base_dir / p).is_file():
        return (base_dir / p).resolve()
    return resolve_chip_path(value).resolve()


def _model_ref(value: str, base_dir: Path) -> str:
    p = Path(value).expanduser()
    if not p.is_absolute() and (base_dir / p).is_file():
        return str((base_dir / p).resolve())
    return value


def _short(exc: BaseException) -> str:
    if isinstance(exc, ConfigError):
        return "; ".join((f"{p.path}: {p.message}" if p.path else p.message) for p in exc.problems)
    return str(exc)


def _blame(exc: ConfigError, params: dict[str, Any]) -> str:
    """'parameter P = V: message' for each problem, naming the parameter that caused it."""
    chip_params = {k: v for k, v in params.items() if not k.startswith(WORKLOAD_PREFIX)}
    parts = []
    for p in exc.problems:
        culprit = None
        if p.path in chip_params:
            culprit = p.path
        else:
            last = p.path.rsplit(".", 1)[-1] if p.path else None
            cands = [k for k in chip_params if last and k.rsplit(".", 1)[-1] == last]
            if len(cands) == 1:
                culprit = cands[0]
        msg = p.message
        if culprit is not None:
            parts.append(f"parameter {culprit} = {format_value(chip_params[culprit])}: {msg}")
        else:
            where = f"{p.path}: " if p.path else ""
            shown = ", ".join(f"{k}={format_value(v)}" for k, v in chip_params.items())
            parts.append(f"{where}{msg} (point: {shown})" if shown else f"{where}{msg}")
    return "invalid point: " + "; ".join(parts)


class _Resolver:
    """Chip files parsed once; chips and models resolved (and cached) per distinct input."""

    def __init__(self, loaded: LoadedSpec):
        self.loaded = loaded
        self.docs: dict[Path, YamlDoc] = {}
        self.chips: dict[tuple, Any] = {}
        self.models: dict[str, Any] = {}

    def doc(self, path: Path) -> YamlDoc:
        d = self.docs.get(path)
        if d is None:
            d = self.docs[path] = read_yaml(path)
        return d

    def chip(self, value: str, overrides: tuple[str, ...]):
        key = (value, overrides)
        hit = self.chips.get(key)
        if hit is None:
            try:
                path = _chip_path(value, self.loaded.base_dir)
                spec = validate(ChipSpec, chip_document(self.doc(path), list(overrides)))
                # the stack it names exists and fits it, as every command's load_chip checks
                problems = chip_stack_problems(spec, path, self.doc(path).line_of(("software_stack",)), overrides)
                if problems:
                    raise ConfigError(problems)
                hit = (spec, spec.to_dict(), None)
            except SimError as exc:
                hit = (None, None, exc)
            self.chips[key] = hit
        return hit

    def model(self, ref: str, model_set: dict | None = None):
        key = (ref, tuple(sorted((str(k), repr(v)) for k, v in (model_set or {}).items())))
        hit = self.models.get(key)
        if hit is None:
            try:
                spec = load_model_spec(_model_ref(ref, self.loaded.base_dir), overrides=dict(model_set or {}) or None)
                hit = (spec, spec.model_dump(mode="json"), None)
            except SimError as exc:
                hit = (None, None, exc)
            self.models[key] = hit
        return hit


def _check_up_front(loaded: LoadedSpec, res: _Resolver, base: tuple[str, ...]) -> None:
    """Mistakes that would fail every point: an unusable base chip or model, a parameter
    path that does not exist.  Reported against the spec file, line and key."""
    spec = loaded.spec
    src = loaded.source
    chip_varied = any("chip" in a.paths for a in loaded.axes)
    problems: list[ConfigProblem] = []
    if not chip_varied:
        _, _, err = res.chip(spec.chip, base)
        if err is not None:
            if isinstance(err, ConfigError):
                raise ConfigError(err.problems, header=f"{src}: the base chip '{spec.chip}' (with the spec's "
                                                       f"set: overrides) is invalid")
            raise ConfigError(ConfigProblem(src, loaded.line_of(("chip",)), "chip", str(err)))
    first_chip = spec.chip
    for ax in loaded.axes:
        if "chip" in ax.paths:
            first_chip = ax.values[0][ax.paths.index("chip")]
    for ax in loaded.axes:
        for i, path in enumerate(ax.paths):
            if path == "chip" or path.startswith(WORKLOAD_PREFIX):
                continue
            loc = ax.loc + ((path,) if len(ax.paths) > 1 else ())
            try:
                over = list(base) + [f"{path}={format_value(ax.values[0][i])}"]
                validate(ChipSpec, chip_document(res.doc(_chip_path(first_chip, loaded.base_dir)), over))
            except ConfigError as exc:
                for p in exc.problems:
                    if any(p.message.startswith(s) for s in _STRUCTURAL):
                        extra = f"{p.path}: " if p.path and p.path != path else ""
                        problems.append(ConfigProblem(src, loaded.line_of(loc), ".".join(map(str, loc)),
                                                      f"parameter '{path}' does not exist in chip "
                                                      f"'{first_chip}': {extra}{p.message}", p.valid_keys))
            except SimError:
                pass  # the chip itself: reported per point
    for field in ("model", "draft_model"):
        if any(f"{WORKLOAD_PREFIX}{field}" in a.paths for a in loaded.axes):
            continue
        for i, w in enumerate(spec.workloads):
            ref = getattr(w, field)
            if w.kind in ("llm", "serving") and ref:
                _, _, err = res.model(str(ref), w.model_set if field == "model" else None)
                if err is not None:
                    problems.append(ConfigProblem(src, loaded.line_of(("workloads", i, field)),
                                                  f"workloads.{i}.{field}", _short(err)))
    if not any(f"{WORKLOAD_PREFIX}draft_chip" in a.paths for a in loaded.axes):
        for i, w in enumerate(spec.workloads):
            if w.kind == "serving" and w.draft_chip:
                _, _, err = res.chip(str(w.draft_chip), ())
                if err is not None:
                    problems.append(ConfigProblem(src, loaded.line_of(("workloads", i, "draft_chip")),
                                                  f"workloads.{i}.draft_chip", _short(err)))
    if problems:
        raise ConfigError(problems)


def check_spec(loaded: LoadedSpec, extra_set: list[str] | None = None) -> None:
    """What would fail every point (base chip, models, parameter paths), as :func:`expand`
    reports it, without planning the points."""
    _check_up_front(loaded, _Resolver(loaded), tuple(loaded.spec.base_overrides()) + tuple(extra_set or ()))


def expand(loaded: LoadedSpec, extra_set: list[str] | None = None) -> list[Point]:
    """Every point of the sweep, in order: parameter combinations (the last axis varies
    fastest), each with every workload.  Invalid points carry their error and no task."""
    res = _Resolver(loaded)
    spec = loaded.spec
    base = tuple(spec.base_overrides()) + tuple(extra_set or ())
    _check_up_front(loaded, res, base)
    axes = loaded.axes
    combos = itertools.product(*[a.values for a in axes]) if axes else [()]
    points: list[Point] = []
    idx = 0
    for combo in combos:
        params: dict[str, Any] = {}
        for ax, vals in zip(axes, combo):
            for p, v in zip(ax.paths, vals):
                params[p] = v
        chip_value = str(params.get("chip", spec.chip))
        chip_over = base + tuple(f"{p}={format_value(v)}" for p, v in params.items()
                                 if p != "chip" and not p.startswith(WORKLOAD_PREFIX))
        chip, chip_dict, chip_err = res.chip(chip_value, chip_over)
        if chip_err is not None:
            chip_msg = _blame(chip_err, params) if isinstance(chip_err, ConfigError) else f"invalid point: {chip_err}"
        wl_updates = {p[len(WORKLOAD_PREFIX):]: v for p, v in params.items() if p.startswith(WORKLOAD_PREFIX)}
        for w in spec.workloads:
            pt = Point(idx, w.label, chip_value, dict(params), list(chip_over))
            idx += 1
            points.append(pt)
            if chip_err is not None:
                pt.error = chip_msg
                continue
            skip = NOT_FOR[w.kind]
            upd = {k: v for k, v in wl_updates.items() if k not in skip}
            if upd:
                try:
                    wl = WorkloadSpec.model_validate({**w.model_dump(exclude_unset=True), **upd})
                except Exception as exc:  # pydantic ValidationError
                    errs = getattr(exc, "errors", None)
                    if callable(errs):
                        msgs = []
                        for e in errs(include_url=False):
                            key = ".".join(str(x) for x in e["loc"])
                            name = f"{WORKLOAD_PREFIX}{key}" if key else "workload"
                            val = upd.get(key, e.get("input"))
                            m = e["msg"].removeprefix("Value error, ")
                            msgs.append(f"parameter {name} = {format_value(val)}: {m}" if key in upd
                                        else f"{name}: {m}")
                        pt.error = "invalid point: " + "; ".join(msgs)
                    else:  # pragma: no cover
                        pt.error = f"invalid point: {exc}"
                    continue
            else:
                wl = w
            model_dict = draft_dict = None
            if wl.kind in ("llm", "serving"):
                mspec, model_dict, merr = res.model(str(wl.model), wl.model_set)
                if merr is not None:
                    pt.error = f"invalid point: parameter {WORKLOAD_PREFIX}model = {wl.model}: {_short(merr)}"
                    continue
                if wl.kind == "llm" and wl.prompt_len is None:
                    wl = wl.model_copy(update={"prompt_len": default_prompt_len(
                        mspec, wl.phase, wl.new_tokens, wl.draft_tokens, wl.context_len)})
            if wl.kind == "serving" and wl.draft_model:
                _, draft_dict, merr = res.model(str(wl.draft_model))
                if merr is not None:
                    pt.error = (f"invalid point: parameter {WORKLOAD_PREFIX}draft_model = {wl.draft_model}: "
                                f"{_short(merr)}")
                    continue
            draft_chip_dict = None
            if wl.kind == "serving" and wl.draft_chip:
                _, draft_chip_dict, cerr = res.chip(str(wl.draft_chip), ())
                if cerr is not None:
                    pt.error = (f"invalid point: parameter {WORKLOAD_PREFIX}draft_chip = {wl.draft_chip}: "
                                f"{_short(cerr)}")
                    continue
            wparams = wl.params()
            what = {"workload": wparams, "model": model_dict}
            if draft_dict is not None:   # (only then: llm and gemm hashes stay as they were)
                what["draft_model"] = draft_dict
            if draft_chip_dict is not None:
                what["draft_chip"] = draft_chip_dict
            pt.hash = content_hash(chip_dict, what)
            pt.task = {"hash": pt.hash, "chip": chip_dict, "workload": wparams, "model": model_dict,
                       "draft_model": draft_dict, "draft_chip": draft_chip_dict}
    return points
