"""Sweep specs: a base chip, one or more workloads, parameters to vary and metrics to keep.

A spec is YAML (``sim sweep SPEC.yaml``) or the same structure as a Python dict::

    name: llama3-8b-decode
    chip: npu_128x128                 # a name (sim list chips) or a path (relative to this file)
    set:                              # overrides applied to every point (like --set)
      memory.levels.hbm.capacity_gib: 24
    workloads:                        # every point runs every workload
      - model: llama3-8b              # kind: llm (default): run_llm's arguments
        model_set: {max_context: 8192}  # optional edits of the model (like `sim run --model-set`)
        phase: decode
        batch: 16
        context_len: 2048
        dtype: fp8
      - kind: gemm                    # kind: gemm: one GEMM (m, k, n, count, dtype...)
        m: 2048
        k: 4096
        n: 4096
    parameters:                       # Cartesian product of the axes; the last varies fastest
      cores.arrays.0.rows: [64, 128, 256]                           # a list
      memory.levels.vmem.capacity_kib: {from: 1024, to: 16384, num: 5, log: true}
      memory.levels.hbm.data_rate_gbps_per_pin: {from: 3.2, to: 9.6, step: 1.6}
      workload.batch: [1, 16]         # workload.<field> varies a workload field
      zip:                            # axes varied together: one axis of the product
        cores.arrays.0.cols: [64, 128, 256]
        cores.cores.count: [8, 4, 1]
    metrics: [tokens_per_s, energy_per_token_j, area_mm2, "energy_per_token_j.*"]

Parameter paths are the dotted paths of ``--set`` (list items by index or by ``name``);
``chip`` varies the base chip itself.  A range is ``{from, to, step}`` (``to`` included
when it falls on the grid) or ``{from, to, num}`` (evenly spaced; ``log: true`` for
geometric spacing); whole-number ends give whole numbers.  ``zip`` holds one mapping of
axes of equal length, or a list of such mappings.

Every mistake is reported with the spec file, line and key (:class:`~sim.errors.ConfigError`).
"""
from __future__ import annotations

import difflib
import fnmatch
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import YamlDoc, parse_override, read_yaml, validate

__all__ = ["WorkloadSpec", "SweepSpec", "Axis", "load_sweep_spec", "sweep_spec_from_dict", "METRICS",
           "DEFAULT_LLM_METRICS", "DEFAULT_GEMM_METRICS", "BREAKDOWN_PREFIXES", "WORKLOAD_PREFIX"]

Scalar = Union[bool, int, float, str]

