"""The kernel harness as the simulator prices it: how ``validation/gpu/measure.py`` timed a
kernel case (``time_fn``; its settings are recorded in h200_env.json "harness"), and the clock
the GPU ran that case's repeats at.

A case is timed as a burst from idle: 31 warm-up calls back to back, then (behind sleep
kernels that let the host enqueue a chunk of 25) repeats of (a 256 MiB L2-flush read, the
op), 20-200 of them until ~0.3 s (``validation/gpu/cases.py`` ``repeats_for``); the median
repeat is reported.

The power controller is taken as a moving-average limiter: it lowers the clock once the
board power averaged over ``power.average_window_s`` (an exponential average, from idle)
reaches ``tdp_w``, and from then on holds that average at the limit.  So

- a case whose repeat period (sleep share, flush, op) averages at or under the limit at the
  chip's ``clock_mhz`` never throttles;
- a case whose median repeat starts before the average crosses the limit is priced at
  ``clock_mhz`` too;
- any other case runs at the highest clock at which its repeat period averages at or under
  the limit (the window holds many repeats): above the clock that op alone would get, since
  the flush and the sleeps draw less than the limit.

Steady-state answers (``sim run``, sweeps, serving, ``model`` cases) do not use this module:
they price every op at its own DVFS clock (:mod:`sim.model.engine.dvfs`).
"""
from __future__ import annotations

import dataclasses
import math

from sim.ir.ops import VectorOp
from sim.model.cost.power import MAX_STEPS, POWER_TOLERANCE, _grid, _predict, at_clock, op_power_w
from sim.model.engine.dvfs import top_clock_mhz
from sim.model.engine.run import result_mapping_key
from sim.model.engine.simulate import simulate_op, simulate_ops
from sim.spec.chip import ChipSpec

__all__ = ["HARNESS_TARGET_S", "HARNESS_MAX_REPS", "HARNESS_MIN_REPS", "HARNESS_MIN_REPS_LONG",
           "HARNESS_FLUSH_BYTES", "harness_repeats", "harness_clock"]

#: validation/gpu/cases.py ``repeats_for``: 20-200 repeats until ~0.3 s (5-20 for long ops)
HARNESS_TARGET_S = 0.3
HARNESS_MAX_REPS = 200
HARNESS_MIN_REPS = 20
HARNESS_MIN_REPS_LONG = 5
#: the L2 flush before every timed repeat: torch.sum over a 256 MiB scratch buffer
HARNESS_FLUSH_BYTES = 256 << 20
#: measure.py ``time_fn``: one call, then 30 more back to back (the host enqueues 30 calls in
#: far less than its 20 ms warm-up limit), no flush
HARNESS_WARMUP_CALLS = 31
#: measure.py ``host_seconds_per_rep``: a 10 ms sleep kernel, then 3 repeats
HARNESS_PROBE_SLEEP_S = 0.010
HARNESS_PROBE_REPS = 3
#: measure.py ``time_fn``: 3 repeats for the rough timing that sets the repeat count
HARNESS_ROUGH_REPS = 3
#: measure.py ``CHUNK``: repeats enqueued behind one sleep kernel of 1.5 x chunk x host time
#: + 0.2 ms (``timed_reps``)
HARNESS_CHUNK = 25
HARNESS_SLEEP_PER_REP_FACTOR = 1.5
HARNESS_SLEEP_EXTRA_S = 2e-4
#: [MB] h200_case_stats.csv ``host_ms``: the host's time to enqueue one repeat (flush, two
#: events, the op), median of the 609 kernel cases 0.165 ms (p25 0.130, p75 0.216)
HARNESS_HOST_S = 0.165e-3


def harness_repeats(seconds: float) -> int:
    """The harness's repeat count for an op of ``seconds`` (cases.py ``repeats_for``)."""
    t_ms = max(seconds * 1e3, 1e-4)
    want = int(math.ceil(HARNESS_TARGET_S * 1e3 / t_ms))
    if t_ms * HARNESS_MIN_REPS <= HARNESS_TARGET_S * 1e3:
        return max(HARNESS_MIN_REPS, min(HARNESS_MAX_REPS, want))
    return max(HARNESS_MIN_REPS_LONG, min(HARNESS_MIN_REPS, want))


@dataclasses.dataclass(frozen=True)
class _Phase:
    """One stretch of the burst at a constant power."""

    seconds: float
    watts: float
    timed_repeat: bool = False   # the op of a timed repeat (its start is what the median sees)


def _sleep_s(repeats: int) -> float:
    return HARNESS_SLEEP_PER_REP_FACTOR * repeats * HARNESS_HOST_S + HARNESS_SLEEP_EXTRA_S


def _burst(op_s: float, op_w: float, flush_s: float, flush_w: float, idle_w: float, reps: int) -> list[_Phase]:
    """The harness's sequence for one case (measure.py ``time_fn``), as power phases.  The
    sleep kernels (``torch.cuda._sleep``: one spinning thread block, no memory traffic) are
    taken at the chip's idle power."""
    phases = [_Phase(op_s * HARNESS_WARMUP_CALLS, op_w), _Phase(HARNESS_PROBE_SLEEP_S, idle_w)]
    phases += [_Phase(flush_s, flush_w), _Phase(op_s, op_w)] * HARNESS_PROBE_REPS
    phases += [_Phase(_sleep_s(HARNESS_ROUGH_REPS), idle_w)]
    phases += [_Phase(flush_s, flush_w), _Phase(op_s, op_w)] * HARNESS_ROUGH_REPS
    for c0 in range(0, reps, HARNESS_CHUNK):
        n = min(HARNESS_CHUNK, reps - c0)
        phases.append(_Phase(_sleep_s(n), idle_w))
        phases += [_Phase(flush_s, flush_w), _Phase(op_s, op_w, timed_repeat=True)] * n
    return phases


