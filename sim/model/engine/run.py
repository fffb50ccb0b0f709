"""Orchestration: simulate one op on one chip → :class:`~sim.ir.results.OpResult`.

Steps (plain Python around one compiled kernel):

1. lower the op to a tile problem (:mod:`sim.model.engine.lower`);
2. map it (:func:`sim.model.mapper.search.search`), memoised per (chip, op, options);
3. build the kernel's arrays and run :func:`sim.model.kernels.engine.run_tiled` - or, for
   problems with very many steps, run two shortened copies of the problem along its
   longest tile loop and extrapolate linearly (the tile nest is periodic along that loop,
   so every count and the cycle total are affine in its trip count; memory stays flat in
   the problem size);
4. turn the per-core statistics into a result with energy and roofline terms.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import itertools
import math
from collections import OrderedDict
from typing import Any

import numpy as np

import sim.model.cost.energy as E
import sim.model.engine.run_cache as run_cache
import sim.model.kernels.dram as D
import sim.model.kernels.engine as K
from sim.errors import MappingError, ShapeError
from sim.ir.ops import Attention, Collective, Conv2d, Copy, Gemm, VectorOp, op_min_dram_bytes
from sim.ir.results import OpResult
from sim.model.dataflow import get_dataflow
from sim.model.engine.lower import (FIDELITY, Options, blocks_sharing_cores, kernel_arrays, lower_op, memory_budget,
                                    operand_bases, raster_group)
from sim.model.mapper.search import Mapping, TileProblem, footprint_bytes, search, search_top
from sim.model.memory.dram import DramParams
from sim.spec.dtypes import get_format

#: False simulates every problem in full (tests compare extrapolation against that)
EXTRAPOLATE = True
#: the smallest samples (rounds) an extrapolation draws at the default fidelity
MIN_SAMPLE_ROUNDS = FIDELITY["high"]["min_sample_rounds"]
#: slopes over consecutive samples must agree this closely for the steady state
STEADY_TOLERANCE = 0.05
#: at most this many times the samples are doubled while looking for a steady state
MAX_DOUBLINGS = 2
#: candidate mappings whose estimate is within this factor of the best are simulated
REFINE_WITHIN = 1.25
#: candidates simulated for problems large enough to need extrapolation
REFINE_LARGE = 2
_MEMO: "OrderedDict[Any, OpResult]" = OrderedDict()
_MEMO_MAX = 4096


def clear_cache() -> None:
    """Forget every memoised op result and engine run (benchmarks time cold runs)."""
    _MEMO.clear()
    _RUN_CACHE.clear()


def _chip_key(chip) -> Any:
    return (chip.name, hash(chip))


def memoised(chip, op, options: Options, compute) -> OpResult:
    """``compute()``'s result for (chip, op, options), remembered: identical questions return
    the same result object (the whole-model runs repeat the same layer's ops)."""
    key = (_chip_key(chip), op, options)
    hit = _MEMO.get(key)
    if hit is not None:
        _MEMO.move_to_end(key)
        return hit
    res = compute()
    _MEMO[key] = res
    if len(_MEMO) > _MEMO_MAX:
        _MEMO.popitem(last=False)
    return res


def simulate_op_at_clock(chip, op, options: Options | None = None) -> OpResult:
    """Simulate ``op`` on ``chip`` at its ``clock_mhz`` (no power limit: the DVFS search of
    :mod:`sim.model.engine.dvfs` calls this at each clock it tries; everyone else calls
    :func:`sim.model.engine.simulate.simulate_op`)."""
    options = options or Options()
    if isinstance(op, Collective):
        return memoised(chip, op, options, lambda: _collective(chip, op, options))
    return memoised(chip, op, options, lambda: _simulate_tiled(chip, op, options))


def _rate_class(mapping_info: dict) -> str | None:
    return mapping_info.get("rate_class")


#: engine runs remembered by the exact numbers the kernel reads (see _run_kernel)
_RUN_CACHE: "OrderedDict[bytes, dict]" = OrderedDict()
_RUN_CACHE_SIZE = 2048


@functools.lru_cache(maxsize=64)
def _dram_params(spec):
    """The DRAM model's parameters and their array for one chip's DRAM spec (shared: the
    kernels only read the array)."""
    params = DramParams.from_spec(spec)
    return params, params.to_array()


def _run_kernel(chip, prob: TileProblem, mapping: Mapping, ideal: bool, bases=None, tile_limit: int = 0) -> dict:
    """One engine run.  The kernel is a pure function of its input arrays (fresh DRAM
    state, no randomness), so a run is remembered by a digest of exactly those arrays:
    two chips or ops that differ only in what the kernel never sees (an SRAM size that
    leads to the same mapping, a name) share one run - the common case in a sweep."""
    arrs = kernel_arrays(chip, prob, mapping, ideal, bases)
    arrs["geo"][K.G_TILE_LIMIT] = tile_limit
    P = arrs["P"]
    params, p = _dram_params(chip.memory.dram)
    inputs = (arrs["geo"], arrs["desc"], arrs["ranges"], arrs["ctab"], arrs["fp"], p)
    h = hashlib.blake2b(digest_size=20)
    for a in inputs:
        a = np.ascontiguousarray(a)
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(a.tobytes())
    key = h.digest()
    hit = _RUN_CACHE.get(key)
    if hit is not None:
        _RUN_CACHE.move_to_end(key)
        return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in hit.items()}
    run = run_cache.load(key)  # another process (or an earlier run) may have simulated it
    if run is None:
        state = params.new_state()
        stats = np.zeros((P, K.S_LEN))
        hist = np.zeros((P, 8), dtype=np.int64)
        out_time = np.zeros(1)
        K.run_tiled(*inputs[:5], p, state, stats, hist, out_time)
        # callers read only the DRAM statistics (the state's last array)
        run = {"stats": stats, "hist": hist, "makespan": float(out_time[0]), "dram_state": (state[-1],), "P": P,
               "geo": arrs["geo"], "ranges": arrs["ranges"]}
        run_cache.store(key, run)
    _RUN_CACHE[key] = run
    if len(_RUN_CACHE) > _RUN_CACHE_SIZE:
        _RUN_CACHE.popitem(last=False)
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in run.items()}


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
    Cyclic mode is shortened by whole waves of output tiles instead (see
    :func:`_extrapolated_waves`), or along k.
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


