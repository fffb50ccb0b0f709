"""LLM inference on a chip: iterations (prefill, decode, generation) → latency, TTFT,
TPOT, tokens/s, MFU, MBU, energy, KV-cache bytes, and a per-op breakdown.

An iteration's trace (:mod:`sim.model.workload.llm`) lists one chip's share of every op; each
distinct op is simulated once (memoised), so identical layers cost nothing.  Ops run one
after another on the chip; with pipeline parallelism the stages run one after another for
one batch (no micro-batch overlap), so latency is the sum over stages.

A generation (prefill, then N decode steps with a growing context) samples the decode
step at a few context lengths and interpolates between them: every op of a decode step is
either independent of the context (projections, MLP, norms) or affine in it (attention
reads a KV cache that grows by one token per step), so linear interpolation between
sampled steps is exact up to the tile rounding of the attention kernel.
"""
from __future__ import annotations

import numbers
import sys
from dataclasses import dataclass
from typing import NamedTuple

from sim.apps.iteration import IterationResult, run_trace, simulate_traces
from sim.apps.results import Fit, LlmRun, PhaseResult, RunParallel, RunPrecision
from sim.errors import MappingError, WorkloadError
from sim.model.engine.lower import Options
from sim.model.mapper.compute import choose_array
from sim.model.stacks import chip_stack
from sim.model.workload.llm import (RUN_PHASES, Iteration, Parallelism, Precision, build_iteration, kv_cache_bytes,
                                    phase_iterations, weight_bytes)
from sim.model.workload.models import default_prompt_len, load_model_spec, run_max_tokens
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format
from sim.spec.model_spec import ModelSpec
from sim.spec.registry import as_chip
from sim.spec.stack_spec import StackSpec

#: decode steps simulated exactly in a generation; the rest are interpolated
GENERATION_SAMPLES = 9


def check_fit(chip: ChipSpec, model, precision, parallel, batch: int, context_tokens: int) -> dict:
    """Weights plus KV cache per chip against the chip's DRAM capacity."""
    chips = parallel.tensor * parallel.pipeline
    w = weight_bytes(model, precision, parallel.tensor)
    kv = kv_cache_bytes(model, context_tokens, batch, precision.kv_format, parallel.tensor)
    cap = chip.memory.dram.capacity_bytes
    per_chip = (w + kv) / chips
    info = {"weight_bytes": w, "kv_cache_bytes": kv, "kv_cache_bytes_per_sequence": kv // max(1, batch),
            "bytes_per_chip": per_chip, "capacity_bytes_per_chip": cap, "chips": chips, "fits": per_chip <= cap}
    return info


#: formats tried, in order, when a run names none: LLM serving's usual bf16 first, then
#: what an accelerator without 16-bit units runs models in (int8-only TPU v1, edge NPUs)
DEFAULT_DTYPES = ("bf16", "fp16", "fp8", "int8", "fp32")


def computes(chip: ChipSpec, fmt: str) -> bool:
    """Whether one of the chip's arrays computes ``fmt`` (natively or widened)."""
    try:
        choose_array(chip, get_format(fmt).rate_class)
        return True
    except MappingError:
        return False


def default_dtype(chip: ChipSpec) -> str:
    """The activation format a run uses when none is given: the first of
    :data:`DEFAULT_DTYPES` that one of the chip's arrays computes (natively or widened)."""
    for d in DEFAULT_DTYPES:
        if computes(chip, d):
            return d
    raise MappingError(f"chip '{chip.name}' has no array for any of {', '.join(DEFAULT_DTYPES)}")


def run_precision(chip: ChipSpec, dtype: str, weight_dtype: str | None = None, kv_dtype: str | None = None,
                  sparsity: str | None = None) -> Precision:
    """The number formats a run in ``dtype`` uses on ``chip`` (``sim run`` and ``sim serve``
    alike): the ones given, except on a chip that has units for ``dtype`` but not for the
    16-bit format kept between GEMMs."""
    precision = Precision(dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype, sparsity=sparsity)
    if not computes(chip, precision.vector_format) and computes(chip, dtype):
        # a chip without matrix units for 16-bit tensors (an int8-only accelerator: TPU v1
        # keeps 8-bit activations in its Unified Buffer, Jouppi et al. 2017) keeps the
        # tensors between GEMMs, its KV cache (unless told otherwise) and its LM head in
        # the GEMM format
        precision = Precision(dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype or dtype, sparsity=sparsity,
                              vector_dtype=dtype, quantised_lm_head=True)
    return precision


