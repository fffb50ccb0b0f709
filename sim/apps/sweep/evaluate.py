"""Evaluating one sweep point: plain data in, plain dict out (picklable, importable by
process-pool and Dask workers alike).

:func:`evaluate_point` never raises for a bad point: any :class:`~sim.errors.SimError`
(a workload that does not fit, an impossible mapping...) and any other exception become
the row's ``error`` so that the sweep goes on.
"""
from __future__ import annotations

import math
import os
import sys
from typing import Any

from sim.apps.energy_report import llm_energy_components_j
from sim.apps.inference import run_llm
from sim.apps.serving.simulator import serve
from sim.apps.single_op import check_limits, simulate_gemm
from sim.apps.sweep.spec import SERVING_METRICS, LengthSpec
from sim.errors import SimError
from sim.model.cost.energy import area_report, design_point_metrics, op_design_metrics
from sim.model.engine.lower import Options
from sim.model.engine.simulate import threads_limited
from sim.spec.chip import ChipSpec
from sim.spec.model_spec import ModelSpec

__all__ = ["evaluate_point", "worker_init"]


def _f(v: Any) -> float:
    """A float, NaN for ``None`` (a metric the point's phase or op does not have)."""
    if v is None:
        return float("nan")
    try:
        return float(v)
    except (TypeError, ValueError):
        return float("nan")


def _llm(chip: ChipSpec, model, wl: dict) -> dict[str, float]:
    """A sweep row's metrics, read from the run's typed fields (:class:`~sim.apps.results.LlmRun`)."""
    kw = dict(phase=wl["phase"], batch=wl["batch"], prompt_len=wl["prompt_len"], context_len=wl["context_len"],
              new_tokens=wl["new_tokens"], draft_tokens=wl["draft_tokens"], dtype=wl["dtype"],
              weight_dtype=wl["weight_dtype"], kv_dtype=wl["kv_dtype"], sparsity=wl["sparsity"],
              tensor_parallel=wl["tensor_parallel"], pipeline_parallel=wl["pipeline_parallel"],
              attention=wl["attention"])
    options = Options(dataflow=wl["dataflow"], memory=wl["memory"], fidelity=wl.get("fidelity", "high"))
    res = run_llm(chip, model, options=options, allow_overflow=wl["allow_overflow"], **kw)
    comps = llm_energy_components_j(chip, model, res, options=options, **kw)
    # every metric is a field of the LlmRun: one it lacks fails here, as an AttributeError,
    # not as a NaN further down.  Only what a phase does not have is NaN: ttft_s of a decode
    # step, tpot_s of a prefill, decode_tokens_per_s outside a generation.
    ops = res.ops
    total = sum(o["total_seconds"] for o in ops)
    # the design question is what this chip's buffers and bandwidth make of the op, so
    # sweeps count the class under the simulated traffic, not the op's textbook class
    mem = sum(o["total_seconds"] for o in ops if o.get("traffic_bound") == "memory")
    peak = chip.dtype_peak_flops(wl["dtype"])
    out = {
        "seconds": float(res.seconds), "ttft_s": _f(res.ttft_s), "tpot_s": _f(res.tpot_s),
        "tokens_per_s": float(res.tokens_per_s), "decode_tokens_per_s": _f(res.decode_tokens_per_s),
        "mfu": float(res.mfu), "mbu": float(res.mbu),
        "tflops": float(res.mfu) * peak * res.parallel.chips / 1e12, "peak_tflops": peak / 1e12,
        "flops": float(res.flops), "dram_bytes": float(res.dram_bytes),
        "energy_j": float(res.energy_j), "energy_per_token_j": float(res.energy_per_token_j),
        "memory_bound_share": mem / total if total > 0 else float("nan"),
        "kv_cache_bytes": float(res.kv_cache_bytes), "weight_bytes": float(res.fit.weight_bytes),
        "bytes_per_chip": float(res.fit.bytes_per_chip),
    }
    out.update({k: _f(v) for k, v in design_point_metrics(chip, res, comps).items()})
    return out


#: summary keys of a serving run kept in a sweep row (see spec.SERVING_METRICS), plus energy_j,
#: energy_per_token_j, mfu and mbu under their LLM names
SERVING_KEYS = tuple(SERVING_METRICS) + ("energy_j", "energy_per_token_j", "mfu", "mbu")


def _length(v):
    return v if isinstance(v, int) else LengthSpec.model_validate(v).dist()


