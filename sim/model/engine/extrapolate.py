"""Large problems from samples: run shortened copies of a problem along its longest tile loop
(or, in cyclic mode, the first whole waves of output tiles) and extrapolate linearly.  The
tile nest is periodic along that loop, so every count and the cycle total are affine in its
trip count once the pipeline and the caches are in steady state; memory stays flat in the
problem size."""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

import sim.model.kernels.dram_layout as D
import sim.model.kernels.engine as K
from sim.ir.lowered import TileProblem
from sim.model.engine.arrays import operand_bases
from sim.model.engine.kernel_run import KernelRun, Probe, run_kernel, run_kernel_probed
from sim.model.engine.lower import FIDELITY, raster_group
from sim.model.mapper.search import Mapping, footprint_bytes
from sim.model.memory.dram import dram_params
from sim.spec.chip import ChipSpec

#: False simulates every problem in full (tests compare extrapolation against that)
EXTRAPOLATE = True
#: the smallest samples (rounds) an extrapolation draws at the default fidelity
MIN_SAMPLE_ROUNDS = FIDELITY["high"]["min_sample_rounds"]
#: slopes over consecutive samples must agree this closely for the steady state
STEADY_TOLERANCE = 0.05
#: at most this many times the samples are doubled while looking for a steady state
MAX_DOUBLINGS = 2
#: an op whose chosen mapping's samples never reached a steady state is simulated in full
#: when its whole work (DRAM chunks or core tile steps, as :func:`extrapolation_plan`
#: estimates it) is at most this; a larger one is extrapolated from its largest samples and flagged
#: (``steady: false``, the run's ``unsteady_extrapolated_share``).  Measured on the 2-core
#: build machine (2026-12-04, Llama-3-8B 2k prefill): unsteady extrapolations missed the
#: full simulation by -36 .. +41 % (tpu_v1 mlp.down +27.9 %, edge_npu mlp.down +40.6 % and
#: causal attn.core -28.5 / -35.8 %, h200_sxm mlp.gate_up -5.2 %, silu +3.6 %), and the full
#: runs of those ops (work 4.6e5 - 8.3e6) took 0.05 - 2.7 s.  Above it full runs take 3 - 16 s
#: (Llama-3-70B TP8 4k-prefill ops on h200_sxm, work 1.0e7 - 2.5e7), where the unsteady
#: extrapolations missed by -8.4 .. +7.6 % (vector ops) and by under 0.1 % (the GEMMs);
#: sliding the samples further (spacing doubled, each sample up to 2e6 of work) settled
#: few of them there and made that run 28 % slower, so it is not done
UNSTEADY_FULL_WORK = 10_000_000
#: a cyclic problem whose full simulation would walk more DRAM chunks (or core steps) than
#: this is never simulated in full: when whole raster periods of waves do not fit in its
#: samples, it is sampled in whole waves anyway, and the result says so
#: (``period_aligned: false``).  The bound is about one minute of one engine run: on the
#: 2-core build machine a full 8704x8192x28672 bf16 GEMM on h200_sxm (2.06e7 estimated
#: chunks) took 8.2-9.0 s per candidate, ~2.3e6 chunks/s.  Every op of the stored H200
#: case files stays below it (the largest, 5.9e7, is simulated in full as before)
HUGE_WORK = 120_000_000
#: a huge problem's (HUGE_WORK) samples may cost at most this much engine work (DRAM
#: chunks or core steps, :func:`sample_work`): about 5-10 s of one engine run on the 2-core
#: build machine (~3.5-5e6 chunks/s measured on 46416^3 bf16 GEMMs on npu_128x128).  Above
#: it, a cyclic problem is sampled in whole waves without raster alignment
#: (``period_aligned: false``) and the op's costlier candidates are not simulated while one
#: within the budget is (:func:`too_costly`; sim.model.engine.run).  Before, a 46416^3
#: GEMM sampled raster-aligned periods of 91-455 waves and a block candidate's 2-10 of 90
#: column rounds (3.8e8 and 1.3e9 chunks: 193 s), and a 10^5-cubed one needed 1.1e10
#: chunks (hours); both problems' plans now cost under 6e7.  Problems of at most
#: HUGE_WORK are untouched
SAMPLE_BUDGET = 100_000_000
#: a problem whose first three samples along a dim (the fewest the steady-state check runs)
#: would cost at least this share of its full run's work is simulated in full: sampling
#: could save at most half the engine time, and a full run is exact.  A sample along k keeps
#: the whole output (written once per sample) and every sample keeps its per-tile fill and
#: drain, so short samples are not cheap: on the 2-core build machine (2026-12-05) a
#: Llama-3-8B 2k-prefill gate_up GEMM (2048x4096x28672 bf16) on h200_sxm sampled at 2..10 of
#: its 64 k tiles took 0.63-0.83 s against 0.49-0.54 s in full, and its steady
#: extrapolations missed the full run by -3.3 .. +0.9 %
SAMPLES_WORTH_AT_MOST = 0.5
#: consecutive samples along a dim (k, m, n or count) lie at least this many DRAM refresh
#: intervals (tREFI) apart in expected time: a refresh blocks a channel for tRFC (~9 % of
#: tREFI on HBM3), so the growth between two samples closer than a few tREFI depends on how
#: many refreshes happen to fall in between, and three such samples can agree by chance.
#: Measured on the 2-core build machine (2026-12-05) on h200_sxm, against full runs: a
#: Llama-3-8B decode's (batch 8, 4k context) k samples 2-4 k tiles apart agreed and missed by
#: -13 % (gate_up, 8x64 tile), -11 % and -7 % (lm_head); a Llama-3-70B TP8 decode lm_head
#: (32x64 tile) grew by 16-36 cycles per k element over spacings of three 64-element k tiles
#: (~5,000 cycles, under one 6,435-cycle tREFI), by 22-25 with refresh off, and its line
#: missed by -16 %.  Samples in whole waves (WavePlan) are not held to it: every wave-plan
#: extrapolation of those runs and of a 70B TP8 4k prefill landed within -3.7 .. +4.0 % of
#: its full run (the GEMMs within 0.2 %), and holding them to it made the 70B TP8 generate
#: benchmark several times slower (longer probed runs of every vector op)
REFRESH_INTERVALS_PER_SPACING = 8