def run_llm(chip: ChipSpec | str, model, *, phase: str = "generate", batch: int = 1, prompt_len: int | None = None,
            context_len: int | None = None, new_tokens: int = 128, draft_tokens: int = 0,
            dtype: str | None = None, weight_dtype: str | None = None, kv_dtype: str | None = None,
            sparsity: str | None = None, tensor_parallel: int = 1, pipeline_parallel: int = 1,
            collective: str = "ring",
            attention: str | None = None, stack: str | None = None, options: Options | None = None,
            allow_overflow: bool = False,
            progress: bool = False, model_set=None) -> LlmRun:
    """Simulate a model on a chip.

    ``phase``: ``prefill`` (one forward pass over ``prompt_len`` tokens per sequence, behind
    ``context_len`` cached ones when given: prefix caching), ``decode`` (one step with
    ``context_len`` (default ``prompt_len``) cached tokens; ``draft_tokens`` > 0 verifies
    that many speculative tokens plus one), or ``generate`` (prefill, then ``new_tokens``
    decode steps).  ``prompt_len`` defaults to 2,048 tokens, fewer where the model's
    ``max_context`` needs it (:func:`~sim.model.workload.models.default_prompt_len`; the
    result's ``prompt_len`` says what ran).  ``dtype`` defaults to :func:`default_dtype` (bf16 where the chip has
    units for it).  Raises WorkloadError when weights and KV cache do not fit the chips'
    memory, unless ``allow_overflow``.

    ``model_set`` edits the model before the run, as ``sim run --model-set`` does:
    ``["max_context=131072", "num_layers=16"]`` (values read as YAML) or
    ``{"max_context": 131072}``; dotted keys reach nested values.  ``model`` may be a name,
    a path or a loaded :class:`~sim.spec.model_spec.ModelSpec`.  A bad edit raises
    :class:`~sim.errors.ModelSpecError` (a WorkloadError and a ConfigError) naming the key,
    with a did-you-mean for a misspelt one.

    Returns an :class:`~sim.apps.results.LlmRun` (frozen, typed fields; ``to_dict()`` is the
    JSON of ``sim run --json``; a read-only mapping for code written against the dict this
    returned before).
    """
    chip = as_chip(chip)
    spec = load_model_spec(model, overrides=model_set)
    prompt_len, attention = _check_run_args(chip, spec, phase, batch, prompt_len, context_len, new_tokens,
                                            draft_tokens, attention)
    stack_spec = chip_stack(chip, stack)  # an unknown stack fails here, before any simulation
    if dtype is None:
        dtype = default_dtype(chip)
    precision = run_precision(chip, dtype, weight_dtype, kv_dtype, sparsity)
    parallel = Parallelism(tensor=tensor_parallel, pipeline=pipeline_parallel, collective_algorithm=collective)
    options = options or Options()
    max_ctx = run_max_tokens(phase, prompt_len, context_len, new_tokens, draft_tokens)
    fit = _check_fits(chip, spec, precision, parallel, batch, max_ctx, allow_overflow)
    head = dict(chip=chip.name, model=spec.name, phase=phase, batch=batch,
                precision=RunPrecision(dtype=precision.dtype, weight_dtype=precision.weight_format,
                                       kv_dtype=precision.kv_format, sparsity=sparsity,
                                       vector_dtype=precision.vector_format,
                                       quantised_lm_head=precision.quantised_lm_head),
                parallel=RunParallel(tensor=tensor_parallel, pipeline=pipeline_parallel, collective=collective),
                attention=attention, stack=stack_spec.name, memory=options.memory, fit=Fit.from_dict(fit))
    iterations = _Iterations(chip, spec, precision, attention, parallel, options, dtype, stack_spec,
                             progress=progress and phase != "generate")

    sample_at = _decode_sample_steps(new_tokens) if phase == "generate" else []
    first, *decode_steps = phase_iterations(phase, batch, prompt_len, context_len, draft_tokens, sample_at)
    if decode_steps:
        iterations.prefetch([first, *decode_steps], progress)
    res = iterations.run(first)
    if phase == "prefill":
        return _single(head, res, _phase(res, batch * prompt_len), tokens_processed=batch * prompt_len,
                       tokens_generated=0, ttft_s=res.seconds)
    if phase == "decode":
        tokens = first.new_tokens
        return _single(head, res, _phase(res, tokens), tokens_processed=tokens, tokens_generated=tokens,
                       tpot_s=res.seconds)
    # generate: prefill + new_tokens decode steps
    sampled = _sampled_decode_steps(iterations, dict(zip(sample_at, decode_steps)), new_tokens, progress)
    return _generation(head, res, sampled, batch, prompt_len, new_tokens, chips=tensor_parallel * pipeline_parallel)


