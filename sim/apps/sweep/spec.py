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
      - kind: serving                 # kind: serving: request-level serving (sim serve's options)
        model: llama3-8b
        scheduler: chunked_prefill
        rate_per_s: 8
        duration_s: 30
        prompt: {kind: lognormal, median: 256, sigma: 0.8, low: 16, high: 1536}
        slo_ttft_ms: 200
    parameters:                       # Cartesian product of the axes; the last varies fastest
      cores.arrays.0.rows: [64, 128, 256]                           # a list
      memory.levels.vmem.capacity_kib: {from: 1024, to: 16384, num: 5, log: true}
      memory.levels.hbm.data_rate_gbps_per_pin: {from: 3.2, to: 9.6, step: 1.6}
      workload.batch: [1, 16]         # workload.<field> varies a workload field
      workload.rate_per_s: [4, 8, 16] # (of the workloads it applies to: here the serving one)
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
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sim.apps.serving.schedulers import SCHEDULERS
from sim.apps.serving.workload import LengthDist
from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import YamlDoc, parse_override, read_yaml, validate

__all__ = ["WorkloadSpec", "SweepSpec", "Axis", "LengthSpec", "load_sweep_spec", "sweep_spec_from_dict", "METRICS",
           "SERVING_METRICS", "DEFAULT_LLM_METRICS", "DEFAULT_GEMM_METRICS", "DEFAULT_SERVING_METRICS",
           "BREAKDOWN_PREFIXES", "WORKLOAD_PREFIX", "NOT_FOR"]

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
#: what a serving point reports (its run's summary; latencies over finished requests)
SERVING_METRICS: dict[str, str] = {
    **{f"{m}_p{p}_s": f"serving: {what} p{p} (s)" for m, what in (
        ("ttft", "time to first token"), ("tpot", "time per output token (vLLM's definition)"),
        ("e2e", "end-to-end latency"), ("itl", "inter-token latency, weighted by decoding sequences"),
        ("queue", "queueing delay before the first iteration")) for p in (50, 90, 99)},
    "throughput_req_per_s": "serving: finished requests per second",
    "output_tokens_per_s": "serving: generated tokens per second (all replicas)",
    "output_tokens_per_s_per_chip": "serving: generated tokens per second per chip",
    "total_tokens_per_s": "serving: prompt + generated tokens per second",
    "goodput_req_per_s": "serving: finished requests meeting every SLO per second (DistServe); needs an SLO",
    "slo_attainment": "serving: share of requests meeting every SLO (0..1); needs an SLO",
    "kv_utilisation_mean": "serving: KV-cache blocks in use, time-weighted mean (0..1)",
    "kv_utilisation_max": "serving: KV-cache blocks in use, peak (0..1)",
    "preemptions": "serving: sequences preempted (KV cache full)",
    "finished": "serving: requests finished",
    "dropped": "serving: requests dropped (max_queue)",
    "unfinished": "serving: requests not finished when the run stopped (overload)",
    "stable": "serving: 1 when every request finished and none was dropped, else 0",
    "queue_growth_per_s": "serving: growth of the waiting queue over the second half of the arrivals (req/s)",
    "batch_mean": "serving: sequences per iteration, time-weighted mean",
    "mean_in_system": "serving: requests in the system, time-weighted mean",
    "makespan_s": "serving: simulated seconds from the first arrival to the last event",
    "energy_per_output_token_j": "serving: energy per generated token (J; idle time not costed)",
    "cost_per_million_output_tokens": "serving: $ per million generated tokens; needs price_per_chip_hour",
    "chips": "serving: chips of the deployment (replicas x tensor x pipeline parallel)",
    "prefix_hit_rate": "serving: prefix-cache lookups that hit (0..1)",
}
METRICS.update(SERVING_METRICS)
BREAKDOWN_PREFIXES = ("energy_j.", "energy_per_token_j.")
DEFAULT_LLM_METRICS = ("seconds", "tokens_per_s", "mfu", "mbu", "energy_per_token_j", "power_w", "area_mm2",
                       "tokens_per_s_per_w", "tokens_per_s_per_mm2")
DEFAULT_GEMM_METRICS = ("seconds", "tflops", "utilization", "energy_j", "power_w", "area_mm2", "tflops_per_w",
                        "tflops_per_mm2")
DEFAULT_SERVING_METRICS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s",
                           "output_tokens_per_s_per_chip", "goodput_req_per_s", "kv_utilisation_mean", "preemptions",
                           "stable")
