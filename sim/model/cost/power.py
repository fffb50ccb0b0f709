"""Clocks from power: the DVFS model (its pure part: power of a result, the clock grid, the
prediction of the clock that fits).  The search that re-simulates an op at each clock tried is
:mod:`sim.model.engine.dvfs`; a whole LLM run's average power is
:func:`sim.apps.energy_report.llm_run_power`.

A chip with a ``power:`` block (:class:`sim.spec.chip.PowerSpec`) has a board power
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

With ``power.dvfs: true`` an op runs at the chip's ``clock_mhz`` (at most ``boost_clock_mhz``)
when its power there fits ``tdp_w``, else at the highest clock below it on the
``clock_step_mhz`` grid (NVIDIA GPUs step their clocks by 15 MHz), down to ``min_clock_mhz``,
whose power fits; the op is re-simulated at each clock tried,
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

import sim.model.cost.energy as E
from sim.spec.chip import ChipSpec

#: a clock whose power is within this fraction above the limit counts as fitting
POWER_TOLERANCE = 1e-3
#: at most this many clocks are simulated per op
MAX_STEPS = 8

__all__ = ["op_power_w", "at_clock", "run_power", "op_clock_mhz", "POWER_TOLERANCE", "MAX_STEPS"]


def op_power_w(result) -> float:
    """Average power of an op result (W): its energy (static included) over its duration."""
    return result.energy_pj * 1e-12 / result.seconds if result.seconds > 0 else 0.0


def at_clock(chip: ChipSpec, clock_mhz: float):
    """The chip running at ``clock_mhz`` with DVFS off (one fixed clock for every op)."""
    return chip.model_copy(update={"clock_mhz": float(clock_mhz),
                                   "power": chip.power.model_copy(update={"dvfs": False})})


def _grid(pw, f: float) -> float:
    """The highest clock of the DVFS grid (boost - k x step) at or below ``f``."""
    step = pw.clock_step_mhz
    k = math.ceil((pw.boost_clock_mhz - f) / step - 1e-9)
    return max(pw.min_clock_mhz, pw.boost_clock_mhz - max(0, k) * step)


def rail_energies_pj(chip: ChipSpec, results) -> tuple[float, float]:
    """(core-rail, other) event energy of ``results`` in pJ, static excluded: the part that
    scales with the core voltage and the part that does not (DRAM, links)."""
    core = other = 0.0
    for r in results:
        for k, v in r.energy_breakdown_pj.items():
            if k in ("total", "static"):
                continue
            if E.is_core_rail(chip, k):
                core += v
            else:
                other += v
    return core, other


def _predict(chip: ChipSpec, res, f0: float, other_s: float = 0.0, other_j: float = 0.0,
             top_mhz: float | None = None) -> float:
    """The highest clock up to ``top_mhz`` (default ``f0``) at which ``res`` (simulated at
    ``f0``; one result, or a list run back to back) would fit the limit if its duration went
    as 1/f, with ``other_s`` seconds and ``other_j`` joules beside it that do not depend on
    the clock (a kernel harness's flush and sleep).  Below ``f0`` that is the most a lower
    clock can save - a lower bound on the power there, so the true answer is at or below it;
    above ``f0`` (time shrinks at most as 1/f) it is a lower bound on the answer."""
    pw = chip.power
    results = list(res) if isinstance(res, (list, tuple)) else [res]
    core, fixed = rail_energies_pj(chip, results)
    k0 = E.voltage_energy_factor(chip, f0)
    seconds = sum(r.seconds for r in results)
    budget = (pw.tdp_w - pw.idle_w) * seconds * 1e12  # pJ the op may spend at f0's duration
    beside = (other_j - pw.tdp_w * other_s) * 1e12    # what the clock-independent rest adds

    def excess(f):
        return (core * E.voltage_energy_factor(chip, f) / k0 + fixed + beside) * f / f0 - budget

    lo, hi = pw.min_clock_mhz, f0 if top_mhz is None else top_mhz
    if excess(lo) > 0:
        return lo
    if excess(hi) <= 0:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if excess(mid) <= 0 else (lo, mid)
    return lo


def op_clock_mhz(chip: ChipSpec, result) -> float:
    """The clock an op result ran at (its DVFS clock, else the chip's)."""
    return float((result.details or {}).get("clock_mhz", chip.clock_mhz))


def _mean_clock(clock_s: float, seconds: float, seen: list[float], chip: ChipSpec) -> float:
    """The time-weighted mean clock, kept within the clocks the ops ran at (a sum of
    products can round a hair above its largest term)."""
    if seconds <= 0 or not seen:
        return chip.clock_mhz
    return min(max(clock_s / seconds, min(seen)), max(seen))


def run_power(chip: ChipSpec, results) -> dict:
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