def _serving(chip: ChipSpec, model, wl: dict, draft, draft_chip: ChipSpec | None = None) -> dict[str, float]:
    """A serving point: :func:`sim.apps.serving.serve` with the workload's options; the row is
    its summary (latency percentiles over finished requests, throughput, goodput, KV use...)."""
    slos = {}
    if wl["slo_ttft_ms"] is not None:
        slos["ttft"] = wl["slo_ttft_ms"] / 1e3
    if wl["slo_tpot_ms"] is not None:
        slos["tpot"] = wl["slo_tpot_ms"] / 1e3
    res = serve(chip, model, scheduler=wl["scheduler"], rate_per_s=wl["rate_per_s"], duration_s=wl["duration_s"],
                num_requests=wl["num_requests"], arrival=wl["arrival"], cv=wl["cv"], prompt=_length(wl["prompt"]),
                output=_length(wl["output"]), seed=wl["seed"], replicas=wl["replicas"],
                prefill_replicas=wl["prefill_replicas"], router=wl["router"], max_batch=wl["max_batch"],
                token_budget=wl["token_budget"],
                timeout_s=None if wl["timeout_ms"] is None else wl["timeout_ms"] / 1e3,
                block_tokens=wl["block_tokens"], kv_capacity_tokens=wl["kv_capacity_tokens"],
                memory_utilisation=wl["memory_utilisation"], preemption=wl["preemption"],
                prefix_caching=wl["prefix_caching"], prefix_groups=wl["prefix_groups"],
                prefix_tokens=wl["prefix_tokens"], speculative_k=wl["speculative_k"], speculative_alpha=wl["alpha"],
                draft_model=draft, draft_chip=draft_chip, draft_tensor_parallel=wl.get("draft_tensor_parallel", 1),
                kv_link_gb_per_s=wl["kv_link_gb_per_s"], graphs=wl["graphs"],
                max_queue=wl["max_queue"], drain_s=wl["drain_s"], slos=slos,
                price_per_chip_hour=wl["price_per_chip_hour"], dtype=wl["dtype"], weight_dtype=wl["weight_dtype"],
                kv_dtype=wl["kv_dtype"], tensor_parallel=wl["tensor_parallel"],
                pipeline_parallel=wl["pipeline_parallel"], attention=wl["attention"],
                fidelity=wl.get("fidelity", "high"))
    s = res.summary
    out = {k: _f(s.get(k)) for k in SERVING_KEYS}
    out["stable"] = 1.0 if s.get("stable") else 0.0
    out.update(area_report(chip))
    out["dram_gb_per_s"] = chip.memory.dram.peak_bytes_per_s / 1e9
    span = _f(s.get("makespan_s"))
    out["power_w"] = out["energy_j"] / span if span > 0 else float("nan")
    return out


def _gemm(chip: ChipSpec, wl: dict) -> dict[str, float]:
    r = simulate_gemm(chip, m=wl["m"], k=wl["k"], n=wl["n"], count=wl["count"], dtype=wl["dtype"],
                      weight_dtype=wl["weight_dtype"], sparsity=wl["sparsity"], dataflow=wl["dataflow"],
                      memory=wl["memory"], row_length=wl["row_length"], fidelity=wl.get("fidelity", "high"))
    out = {"seconds": r.seconds, "cycles": r.cycles, "utilization": r.utilization, "energy_j": r.energy_pj * 1e-12,
           "dram_bytes": r.dram_bytes, "arithmetic_intensity": r.arithmetic_intensity,
           "memory_bound_share": 1.0 if r.traffic_bound == "memory" else 0.0,
           "peak_tflops": chip.dtype_peak_flops(wl["dtype"]) / 1e12}
    out.update(op_design_metrics(chip, r))
    return {k: _f(v) for k, v in out.items()}


def evaluate_point(task: dict) -> dict:
    """Simulate one point.  ``task``: ``{"hash", "chip": resolved chip dict, "workload":
    workload fields, "model": resolved model dict or None}``.  Returns ``{"hash", "error",
    metric: float, ...}`` (``error`` None on success).  ``task["threads"]`` (optional) caps the
    threads the point's ops are simulated on (:func:`~sim.model.engine.simulate.threads_limited`:
    1 in a process pool's or a Dask cluster's workers)."""
    with threads_limited(task.get("threads")):
        return _evaluate(task)


def _evaluate(task: dict) -> dict:
    row: dict[str, Any] = {"hash": task["hash"], "error": None}
    try:
        chip = ChipSpec.model_validate(task["chip"])
        check_limits(chip)
        wl = task["workload"]
        if wl["kind"] == "gemm":
            row.update(_gemm(chip, wl))
        elif wl["kind"] == "serving":
            draft, draft_chip = task.get("draft_model"), task.get("draft_chip")
            row.update(_serving(chip, ModelSpec.model_validate(task["model"]), wl,
                                ModelSpec.model_validate(draft) if draft else None,
                                ChipSpec.model_validate(draft_chip) if draft_chip else None))
        else:
            row.update(_llm(chip, ModelSpec.model_validate(task["model"]), wl))
    except Exception as exc:  # noqa: BLE001 - a failed point is a row, the sweep goes on
        msg = str(exc).strip() or type(exc).__name__
        row = {"hash": task["hash"],
               "error": msg if isinstance(exc, SimError) else f"internal error: {type(exc).__name__}: {msg}"}
    for k, v in list(row.items()):
        if k not in ("hash", "error") and isinstance(v, float) and math.isinf(v):
            row[k] = float("nan")
    return row


def worker_init() -> None:
    """Process-pool initialiser: die with the parent (Linux).  (The engine is imported with this
    module, before the first point.)"""
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal

            libc = ctypes.CDLL("libc.so.6", use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
            if os.getppid() == 1:  # parent already gone
                os._exit(1)
        except Exception:  # pragma: no cover - best effort
            pass