_DEFAULT_METRICS = {"llm": DEFAULT_LLM_METRICS, "gemm": DEFAULT_GEMM_METRICS, "serving": DEFAULT_SERVING_METRICS}
WORKLOAD_PREFIX = "workload."
_LLM_ONLY = ("model", "model_set", "phase", "batch", "prompt_len", "context_len", "new_tokens", "draft_tokens", "kv_dtype",
             "tensor_parallel", "pipeline_parallel", "attention", "allow_overflow")
_GEMM_ONLY = ("m", "k", "n", "count", "row_length")
#: the fields of sim serve's options (kind: serving only)
_SERVING_ONLY = ("scheduler", "rate_per_s", "duration_s", "num_requests", "arrival", "cv", "prompt", "output", "seed",
                 "replicas", "prefill_replicas", "router", "max_batch", "token_budget", "timeout_ms", "block_tokens",
                 "kv_capacity_tokens", "memory_utilisation", "preemption", "prefix_caching", "prefix_groups",
                 "prefix_tokens", "speculative_k", "alpha", "draft_model", "kv_link_gb_per_s", "graphs", "max_queue",
                 "drain_s", "slo_ttft_ms", "slo_tpot_ms", "price_per_chip_hour")
#: fields of the llm kind that a serving workload shares (the model and how it is deployed)
_LLM_AND_SERVING = ("model", "model_set", "kv_dtype", "tensor_parallel", "pipeline_parallel", "attention")
#: fields that do not apply to each kind (left alone by a workload.<field> axis, refused in
#: the workload itself, kept out of its hash)
NOT_FOR: dict[str, tuple[str, ...]] = {
    "llm": _GEMM_ONLY + _SERVING_ONLY,
    "gemm": _LLM_ONLY + _SERVING_ONLY,
    "serving": _GEMM_ONLY + tuple(f for f in _LLM_ONLY if f not in _LLM_AND_SERVING) + ("sparsity", "dataflow",
                                                                                         "memory"),
}
#: the choices of serving's named options (sim.apps.serving keeps the same lists; a test checks)
ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity")
GRAPH_POLICIES = ("all", "decode", "none")


def _kinds_of(field: str) -> list[str]:
    return [k for k, bad in NOT_FOR.items() if field not in bad]