#: every metric a point reports (``energy_j.<component>`` and ``energy_per_token_j.<component>``
#: columns come in addition: one per memory level and for mac, vector, noc, static)
METRICS: dict[str, str] = {
    "seconds": "latency of the workload (s): one prefill / decode step / whole generation / GEMM",
    "ttft_s": "time to first token (s): prefill and generate",
    "tpot_s": "time per output token (s): decode and generate",
    "tokens_per_s": "tokens per second (prefill: prompt tokens; decode/generate: generated tokens)",
    "decode_tokens_per_s": "generate: generated tokens per second of decoding",
    "mfu": "model FLOPs utilisation (0..1)",
    "mbu": "memory bandwidth utilisation (0..1)",
    "utilization": "GEMM: MAC utilisation of the chip's arrays (0..1)",
    "cycles": "GEMM: cycles",
    "tflops": "achieved TFLOP/s",
    "peak_tflops": "peak TFLOP/s of the chip for the workload's dtype",
    "arithmetic_intensity": "FLOP per compulsory DRAM byte (each operand moved once)",
    "flops": "LLM: FLOPs of the workload (all chips)",
    "dram_bytes": "DRAM bytes moved by the workload",
    "memory_bound_share": "share of the time spent in ops that are memory-bound with the DRAM traffic simulated (0..1)",
    "energy_j": "energy of the workload (J)",
    "energy_per_token_j": "energy per token (J)",
    "power_w": "average power (W) = energy / latency",
    "tokens_per_j": "tokens per joule",
    "tokens_per_s_per_w": "throughput per watt (tokens/s/W, = tokens per joule)",
    "tokens_per_s_per_mm2": "throughput per area (tokens/s/mm²)",
    "tflops_per_w": "GEMM: TFLOP/s per watt",
    "tflops_per_mm2": "GEMM: TFLOP/s per mm²",
    "area_mm2": "chip area (mm²): MACs + SRAM + other",
    "mac_area_mm2": "area of the MAC arrays (mm²)",
    "sram_area_mm2": "area of the on-chip SRAM (mm²)",
    "other_area_mm2": "other stated area (mm²)",
    "pes": "processing elements (MAC units) on the chip",
    "sram_mib": "on-chip SRAM (MiB), all levels and cores",
    "mac_um2_per_pe": "area per PE (µm²)",
    "sram_mm2_per_mib": "SRAM area per MiB (mm²)",
    "dram_gb_per_s": "peak DRAM bandwidth (GB/s)",
    "kv_cache_bytes": "KV-cache bytes (all sequences)",
    "weight_bytes": "weight bytes",
    "bytes_per_chip": "weights + KV cache per chip (bytes)",
}
BREAKDOWN_PREFIXES = ("energy_j.", "energy_per_token_j.")
DEFAULT_LLM_METRICS = ("seconds", "tokens_per_s", "mfu", "mbu", "energy_per_token_j", "power_w", "area_mm2",
                       "tokens_per_s_per_w", "tokens_per_s_per_mm2")
DEFAULT_GEMM_METRICS = ("seconds", "tflops", "utilization", "energy_j", "power_w", "area_mm2", "tflops_per_w",
                        "tflops_per_mm2")
WORKLOAD_PREFIX = "workload."
_LLM_ONLY = ("model", "model_set", "phase", "batch", "prompt_len", "context_len", "new_tokens", "draft_tokens", "kv_dtype",
             "tensor_parallel", "pipeline_parallel", "attention", "allow_overflow")
_GEMM_ONLY = ("m", "k", "n", "count", "row_length")


