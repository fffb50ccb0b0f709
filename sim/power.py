"""Clocks from power: the DVFS model.

A chip with a ``power:`` block (:class:`sim.config.chip.PowerSpec`) has a board power
limit ``tdp_w``, an idle power ``idle_w``, a boost clock and a voltage that falls linearly
with the clock down to ``min_clock_mhz``.  The power of an op at clock f is

    P(f) = idle_w + E_core(f) / t(f) + E_fixed / t(f),
    E_core(f) = E_core(boost) * (V(f) / V(boost))^2,

where ``E_core`` is the op's switching energy on the core supply (MACs, vector ops,
registers, SRAMs, L2, on-chip network: the energy tables, which are at the boost-clock
voltage), ``E_fixed`` the energy on other supplies (DRAM, links) and t(f) the op's
simulated duration at clock f.  This is the CMOS dynamic-power relation P = a C V^2 f
(e.g. Weste & Harris, *CMOS VLSI Design*, 4th ed., sec. 5.1) with V linear in f over the
DVFS range, the form measured on NVIDIA GPUs by Guerreiro et al., "Modeling and Decoupling
the GPU Power Consumption for Cross-Domain DVFS", IEEE TPDS 30(11), 2019 (voltage rising
linearly with the core clock above a knee).

With ``power.dvfs: true`` an op runs at the highest clock on the ``clock_step_mhz`` grid
(NVIDIA GPUs step their clocks by 15 MHz) between ``min_clock_mhz`` and
``boost_clock_mhz`` whose power fits ``tdp_w``; the op is re-simulated at each clock tried,
so memory-bound phases that do not slow down with the clock are costed as they are.  Its
result carries ``details['clock_mhz']``, ``details['power_w']`` and
``details['voltage_ratio']``; its cycle counts are expressed at the chip's ``clock_mhz``
(``cycles / clock_hz`` stays its duration).

Limitations: the clock is chosen per op, as if the power controller settled within each
kernel; a real controller averages power over milliseconds, so short kernels between idle
gaps run faster than this model says (see :func:`run_power`).  Leakage is held at its idle
value whatever the voltage.
"""
from __future__ import annotations

import dataclasses
import math

from . import energy as E

#: a clock whose power is within this fraction above the limit counts as fitting
POWER_TOLERANCE = 1e-3
#: at most this many clocks are simulated per op
MAX_STEPS = 8

__all__ = ["op_power_w", "at_clock", "dvfs_clock", "simulate_op_dvfs", "power_at", "run_power", "op_clock_mhz",
           "calibrate_array_cycle_pj", "llm_run_power"]


def op_power_w(result) -> float:
    """Average power of an op result (W): its energy (static included) over its duration."""
    return result.energy_pj * 1e-12 / result.seconds if result.seconds > 0 else 0.0


def at_clock(chip, clock_mhz: float):
    """The chip running at ``clock_mhz`` with DVFS off (one fixed clock for every op)."""
    return chip.model_copy(update={"clock_mhz": float(clock_mhz),
                                   "power": chip.power.model_copy(update={"dvfs": False})})


def _grid(pw, f: float) -> float:
    """The highest clock of the DVFS grid (boost - k x step) at or below ``f``."""
    step = pw.clock_step_mhz
    k = math.ceil((pw.boost_clock_mhz - f) / step - 1e-9)
    return max(pw.min_clock_mhz, pw.boost_clock_mhz - max(0, k) * step)


def _predict(chip, res, f0: float) -> float:
    """The highest clock at which ``res`` (simulated at ``f0``) would fit the limit if its
    duration grew as 1/f - the most a lower clock can save; a lower bound on the power at
    that clock, so the true answer is at or below it."""
    pw = chip.power
    core = sum(v for k, v in res.energy_breakdown_pj.items() if E.is_core_rail(chip, k))
    fixed = sum(v for k, v in res.energy_breakdown_pj.items()
                if k not in ("total", "static") and not E.is_core_rail(chip, k))
    k0 = E.voltage_energy_factor(chip, f0)
    budget = (pw.tdp_w - pw.idle_w) * res.seconds * 1e12  # pJ the op may spend at f0's duration

    def excess(f):
        return (core * E.voltage_energy_factor(chip, f) / k0 + fixed) * f / f0 - budget

    lo, hi = pw.min_clock_mhz, f0
    if excess(lo) > 0:
        return lo
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) <= 0 else (lo, mid)
    return lo