@dataclass(frozen=True)
class DimPlan:
    """Shorten the problem along ``dim`` (count, m, n or k): ``rounds`` whole rounds of
    ``round_size`` elements, sampled first at ``samples`` = (r1, r2) rounds."""

    dim: str
    round_size: int
    rounds: int
    samples: tuple[int, int]
    work: float = 0.0   # the whole problem's work (DRAM chunks or core tile steps)
    #: a huge problem's samples, too costly to run (SAMPLE_BUDGET), are themselves extrapolated:
    #: the plan of its largest sample (each sample is planned alike when it runs); None: run them
    inner: "DimPlan | WavePlan | None" = None


@dataclass(frozen=True)
class WavePlan:
    """Cyclic mode: ``tiles`` output tiles dealt to ``cores`` cores make ``waves`` whole
    waves (and a partial one), sampled first at ``samples`` = (w1, w2) waves."""

    tiles: int
    cores: int
    waves: int
    samples: tuple[int, int]
    period_aligned: bool = True
    work: float = 0.0   # the whole problem's work (DRAM chunks or core tile steps)


def _max_core_steps(prob: TileProblem, mapping: Mapping) -> int:
    tm = math.ceil(prob.m / mapping.tile_m)
    tn = math.ceil(prob.n / mapping.tile_n)
    tk = math.ceil(prob.k / mapping.tile_k)
    total = prob.count * tm * tn * tk
    return math.ceil(total / max(1, mapping.cores_used))