def _check_run_args(chip: ChipSpec, spec: ModelSpec, phase: str, batch: int, prompt_len: int | None, context_len: int | None,
                    new_tokens: int, draft_tokens: int, attention: str | None) -> tuple[int, str]:
    """Refuse a bad phase, count or attention lowering; returns ``prompt_len`` and
    ``attention`` with their defaults filled in."""
    if phase not in RUN_PHASES:
        raise WorkloadError(f"phase must be prefill, decode or generate, got {phase!r}")
    if prompt_len is None:
        prompt_len = default_prompt_len(spec, phase, new_tokens, draft_tokens, context_len)
    for name, v in (("batch", batch), ("prompt_len", prompt_len), ("new_tokens", new_tokens)):
        if isinstance(v, bool) or not isinstance(v, numbers.Integral) or v < 1:   # (2.0 broke later)
            raise WorkloadError(f"{name} must be a whole number >= 1, got {v!r}")
    if attention is None:
        attention = chip.attention_lowering
    if attention not in ("fused", "unfused"):
        raise WorkloadError(f"attention must be 'fused' or 'unfused', got {attention!r}")
    return prompt_len, attention


def _check_fits(chip: ChipSpec, spec: ModelSpec, precision: Precision, parallel: Parallelism, batch: int, max_ctx: int,
                allow_overflow: bool) -> dict:
    """:func:`check_fit`'s answer; raise WorkloadError when it does not fit, unless
    ``allow_overflow``."""
    fit = check_fit(chip, spec, precision, parallel, batch, max_ctx)
    if not fit["fits"] and not allow_overflow:
        raise WorkloadError(
            f"{spec.name} does not fit {fit['chips']} x {chip.name}: weights {fit['weight_bytes'] / 1e9:,.1f} GB + "
            f"KV cache {fit['kv_cache_bytes'] / 1e9:,.1f} GB = {fit['bytes_per_chip'] / 1e9:,.1f} GB per chip, but each "
            f"chip has {fit['capacity_bytes_per_chip'] / 1e9:,.1f} GB; use more chips (--tensor-parallel / "
            "--pipeline-parallel), a narrower --weight-dtype / --kv-dtype, or --allow-overflow")
    return fit


@dataclass(frozen=True)
class _Iterations:
    """Everything that stays fixed over one run's iterations, so that each iteration is
    one call: build its trace, simulate it, label its kernels with their phase."""

    chip: ChipSpec
    spec: ModelSpec
    precision: Precision
    attention: str
    parallel: Parallelism
    options: Options
    dtype: str
    stack: StackSpec
    progress: bool

    def trace(self, iteration: Iteration):
        return build_iteration(self.spec, iteration, precision=self.precision, attention=self.attention,
                               parallel=self.parallel)

    def prefetch(self, iterations: list[Iteration], progress: bool) -> None:
        """Simulate the distinct kernels of all ``iterations`` at once (several threads), so
        that :meth:`run` finds them memoised."""
        simulate_traces(self.chip, [self.trace(it) for it in iterations], self.options, self.stack, progress)

    def run(self, iteration: Iteration) -> IterationResult:
        label = iteration.label
        trace = self.trace(iteration)
        res = run_trace(self.chip, trace, self.options, label=label, dtype=self.dtype, progress=self.progress,
                        stack=self.stack)
        for row in res.ops:  # which phase of the run a kernel belongs to (a generate run lists both)
            row["phase"] = "prefill" if label == "prefill" else ("decode" if label.startswith("decode") else "verify")
        return res