def power_at(chip, op, options, clock_mhz: float):
    """(result, power W) of ``op`` simulated at ``clock_mhz``."""
    from .engine.run import simulate_op

    r = simulate_op(at_clock(chip, clock_mhz), op, options)
    return r, op_power_w(r)


def dvfs_clock(chip, op, options=None):
    """(clock MHz, result at that clock, power W, limited) for ``op`` under the chip's power
    limit: the boost clock when it fits, else the highest grid clock that does (the
    minimum clock, ``limited`` True, when none does)."""
    from .engine.lower import Options

    options = options or Options()
    pw = chip.power
    limit = pw.tdp_w * (1.0 + POWER_TOLERANCE)
    f = pw.boost_clock_mhz
    r, p = power_at(chip, op, options, f)
    if p <= limit:
        return f, r, p, False
    feasible = None
    infeasible = f  # the lowest clock known to be above the limit
    for _ in range(MAX_STEPS):
        nxt = _grid(pw, min(_predict(chip, r, f), infeasible - pw.clock_step_mhz))
        if feasible is not None and nxt <= feasible[0]:
            break
        r2, p2 = power_at(chip, op, options, nxt)
        if p2 <= limit:
            feasible = (nxt, r2, p2)
            if nxt + pw.clock_step_mhz >= infeasible or nxt >= pw.boost_clock_mhz:
                break
            # the prediction from an infeasible clock undershoots only when time grows
            # slower than 1/f; one grid step up may still fit
            f_up = nxt + pw.clock_step_mhz
            r3, p3 = power_at(chip, op, options, f_up)
            if p3 <= limit:
                feasible = (f_up, r3, p3)
                r, f = r3, f_up
                continue
            break
        infeasible = nxt
        r, f = r2, nxt
        if nxt <= pw.min_clock_mhz:
            return nxt, r2, p2, True
    if feasible is None:
        return f, r, op_power_w(r), op_power_w(r) > limit
    return feasible[0], feasible[1], feasible[2], False


def simulate_op_dvfs(chip, op, options=None):
    """``op`` at the clock its power allows (:func:`dvfs_clock`), as an :class:`OpResult`
    whose cycle counts are at the chip's ``clock_mhz`` and whose details say the clock."""
    f, r, p, limited = dvfs_clock(chip, op, options)
    scale = chip.clock_mhz / f  # op-clock cycles -> cycles of the chip's nominal clock
    details = dict(r.details, clock_mhz=f, power_w=p, voltage_ratio=chip.power.voltage_ratio(f),
                   power_limited=bool(f < chip.power.boost_clock_mhz), below_min_clock=bool(limited))
    return dataclasses.replace(
        r, cycles=r.cycles * scale, compute_cycles=r.compute_cycles * scale, stall_cycles=r.stall_cycles * scale,
        roofline_cycles=r.roofline_cycles * scale, details=details)


def op_clock_mhz(chip, result) -> float:
    """The clock an op result ran at (its DVFS clock, else the chip's)."""
    return float((result.details or {}).get("clock_mhz", chip.clock_mhz))


def _mean_clock(clock_s: float, seconds: float, seen: list[float], chip) -> float:
    """The time-weighted mean clock, kept within the clocks the ops ran at (a sum of
    products can round a hair above its largest term)."""
    if seconds <= 0 or not seen:
        return chip.clock_mhz
    return min(max(clock_s / seconds, min(seen)), max(seen))


def run_power(chip, results) -> dict:
    """Average power, energy and time-weighted clock of a sequence of op results run back
    to back (each with its ``repeat``): ``{'seconds', 'energy_j', 'power_w', 'clock_mhz',
    'tdp_w'}``."""
    seconds = energy = clock_s = 0.0
    seen: list[float] = []
    for r in results:
        rep = getattr(r, "repeat", 1) or 1
        seconds += r.seconds * rep
        energy += r.energy_pj * 1e-12 * rep
        seen.append(op_clock_mhz(chip, r))
        clock_s += seen[-1] * r.seconds * rep
    return {"seconds": seconds, "energy_j": energy, "power_w": energy / seconds if seconds > 0 else 0.0,
            "clock_mhz": _mean_clock(clock_s, seconds, seen, chip),
            "tdp_w": chip.power.tdp_w if getattr(chip, "power", None) is not None else None}


