"""One iteration on a chip: every kernel of a trace (one chip's share of a forward pass, as the
chip's software stack launches it) simulated and summed into an :class:`IterationResult`.
:mod:`sim.apps.inference` builds prefill, decode and generation runs from these; ``sim
validate``'s mixed-batch cases and ``sim serve``'s exact iterations price steps the same way."""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass, field

from sim.ir.ops import Attention
from sim.ir.results import OpResult, summed_work
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op, simulate_ops
from sim.model.stacks import chip_stack, lower_trace
from sim.model.varlen_attention import varlen_prefill
from sim.spec.chip import ChipSpec
from sim.spec.stack_spec import StackSpec

__all__ = ["IterationResult", "run_trace", "simulate_traces"]


@dataclass
class IterationResult:
    """One iteration (one forward pass) of a model on a chip (or a group of chips)."""

    label: str
    seconds: float
    new_tokens: int
    flops: float
    dram_bytes: float
    energy_j: float
    ops: list[dict]
    chips: int
    peak_flops: float
    peak_bytes_per_s: float
    #: energy_j by memory level and unit, from the kernels' energy breakdowns
    energy_components_j: dict = field(default_factory=dict)

    @property
    def tokens_per_s(self) -> float:
        return self.new_tokens / self.seconds if self.seconds > 0 else 0.0

    @property
    def mfu(self) -> float:
        return self.flops / self.seconds / (self.peak_flops * self.chips) if self.seconds > 0 else 0.0

    @property
    def mbu(self) -> float:
        return self.dram_bytes / self.seconds / (self.peak_bytes_per_s * self.chips) if self.seconds > 0 else 0.0

    def dataframe(self):
        import pandas as pd

        return pd.DataFrame(self.ops)

    def _repr_html_(self) -> str:
        head = (f"<b>{self.label}</b>: {self.seconds * 1e3:.3f} ms, {self.tokens_per_s:,.1f} tokens/s, "
                f"MFU {self.mfu:.1%}, MBU {self.mbu:.1%}<br>")
        return head + self.dataframe()._repr_html_()


def run_trace(chip: ChipSpec, trace, options: Options | None = None, label: str = "", dtype: str = "bf16",
              progress: bool = False, stack=None) -> IterationResult:
    """Simulate every op of ``trace`` on ``chip`` (one chip's share; collectives included),
    as the kernels ``stack`` (default: the chip's ``software_stack``) launches for them
    (:func:`sim.model.stacks.lower_trace`: the same lowering ``sim validate`` prices).

    A stack whose prefill attention is varlen (``attention.prefill_varlen``) runs every prompt
    chunk of a layer in ONE kernel: those attention kernels become one row ``attn.core.varlen``
    (one launch per layer), timed by :func:`sim.model.varlen_attention.varlen_prefill` as
    ``sim serve`` times them (:meth:`~sim.apps.serving.latency.LatencyModel.varlen_prefill_attention`),
    its FLOPs, DRAM bytes and energy the chunks' own kernels' (:func:`_prompt_attention_groups`)."""
    options = options or Options()
    rows: list[dict] = []
    total = 0.0
    flops = 0.0
    dram = 0.0
    energy = 0.0
    comps: dict[str, float] = {}
    # dequantisation ops are skipped by the lowering: they run on the vector unit inside
    # the GEMM (or attention) that consumes the narrow operand (sim.model.engine.lower)
    stack_spec = chip_stack(chip, stack)
    items = lower_trace(trace, stack_spec)
    groups = _prompt_attention_groups(items, trace) if stack_spec.attention.prefill_varlen else {}
    grouped = {i for g in groups.values() for i in g}
    # every distinct kernel first, several at once (sim.model.engine.simulate.simulate_ops);
    # the loop below then reads them in trace order
    answers = _simulate_all(chip, _questions(items, options), progress, label or "kernels")
    for i, t in enumerate(items):
        if i in grouped:
            if i not in groups:     # priced with the first prompt attention of its layer
                continue
            r, extra = _varlen_result(chip, stack_spec, [items[j] for j in groups[i]], options)
        else:
            r, extra = answers[i], {}
        rep = t.repeat
        total += r.seconds * rep
        flops += r.flops * rep
        dram += r.dram_bytes * rep
        energy += r.energy_pj * rep
        for k, v in (r.energy_breakdown_pj or {}).items():
            if k != "total":
                comps[k] = comps.get(k, 0.0) + float(v) * rep
        rows.append({"op": r.name, "source_op": t.source, "kind": r.kind, "block": t.block, "layer": t.layer, "stage": t.stage,
                     "repeat": rep, "seconds": r.seconds, "total_seconds": r.seconds * rep,
                     "flops": r.flops, "dram_bytes": r.dram_bytes, "arithmetic_intensity": r.arithmetic_intensity,
                     "dram_intensity": r.dram_intensity, "bound": r.bound, "traffic_bound": r.traffic_bound,
                     "utilization": r.utilization, "energy_pj": r.energy_pj,
                     "achieved_dram_bytes_per_s": r.achieved_dram_bytes_per_s, "cycles": r.cycles,
                     "stall_cycles": r.stall_cycles, "roofline_seconds": r.roofline_cycles / chip.clock_hz,
                     # how the engine got the time: simulated in full, or extrapolated from
                     # shortened copies (steady: whether consecutive samples agreed)
                     "extrapolated": bool(ex := (r.details or {}).get("extrapolated")),
                     "steady": (ex.get("steady") if ex else None), **extra})
    for row in rows:
        row["share"] = row["total_seconds"] / total if total > 0 else 0.0
    meta = getattr(trace, "meta", {}) or {}
    new_tokens = int(meta.get("new_tokens", 0) or 0)
    par = meta.get("parallel") or {}
    chips = int(par.get("tensor", 1)) * int(par.get("pipeline", 1)) if isinstance(par, dict) else 1
    scale = 1e-12 * (chips if chips > 1 else 1)
    return IterationResult(label=label or meta.get("label", ""), seconds=total, new_tokens=new_tokens,
                           flops=flops * (chips if chips > 1 else 1), dram_bytes=dram * (chips if chips > 1 else 1),
                           energy_j=energy * 1e-12 * (chips if chips > 1 else 1), ops=rows, chips=chips,
                           peak_flops=chip.dtype_peak_flops(dtype), peak_bytes_per_s=chip.memory.dram.peak_bytes_per_s,
                           energy_components_j={k: v * scale for k, v in comps.items()})


