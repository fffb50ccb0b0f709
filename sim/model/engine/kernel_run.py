"""One run of the compiled event engine (:func:`sim.model.kernels.engine.run_tiled`) on a
tile problem and its mapping, as a :class:`KernelRun`; remembered in memory and on disk
(:mod:`sim.model.engine.run_cache`) by a digest of exactly the arrays the kernel reads."""
from __future__ import annotations

import dataclasses
import functools
import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

import sim.model.engine.progress as progress
import sim.model.engine.run_cache as run_cache
import sim.model.kernels.engine as K
import sim.model.kernels.probe as KP
from sim.ir.lowered import TileProblem
from sim.model.engine.arrays import kernel_arrays
from sim.model.engine.memo import Memo
from sim.model.kernels.io import KernelOutputs, ProbeSamples
from sim.model.mapper.search import Mapping
from sim.model.memory.dram import dram_params
from sim.spec.chip import ChipSpec


@dataclass(frozen=True)
class KernelRun:
    """What one engine run (or an extrapolation of several) measured.

    ``stats`` [cores, K.S_LEN] per-core counters; ``hist`` [cores, 8] steps per
    (full/edge m, k, n) tile shape; ``makespan`` cycles; ``dram_stats`` the DRAM model's
    statistics (indexed by ``sim.model.kernels.dram.S_*``); ``P`` the cores (block slots)
    the kernel ran; ``geo`` and ``ranges`` the geometry and per-core ranges it read;
    ``extrapolated`` how the run was extrapolated from samples (None: simulated in full),
    as reported in ``OpResult.details``."""

    stats: np.ndarray
    hist: np.ndarray
    makespan: float
    dram_stats: np.ndarray
    P: int
    geo: np.ndarray
    ranges: np.ndarray
    extrapolated: dict[str, Any] | None = None

    def copy(self) -> "KernelRun":
        """The same run with its own copies of the arrays (the memo's stay untouched)."""
        return dataclasses.replace(self, **{f.name: getattr(self, f.name).copy() for f in dataclasses.fields(self)
                                            if isinstance(getattr(self, f.name), np.ndarray)})


class EngineStall(RuntimeError):
    """The compiled engine stopped making progress (a simulator bug, not bad input): its
    progress guard saw too many consecutive events at one instant.  Raised instead of
    hanging; the message names the op, the mapping and the cycle."""


#: engine runs remembered by the exact numbers the kernel reads (see run_kernel): a
#: KernelRun, or a probed run's samples as stored (run_kernel_probed; its digest covers
#: the probes too, so the two kinds never share a key)
_RUN_CACHE: "Memo[KernelRun | dict]" = Memo(2048)


def clear() -> None:
    """Forget every engine run remembered in memory (the disk cache stays)."""
    _RUN_CACHE.clear()


@functools.lru_cache(maxsize=64)
def _dram_params(spec):
    """The DRAM model's parameters and their array for one chip's DRAM spec (shared: the
    kernels only read the array)."""
    params = dram_params(spec)
    return params, params.to_array()


def _digest(arrays) -> bytes:
    """A run's memo key: every array the kernel reads, in order (a run's KernelInputs
    fields, then the DRAM parameters, then a probed run's probes), by dtype, shape and
    bytes."""
    h = hashlib.blake2b(digest_size=20)
    for a in arrays:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    return h.digest()


def _run_size(prob: TileProblem, tile_limit: int) -> str:
    """An engine run's size in words, for progress: its (sampled) problem, and the output
    tiles it stops at in cyclic mode."""
    size = f"m x k x n {prob.m:,} x {prob.k:,} x {prob.n:,}" + (f", {prob.count:,} instances" if prob.count > 1 else "")
    return size + (f", first {tile_limit:,} output tiles" if tile_limit else "")


def _raise_stall(prob: TileProblem, mapping: Mapping, t: float) -> None:
    raise EngineStall(
        f"the engine stopped making progress on op '{prob.name}' at cycle {-t - 1.0:,.0f} "
        f"(mapping {mapping.tile_m}x{mapping.tile_n}x{mapping.tile_k} on {mapping.cores_used} cores, "
        f"{mapping.distribution}): a simulator bug, please report it with the command that ran")