def calibrate_array_cycle_pj(chip, op, array: str, clock_mhz: float, power_w: float, flops_per_s: float,
                             options=None) -> float:
    """The ``energy.array_pe_cycle_pj`` of ``array`` that makes the modelled power of ``op``
    run back to back at ``clock_mhz`` equal a measured ``power_w`` at a measured rate
    ``flops_per_s`` (a sustained-matmul microbenchmark with power and clock samples).

    The op is simulated at that clock with no per-cycle energy on ``array``; its energy per
    FLOP (every event, at that clock's voltage, static excluded) times the measured rate,
    plus the idle power, is what the tables explain; the rest is spread over the PE-cycles
    the measured MAC rate needs (at the array's own rate for the op's class) at that voltage.
    """
    from .engine.lower import Options
    from .engine.run import simulate_op

    energy = chip.energy.model_copy(update={"array_pe_cycle_pj": {
        k: v for k, v in chip.energy.array_pe_cycle_pj.items() if k != array}})
    c = at_clock(chip.model_copy(update={"energy": energy}), clock_mhz)
    r = simulate_op(c, op, options or Options())
    events = sum(v for k, v in r.energy_breakdown_pj.items() if k not in ("total", "static"))
    explained = chip.power.idle_w + events * 1e-12 / r.flops * flops_per_s
    rate_class = r.mapping.get("compute", {}).get("rate_class") or r.mapping.get("rate_class")
    units = next(a for a in chip.cores.arrays if a.name == array)
    pe_cycles_per_s = flops_per_s / 2.0 / units.rate_for(rate_class)[0]
    return (power_w - explained) / (pe_cycles_per_s * E.voltage_energy_factor(c)) * 1e12


def llm_run_power(chip, model, result: dict, *, phase: str = "prefill", batch: int = 1, prompt_len: int = 2048,
                  context_len=None, new_tokens: int = 128, draft_tokens: int = 0, tensor_parallel: int = 1,
                  pipeline_parallel: int = 1, options=None, **_ignored) -> dict:
    """Average power of one chip over an LLM run (:func:`sim.inference.run_llm`'s
    ``result`` for the same arguments), the time-weighted clock its ops ran at and the
    energy per token with that clock: ``{'power_w', 'clock_mhz', 'tdp_w', 'seconds',
    'energy_j', 'energy_per_token_j'}``.

    The ops are rebuilt with the formats and attention lowering the run resolved and
    their (memoised) results read back; for ``generate`` the decode steps are those of the
    middle step, as in :func:`sim.energy.llm_energy_components_j`."""
    from .energy import _llm_traces
    from .engine.lower import Options
    from .engine.run import simulate_op
    from .workload.llm import Parallelism, Precision
    from .workload.models import load_model_spec

    spec = load_model_spec(model) if isinstance(model, str) else model
    p = result.get("precision") or {}
    precision = Precision(dtype=p.get("dtype", "bf16"), weight_dtype=p.get("weight_dtype"),
                          kv_dtype=p.get("kv_dtype"), sparsity=p.get("sparsity"),
                          vector_dtype=p.get("vector_dtype"), quantised_lm_head=p.get("quantised_lm_head", False))
    attention = result.get("attention") or chip.attention_lowering
    parallel = Parallelism(tensor=tensor_parallel, pipeline=pipeline_parallel,
                           collective_algorithm=(result.get("parallel") or {}).get("collective", "ring"))
    options = options or Options()
    try:  # the software stack that lowered the run's ops into kernels (sim/stacks.py), when present
        from .stacks import chip_stack, lower_trace

        stack = chip_stack(chip, result.get("stack"))
        kernels = lambda trace: lower_trace(trace, stack)  # noqa: E731
        opts = lambda t: t.options(options)  # noqa: E731
    except ImportError:
        kernels = lambda trace: trace  # noqa: E731
        opts = lambda t: options  # noqa: E731
    seconds = energy = clock_s = 0.0
    seen: list[float] = []
    for trace, weight in _llm_traces(spec, phase, batch, prompt_len, context_len, new_tokens, draft_tokens,
                                     precision, parallel, attention):
        for t in kernels(trace):
            if getattr(t.op, "op", None) == "dequant":
                continue  # fused into its consumer, as run_trace does
            r = simulate_op(chip, t.op, opts(t))
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