def _questions(items, options: Options) -> list[tuple]:
    """(op, options) of each lowered kernel: what :func:`simulate_op` is asked for it."""
    return [(t.op, t.options(options)) for t in items]


def simulate_traces(chip: ChipSpec, traces, options: Options | None = None, stack=None, progress: bool = False,
                    label: str = "kernels") -> None:
    """Simulate every distinct kernel of ``traces`` at once, on several threads
    (:func:`~sim.model.engine.simulate.simulate_ops`), so that :func:`run_trace` on each
    then finds them memoised: a generation's prefill and sampled decode steps share one pool
    instead of one per step."""
    options = options or Options()
    stack_spec = chip_stack(chip, stack)
    _simulate_all(chip, [q for trace in traces for q in _questions(lower_trace(trace, stack_spec), options)],
                  progress, label)


def _simulate_all(chip: ChipSpec, questions: list[tuple], progress: bool, label: str) -> list[OpResult]:
    """:func:`~sim.model.engine.simulate.simulate_ops` of ``questions``, with a progress bar
    over the distinct ones when asked."""
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(set(questions)), desc=label, unit="kernel", leave=False, file=sys.stderr,
                   mininterval=0.5 if sys.stderr.isatty() else 10.0)
    try:
        return simulate_ops(chip, questions, done=bar.update if bar is not None else None)
    finally:
        if bar is not None:
            bar.close()


def _prompt_attention_groups(items, trace) -> dict[int, list[int]]:
    """The prompt chunks' fused attention kernels of each layer body of lowered ``items``, by the
    index of the body's first: kernels of an Attention with more than one query row, except a
    group whose sequences all verify drafted tokens (every new token with logits: ``sim serve``
    prices those with the decoding sequences)."""
    meta = getattr(trace, "meta", {}) or {}
    kinds: dict[tuple[int, int], set] = {}
    for n, p, logits in meta.get("iteration") or ():
        kinds.setdefault((int(n), int(p)), set()).add(logits is not None and logits == n)
    verify = {k for k, v in kinds.items() if v == {True}}
    bodies: dict[tuple, list[int]] = {}
    for i, k in enumerate(items):
        op = k.op
        if isinstance(op, Attention) and op.fused and op.q_len > 1 and \
                (op.q_len, op.kv_len - op.q_len) not in verify:
            bodies.setdefault((k.layer, k.repeat, k.stage), []).append(i)
    return {g[0]: g for g in bodies.values()}


def _varlen_result(chip: ChipSpec, stack: StackSpec, group, options: Options) -> tuple[OpResult, dict]:
    """One varlen launch for the prompt-chunk attention kernels ``group`` of one layer: its time
    from :func:`~sim.model.varlen_attention.varlen_prefill` over their chunks (in trace order, each
    kernel's ``batch`` sequences), its work (FLOPs, DRAM bytes, energy) theirs, as
    :meth:`~sim.apps.serving.latency.LatencyModel.varlen_prefill_attention` keeps it."""
    rs = [simulate_op(chip, k.op, k.options(options)) for k in group]
    op = group[0].op
    chunks = [(k.op.q_len, k.op.kv_len - k.op.q_len) for k in group for _ in range(k.op.batch)]
    vk = varlen_prefill(chip, stack, chunks, op.heads, op.head_dim, op.dtype, op.kv_dtype, options)
    flops = sum(r.flops for r in rs)
    dram = sum(r.dram_bytes for r in rs)
    compulsory = sum(r.flops / r.arithmetic_intensity for r in rs if r.arithmetic_intensity > 0)
    work = summed_work(rs)
    main = max(rs, key=lambda r: r.flops)   # the roofline class of the work: its largest chunk's
    work["energy_breakdown_pj"] = work["energy_breakdown_pj"] or main.energy_breakdown_pj
    cycles = vk.seconds * chip.clock_hz
    compute = min(cycles, sum(x.compute_cycles for x in rs))
    r = dataclasses.replace(
        main, name="attn.core.varlen", seconds=vk.seconds, cycles=cycles, compute_cycles=compute,
        stall_cycles=cycles - compute, macs=sum(x.macs for x in rs), flops=flops, **work,
        utilization=sum(x.utilization * x.seconds for x in rs) / vk.seconds if vk.seconds > 0 else 0.0,
        arithmetic_intensity=flops / compulsory if compulsory > 0 else 0.0,
        dram_intensity=flops / dram if dram > 0 else 0.0,
        achieved_dram_bytes_per_s=dram / vk.seconds if vk.seconds > 0 else 0.0,
        roofline_cycles=sum(x.roofline_cycles for x in rs), details={})
    extra = {"launches": 1, "varlen_chunks": len(chunks),
             "varlen_programs": vk.programs, "varlen_waves": vk.waves}
    return r, extra