class WorkloadSpec(BaseModel):
    """One workload run at every point: an LLM iteration (``kind: llm``, the arguments of
    :func:`sim.apps.inference.run_llm`) or one GEMM (``kind: gemm``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Optional[str] = None
    kind: Literal["llm", "gemm"] = "llm"
    # llm
    model: Optional[str] = None
    # edits of the model file, as `sim run --model-set`: ``{max_context: 131072}`` or
    # ``["max_context=131072"]`` (stored as the mapping, so both hash alike)
    model_set: Optional[dict[str, Scalar]] = None
    phase: Literal["prefill", "decode", "generate"] = "decode"
    batch: int = Field(1, ge=1)
    prompt_len: int = Field(2048, ge=1)
    context_len: Optional[int] = Field(None, ge=0)
    new_tokens: int = Field(128, ge=1)
    draft_tokens: int = Field(0, ge=0)
    kv_dtype: Optional[str] = None
    tensor_parallel: int = Field(1, ge=1)
    pipeline_parallel: int = Field(1, ge=1)
    attention: Optional[Literal["fused", "unfused"]] = None   # None: the chip's attention_lowering
    allow_overflow: bool = False
    # gemm
    m: Optional[int] = Field(None, ge=1)
    k: Optional[int] = Field(None, ge=1)
    n: Optional[int] = Field(None, ge=1)
    count: int = Field(1, ge=1)
    row_length: Optional[int] = Field(None, ge=1)
    # both
    dtype: str = "bf16"
    weight_dtype: Optional[str] = None
    sparsity: Optional[Literal["2:4", "unstructured"]] = None
    dataflow: Optional[str] = None
    memory: Literal["modeled", "ideal"] = "modeled"
    fidelity: Literal["high", "fast"] = "high"

    @field_validator("model_set", mode="before")
    @classmethod
    def _model_set_list(cls, v):
        if isinstance(v, (list, tuple)):
            out = {}
            for item in v:
                if not isinstance(item, str):
                    raise ValueError(f"expected 'key=value' strings, got {item!r}")
                try:
                    key, value = parse_override(item, "model_set")
                except ConfigError as exc:
                    raise ValueError("; ".join(p.message for p in exc.problems) + f" (got {item!r})") from None
                out[key] = value
            return out
        return v

    @model_validator(mode="after")
    def _kind_fields(self) -> "WorkloadSpec":
        given = self.model_fields_set
        if self.kind == "llm":
            if not self.model:
                raise ValueError("an llm workload needs 'model' (a name from `sim list workloads` or a path)")
            wrong = [f for f in _GEMM_ONLY if f in given]
            if wrong:
                raise ValueError(f"{', '.join(wrong)}: only for kind: gemm")
        else:
            missing = [f for f in ("m", "k", "n") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"a gemm workload needs {', '.join(missing)}")
            wrong = [f for f in _LLM_ONLY if f in given]
            if wrong:
                raise ValueError(f"{', '.join(wrong)}: only for kind: llm")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind == "gemm":
            return f"gemm-{self.m}x{self.k}x{self.n}"
        return f"{Path(str(self.model)).stem}-{self.phase}"

    def params(self) -> dict[str, Any]:
        """The fields that define the simulation (everything but the name), for hashing."""
        d = self.model_dump()
        d.pop("name", None)
        d.pop("model", None)  # the resolved model goes into the hash instead of its name
        d.pop("model_set", None)  # (and so do its edits)
        if self.kind == "llm":
            for f in _GEMM_ONLY:
                d.pop(f, None)
        else:
            for f in _LLM_ONLY:
                d.pop(f, None)
        return d


class SweepSpec(BaseModel):
    """A sweep (see the module docstring for the format)."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    schema_version: Literal[1] = 1
    name: Optional[str] = None
    description: str = ""
    chip: str
    set_: Union[dict[str, Any], list[str]] = Field(default_factory=dict, alias="set")
    workloads: list[WorkloadSpec] = Field(min_length=1)
    parameters: dict[str, Any] = Field(default_factory=dict)
    metrics: Optional[list[str]] = None

    def base_overrides(self) -> list[str]:
        s = self.set_
        if isinstance(s, dict):
            return [f"{k}={format_value(v)}" for k, v in s.items()]
        return [str(x) for x in s]


# --------------------------------------------------------------------------- axes


@dataclass(frozen=True)
class Axis:
    """One axis of the product: one path, or several varied together (a zip group)."""

    paths: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]   # per step: one value per path
    loc: tuple[Any, ...]                  # where it is in the spec (for error lines)

    def __len__(self) -> int:
        return len(self.values)


def format_value(v: Any) -> str:
    """A value as ``--set`` text that the loader reads back as the same value."""
    import json

    if isinstance(v, bool) or v is None:
        return json.dumps(v)
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, (list, tuple, dict)):
        return json.dumps(v)
    return json.dumps(str(v))


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
        n = int(math.floor((b - a) / s + 1e-9)) + 1
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
        except ValueError as exc:
            problems.append(ConfigProblem(source, line(loc), ".".join(map(str, loc)), str(exc)))
            continue
        axes.append(Axis((key,), tuple((v,) for v in vals), loc))
    if problems:
        raise ConfigError(problems)
    return axes


