"""The metrics a sweep point can report (:data:`METRICS`, :data:`SERVING_METRICS`, the
per-component breakdown prefixes, the default metrics of each workload kind) and the check of
a spec's ``metrics:`` list (:func:`check_metrics`).

The catalogue is read by the planner, the point evaluator and the figures as well as by the
spec loader, so it is kept apart from the spec's schema and its parameter axes;
:mod:`sim.apps.sweep.spec` re-exports every name.
"""
from __future__ import annotations

import difflib
import fnmatch

from sim.apps.sweep.spec_schema import SweepSpec
from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import YamlDoc

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
