"""Energy and power of a whole LLM run, split by memory level and unit: these rebuild the
run's op trace and read the (memoised) op results back, so they sit above the trace builder,
the stack lowering and the engine (the per-op tables are :mod:`sim.model.cost.energy`, the
DVFS model :mod:`sim.model.cost.power`)."""
from __future__ import annotations

from collections.abc import Mapping

from sim.model.cost.energy import op_energy_components_pj
from sim.model.cost.power import _mean_clock, op_clock_mhz
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op
from sim.model.stacks import chip_stack, lower_trace
from sim.model.workload.llm import Parallelism, Precision, Trace, build_iteration, phase_iterations
from sim.model.workload.models import default_prompt_len, load_model_spec
from sim.spec.chip import ChipSpec

__all__ = ["llm_energy_components_j", "llm_run_power"]


def _llm_traces(model, phase: str, batch: int, prompt_len: int | None, context_len: int | None, new_tokens: int,
                draft_tokens: int, precision: Precision, parallel: Parallelism, attention: str) -> list[tuple[Trace, float]]:
    """(trace, weight) pairs whose weighted op energies split an LLM run's energy: the
    iterations :func:`sim.apps.inference.run_llm` runs for ``phase``
    (:func:`~sim.model.workload.llm.phase_iterations`), a generation's decode steps stood for
    by its middle one, weighted ``new_tokens`` (``prompt_len`` None: the run's default)."""
    if prompt_len is None:
        prompt_len = default_prompt_len(model, phase, new_tokens, draft_tokens, context_len)
    middle = (new_tokens // 2,) if phase == "generate" else ()
    iterations = phase_iterations(phase, batch, prompt_len, context_len, draft_tokens, middle)
    weights = [1.0, float(new_tokens)] if phase == "generate" else [1.0]
    return [(build_iteration(model, it, precision=precision, attention=attention, parallel=parallel), w)
            for it, w in zip(iterations, weights)]


def llm_energy_components_j(chip: ChipSpec, model, result: Mapping, *, phase: str = "generate", batch: int = 1,
                            prompt_len: int | None = None, context_len=None, new_tokens: int = 128,
                            draft_tokens: int = 0, dtype: str = "bf16", weight_dtype=None, kv_dtype=None,
                            sparsity=None, tensor_parallel: int = 1, pipeline_parallel: int = 1,
                            attention: str | None = None, options=None, model_set=None, **_ignored) -> dict:
    """Energy of an LLM run split by component - each memory level by name (registers,
    SRAMs, DRAM), ``mac``, ``vector``, ``noc``, ``static`` - in joules, summing to the
    run's ``energy_j``.

    ``result`` is :func:`sim.apps.inference.run_llm`'s output for the same arguments (an
    :class:`~sim.apps.results.LlmRun`, or any mapping with its keys: read through the mapping,
    so that a dict built from one, ``{**res, "ops": rows}``, works too).  When its
    op rows carry ``energy_breakdown_pj`` they are summed directly; otherwise the run's ops
    are rebuilt - with the formats and attention lowering the run resolved (its
    ``precision`` and ``attention``) - and their (memoised) results read back.  For ``generate`` the split is
    that of the prefill plus the middle decode step times ``new_tokens`` (the total is
    exact; the split between components is that approximation).
    """
    total_j = float(result.get("energy_j", 0.0))
    ops = result.get("ops") or []
    comps: dict[str, float] = {}
    if phase != "generate" and ops and all("energy_breakdown_pj" in o for o in ops):
        comps = op_energy_components_pj(ops)
    else:

        spec = load_model_spec(model, overrides=model_set)  # the model the run priced, its edits included
        p = result.get("precision") or {}
        precision = Precision(dtype=p.get("dtype", dtype), weight_dtype=p.get("weight_dtype", weight_dtype),
                              kv_dtype=p.get("kv_dtype", kv_dtype), sparsity=p.get("sparsity", sparsity),
                              vector_dtype=p.get("vector_dtype"), quantised_lm_head=p.get("quantised_lm_head", False))
        attention = result.get("attention") or attention or chip.attention_lowering
        parallel = Parallelism(tensor=tensor_parallel, pipeline=pipeline_parallel,
                               collective_algorithm=(result.get("parallel") or {}).get("collective", "ring"))
        options = options or Options()
        stack = chip_stack(chip, result.get("stack"))  # the kernels the run priced
        for trace, weight in _llm_traces(spec, phase, batch, prompt_len, context_len, new_tokens, draft_tokens,
                                         precision, parallel, attention):
            for t in lower_trace(trace, stack):
                r = simulate_op(chip, t.op, t.options(options))
                for k, v in r.energy_breakdown_pj.items():
                    if k != "total":
                        comps[k] = comps.get(k, 0.0) + float(v) * t.repeat * weight
    s = sum(comps.values())
    if s <= 0:
        return {k: 0.0 for k in comps}
    return {k: v / s * total_j for k, v in comps.items()}


def llm_run_power(chip: ChipSpec, model, result: Mapping, *, phase: str = "prefill", batch: int = 1,
                  prompt_len: int | None = None,
                  context_len=None, new_tokens: int = 128, draft_tokens: int = 0, tensor_parallel: int = 1,
                  pipeline_parallel: int = 1, options=None, model_set=None, **_ignored) -> dict:
    """Average power of one chip over an LLM run (:func:`sim.apps.inference.run_llm`'s
    ``result`` for the same arguments: an :class:`~sim.apps.results.LlmRun` or a mapping with its keys), the time-weighted clock its ops ran at and the
    energy per token with that clock: ``{'power_w', 'clock_mhz', 'tdp_w', 'seconds',
    'energy_j', 'energy_per_token_j'}``.

    The ops are rebuilt with the formats and attention lowering the run resolved and
    their (memoised) results read back; for ``generate`` the decode steps are those of the
    middle step, as in :func:`sim.model.cost.energy.llm_energy_components_j`."""

    spec = load_model_spec(model, overrides=model_set)  # the model the run priced, its edits included
    p = result.get("precision") or {}
    precision = Precision(dtype=p.get("dtype", "bf16"), weight_dtype=p.get("weight_dtype"),
                          kv_dtype=p.get("kv_dtype"), sparsity=p.get("sparsity"),
                          vector_dtype=p.get("vector_dtype"), quantised_lm_head=p.get("quantised_lm_head", False))
    attention = result.get("attention") or chip.attention_lowering
    parallel = Parallelism(tensor=tensor_parallel, pipeline=pipeline_parallel,
                           collective_algorithm=(result.get("parallel") or {}).get("collective", "ring"))
    options = options or Options()
    stack = chip_stack(chip, result.get("stack"))  # the kernels the run priced (sim/model/stacks.py)
    seconds = energy = clock_s = 0.0
    seen: list[float] = []
    for trace, weight in _llm_traces(spec, phase, batch, prompt_len, context_len, new_tokens, draft_tokens,
                                     precision, parallel, attention):
        for t in lower_trace(trace, stack):
            if getattr(t.op, "op", None) == "dequant":
                continue  # fused into its consumer, as run_trace does
            r = simulate_op(chip, t.op, t.options(options))
            w = t.repeat * weight
            seconds += r.seconds * w
            energy += r.energy_pj * 1e-12 * w
            seen.append(op_clock_mhz(chip, r))
            clock_s += seen[-1] * r.seconds * w
    tokens = float(result.get("energy_j", 0) / result["energy_per_token_j"]) if result.get("energy_per_token_j") else 0.0
    return {"power_w": energy / seconds if seconds > 0 else 0.0,
            "clock_mhz": _mean_clock(clock_s, seconds, seen, chip),
            "tdp_w": chip.power.tdp_w if getattr(chip, "power", None) is not None else None,
            "seconds": seconds, "energy_j": energy,
            "energy_per_token_j": energy / tokens if tokens else float("nan")}