def check_metrics(spec: SweepSpec, doc: YamlDoc | None) -> list[str]:
    """The metric names (or patterns) to keep; unknown names are reported with a hint."""
    if spec.metrics is None:
        kinds = {w.kind for w in spec.workloads}
        out: list[str] = []
        for k in ("llm", "gemm"):
            if k in kinds:
                for m in (DEFAULT_LLM_METRICS if k == "llm" else DEFAULT_GEMM_METRICS):
                    if m not in out:
                        out.append(m)
        return out
    problems = []
    for i, m in enumerate(spec.metrics):
        if m in METRICS or any(m.startswith(p) and len(m) > len(p) for p in BREAKDOWN_PREFIXES):
            continue
        if any(ch in m for ch in "*?[") and (fnmatch.filter(list(METRICS), m)
                                             or any(m.startswith(p) for p in BREAKDOWN_PREFIXES)):
            continue
        close = difflib.get_close_matches(m, list(METRICS), n=1)
        problems.append(ConfigProblem(
            doc.source if doc else "<sweep spec>", doc.line_of(("metrics", i)) if doc else 0, f"metrics.{i}",
            f"unknown metric '{m}'" + (f"; did you mean '{close[0]}'?" if close else "")
            + f" (metrics: {', '.join(METRICS)}, energy_j.<component>, energy_per_token_j.<component>; "
              "patterns such as 'energy_per_token_j.*' are allowed)"))
    if problems:
        raise ConfigError(problems)
    return list(spec.metrics)


@dataclass(frozen=True)
class LoadedSpec:
    spec: SweepSpec
    doc: Optional[YamlDoc]
    base_dir: Path
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...]

    @property
    def name(self) -> str:
        if self.spec.name:
            return self.spec.name
        if self.doc is not None and self.doc.source and not self.doc.source.startswith("<"):
            return Path(self.doc.source.split(" (")[0]).stem
        return "sweep"

    def line_of(self, loc) -> int:
        return self.doc.line_of(loc) if self.doc is not None else 0

    @property
    def source(self) -> str:
        return self.doc.source if self.doc is not None else "<sweep spec>"


#: the most points a sweep may have (``SIM_SWEEP_MAX_POINTS`` changes it); checked before
#: anything is planned, so a mistaken range never costs memory
MAX_POINTS = int(__import__("os").environ.get("SIM_SWEEP_MAX_POINTS", "100000"))


def _check_size(spec: SweepSpec, doc: YamlDoc | None, axes: list) -> None:
    total = max(1, len(spec.workloads))
    for ax in axes:
        total *= max(1, len(ax.values))
    if total <= MAX_POINTS:
        return
    source = doc.source if doc is not None else "<sweep spec>"
    line = doc.line_of(("parameters",)) if doc is not None else 0
    sizes = " x ".join(f"{len(ax.values):,} ({'+'.join(ax.paths)})" for ax in axes)
    raise ConfigError(ConfigProblem(
        source, line, "parameters",
        f"the sweep has {total:,} points ({len(spec.workloads)} workload(s) x {sizes}), above the limit of "
        f"{MAX_POINTS:,}; narrow the ranges or split the sweep (SIM_SWEEP_MAX_POINTS raises the limit)"))


def _finish(spec: SweepSpec, doc: YamlDoc | None, base_dir: Path) -> LoadedSpec:
    axes = parse_axes(spec, doc)
    _check_size(spec, doc, axes)
    metrics = check_metrics(spec, doc)
    names: dict[str, int] = {}
    problems = []
    for i, w in enumerate(spec.workloads):
        if w.label in names:
            problems.append(ConfigProblem(doc.source if doc else "<sweep spec>",
                                          doc.line_of(("workloads", i)) if doc else 0, f"workloads.{i}",
                                          f"two workloads are called '{w.label}'; give them different 'name's"))
        names[w.label] = i
    if problems:
        raise ConfigError(problems)
    return LoadedSpec(spec, doc, base_dir, tuple(axes), tuple(metrics))


def load_sweep_spec(path: str | Path) -> LoadedSpec:
    """Read and check a sweep spec file (errors name the file, line and key)."""
    doc = read_yaml(path)
    spec = validate(SweepSpec, doc)
    return _finish(spec, doc, Path(path).resolve().parent)


def sweep_spec_from_dict(data: dict, base_dir: str | Path = ".") -> LoadedSpec:
    """A spec given as a Python dict (same structure as the YAML)."""
    doc = YamlDoc(data, {(): 0}, "<sweep spec>")
    spec = validate(SweepSpec, doc)
    return _finish(spec, doc, Path(base_dir).resolve())