def _rounds(prob: TileProblem, mapping: Mapping, has_chip_cache: bool) -> dict[str, tuple[int, int]]:
    """For each dim that can be shortened: (round size in elements, number of whole rounds).

    A round is a slice after which every core's work pattern repeats: in block mode one
    tile per core slice along count/m/n; along k (every core walks all of k) one k tile.
    Cyclic mode is shortened by whole waves of output tiles instead (:class:`WavePlan`),
    or along k.
    """
    out: dict[str, tuple[int, int]] = {}
    if mapping.distribution == "cyclic":
        # whole instances (every instance has the same tiles, causal or not), in groups
        # that add whole waves, so the dealing pattern repeats from one group to the next
        per_inst = math.ceil(prob.m / mapping.tile_m) * math.ceil(prob.n / mapping.tile_n)
        group = max(1, mapping.cores_used // math.gcd(mapping.cores_used, per_inst))
        if prob.count // group >= 4 * MIN_SAMPLE_ROUNDS[1]:
            out["count"] = (group, prob.count // group)
    single_wave = mapping.distribution == "cyclic" and (
        prob.count * math.ceil(prob.m / mapping.tile_m) * math.ceil(prob.n / mapping.tile_n) <= mapping.cores_used)
    compulsory = (footprint_bytes(prob, "a", prob.m, prob.n, prob.k, prob.count)
                  + (footprint_bytes(prob, "b", prob.m, prob.n, prob.k, prob.count) if prob.has_b else 0.0)
                  + footprint_bytes(prob, "c", prob.m, prob.n, prob.k, prob.count))
    streaming = mapping.estimated_dram_bytes <= 1.1 * float(compulsory)
    if prob.reduction and not prob.causal and (single_wave or streaming or not has_chip_cache):
        # along k only when cache reuse cannot depend on it: one wave of tiles, every
        # byte fetched once anyway (streaming weights), or no chip-level cache
        out["k"] = (mapping.tile_k, prob.k // mapping.tile_k)
    if mapping.distribution == "block":
        pc, pm, pn = mapping.partition
        sizes = {"count": (1 * pc, prob.count),
                 "m": (max(mapping.tile_m, prob.unit_m) * pm, prob.m),
                 "n": (max(mapping.tile_n, prob.unit_n) * pn, prob.n)}
        for dim, (rs, size) in sizes.items():
            if dim == "m" and mapping.tile_m % prob.unit_m and pm > 1:
                continue
            if dim == "n" and mapping.tile_n % prob.unit_n and pn > 1:
                continue
            out[dim] = (rs, size // rs)
    return out


def _min_spacing(chip: ChipSpec, mapping: Mapping, ideal: bool, rounds: int) -> int:
    """The fewest rounds (or waves) of ``rounds`` between two samples: what spans
    REFRESH_INTERVALS_PER_SPACING refresh intervals at the mapping's estimated time per round
    (1 with ideal memory or no refresh)."""
    t_refi_ns = 0.0 if ideal else dram_params(chip.memory.dram).t_refi_ns
    if t_refi_ns <= 0:
        return 1
    per_round_cycles = max(mapping.estimated_cycles, 1.0) / max(1, rounds)
    return max(1, math.ceil(REFRESH_INTERVALS_PER_SPACING * t_refi_ns * 1e-9 * chip.clock_hz / per_round_cycles))


def extrapolation_plan(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool,
                       fidelity: str = "high") -> DimPlan | WavePlan | None:
    """How to shorten a large problem, or None to simulate it in full."""
    fid = FIDELITY[fidelity]
    steps = _max_core_steps(prob, mapping)
    chunks = 0.0 if ideal else mapping.estimated_dram_bytes / max(1, chip.memory.dram.interleave_bytes)
    work = max(steps, chunks)
    if not EXTRAPOLATE:
        return None
    sample = fid["sample_chunks"]
    if steps <= fid["steps"] and chunks <= fid["chunks"]:
        return None
    unaligned = None  # a huge cyclic problem's last resort (see HUGE_WORK)
    if mapping.distribution == "cyclic" and not prob.causal:
        tiles = prob.count * math.ceil(prob.m / mapping.tile_m) * math.ceil(prob.n / mapping.tile_n)
        P = max(1, mapping.cores_used)
        waves = tiles // P
        # tiles are rasterised in groups of g tile rows; cache reuse repeats once per
        # group, so samples start after the first group and each sample interval spans
        # at least one group

        tn = math.ceil(prob.n / mapping.tile_n)
        tm = math.ceil(prob.m / mapping.tile_m)
        period = math.ceil(min(raster_group(P), tm) * tn / P) if (prob.count == 1 and tm > 1) else 1
        w1 = max(fid["min_sample_rounds"][0], period)
        w2 = int(max(w1 + period, fid["min_sample_rounds"][1], sample / max(work / waves, 1.0)))
        # the steady-state check's first three samples (w1, w2, 2 w2 - w1) fit in half the
        # waves (sample_rounds); one probed run draws them all
        fits = 2 * w2 - w1 <= waves // 2
        aligned = WavePlan(tiles=tiles, cores=P, waves=waves, samples=(w1, w2), work=work) if fits else None
        if aligned is not None and not too_costly(aligned, fidelity):
            return aligned
        w1 = fid["min_sample_rounds"][0]
        w2 = int(max(fid["min_sample_rounds"][1], sample / max(work / waves, 1.0)))
        if work > HUGE_WORK and 4 * w2 <= waves:
            unaligned = WavePlan(tiles=tiles, cores=P, waves=waves, samples=(w1, w2), period_aligned=False,
                                 work=work)
        if aligned is not None:
            # a huge problem whose raster periods are too long to sample within SAMPLE_BUDGET
            return unaligned or aligned
    best = None
    for dim, (rs, rounds) in _rounds(prob, mapping, bool(chip.memory.chip_srams)).items():
        if rounds >= 4 * fid["min_sample_rounds"][1] and (best is None or rounds > best[2]):
            best = (dim, rs, rounds)
    if best is None:
        return unaligned
    dim, rs, rounds = best
    r2 = int(min(rounds // 4, max(fid["min_sample_rounds"][1], sample / max(work / rounds, 1.0))))
    r1 = max(fid["min_sample_rounds"][0], r2 // 4)
    plan = DimPlan(dim=dim, round_size=rs, rounds=rounds, samples=(r1, r2), work=work)
    if not is_huge(plan):  # (a huge problem is never simulated in full)
        r2 = max(r2, r1 + _min_spacing(chip, mapping, ideal, rounds))
        if 4 * r2 > rounds:
            return None  # samples far enough apart do not fit: simulate in full
        plan = dataclasses.replace(plan, samples=(r1, r2))
        first_three = sample_rounds(plan.samples, rounds, True)[:3]
        if sum(_dim_sample_work(chip, prob, mapping, ideal, plan, r) for r in first_three) >= SAMPLES_WORTH_AT_MOST * work:
            return None
    if too_costly(plan, fidelity):
        # the samples, each a long problem along the other dims, are extrapolated in turn
        inner = _sample_plan(chip, prob, mapping, ideal, plan, max(sample_rounds(plan.samples, rounds,
                                                                                 fid["steady_check"])), fidelity)
        if inner is not None and sample_work(inner, fidelity) < 0.5 * inner.work:
            plan = dataclasses.replace(plan, inner=inner)
    if unaligned is not None and too_costly(plan, fidelity) and not too_costly(unaligned, fidelity):
        return unaligned  # whole waves of a huge cyclic problem cost less than rounds along the dim
    return plan


def _dim_sample_work(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool, plan: DimPlan,
                     r: int) -> float:
    """The engine work (as ``plan.work``: core tile steps or DRAM chunks) of the ``r``-round
    sample along ``plan.dim``: core steps and the DRAM bytes of the operands the dim indexes
    shrink with it; an operand it does not index (a k sample's output) is moved whole."""
    full = getattr(prob, plan.dim)
    share = (r * plan.round_size + full - plan.rounds * plan.round_size) / max(1, full)
    steps = _max_core_steps(prob, mapping) * share
    if ideal:
        return steps
    # (every operand is indexed by count: a sample along it shrinks all of them)
    unindexed = [w for w, dims in (("a", prob.a_dims), ("b", prob.b_dims), ("c", prob.c_dims))
                 if plan.dim != "count" and plan.dim not in dims and (w != "b" or prob.has_b)]
    total = mapping.estimated_dram_bytes
    whole = min(total, sum(float(footprint_bytes(prob, w, prob.m, prob.n, prob.k, prob.count)) for w in unindexed))
    return max(steps, (whole + (total - whole) * share) / max(1, chip.memory.dram.interleave_bytes))


def _sample_problem(prob: TileProblem, mapping: Mapping, plan: DimPlan, r: int) -> tuple[TileProblem, Mapping]:
    """The copy of ``prob`` shortened to ``r`` rounds along ``plan.dim`` (the original remainder
    kept), and ``mapping`` with its DRAM estimate scaled to it (what :func:`extrapolation_plan`
    reads of a mapping besides its tiles)."""
    full = getattr(prob, plan.dim)
    size = r * plan.round_size + (full - plan.rounds * plan.round_size)
    return (dataclasses.replace(prob, **{plan.dim: size}),
            dataclasses.replace(mapping, estimated_dram_bytes=mapping.estimated_dram_bytes * size / max(1, full)))


def _sample_plan(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool, plan: DimPlan, r: int,
                 fidelity: str) -> DimPlan | WavePlan | None:
    """How the ``r``-round sample of a huge problem's ``plan`` is itself extrapolated (along
    another dim), or None to run it."""
    sub, sub_mapping = _sample_problem(prob, mapping, plan, r)
    inner = extrapolation_plan(chip, sub, sub_mapping, ideal, fidelity)
    return None if inner is None or (isinstance(inner, DimPlan) and inner.dim == plan.dim) else inner


def sample_work(plan: DimPlan | WavePlan, fidelity: str = "high") -> float:
    """The engine work (DRAM chunks or core tile steps, as ``plan.work``) that the samples of
    ``plan`` may cost: every sample along a dim (each is a separate run), or the largest
    number of waves (one probed run)."""
    check = FIDELITY[fidelity]["steady_check"]
    if isinstance(plan, WavePlan):
        return plan.work * max(sample_rounds(plan.samples, plan.waves, check)) / max(1, plan.waves)
    # samples extrapolated in turn cost the share of theirs that their own samples cost
    share = sample_work(plan.inner, fidelity) / max(1.0, plan.inner.work) if plan.inner is not None else 1.0
    return plan.work * share * sum(sample_rounds(plan.samples, plan.rounds, check)) / max(1, plan.rounds)


def is_huge(plan: DimPlan | WavePlan | None) -> bool:
    """True for the plan of a problem never simulated in full: its work is above HUGE_WORK."""
    return plan is not None and plan.work > HUGE_WORK


def too_costly(plan: DimPlan | WavePlan | None, fidelity: str = "high") -> bool:
    """True for the plan of a huge problem (``work`` > HUGE_WORK) whose samples would cost
    more than SAMPLE_BUDGET; never for a problem of at most HUGE_WORK."""
    return is_huge(plan) and sample_work(plan, fidelity) > SAMPLE_BUDGET


def _dram_stats(run: KernelRun) -> np.ndarray:
    return np.nan_to_num(run.dram_stats, posinf=0.0)


# the DRAM model's event counts (row outcomes, activates, refreshes, bus events): the line
# through two samples may take one below zero, since a sample of another size lays its rows
# out differently (A's row stride is k: an int8 128x28672x16384 GEMM on h100_sxm had 29 k
# rounds with more row hits than 56 had, and its line gave a row-hit rate of -0.086)
_EVENT_COUNTS = [D.S_ROW_HITS, D.S_ROW_EMPTY, D.S_ROW_CONFLICTS, D.S_ACTIVATES, D.S_REFRESHES,
                 D.S_TURNAROUNDS, D.S_REORDERED_HITS, D.S_HOLE_FILLS]


def _events_possible(line: np.ndarray, ref: np.ndarray) -> np.ndarray:
    """``line`` with its event counts kept possible: where the line takes any below zero, all
    of them are the larger sample ``ref``'s per request, times the line's requests (the mix
    of the last sample, not a negative margin)."""
    if not (line[_EVENT_COUNTS] < 0).any() or ref[D.S_REQUESTS] <= 0:
        return line
    out = line.copy()
    out[_EVENT_COUNTS] = ref[_EVENT_COUNTS] * (max(line[D.S_REQUESTS], 0.0) / ref[D.S_REQUESTS])
    return out


def _line(a: KernelRun, b: KernelRun, f: float) -> KernelRun:
    """Statistics at ``a + (b - a) * f`` (affine extrapolation of two runs)."""
    s1, s2 = _dram_stats(a), _dram_stats(b)
    return dataclasses.replace(
        b, stats=a.stats + (b.stats - a.stats) * f,
        hist=np.round(a.hist + (b.hist - a.hist) * f).astype(np.int64),
        makespan=a.makespan + (b.makespan - a.makespan) * f,
        dram_stats=_events_possible(s1 + (s2 - s1) * f, s2))


def _slope(x: KernelRun, y: KernelRun, rx: int, ry: int, key: str) -> float:
    """Growth per round of the makespan (``t``) or of the DRAM bytes (``bytes``)."""
    vx = x.makespan if key == "t" else float(x.stats[:, K.S_DRAM_READ].sum() + x.stats[:, K.S_DRAM_WRITE].sum())
    vy = y.makespan if key == "t" else float(y.stats[:, K.S_DRAM_READ].sum() + y.stats[:, K.S_DRAM_WRITE].sum())
    return (vy - vx) / (ry - rx)


def sample_rounds(samples: tuple[int, int], total: int, check: bool) -> list[int]:
    """Every sample (in rounds, or whole waves) :func:`_steady_samples` may ask for, in order:
    r1, r2, then r2 + d, r2 + 2d, ... (d = r2 - r1) while they fit in half the problem and
    the ``MAX_DOUBLINGS`` allow; only (r1, r2) when the steady state is not checked."""
    rounds = list(samples)
    if check:
        while len(rounds) < 3 + MAX_DOUBLINGS and 2 * rounds[-1] - rounds[-2] <= total // 2:
            rounds.append(2 * rounds[-1] - rounds[-2])
    return rounds


def _steady_samples(run, rounds: list[int], check: bool):
    """The two samples to extrapolate from: (b, c, r2, r3, steady), or None when the
    problem is too short for a third sample (simulate it in full).

    ``rounds`` come from :func:`sample_rounds`.  Over each three consecutive samples
    r1 < r2 < r3, if the slope over (r1, r2) and over (r2, r3) differ by more than
    STEADY_TOLERANCE in time or DRAM bytes (caches warming up, reuse not yet periodic, or
    work per round that grows, as causal attention's does along its queries), the next
    three are tried.  ``steady`` is True, False (never steady: the largest samples, see
    :func:`unsteady_and_affordable`) or None (``check`` off: a straight line through the
    first two samples)."""
    a, b = run(rounds[0]), run(rounds[1])
    if not check:
        return a, b, rounds[0], rounds[1], None
    if len(rounds) < 3:
        return None
    ran = {rounds[0]: a, rounds[1]: b}
    for i in range(2, len(rounds)):
        r1, r2, r3 = rounds[i - 2], rounds[i - 1], rounds[i]
        c = ran[r3] = run(r3)
        if _agree(a, b, c, r1, r2, r3):
            return b, c, r2, r3, True
        a, b = b, c
    # a pattern that repeats every two sample spacings (grouped rasterisation dealing a
    # wave's tiles from alternating panels: the H200's 131072x8192x1280 fp8 qkv GEMM of a
    # 70B TP8 prefill grows by 99.5 and 87.2 MB of DRAM traffic in turn, at a steady 131.2k
    # cycles per wave) is steady at twice the spacing: the samples already run, taken every
    # other one - when the growth over each spacing repeats the one two spacings before it
    # (a period of two, not a trend that a wider triple happens to hide: a 24x8192x10240
    # GEMV's k samples agreed at twice the spacing without repeating, 4 % off its full run)
    for i in range(4, len(rounds)):
        r = rounds[i - 4:i + 1]
        if len({r[j + 1] - r[j] for j in range(4)}) == 1 and _repeats(*(ran[x] for x in r), r):
            return ran[r[2]], ran[r[4]], r[2], r[4], True
    return a, b, rounds[-2], rounds[-1], False


def _repeats(a: KernelRun, b: KernelRun, c: KernelRun, d: KernelRun, e: KernelRun, r: list[int]) -> bool:
    """Whether the growth over each of four equal spacings r[0] < ... < r[4] equals, within
    STEADY_TOLERANCE, the growth two spacings before it, in time and in DRAM bytes."""
    runs = (a, b, c, d, e)
    for key in ("t", "bytes"):
        s = [_slope(runs[j], runs[j + 1], r[j], r[j + 1], key) for j in range(4)]
        if any(abs(s[j + 2] - s[j]) > STEADY_TOLERANCE * max(abs(s[j + 2]), 1e-9) for j in range(2)):
            return False
    return True


def _agree(a: KernelRun, b: KernelRun, c: KernelRun, r1: int, r2: int, r3: int) -> bool:
    """Whether the growth over (r1, r2) and over (r2, r3) agree within STEADY_TOLERANCE in
    time and in DRAM bytes."""
    return all(abs(s2 - s1) <= STEADY_TOLERANCE * max(abs(s2), 1e-9)
               for s1, s2 in ((_slope(a, b, r1, r2, key), _slope(b, c, r2, r3, key)) for key in ("t", "bytes")))


def unsteady_and_affordable(run: KernelRun, plan: DimPlan | WavePlan | None) -> bool:
    """True when ``run`` was extrapolated from samples that never became steady and its
    problem is cheap enough to simulate in full instead (``UNSTEADY_FULL_WORK``).  The
    caller decides once per op, for the candidate that won: candidates are ranked on their
    extrapolations, so only one full run is paid."""
    return (plan is not None and run.extrapolated is not None and run.extrapolated.get("steady") is False
            and plan.work <= UNSTEADY_FULL_WORK)


def _wave_samples(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool, bases, plan: WavePlan,
                  rounds: list[int], check: bool) -> dict[int, KernelRun]:
    """The runs of the first waves that :func:`extrapolated_run` may need, by tile count,
    from one probed engine run (:func:`run_kernel_probed`): each whole-wave sample, and
    each sample that may be the base of the extrapolation plus the last partial wave's
    tiles.  The probed run stops at the steady state, so it costs one run of the largest
    sample needed plus a drain per sample, where running them one by one costs their sum.
    ``rounds`` are the whole-wave samples (:func:`sample_rounds`)."""
    P, left = plan.cores, plan.tiles - plan.waves * plan.cores
    probes = {r * P: Probe(r * P, r) for r in rounds}
    # the base of the extrapolation is the earlier sample of the pair it uses
    for r in (rounds[1:-1] if check else rounds[:1]):
        if left:
            probes[r * P + left] = Probe(r * P + left)
    return run_kernel_probed(chip, prob, mapping, ideal, bases, tuple(probes[t] for t in sorted(probes)),
                             STEADY_TOLERANCE if check else 0.0)


def extrapolated_run(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool, plan: DimPlan | WavePlan,
                     fidelity: str = "high", bases=None) -> KernelRun | None:
    """Run shortened copies and extrapolate every statistic along the plan, after
    checking that the problem is in steady state; None when it is not (simulate fully).

    Along a dim, each copy keeps the original remainder (edge tiles) and a number of
    whole rounds; along waves (cyclic mode), a copy runs the first w whole waves of
    output tiles, and the last partial wave is added as the difference between w1 waves
    plus the leftover tiles and w1 waves (all those copies are drained samples of one
    probed run, :func:`_wave_samples`).  Cycles and counts are affine in the number of
    rounds once the pipeline and the caches are in steady state (:func:`_steady_samples`).

    A huge problem's plan with an ``inner`` plan extrapolates each of its samples too, along
    another dim (``bases``: the whole problem's operand addresses, which every sample keeps)."""
    bases = operand_bases(prob) if bases is None else bases
    check = FIDELITY[fidelity]["steady_check"]
    total = plan.waves if isinstance(plan, WavePlan) else plan.rounds
    rounds = sample_rounds(plan.samples, total, check)
    inner_records: list[dict] = []
    if check and len(rounds) < 3:
        return None  # too short for a third sample (as _steady_samples finds): simulate in full
    if isinstance(plan, WavePlan):
        P = plan.cores
        left = plan.tiles - total * P
        sampled = _wave_samples(chip, prob, mapping, ideal, bases, plan, rounds, check)

        def run(r: int, extra: int = 0) -> KernelRun:
            # a sample of the one probed run; a fresh run only where it ended sooner
            # than the check below asks (the same floating-point test, summed in
            # another order, may land on the other side of the tolerance)
            got = sampled.get(r * P + extra)
            return got if got is not None else run_kernel(chip, prob, mapping, ideal, bases, tile_limit=r * P + extra)
    else:
        dim, rs = plan.dim, plan.round_size
        rem = getattr(prob, dim) - total * rs

        def run(r: int) -> KernelRun:
            sub = dataclasses.replace(prob, **{dim: r * rs + rem})
            if plan.inner is not None:
                inner = _sample_plan(chip, prob, mapping, ideal, plan, r, fidelity)
                got = extrapolated_run(chip, sub, mapping, ideal, inner, fidelity, bases) if inner is not None else None
                if got is not None:
                    inner_records.append(got.extrapolated)
                    return got
            return run_kernel(chip, sub, mapping, ideal, bases)
    found = _steady_samples(run, rounds, check)
    if found is None:
        return None
    b, c, r2, r3, steady = found
    out = _line(b, c, (total - r2) / (r3 - r2))
    if isinstance(plan, WavePlan):
        if left:
            d = run(r2, left)
            out = dataclasses.replace(out, stats=out.stats + (d.stats - b.stats), hist=out.hist + (d.hist - b.hist),
                                      makespan=out.makespan + (d.makespan - b.makespan),
                                      dram_stats=_events_possible(
                                          out.dram_stats + (_dram_stats(d) - _dram_stats(b)), _dram_stats(d)))
        record = {"dim": "waves", "waves": total, "leftover_tiles": left, "sampled_waves": [r2, r3],
                  "steady": steady, "period_aligned": plan.period_aligned}
    else:
        record = {"dim": plan.dim, "rounds": total, "round_size": plan.round_size, "sampled_rounds": [r2, r3],
                  "steady": steady}
        if inner_records:
            # each sample extrapolated in turn: the last one's plan, and whether every one was steady
            record["samples_extrapolated"] = dict(inner_records[-1], steady=all(
                x.get("steady") is not False for x in inner_records))
    return dataclasses.replace(out, extrapolated=record)