def _extrapolation_plan(chip, prob: TileProblem, mapping: Mapping, ideal: bool, fidelity: str = "high"):
    """How to shorten a large problem: ("dim", dim, round size, rounds, (r1, r2)),
    ("waves", total tiles, cores, waves, (w1, w2)), or None to simulate in full."""
    fid = FIDELITY[fidelity]
    steps = _max_core_steps(prob, mapping)
    chunks = 0.0 if ideal else mapping.estimated_dram_bytes / max(1, chip.memory.dram.interleave_bytes)
    work = max(steps, chunks)
    if not EXTRAPOLATE:
        return None
    sample = fid["sample_chunks"]
    if steps <= fid["steps"] and chunks <= fid["chunks"]:
        return None
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
        if 4 * w2 <= waves:
            return ("waves", tiles, P, waves, (w1, w2))
    best = None
    for dim, (rs, rounds) in _rounds(prob, mapping, bool(chip.memory.chip_srams)).items():
        if rounds >= 4 * fid["min_sample_rounds"][1] and (best is None or rounds > best[2]):
            best = (dim, rs, rounds)
    if best is None:
        return None
    dim, rs, rounds = best
    r2 = int(min(rounds // 4, max(fid["min_sample_rounds"][1], sample / max(work / rounds, 1.0))))
    r1 = max(fid["min_sample_rounds"][0], r2 // 4)
    return ("dim", dim, rs, rounds, (r1, r2))


def _line(a: dict, b: dict, f: float) -> dict:
    """Statistics at ``a + (b - a) * f`` (affine extrapolation of two runs)."""
    out = dict(b)
    out["stats"] = a["stats"] + (b["stats"] - a["stats"]) * f
    out["hist"] = np.round(a["hist"] + (b["hist"] - a["hist"]) * f).astype(np.int64)
    out["makespan"] = a["makespan"] + (b["makespan"] - a["makespan"]) * f
    s1 = np.nan_to_num(a["dram_state"][-1], posinf=0.0)
    s2 = np.nan_to_num(b["dram_state"][-1], posinf=0.0)
    out["dram_stats"] = s1 + (s2 - s1) * f
    return out


def _extrapolated_run(chip, prob: TileProblem, mapping: Mapping, ideal: bool, plan,
                      fidelity: str = "high") -> dict | None:
    """Run shortened copies and extrapolate every statistic along the plan, after
    checking that the problem is in steady state; None when it is not (simulate fully).

    Along a dim, each copy keeps the original remainder (edge tiles) and a number of
    whole rounds; along waves (cyclic mode), a copy runs the first w whole waves of
    output tiles, and the last partial wave is added as the difference between w1 waves
    plus the leftover tiles and w1 waves.  Cycles and counts are affine in the number of
    rounds once the pipeline and the caches are in steady state.  Three equally spaced
    samples r1 < r2 < r3 are run; if the slope over (r1, r2) and over (r2, r3) differ by more than
    STEADY_TOLERANCE in time or DRAM bytes, the samples are doubled (caches warming up,
    reuse not yet periodic) until they agree or reach half the problem."""
    bases = operand_bases(prob)
    if plan[0] == "waves":
        _, tiles, P, total, (r1, r2) = plan
        run = lambda r: _run_kernel(chip, prob, mapping, ideal, bases, tile_limit=r * P)  # noqa: E731
    else:
        _, dim, rs, total, (r1, r2) = plan
        rem = getattr(prob, dim) - total * rs
        run = lambda r: _run_kernel(chip, dataclasses.replace(prob, **{dim: r * rs + rem}), mapping, ideal,  # noqa: E731
                                    bases)
    a, b = run(r1), run(r2)
    steady = True
    c = None
    doublings = 0
    if not FIDELITY[fidelity]["steady_check"]:
        # fast fidelity: a straight line through two samples, the steady state unchecked
        steady = None
        b, c, r2, r3 = a, b, r1, r2
    while steady is not None:
        r3 = 2 * r2 - r1
        if r3 > total // 2 or doublings > MAX_DOUBLINGS:
            if c is None:
                return None
            # never steady within half the problem: extrapolate from the largest samples
            # (flagged in the result) rather than simulate a huge problem in full
            steady = False
            b, c, r2, r3 = a, b, r1, r2
            break
        c = run(r3)

        def slope(x, y, rx, ry, key):
            vx = x["makespan"] if key == "t" else float(x["stats"][:, K.S_DRAM_READ].sum() + x["stats"][:, K.S_DRAM_WRITE].sum())
            vy = y["makespan"] if key == "t" else float(y["stats"][:, K.S_DRAM_READ].sum() + y["stats"][:, K.S_DRAM_WRITE].sum())
            return (vy - vx) / (ry - rx)

        ok = True
        for key in ("t", "bytes"):
            s1, s2 = slope(a, b, r1, r2, key), slope(b, c, r2, r3, key)
            if abs(s2 - s1) > STEADY_TOLERANCE * max(abs(s2), 1e-9):
                ok = False
        if ok:
            break
        doublings += 1
        a, b, r1, r2 = b, c, r2, r3
    out = _line(b, c, (total - r2) / (r3 - r2))
    if plan[0] == "waves":
        left = tiles - total * P
        if left:
            d = _run_kernel(chip, prob, mapping, ideal, bases, tile_limit=r2 * P + left)
            for key in ("stats", "hist", "makespan"):
                out[key] = out[key] + (d[key] - b[key])
            out["dram_stats"] = out["dram_stats"] + (np.nan_to_num(d["dram_state"][-1], posinf=0.0)
                                                     - np.nan_to_num(b["dram_state"][-1], posinf=0.0))
        out["extrapolated"] = {"dim": "waves", "waves": total, "leftover_tiles": left, "sampled_waves": [r2, r3],
                               "steady": steady}
    else:
        out["extrapolated"] = {"dim": plan[1], "rounds": total, "round_size": plan[2], "sampled_rounds": [r2, r3],
                               "steady": steady}
    return out


def _simulate_tiled(chip, op, options: Options) -> OpResult:
    ideal = options.memory == "ideal"
    cores = chip.cores.count
    prob, info = lower_op(chip, op, options, cores)
    budget = memory_budget(chip, ideal and not prob.causal)
    ms = getattr(chip, "mapping", None)
    fid = FIDELITY[options.fidelity]
    top = min(ms.refine_candidates, fid["refine"]) if (ms is not None and not ideal) else 1
    cands = _candidates(chip, prob, info, cores, budget, top, ideal, options.split_k)
    if len(cands) > fid["refine_large"] and _extrapolation_plan(chip, cands[0][1], cands[0][2], ideal,
                                                                options.fidelity) is not None:
        cands = cands[:fid["refine_large"]]  # large problems: fewer candidates, each is costly to simulate
    best = None
    for est, p, mapping, split in cands:
        mapping = dataclasses.replace(mapping, compute=dict(info, split_k=split, candidates_simulated=len(cands)))
        plan = _extrapolation_plan(chip, p, mapping, ideal, options.fidelity)
        run = _extrapolated_run(chip, p, mapping, ideal, plan, options.fidelity) if plan is not None else None
        if run is None:
            run = _run_kernel(chip, p, mapping, ideal)
            run["dram_stats"] = run["dram_state"][-1]
            run["extrapolated"] = None
        res = _result(chip, op, p, mapping, mapping.compute, run, ideal)
        if run.get("extrapolated") and res.cycles < res.roofline_cycles:
            # an extrapolation that beats the roofline is wrong: simulate in full
            run = _run_kernel(chip, p, mapping, ideal)
            run["dram_stats"] = run["dram_state"][-1]
            run["extrapolated"] = None
            res = _result(chip, op, p, mapping, mapping.compute, run, ideal)
        if split > 1:
            res = _merge(res, simulate_op_at_clock(chip, _split_k_reduction(op, split),
                                          Options(memory=options.memory, fidelity=options.fidelity)))
        if info.get("kv_splits", 1) > 1:
            res = _merge(res, simulate_op_at_clock(chip, _split_kv_reduction(op, info["kv_splits"]),
                                          Options(memory=options.memory, fidelity=options.fidelity)))
        if best is None or res.seconds < best.seconds:
            best = res
    if options.stream is not None and isinstance(op, VectorOp) and not ideal:
        best = _stream_kernel_rate(chip, op, best, options.stream)
    return best


def _stream_kernel_rate(chip, op: VectorOp, res: OpResult, rule) -> OpResult:
    """A library's memory-bound kernel at its measured rate (a stack's StreamKernelRule):
    its body is the ideal stream's body over the rule's bandwidth fraction, but never
    shorter than the rule's floor for the op's row length; the launch overhead stays.
    Both only lengthen the body, so the kernel never beats the ideal stream (nor the
    roofline)."""
    launch = chip.runtime.op_launch_overhead_ns * chip.clock_hz / 1e9 if chip.runtime is not None else 0.0
    body = max(0.0, res.cycles - launch)
    floor = (rule.floor_ns + rule.floor_ns_per_row_element * op.row_elements) * chip.clock_hz / 1e9
    new_body = max(floor, body / rule.bandwidth_fraction)
    if new_body <= body:
        return res
    cycles = float(math.ceil(new_body + launch - 1e-9))
    seconds = cycles / chip.clock_hz
    dram = res.dram_read_bytes + res.dram_write_bytes
    details = dict(res.details, stream_kernel={"bandwidth_fraction": rule.bandwidth_fraction,
                                               "floor_cycles": floor, "ideal_body_cycles": body,
                                               "source": rule.source})
    return dataclasses.replace(res, cycles=cycles, stall_cycles=res.stall_cycles + (cycles - res.cycles),
                               seconds=seconds, utilization=res.utilization * res.cycles / cycles if cycles else 0.0,
                               achieved_dram_bytes_per_s=dram / seconds if seconds else 0.0, details=details)


def _candidates(chip, prob: TileProblem, info: dict, cores: int, budget, top: int, ideal: bool,
                split_menu: tuple[int, ...] | None = None):
    """(estimate, problem, mapping, split-K factor) of the best ``top`` mappings.

    GEMMs may split k from the chip's ``split_k`` menu: S slices of k run as S times as
    many instances writing fp32 partial sums, then a reduction pass sums them (its
    traffic is part of the estimate)."""
    ms = getattr(chip, "mapping", None)
    menu = (1,)
    if ms is not None and info.get("kind") == "gemm" and not ideal:
        menu = tuple(split_menu or ms.array_split_k.get(info.get("array"), ms.split_k))
    out = []
    error = None
    lanes = int(info.get("rows", 1) * info.get("cols", 1) * info.get("arrays_per_core", 1))
    for (group, blocks), S in itertools.product(blocks_sharing_cores(prob, lanes), sorted(set(menu))):
        if S > 1 and (prob.k // S < max(1, prob.fixed_k or prob.unit_k)):
            continue
        p = group if S == 1 else dataclasses.replace(group, count=prob.count * S, k=-(-prob.k // S),
                                                      layout=dataclasses.replace(prob.layout, c=prob.layout.psum))
        try:
            maps = search_top(p, cores * blocks, budget.shared_by(blocks), top)
        except MappingError as exc:
            error = exc
            continue
        extra = 0.0
        if S > 1:
            out_el = prob.count * prob.m * prob.n
            extra = (S * out_el * 4 + out_el * prob.layout.c) / (budget.dram_bytes_per_cycle * 0.9)
            if chip.runtime is not None:
                extra += chip.runtime.op_launch_overhead_ns * chip.clock_hz / 1e9
        out.extend((m.estimated_cycles + extra, p, m, S) for m in maps)
    if not out:
        raise error if error is not None else MappingError(f"op '{prob.name}': no mapping found")
    out.sort(key=lambda c: c[0])
    # only candidates the estimate cannot tell apart are worth simulating
    return [c for c in out[:top] if c[0] <= out[0][0] * REFINE_WITHIN]


def _split_k_reduction(op, split: int) -> VectorOp:
    """The second pass of a split-K GEMM: sum ``split`` fp32 partial outputs."""
    n_out = op.m * op.n * op.count
    out_bytes = get_format(op.c_dtype).bytes_for(op.m * op.n) * op.count
    return VectorOp(f"{op.name}.split_k_reduce", "split_k_reduce", n_out, float(split),
                    read_bytes=split * n_out * 4, write_bytes=out_bytes)


def _split_kv_reduction(op: Attention, splits: int) -> VectorOp:
    """The second pass of a split-KV (flash-decoding) attention: each query row's
    ``splits`` fp32 partial outputs, rescaled by their softmax maximum and sum, added up
    (cuDNN's lean_reduction_kernel on the H200, [MB] kernel names)."""
    rows = op.batch * op.heads * op.q_len
    n_out = rows * op.head_dim
    return VectorOp(f"{op.name}.split_kv_reduce", "split_kv_reduce", n_out, 2.0 * splits,
                    read_bytes=splits * (n_out + 2 * rows) * 4, write_bytes=get_format(op.dtype).bytes_for(n_out))


def _merge(a: OpResult, b: OpResult) -> OpResult:
    """One result for an op run as two kernels back to back (``b`` after ``a``)."""
    seconds = a.seconds + b.seconds
    cycles = a.cycles + b.cycles
    energy = {k: a.energy_breakdown_pj.get(k, 0.0) + b.energy_breakdown_pj.get(k, 0.0)
              for k in set(a.energy_breakdown_pj) | set(b.energy_breakdown_pj)}
    dram = a.dram_bytes + b.dram_bytes
    details = dict(a.details, second_kernel=b.to_dict())
    terms = [sum(r.details.get(key, 0.0) for r in (a, b)) for key in ("compute_bound_cycles", "memory_bound_cycles")]
    traffic_bound = "compute" if terms[0] >= terms[1] else "memory"
    return dataclasses.replace(
        a, cycles=cycles, compute_cycles=a.compute_cycles + b.compute_cycles,
        stall_cycles=a.stall_cycles + b.stall_cycles, seconds=seconds,
        dram_read_bytes=a.dram_read_bytes + b.dram_read_bytes, dram_write_bytes=a.dram_write_bytes + b.dram_write_bytes,
        l2_hit_bytes=a.l2_hit_bytes + b.l2_hit_bytes, sram_read_bytes=a.sram_read_bytes + b.sram_read_bytes,
        sram_write_bytes=a.sram_write_bytes + b.sram_write_bytes, energy_pj=a.energy_pj + b.energy_pj,
        energy_breakdown_pj=energy, roofline_cycles=max(a.roofline_cycles, a.roofline_cycles + b.roofline_cycles),
        utilization=a.utilization * a.cycles / cycles if cycles else 0.0,
        dram_intensity=a.flops / dram if dram else a.dram_intensity, traffic_bound=traffic_bound,
        achieved_dram_bytes_per_s=dram / seconds if seconds else 0.0, details=details)


def _result(chip, op, prob: TileProblem, mapping: Mapping, info: dict, run: dict, ideal: bool) -> OpResult:
    stats = run["stats"]
    busiest = int(np.argmax(stats[:, K.S_COMPUTE])) if len(stats) else 0
    compute = float(stats[busiest, K.S_COMPUTE]) if len(stats) else 0.0
    makespan = float(run["makespan"])
    launch = chip.runtime.op_launch_overhead_ns * chip.clock_hz / 1e9 if chip.runtime is not None else 0.0
    ms = getattr(chip, "mapping", None)
    if ms is not None and info.get("kind") in ("gemm", "attention"):
        launch += ms.kernel_prologue_ns * chip.clock_hz / 1e9
    if ideal:
        # SCALE-Sim's convention: the reported count is the index of the last cycle
        cycles = max(0.0, makespan - 1.0)
        compute_c = max(0.0, compute - 1.0)
    else:
        cycles = makespan + launch
        compute_c = compute
    cycles = float(math.ceil(cycles - 1e-9))
    seconds = cycles / chip.clock_hz
    dram_rd = float(stats[:, K.S_DRAM_READ].sum())
    dram_wr = float(stats[:, K.S_DRAM_WRITE].sum())
    l2_hit = float(stats[:, K.S_L2_HIT].sum())
    macs = int(getattr(op, "macs", 0) or 0)
    flops = float(getattr(op, "flops", 0) or 0)
    rate = info.get("rate_class")
    # roofline terms at the chip's peaks
    if rate is not None and macs:
        sparse = bool(info.get("sparse_2_4_units_used"))
        peak_macs = _peak_macs(chip, info)
        compute_bound = macs / peak_macs / (info.get("sparse_speedup", 2.0) if sparse else 1.0)
    else:
        peak_macs = 0.0
        compute_bound = 0.0
    if info.get("kind") == "vector":
        vu = chip.cores.vector_unit
        compute_bound = max(compute_bound, flops / (vu.lanes * vu.ops_per_lane_per_cycle * chip.cores.count))
    peak_bpc = chip.memory.dram.peak_bytes_per_s / chip.clock_hz
    memory_bound = 0.0 if ideal else (dram_rd + dram_wr) / peak_bpc
    roof = max(compute_bound, memory_bound)
    # the roofline's class at the op's own (compulsory) intensity, and the same test with
    # the traffic this mapping moves (memory-bound when the buffers cannot hold the reuse)
    min_bytes = float(op_min_dram_bytes(op))
    bound = "compute" if compute_bound >= min_bytes / peak_bpc else "memory"
    traffic_bound = "compute" if compute_bound >= memory_bound else "memory"
    util = macs / (cycles * peak_macs) if (cycles > 0 and peak_macs > 0) else 0.0
    # SRAM traffic: DMA fills and drains, plus the array's reads of its tiles
    sram_wr = float(stats[:, K.S_BYTES_A].sum() + stats[:, K.S_BYTES_B].sum() + stats[:, K.S_BYTES_PSUM_READ].sum())
    sram_rd = float(stats[:, K.S_BYTES_C_WRITE].sum())
    array_rd, array_wr, rf_bytes = _array_access_bytes(prob, mapping, run["hist"], run.get("ranges"), info)
    sram_rd += array_rd
    sram_wr += array_wr
    energy = _energy(chip, op, info, macs, flops, dram_rd, dram_wr, l2_hit, sram_rd, sram_wr, rf_bytes, seconds)
    details = {
        "cores_used": int(mapping.cores_used),
        "per_core_compute_cycles_max": compute,
        "steps": float(stats[:, K.S_STEPS].sum()),
        "tile_loads_a": float(stats[:, K.S_LOADS_A].sum()),
        "tile_loads_b": float(stats[:, K.S_LOADS_B].sum()),
        "psum_reads": float(stats[:, K.S_PSUM_READS].sum()),
        "stores": float(stats[:, K.S_STORES].sum()),
        "launch_overhead_cycles": launch,
        "compute_bound_cycles": compute_bound,
        "memory_bound_cycles": memory_bound,
        "dram": _dram_details(run.get("dram_stats")),
        "extrapolated": run.get("extrapolated"),
    }
    achieved = (dram_rd + dram_wr) / seconds if seconds > 0 else 0.0
    return OpResult(
        name=op.name, kind=info.get("kind", op.kind), cycles=cycles, compute_cycles=float(compute_c),
        stall_cycles=max(0.0, cycles - compute_c), seconds=seconds, macs=macs, flops=flops, utilization=util,
        dram_read_bytes=dram_rd, dram_write_bytes=dram_wr, l2_hit_bytes=l2_hit, sram_read_bytes=sram_rd,
        sram_write_bytes=sram_wr, energy_pj=energy["total"], energy_breakdown_pj=energy, roofline_cycles=roof,
        bound=bound, arithmetic_intensity=flops / min_bytes if min_bytes > 0 else float("inf"),
        achieved_dram_bytes_per_s=achieved, mapping=mapping.to_dict(), memory="ideal" if ideal else "modeled",
        details=details, traffic_bound=traffic_bound,
        dram_intensity=(flops / (dram_rd + dram_wr)) if (dram_rd + dram_wr) > 0 else float("inf"))


def _peak_macs(chip, info: dict) -> float:
    """Chip-wide MACs per cycle of the array the op ran on, in its rate class."""
    arr = next(a for a in chip.cores.arrays if a.name == info["array"])
    rate = info["macs_per_pe_per_cycle"]
    return arr.rows * arr.cols * arr.count * rate * chip.cores.count


def _array_access_bytes(prob, mapping, hist, ranges, info):
    """(SRAM read bytes, SRAM write bytes, register bytes) the arrays cause, from the
    dataflow's per-tile access counts for every tile shape the engine ran."""
    if info.get("kind") != "gemm":
        return 0.0, 0.0, 0.0

    df = get_dataflow(info["dataflow"], **({"row_length": info["row_length"]} if info.get("row_length") and info[
        "dataflow"] == "rs" else {}))
    kpc = info["k_per_pe_cycle"]
    rows, cols, n_arr = info["rows"], info["cols"], info["arrays_per_core"]
    rd = wr = rf = 0.0
    P = hist.shape[0]
    for c in range(P):
        if ranges is not None and len(ranges) == P and mapping.distribution == "block":
            mm, nn = ranges[c, 3] - ranges[c, 2], ranges[c, 5] - ranges[c, 4]
        else:
            mm, nn = prob.m, prob.n
        for code in range(8):
            n_steps = hist[c, code]
            if n_steps == 0:
                continue
            em, ek, en = code >> 2 & 1, code >> 1 & 1, code & 1
            sm = mapping.tile_m if not em else (mm % mapping.tile_m or mapping.tile_m)
            sn = mapping.tile_n if not en else (nn % mapping.tile_n or mapping.tile_n)
            sk = mapping.tile_k if not ek else (prob.k % mapping.tile_k or mapping.tile_k)
            kp = int(math.ceil(sk / kpc))
            sn_arr = -(-sn // n_arr)
            acc = df.accesses(sm, kp, sn_arr, rows, cols)
            words_in = float(acc["sram_reads_input"]) * n_arr
            words_w = float(acc["sram_reads_weight"]) * n_arr
            words_out = float(acc["sram_writes_output"]) * n_arr
            words_ps = float(acc.get("sram_reads_psum", 0.0)) * n_arr
            rd += n_steps * (words_in * prob.layout.a * kpc + words_w * prob.layout.b * kpc + words_ps * prob.layout.psum)
            wr += n_steps * words_out * prob.layout.psum
            rf_words = sum(float(v) for key, v in acc.items() if key.startswith("rf_")) * n_arr
            rf += n_steps * rf_words * max(prob.layout.a, 1.0)
    return rd, wr, rf


def _energy(chip, op, info, macs, flops, dram_rd, dram_wr, l2_hit, sram_rd, sram_wr, rf_bytes, seconds) -> dict:
    out: dict[str, float] = {}
    rate = info.get("rate_class")
    if macs and rate:
        eff_macs = macs / (info.get("sparse_speedup", 2.0) if info.get("sparse_2_4_units_used") else 1.0)
        out["mac"] = E.mac_energy_pj(chip, rate, info.get("array"), eff_macs)
    vec_ops = flops if info.get("kind") == "vector" else (
        float(op.batch * op.heads * op.scored_pairs() * 5) if isinstance(op, Attention) else 0.0)
    if vec_ops:
        out["vector"] = vec_ops * E.vector_op_pj(chip)
    regs = chip.memory.registers
    if regs is not None and rf_bytes:
        out[regs.name] = rf_bytes * E.level_pj_per_byte(chip, regs)
    elif rf_bytes:
        out["registers"] = rf_bytes * E.DEFAULT_REGISTER_PJ_PER_BYTE * E.node_scale(chip)
    buf = chip.memory.core_srams[-1]
    out[buf.name] = sram_rd * E.level_pj_per_byte(chip, buf) + sram_wr * E.level_pj_per_byte(chip, buf, write=True)
    for lvl in chip.memory.chip_srams:
        share = 1.0 / len(chip.memory.chip_srams)
        out[lvl.name] = ((l2_hit + dram_rd) * E.level_pj_per_byte(chip, lvl) + dram_wr * E.level_pj_per_byte(
            chip, lvl, write=True)) * share
    dram = chip.memory.dram
    out[dram.name] = dram_rd * E.level_pj_per_byte(chip, dram) + dram_wr * E.level_pj_per_byte(chip, dram, True)
    out["noc"] = (dram_rd + dram_wr + l2_hit) * E.noc_pj_per_byte(chip)
    out = E.at_clock_voltage(chip, out)  # core-rail energies at the voltage of the chip's clock
    static = E.static_energy_pj(chip, seconds)
    if static:
        out["static"] = static
    out["total"] = float(sum(out.values()))
    return out


def _dram_details(st) -> dict:
    if st is None:
        return {}

    st = np.asarray(st, dtype=np.float64)
    hits, empty, conf = st[D.S_ROW_HITS], st[D.S_ROW_EMPTY], st[D.S_ROW_CONFLICTS]
    total = hits + empty + conf
    return {"chunks": float(st[D.S_REQUESTS]), "row_hit_rate": float(hits / total) if total else 0.0,
            "row_conflicts": float(conf), "refreshes": float(st[D.S_REFRESHES]),
            "activates": float(st[D.S_ACTIVATES])}


# --------------------------------------------------------------------------- collectives


def collective_seconds(chip, op: Collective) -> tuple[float, dict]:
    """Ring or tree collective over the chip's interconnect (alpha-beta model).

    Ring all-reduce moves 2(p-1)/p of the data through each link in 2(p-1) steps
    (Patarasuk & Yuan, JPDC 2009); all-gather and reduce-scatter half of that; tree
    all-reduce 2·log2(p) steps of the full data; a send is one hop.
    """
    ic = chip.interconnect
    if ic is None:
        raise MappingError(f"chip '{chip.name}' has no interconnect block: multi-chip runs need "
                           "interconnect.link_bandwidth_gb_per_s (and latency/topology)")
    p = op.participants
    bw = ic.link_bandwidth_gb_per_s * 1e9 * (ic.links_per_chip if ic.topology != "ring" else min(2, ic.links_per_chip))
    lat = ic.link_latency_ns * 1e-9
    b = float(op.bytes)
    if p <= 1:
        return 0.0, {"steps": 0, "bytes_per_chip": 0.0}
    if op.collective == "send":
        steps, moved = 1, b
    elif op.algorithm == "tree":
        steps = 2 * math.ceil(math.log2(p)) if op.collective == "all_reduce" else math.ceil(math.log2(p))
        moved = b * steps / 1.0
    else:
        factor = 2.0 if op.collective == "all_reduce" else 1.0
        steps = int(factor * (p - 1))
        moved = factor * (p - 1) / p * b
    return steps * lat + moved / bw, {"steps": steps, "bytes_per_chip": moved}


def _collective(chip, op: Collective, options: Options) -> OpResult:
    seconds, info = collective_seconds(chip, op)
    cycles = float(math.ceil(seconds * chip.clock_hz))
    e_pj = (chip.interconnect.energy_pj_per_byte or 10.0) * info["bytes_per_chip"]
    return OpResult(
        name=op.name, kind="collective", cycles=cycles, compute_cycles=0.0, stall_cycles=cycles, seconds=seconds,
        macs=0, flops=0.0, utilization=0.0, dram_read_bytes=0.0, dram_write_bytes=0.0, l2_hit_bytes=0.0,
        sram_read_bytes=0.0, sram_write_bytes=0.0, energy_pj=e_pj, energy_breakdown_pj={"interconnect": e_pj,
                                                                                         "total": e_pj},
        roofline_cycles=cycles, bound="network", arithmetic_intensity=0.0, achieved_dram_bytes_per_s=0.0,
        mapping={"collective": op.collective, "algorithm": op.algorithm, "participants": op.participants, **info},
        memory=options.memory, details=info)
