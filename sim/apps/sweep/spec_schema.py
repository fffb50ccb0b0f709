"""The schema of a sweep spec: the pydantic models of the file (:class:`SweepSpec`, its
:class:`WorkloadSpec` items, the serving :class:`LengthSpec`), which workload fields apply to
which kind (:data:`NOT_FOR`), and :func:`format_value` (a value as ``--set`` text).

It is what a spec file *is*, checked field by field; expanding its parameters into axes
(:mod:`sim.apps.sweep.spec_axes`), its metrics (:mod:`sim.apps.sweep.spec_metrics`) and
loading it (:mod:`sim.apps.sweep.spec`) build on it, so it depends on none of them.
:mod:`sim.apps.sweep.spec` re-exports every name.
"""
from __future__ import annotations

import difflib
import math
from pathlib import Path
from typing import Any, Literal, Optional, Union

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from sim.apps.serving.schedulers import SCHEDULERS
from sim.apps.serving.workload import LengthDist
from sim.errors import ConfigError, UnknownNameError
from sim.spec.dtypes import get_format
from sim.spec.loader import parse_override
from sim.spec.spec_base import is_file_safe

Scalar = Union[bool, int, float, str]

WORKLOAD_PREFIX = "workload."
_LLM_ONLY = ("model", "model_set", "phase", "batch", "prompt_len", "context_len", "new_tokens", "draft_tokens", "kv_dtype",
             "tensor_parallel", "pipeline_parallel", "attention", "allow_overflow")
_GEMM_ONLY = ("m", "k", "n", "count", "row_length")
#: the fields of sim serve's options (kind: serving only)
_SERVING_ONLY = ("scheduler", "rate_per_s", "duration_s", "num_requests", "arrival", "cv", "prompt", "output", "seed",
                 "replicas", "prefill_replicas", "router", "max_batch", "token_budget", "timeout_ms", "block_tokens",
                 "kv_capacity_tokens", "memory_utilisation", "preemption", "prefix_caching", "prefix_groups",
                 "prefix_tokens", "speculative_k", "alpha", "draft_model", "draft_chip", "draft_tensor_parallel",
                 "kv_link_gb_per_s", "graphs", "max_queue",
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


#: the largest whole number a sweep parameter may take: what a results table stores exactly
#: (float64's 2^53; m = 10^20 passed, failed its point and then the store, exit 3)
MAX_SWEEP_INT = 2 ** 53


class LengthSpec(BaseModel):
    """Prompt or output lengths of a serving workload: ``{kind: fixed, value: N}`` (or just
    ``N``), ``{kind: uniform, low, high}``, ``{kind: lognormal, median, sigma, low, high}``
    (clipped to [low, high])."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: Literal["fixed", "uniform", "lognormal"]
    value: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    low: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    high: int = Field(1 << 20, ge=1, le=MAX_SWEEP_INT)
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
    batch: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    # None: 2,048 tokens, or fewer where the model's max_context needs room (as `sim run`;
    # resolved per point by the planner, so the row and the hash carry the value that ran)
    prompt_len: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    context_len: Optional[int] = Field(None, ge=0, le=MAX_SWEEP_INT)
    new_tokens: int = Field(128, ge=1, le=MAX_SWEEP_INT)
    draft_tokens: int = Field(0, ge=0, le=MAX_SWEEP_INT)
    kv_dtype: Optional[str] = None
    tensor_parallel: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    pipeline_parallel: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    attention: Optional[Literal["fused", "unfused"]] = None   # None: the chip's attention_lowering
    allow_overflow: bool = False
    # gemm
    m: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    k: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    n: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    count: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    row_length: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
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
    num_requests: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    arrival: Literal["poisson", "gamma", "fixed"] = "poisson"
    cv: float = Field(1.0, gt=0, allow_inf_nan=False)
    prompt: Union[int, LengthSpec] = 512
    output: Union[int, LengthSpec] = 128
    seed: int = Field(0, ge=0, le=MAX_SWEEP_INT)
    replicas: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    prefill_replicas: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    router: Literal[ROUTERS] = "least_outstanding"  # type: ignore[valid-type]
    max_batch: int = Field(256, ge=1, le=MAX_SWEEP_INT)
    token_budget: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    timeout_ms: Optional[float] = Field(None, ge=0, allow_inf_nan=False)
    block_tokens: int = Field(16, ge=1, le=MAX_SWEEP_INT)
    kv_capacity_tokens: Optional[int] = Field(None, ge=1, le=MAX_SWEEP_INT)
    memory_utilisation: float = Field(0.9, gt=0, le=1)
    preemption: Literal["recompute", "swap"] = "recompute"
    prefix_caching: bool = False
    prefix_groups: int = Field(0, ge=0, le=MAX_SWEEP_INT)
    prefix_tokens: int = Field(0, ge=0, le=MAX_SWEEP_INT)
    speculative_k: int = Field(0, ge=0, le=MAX_SWEEP_INT)
    alpha: float = Field(0.7, ge=0, le=1)
    draft_model: Optional[str] = None
    draft_chip: Optional[str] = None        # a chip name or file the draft runs on (default: the target's chips)
    draft_tensor_parallel: int = Field(1, ge=1, le=MAX_SWEEP_INT)
    kv_link_gb_per_s: Optional[float] = Field(None, gt=0, allow_inf_nan=False)
    graphs: Literal[GRAPH_POLICIES] = "all"  # type: ignore[valid-type]
    max_queue: Optional[int] = Field(None, ge=0, le=MAX_SWEEP_INT)
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

    @field_validator("name", "model", "draft_model", "draft_chip", "dataflow")
    @classmethod
    def _not_empty(cls, v):
        # `dataflow: ''` ran the chip's default and `name: ''` labelled the point by its model, as
        # `--dataflow ''` did before the CLI refused it
        if v is not None and not str(v).strip():
            raise ValueError("empty; give a value or leave the key out")
        return v

    @field_validator("dtype", "weight_dtype", "kv_dtype")
    @classmethod
    def _number_format(cls, v):
        # checked when the spec is read: 'bf17' or '' failed every point with "unknown number
        # format" and no file or line
        if v is not None:
            try:
                get_format(v)
            except UnknownNameError as exc:
                raise ValueError(str(exc)) from None
        return v

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
        d.pop("draft_chip", None)   # (and the resolved draft chip)
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

    @field_validator("name")
    @classmethod
    def _plain_name(cls, v):
        # the default results folder is reports/sweeps/NAME: a name must not lead out of it
        if v is not None and not is_file_safe(v):
            raise ValueError(f"a sweep name is a plain folder name (no '/', '\\' or leading '.'), got {v!r}")
        return v

    def base_overrides(self) -> list[str]:
        s = self.set_
        if isinstance(s, dict):
            return [f"{k}={format_value(v)}" for k, v in s.items()]
        return [str(x) for x in s]



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