def run_kernel(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool, bases=None,
               tile_limit: int = 0) -> KernelRun:
    """One engine run.  The kernel is a pure function of its input arrays (fresh DRAM
    state, no randomness), so a run is remembered by a digest of exactly those arrays:
    two chips or ops that differ only in what the kernel never sees (an SRAM size that
    leads to the same mapping, a name) share one run - the common case in a sweep.
    ``bases`` fixes the operand addresses; ``tile_limit`` (> 0) stops after that many
    output tiles (cyclic mode)."""
    inputs = kernel_arrays(chip, prob, mapping, ideal, bases)
    inputs.geo[K.G_TILE_LIMIT] = tile_limit
    P = inputs.P
    params, p = _dram_params(chip.memory.dram)
    key = _digest((*inputs, p))

    def simulate() -> KernelRun:
        stored = run_cache.load(key)  # another process (or an earlier run) may have simulated it
        if stored is not None:
            return KernelRun(**stored)
        if progress.active():
            progress.engine_run_started(_run_size(prob, tile_limit))
        state = params.new_state()
        out = KernelOutputs.zeros(P)
        K.run_tiled(inputs, p, state, out)
        if out.out_time[0] < 0.0:
            _raise_stall(prob, mapping, out.out_time[0])
        # callers read only the DRAM statistics (the state's last array)
        run = KernelRun(stats=out.stats, hist=out.hist, makespan=float(out.out_time[0]), dram_stats=state[-1], P=P,
                        geo=inputs.geo, ranges=inputs.ranges)
        run_cache.store(key, {"stats": run.stats, "hist": run.hist, "makespan": run.makespan,
                              "dram_stats": run.dram_stats, "P": run.P, "geo": run.geo, "ranges": run.ranges})
        return run

    return _RUN_CACHE.get_or_compute(key, simulate).copy()


@dataclass(frozen=True)
class Probe:
    """One drained sample asked of a probed run: the run as if it stopped dealing output
    tiles at ``tiles``; ``rounds`` (whole waves) when it is one of the samples the
    steady-state check compares, else None."""

    tiles: int
    rounds: int | None = None


def run_kernel_probed(chip: ChipSpec, prob: TileProblem, mapping: Mapping, ideal: bool, bases,
                      probes: tuple[Probe, ...], steady_tolerance: float = 0.0) -> dict[int, KernelRun]:
    """Cyclic mode: the runs with ``tile_limit`` = each probe's tile count (ascending), from
    one engine run that pauses at each and drains a copy of its state
    (:func:`sim.model.kernels.probe.run_tiled_probed`): each is identical to
    ``run_kernel(..., tile_limit=probe.tiles)``.  With ``steady_tolerance`` > 0 the run
    ends at the first checked probe whose last two checked intervals grow alike within it
    (later probes are then missing from the answer).  Remembered like :func:`run_kernel`."""
    inputs = kernel_arrays(chip, prob, mapping, ideal, bases)
    inputs.fp[K.F_STEADY_TOL] = steady_tolerance
    P = inputs.P
    tiles = [q.tiles for q in probes]
    if mapping.distribution != "cyclic" or tiles != sorted(set(tiles)) or (tiles and tiles[0] < P):
        # the first P tiles are dealt at the start, before any core can ask for one
        raise ValueError(f"probes must be ascending tile counts of at least the {P} cores of a cyclic run: {tiles}")
    params, p = _dram_params(chip.memory.dram)
    pr = np.zeros((len(probes), 3), dtype=np.int64)
    for i, q in enumerate(probes):
        pr[i, KP.PR_TILES] = q.tiles
        pr[i, KP.PR_CHECK] = q.rounds is not None
        pr[i, KP.PR_ROUNDS] = q.rounds or 0
    key = _digest((*inputs, p, pr))

    def simulate() -> dict:
        stored = run_cache.load(key)
        if stored is not None:
            return stored
        if progress.active():
            progress.engine_run_started(_run_size(prob, tiles[-1] if tiles else 0)
                                        + f", {len(tiles)} samples drained from it")
        state = params.new_state()
        samples = ProbeSamples.zeros(len(pr), P, len(state[-1]))
        taken = int(KP.run_tiled_probed(inputs, p, state, pr, samples))
        if samples.out_time[0] < 0.0:
            _raise_stall(prob, mapping, samples.out_time[0])
        found = {"P": P, "geo": inputs.geo, "ranges": inputs.ranges, "tiles": pr[:taken, 0],
                 "stats": samples.stats[:taken], "hist": samples.hist[:taken],
                 "makespan": samples.makespan[:taken], "dram_stats": samples.dram_stats[:taken]}
        run_cache.store(key, found)
        return found

    found = _RUN_CACHE.get_or_compute(key, simulate)
    out = {}
    for i, tiles in enumerate(found["tiles"]):
        geo = found["geo"].copy()
        geo[K.G_TILE_LIMIT] = tiles
        out[int(tiles)] = KernelRun(stats=found["stats"][i].copy(), hist=found["hist"][i].copy(),
                                    makespan=float(found["makespan"][i]), dram_stats=found["dram_stats"][i].copy(),
                                    P=int(found["P"]), geo=geo, ranges=found["ranges"].copy())
    return out
