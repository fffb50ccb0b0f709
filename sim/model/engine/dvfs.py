"""The clock an op runs at under its chip's power limit (DVFS): the op is re-simulated at each
clock tried, from the chip's ``clock_mhz`` down, until its power fits (the model is in
:mod:`sim.model.cost.power`)."""
from __future__ import annotations

import dataclasses

import sim.model.cost.energy as E
from sim.model.cost.power import MAX_STEPS, POWER_TOLERANCE, _grid, _predict, at_clock, op_power_w, rail_energies_pj
from sim.model.engine.lower import Options
from sim.model.engine.run import result_mapping_key
from sim.model.engine.run import simulate_op_at_clock as simulate_op
from sim.spec.chip import ChipSpec

#: a throttled op keeps the mapping chosen at the chip's clock (when the mapper still offers
#: it): a kernel library picks its kernel from the shape (cuBLAS's heuristic), a compiler its
#: mapping for the nominal clock, and neither knows the clock the power controller will set
#: at run time.  It also makes a throttled op cost about 1.5 searches instead of 3 (an 8B
#: 4096-token prefill on h200_sxm: 40 -> 24 s cold on the 2-core build machine).  False
#: searches every candidate again at each clock tried (Llama-3-8B 4096 prefill on h200_sxm
#: 1.1 % faster: its gate_up GEMM runs a 192x184 tile at 1425 MHz where 192x192 won at 1650 MHz)
REUSE_MAPPING = True

__all__ = ["power_at", "top_clock_mhz", "dvfs_clock", "simulate_op_dvfs", "calibrate_array_cycle_pj"]


def top_clock_mhz(chip: ChipSpec) -> float:
    """The clock an op runs at when its power fits the limit: the chip's ``clock_mhz``, at most
    the boost clock.  Where ``clock_mhz`` is the boost clock (blackwell_b200) that is the
    boost clock; where it is a calibration of the rate short, unthrottled kernels reach
    (h200_sxm, h100_sxm: 1650 MHz, see their files) DVFS only ever lowers it."""
    return min(float(chip.clock_mhz), float(chip.power.boost_clock_mhz))


def power_at(chip: ChipSpec, op, options, clock_mhz: float):
    """(result, power W) of ``op`` simulated at ``clock_mhz``."""

    r = simulate_op(at_clock(chip, clock_mhz), op, options)
    return r, op_power_w(r)


def dvfs_clock(chip: ChipSpec, op, options=None):
    """(clock MHz, result at that clock, power W, limited) for ``op`` under the chip's power
    limit: the chip's ``clock_mhz`` (its clock when the power allows it; at most the boost
    clock) when it fits, else the highest grid clock below it that does (the minimum clock,
    ``limited`` True, when none does)."""

    options = options or Options()
    pw = chip.power
    limit = pw.tdp_w * (1.0 + POWER_TOLERANCE)
    top = top_clock_mhz(chip)
    f = top
    r, p = power_at(chip, op, options, f)
    if p <= limit:
        return f, r, p, False
    key = result_mapping_key(r) if REUSE_MAPPING else None
    if key is not None:
        # ... and, where that mapping's run there is compute-bound, its engine run
        options = dataclasses.replace(options, mapping_of=key, reference_clock_mhz=top)
    feasible = None
    infeasible = f  # the lowest clock known to be above the limit
    for _ in range(MAX_STEPS):
        nxt = _grid(pw, min(_predict(chip, r, f), infeasible - pw.clock_step_mhz))
        if feasible is not None and nxt <= feasible[0]:
            break
        r2, p2 = power_at(chip, op, options, nxt)
        if p2 <= limit:
            feasible = (nxt, r2, p2)
            if nxt + pw.clock_step_mhz >= infeasible or nxt >= top:
                break
            # the prediction from an infeasible clock undershoots only when time grows
            # slower than 1/f; one grid step up may still fit - unless its energy there over
            # this clock's duration (a higher clock is never slower) is already over the limit,
            # as it is for most throttled ops (the step raises the core rail's voltage)
            f_up = nxt + pw.clock_step_mhz
            if _over_at(chip, r2, nxt, f_up, limit):
                break
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


def _over_at(chip: ChipSpec, res, f_mhz: float, f_up_mhz: float, limit_w: float) -> bool:
    """Whether ``res`` (simulated at ``f_mhz``) is certainly over ``limit_w`` at the higher
    ``f_up_mhz``: its events cost more there (the core rail's at the higher voltage) and its
    duration is at most the one at ``f_mhz``, so this is a lower bound on its power there."""
    core, other = rail_energies_pj(chip, [res])
    scale = E.voltage_energy_factor(chip, f_up_mhz) / E.voltage_energy_factor(chip, f_mhz)
    return res.seconds > 0 and chip.power.idle_w + (core * scale + other) * 1e-12 / res.seconds > limit_w


def simulate_op_dvfs(chip: ChipSpec, op, options=None):
    """``op`` at the clock its power allows (:func:`dvfs_clock`), as an :class:`OpResult`
    whose cycle counts are at the chip's ``clock_mhz`` and whose details say the clock."""
    f, r, p, limited = dvfs_clock(chip, op, options)
    scale = chip.clock_mhz / f  # op-clock cycles -> cycles of the chip's nominal clock
    # cycle counts in the details too (launch overhead, ...): every *_cycles is at the nominal clock
    rescaled = {k: v * scale for k, v in r.details.items()
                if k.endswith("_cycles") and isinstance(v, (int, float)) and not isinstance(v, bool)}
    details = dict(r.details, **rescaled, clock_mhz=f, power_w=p, voltage_ratio=chip.power.voltage_ratio(f),
                   power_limited=bool(f < top_clock_mhz(chip)), below_min_clock=bool(limited))
    return dataclasses.replace(
        r, cycles=r.cycles * scale, compute_cycles=r.compute_cycles * scale, stall_cycles=r.stall_cycles * scale,
        roofline_cycles=r.roofline_cycles * scale, details=details)


def calibrate_array_cycle_pj(chip: ChipSpec, op, array: str, clock_mhz: float, power_w: float, flops_per_s: float,
                             options=None) -> float:
    """The ``energy.array_pe_cycle_pj`` of ``array`` that makes the modelled power of ``op``
    run back to back at ``clock_mhz`` equal a measured ``power_w`` at a measured rate
    ``flops_per_s`` (a sustained-matmul microbenchmark with power and clock samples).

    The op is simulated at that clock with no per-cycle energy on ``array``; its energy per
    FLOP (every event, at that clock's voltage, static excluded) times the measured rate,
    plus the idle power, is what the tables explain; the rest is spread over the PE-cycles
    the measured MAC rate needs (at the array's own rate for the op's class) at that voltage.
    """

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