def unthrottled_repeats(phases: list[_Phase], idle_w: float, limit_w: float, window_s: float) -> int:
    """How many timed repeats start before the exponential average of the power (time
    constant ``window_s``, from ``idle_w``) first reaches ``limit_w``.  Called only for a
    burst whose repeat period averages above the limit at the unthrottled clock, so once the
    controller has lowered the clock it never raises it again within the burst."""
    avg = idle_w
    started = 0
    for ph in phases:
        if ph.timed_repeat:
            started += 1
        # the average rises within a phase of higher power: its end is its highest point
        avg = ph.watts + (avg - ph.watts) * math.exp(-ph.seconds / window_s)
        if avg >= limit_w:
            return max(0, started - 1) if ph.timed_repeat else started
    return started


def _flush(chip: ChipSpec):
    """The flush read (a 256 MiB sum) on ``chip``: (seconds, watts)."""
    r = simulate_op(chip, VectorOp("l2_flush", "sum", elements=HARNESS_FLUSH_BYTES // 2, ops_per_element=1.0,
                                   read_bytes=HARNESS_FLUSH_BYTES, write_bytes=2))
    return r.seconds, op_power_w(r)


@dataclasses.dataclass(frozen=True)
class _Repeat:
    """One timed repeat on a fixed-clock chip: the case's kernels, the flush before them and
    the repeat's share of its chunk's sleep (at the idle power)."""

    results: list
    flush_s: float
    flush_w: float
    sleep_s: float
    idle_w: float

    @property
    def op_s(self) -> float:
        return sum(r.seconds for r in self.results)

    @property
    def op_w(self) -> float:
        return sum(r.energy_pj for r in self.results) * 1e-12 / self.op_s if self.op_s > 0 else 0.0

    @property
    def other_s(self) -> float:
        return self.flush_s + self.sleep_s

    @property
    def other_j(self) -> float:
        return self.flush_s * self.flush_w + self.sleep_s * self.idle_w

    @property
    def period_w(self) -> float:
        return (self.op_s * self.op_w + self.other_j) / (self.op_s + self.other_s)


def _repeat(chip: ChipSpec, kernels: list) -> _Repeat:
    results = simulate_ops(chip, kernels)
    flush_s, flush_w = _flush(chip)
    return _Repeat(results, flush_s, flush_w, _sleep_s(HARNESS_CHUNK) / HARNESS_CHUNK, chip.power.idle_w)


def harness_clock(chip: ChipSpec, kernels_of) -> tuple[object, list]:
    """(chip at the clock the harness's median repeat ran at, with DVFS off; the case's
    kernels as priced there) for a chip with DVFS and a power-averaging window; ``chip`` and
    ``kernels_of(chip)`` unchanged otherwise.  ``kernels_of(chip)`` lists the case's
    ``(op, Options)``.  Below ``clock_mhz`` every kernel keeps the mapping it had there
    (as :mod:`sim.model.engine.dvfs` does: the library picks its kernel from the shape)."""
    pw = getattr(chip, "power", None)
    if pw is None or not pw.dvfs or pw.average_window_s <= 0:
        return chip, kernels_of(chip)
    limit = pw.tdp_w * (1.0 + POWER_TOLERANCE)
    f_mhz = top_clock_mhz(chip)
    top = at_clock(chip, f_mhz)
    kernels = kernels_of(top)
    rep = _repeat(top, kernels)
    if rep.period_w <= limit or rep.op_s <= 0:
        return top, kernels
    reps = harness_repeats(rep.op_s)
    phases = _burst(rep.op_s, rep.op_w, rep.flush_s, rep.flush_w, pw.idle_w, reps)
    if 2 * unthrottled_repeats(phases, pw.idle_w, pw.tdp_w, pw.average_window_s) > reps:
        return top, kernels
    kernels = [(op, dataclasses.replace(opts, mapping_of=result_mapping_key(r), reference_clock_mhz=f_mhz))
               for (op, opts), r in zip(kernels, rep.results)]
    # the highest grid clock whose repeat period fits: a prediction from each clock tried
    # bounds the answer (from above where it did not fit, from below where it did); the
    # flush and sleep are taken at the top clock's values, as clock-independent
    other_s, other_j = rep.other_s, rep.other_j
    top_mhz, step = f_mhz, pw.clock_step_mhz
    results = rep.results
    fits_mhz, bad_mhz = None, top_mhz
    for _ in range(MAX_STEPS):
        guess = _grid(pw, min(_predict(chip, results, f_mhz, other_s, other_j, top_mhz), bad_mhz - step))
        nxt = guess if fits_mhz is None else max(guess, fits_mhz + step)
        if nxt >= bad_mhz or (fits_mhz is not None and nxt <= fits_mhz):
            break
        at = _repeat(at_clock(chip, nxt), kernels)
        f_mhz, results = nxt, at.results
        if at.period_w <= limit:
            fits_mhz = nxt
        else:
            bad_mhz = nxt
            if nxt <= pw.min_clock_mhz:
                break
        if fits_mhz is not None and fits_mhz + step >= bad_mhz:
            break
    return at_clock(chip, fits_mhz if fits_mhz is not None else pw.min_clock_mhz), kernels