def _decode_sample_steps(steps: int) -> list[int]:
    """The decode steps a generation of ``steps`` steps simulates: all of them up to
    :data:`GENERATION_SAMPLES`, else that many spread evenly, first and last included."""
    if steps <= GENERATION_SAMPLES:
        return list(range(steps))
    return sorted({round(i * (steps - 1) / (GENERATION_SAMPLES - 1)) for i in range(GENERATION_SAMPLES)})


def _sampled_decode_steps(iterations: _Iterations, samples: dict[int, Iteration], steps: int,
                          progress: bool) -> dict[int, IterationResult]:
    """Simulate the decode steps a generation of ``steps`` steps samples (``samples``: each
    sampled step's index and iteration), keyed by step index."""
    sampled: dict[int, IterationResult] = {}
    bar = None
    if progress:
        from tqdm import tqdm

        # counts the steps the user asked for: the ones between two sampled steps are
        # interpolated, so they are done when the later sample is
        bar = tqdm(total=steps, desc="decode steps", unit="step", file=sys.stderr,
                   mininterval=0.5 if sys.stderr.isatty() else 10.0)
    done = 0
    for s, iteration in samples.items():
        sampled[s] = iterations.run(iteration)
        if bar is not None:
            bar.update(s + 1 - done)
            done = s + 1
    if bar is not None:
        bar.update(steps - done)
        bar.close()
    return sampled


class _DecodeTotals(NamedTuple):
    """A generation's decode steps summed: the sampled ones as simulated, the rest
    interpolated linearly between their neighbouring samples."""

    seconds: float
    energy_j: float
    flops: float
    dram_bytes: float
    energy_components_j: dict[str, float]


def _decode_totals(sampled: dict[int, IterationResult], steps: int) -> _DecodeTotals:
    dec_seconds = 0.0
    dec_energy = 0.0
    dec_flops = 0.0
    dec_bytes = 0.0
    dec_comps: dict[str, float] = {}
    keys = sorted(sampled)
    for s in range(steps):
        if s in sampled:
            r = sampled[s]
            t, e, f, b = r.seconds, r.energy_j, r.flops, r.dram_bytes
            cs = r.energy_components_j
        else:
            hi = next(k for k in keys if k > s)
            lo = max(k for k in keys if k < s)
            w = (s - lo) / (hi - lo)
            a, c = sampled[lo], sampled[hi]
            t = a.seconds + w * (c.seconds - a.seconds)
            e = a.energy_j + w * (c.energy_j - a.energy_j)
            f = a.flops + w * (c.flops - a.flops)
            b = a.dram_bytes + w * (c.dram_bytes - a.dram_bytes)
            cs = {k: a.energy_components_j.get(k, 0.0) + w * (c.energy_components_j.get(k, 0.0)
                                                              - a.energy_components_j.get(k, 0.0))
                  for k in sorted({*a.energy_components_j, *c.energy_components_j})}
        dec_seconds += t
        dec_energy += e
        dec_flops += f
        dec_bytes += b
        for k, v in cs.items():
            dec_comps[k] = dec_comps.get(k, 0.0) + v
    return _DecodeTotals(dec_seconds, dec_energy, dec_flops, dec_bytes, dec_comps)