class LengthSpec(BaseModel):
    """Prompt or output lengths of a serving workload: ``{kind: fixed, value: N}`` (or just
    ``N``), ``{kind: uniform, low, high}``, ``{kind: lognormal, median, sigma, low, high}``
    (clipped to [low, high])."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["fixed", "uniform", "lognormal"]
    value: Optional[int] = Field(None, ge=1)
    low: int = Field(1, ge=1)
    high: int = Field(1 << 20, ge=1)
    median: Optional[float] = Field(None, gt=0)
    sigma: float = Field(0.5, ge=0)

    @model_validator(mode="after")
    def _fields(self) -> "LengthSpec":
        if self.kind == "fixed" and self.value is None:
            raise ValueError("a fixed length needs 'value'")
        if self.kind == "lognormal" and self.median is None:
            raise ValueError("a lognormal length needs 'median' (and 'sigma', 'low', 'high')")
        if self.high < self.low:
            raise ValueError(f"'high' ({self.high}) is below 'low' ({self.low})")
        return self

    def dist(self):
        """The :class:`sim.apps.serving.workload.LengthDist` it describes."""
        if self.kind == "fixed":
            return LengthDist("fixed", value=int(self.value))
        if self.kind == "uniform":
            return LengthDist("uniform", low=self.low, high=self.high)
        return LengthDist("lognormal", mean_log=math.log(self.median), sigma_log=self.sigma, low=self.low,
                          high=self.high)


class WorkloadSpec(BaseModel):
    """One workload run at every point: an LLM iteration (``kind: llm``, the arguments of
    :func:`sim.apps.inference.run_llm`), one GEMM (``kind: gemm``) or request-level serving
    (``kind: serving``, the options of :func:`sim.apps.serving.serve`)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Optional[str] = None
    kind: Literal["llm", "gemm", "serving"] = "llm"
    # llm
    model: Optional[str] = None
    # edits of the model file, as `sim run --model-set`: ``{max_context: 131072}`` or
    # ``["max_context=131072"]`` (stored as the mapping, so both hash alike)
    model_set: Optional[dict[str, Scalar]] = None
    phase: Literal["prefill", "decode", "generate"] = "decode"
    batch: int = Field(1, ge=1)
    # None: 2,048 tokens, or fewer where the model's max_context needs room (as `sim run`;
    # resolved per point by the planner, so the row and the hash carry the value that ran)
    prompt_len: Optional[int] = Field(None, ge=1)
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
    # serving (sim serve's options; defaults as serve's)
    scheduler: str = "continuous"
    rate_per_s: float = Field(8.0, gt=0, allow_inf_nan=False)
    duration_s: float = Field(60.0, gt=0, allow_inf_nan=False)
    num_requests: Optional[int] = Field(None, ge=1)
    arrival: Literal["poisson", "gamma", "fixed"] = "poisson"
    cv: float = Field(1.0, gt=0, allow_inf_nan=False)
    prompt: Union[int, LengthSpec] = 512
    output: Union[int, LengthSpec] = 128
    seed: int = Field(0, ge=0)
    replicas: int = Field(1, ge=1)
    prefill_replicas: Optional[int] = Field(None, ge=1)
    router: Literal[ROUTERS] = "least_outstanding"  # type: ignore[valid-type]
    max_batch: int = Field(256, ge=1)
    token_budget: Optional[int] = Field(None, ge=1)
    timeout_ms: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    block_tokens: int = Field(16, ge=1)
    kv_capacity_tokens: Optional[int] = Field(None, ge=1)
    memory_utilisation: float = Field(0.9, gt=0, le=1)
    preemption: Literal["recompute", "swap"] = "recompute"
    prefix_caching: bool = False
    prefix_groups: int = Field(0, ge=0)
    prefix_tokens: int = Field(0, ge=0)
    speculative_k: int = Field(0, ge=0)
    alpha: float = Field(0.7, ge=0, le=1)
    draft_model: Optional[str] = None
    kv_link_gb_per_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    graphs: Literal[GRAPH_POLICIES] = "all"  # type: ignore[valid-type]
    max_queue: Optional[int] = Field(None, ge=0)
    drain_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    slo_ttft_ms: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    slo_tpot_ms: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    price_per_chip_hour: Optional[float] = Field(None, ge=0, allow_inf_nan=False)

    @field_validator("scheduler")
    @classmethod
    def _scheduler(cls, v: str) -> str:
        key = str(v).replace("-", "_")
        if key not in SCHEDULERS:
            close = difflib.get_close_matches(key, list(SCHEDULERS), n=1)
            raise ValueError(f"unknown scheduler '{v}'" + (f"; did you mean '{close[0]}'?" if close else "")
                             + f" (schedulers: {', '.join(SCHEDULERS)})")
        return key

    @field_validator("prompt", "output")
    @classmethod
    def _length(cls, v):
        if isinstance(v, int) and v < 1:
            raise ValueError(f"a length must be >= 1 token, got {v}")
        return v

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
        if self.kind in ("llm", "serving") and not self.model:
            raise ValueError(f"an {self.kind} workload needs 'model' (a name from `sim list workloads` or a path)")
        if self.kind == "gemm":
            missing = [f for f in ("m", "k", "n") if getattr(self, f) is None]
            if missing:
                raise ValueError(f"a gemm workload needs {', '.join(missing)}")
        wrong = [f for f in NOT_FOR[self.kind] if f in given]
        if wrong:
            by: dict[str, list[str]] = {}
            for f in wrong:
                by.setdefault(" and ".join(_kinds_of(f)), []).append(f)
            raise ValueError("; ".join(f"{', '.join(fs)}: only for kind: {k}" for k, fs in by.items())
                             + f" (this workload is kind: {self.kind})")
        return self

    @property
    def label(self) -> str:
        if self.name:
            return self.name
        if self.kind == "gemm":
            return f"gemm-{self.m}x{self.k}x{self.n}"
        if self.kind == "serving":
            return f"{Path(str(self.model)).stem}-serving"
        return f"{Path(str(self.model)).stem}-{self.phase}"

    def params(self) -> dict[str, Any]:
        """The fields that define the simulation (everything but the name), for hashing.
        Only the kind's own fields: an llm or gemm point's hash is what it was before serving
        fields existed."""
        d = self.model_dump()
        d.pop("name", None)
        d.pop("model", None)  # the resolved model goes into the hash instead of its name
        d.pop("model_set", None)  # (and so do its edits)
        d.pop("draft_model", None)  # (and the resolved draft model)
        for f in NOT_FOR[self.kind]:
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


def check_metrics(spec: SweepSpec, doc: YamlDoc | None) -> list[str]:
    """The metric names (or patterns) to keep; unknown names are reported with a hint."""
    if spec.metrics is None:
        kinds = {w.kind for w in spec.workloads}
        out: list[str] = []
        for k in ("llm", "gemm", "serving"):
            if k in kinds:
                for m in _DEFAULT_METRICS[k]:
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