def _generation(head: dict, pre: IterationResult, sampled: dict[int, IterationResult], batch: int,
                prompt_len: int, steps: int, chips: int) -> LlmRun:
    """A generation's result: the prefill plus ``steps`` decode steps (from ``sampled``)."""
    dec = _decode_totals(sampled, steps)
    dec_seconds, dec_flops, dec_bytes = dec.seconds, dec.flops, dec.dram_bytes
    keys = sorted(sampled)
    total_s = pre.seconds + dec_seconds
    generated = batch * steps
    energy = pre.energy_j + dec.energy_j
    # the prefill's shares and the decode steps' (those of the middle sampled step),
    # weighted by the time each phase takes
    mid = _extrapolated_shares(sampled[keys[len(keys) // 2]].ops)
    shares = {k: (v * pre.seconds + mid[k] * dec_seconds) / total_s if total_s > 0 else 0.0
              for k, v in _extrapolated_shares(pre.ops).items()}
    comps = {k: pre.energy_components_j.get(k, 0.0) + dec.energy_components_j.get(k, 0.0)
             for k in sorted({*pre.energy_components_j, *dec.energy_components_j})}
    return LlmRun(
        **head, seconds=total_s, ttft_s=pre.seconds, tpot_s=dec_seconds / steps,
        tokens_per_s=generated / total_s if total_s > 0 else 0.0,
        decode_tokens_per_s=generated / dec_seconds if dec_seconds > 0 else 0.0,
        prefill_tokens_per_s=batch * prompt_len / pre.seconds if pre.seconds > 0 else 0.0,  # prompt tokens per s (was 0.0: the trace carries no new_tokens)
        energy_j=energy,
        # per generated token, as tokens_per_s counts them; the prompt's tokens are in
        # tokens_processed and energy_per_processed_token_j
        energy_per_token_j=energy / generated,
        energy_per_processed_token_j=energy / (batch * (prompt_len + steps)),
        tokens_generated=generated, tokens_processed=batch * (prompt_len + steps),
        flops=pre.flops + dec_flops, dram_bytes=pre.dram_bytes + dec_bytes,
        mfu=(pre.flops + dec_flops) / total_s / (pre.peak_flops * chips) if total_s > 0 else 0.0,
        mbu=(pre.dram_bytes + dec_bytes) / total_s / (pre.peak_bytes_per_s * chips) if total_s > 0 else 0.0,
        new_tokens=steps, prompt_len=prompt_len, decode_steps_simulated=len(sampled),
        extrapolated_share=shares["extrapolated_share"],
        unsteady_extrapolated_share=shares["unsteady_extrapolated_share"],
        energy_components_j=_ordered(comps, energy),
        prefill=_phase(pre, batch * prompt_len), decode_first=_phase(sampled[keys[0]], batch),
        decode_last=_phase(sampled[keys[-1]], batch),
        ops=pre.ops + sampled[keys[-1]].ops)


def _extrapolated_shares(ops: list[dict]) -> dict[str, float]:
    """Shares of an iteration's time that come from extrapolated kernels, and from those
    whose samples never reached a steady state (flagged, not hidden)."""
    total = sum(o["total_seconds"] for o in ops)
    ex = sum(o["total_seconds"] for o in ops if o.get("extrapolated"))
    unsteady = sum(o["total_seconds"] for o in ops if o.get("extrapolated") and o.get("steady") is False)
    return {"extrapolated_share": ex / total if total > 0 else 0.0,
            "unsteady_extrapolated_share": unsteady / total if total > 0 else 0.0}


def _phase(res: IterationResult, tokens: int) -> PhaseResult:
    return PhaseResult(**_extrapolated_shares(res.ops),
                       seconds=res.seconds, tokens=tokens, tokens_per_s=tokens / res.seconds if res.seconds else 0.0,
                       mfu=res.mfu, mbu=res.mbu, energy_j=res.energy_j,
                       energy_per_token_j=res.energy_j / tokens if tokens else 0.0, flops=res.flops,
                       dram_bytes=res.dram_bytes)


def _ordered(comps: dict[str, float], total_j: float) -> dict[str, float]:
    """Energy components largest first, scaled to sum to the run's energy (they do up to
    rounding: the kernels' energies are the sums of their breakdowns); empty if none."""
    s = sum(comps.values())
    if s <= 0:
        return {}
    return {k: v / s * total_j for k, v in sorted(comps.items(), key=lambda kv: -kv[1])}


def _single(head: dict, res: IterationResult, ph: PhaseResult, **kw) -> LlmRun:
    """A run of one iteration (a prefill or a decode step)."""
    return LlmRun(**head, seconds=ph.seconds, tokens_per_s=ph.tokens_per_s, flops=ph.flops,
                  dram_bytes=ph.dram_bytes, energy_j=ph.energy_j, energy_per_token_j=ph.energy_per_token_j,
                  mfu=ph.mfu, mbu=ph.mbu, extrapolated_share=ph.extrapolated_share,
                  unsteady_extrapolated_share=ph.unsteady_extrapolated_share,
                  energy_components_j=_ordered(res.energy_components_j, ph.energy_j), ops=res.ops, **kw)


# ----------------------------------------------------------------------------- CLI


