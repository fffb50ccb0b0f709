"""A kernel run → an :class:`~sim.ir.results.OpResult`: cycles with the launch overhead, the
bytes at every memory level, energy (:mod:`sim.model.cost.energy`), roofline bounds and the
engine's counters; and the results a kernel's result is combined into (an op run as two
kernels, a library's memory-bound kernel at its measured rate)."""
from __future__ import annotations

import dataclasses
import math

import numpy as np

import sim.model.cost.energy as E
import sim.model.kernels.dram as D
import sim.model.kernels.engine as K
from sim.errors import MappingError
from sim.ir.lowered import LoweredGemm, LoweredOnArray, LoweredOp, TileProblem
from sim.ir.ops import Attention, VectorOp, op_min_dram_bytes
from sim.ir.results import OpResult, summed_work
from sim.model.dataflow import get_dataflow
from sim.model.engine.arrays import compute_table
from sim.model.engine.kernel_run import KernelRun
from sim.model.engine.residency import activation_operand_bytes
from sim.model.mapper.search import Mapping
from sim.spec.chip import ChipSpec
from sim.spec.stack_spec import PartialTokenTileRule, ThreadPerOutputRule


def launch_cycles(chip: ChipSpec, lowered: LoweredOp) -> float:
    """Cycles a kernel pays beside its engine run: the runtime's launch overhead, and the
    kernel library's prologue for a kernel on an array."""
    launch = chip.runtime.op_launch_overhead_ns * chip.clock_hz / 1e9 if chip.runtime is not None else 0.0
    ms = getattr(chip, "mapping", None)
    if ms is not None and isinstance(lowered, LoweredOnArray):
        launch += ms.kernel_prologue_ns * chip.clock_hz / 1e9
    return launch


def compute_floor_cycles(prob: TileProblem, mapping: Mapping) -> float | None:
    """A lower bound on the engine's makespan for ``prob`` dealt cyclically with ``mapping``,
    from its array work alone (None where it is not derived: block distribution, causal
    masks).  Every output tile's steps and its tail run one after another on one core
    (the compute table of :func:`sim.model.engine.arrays.compute_table`, which the engine
    charges), so the makespan is at least the total over all tiles shared by the cores, and
    at least the full tiles some core must take (ceil(full tiles / cores) of them)."""
    if mapping.distribution != "cyclic" or prob.causal:
        return None
    row = compute_table(prob, mapping, None)[0]
    tm, tn, tk = mapping.tile_m, mapping.tile_n, mapping.tile_k
    k_full, k_edge = prob.k // tk, int(prob.k % tk > 0)
    tiles = {0: prob.m // tm, 1: int(prob.m % tm > 0)}, {0: prob.n // tn, 1: int(prob.n % tn > 0)}

    def tile_cycles(em: int, en: int) -> float:
        # columns: entry em * 4 + ek * 2 + en; its tail at 8 + the last step's entry
        last = em * 4 + (2 if k_edge else 0) + en
        return k_full * row[em * 4 + en] + k_edge * row[em * 4 + 2 + en] + row[8 + last]

    total = sum(tiles[0][em] * tiles[1][en] * tile_cycles(em, en) for em in (0, 1) for en in (0, 1)) * prob.count
    cores = max(1, int(mapping.cores_used))
    full_tiles = tiles[0][0] * tiles[1][0] * prob.count
    return float(max(total / cores, -(-full_tiles // cores) * tile_cycles(0, 0)))


def assemble_result(chip: ChipSpec, op, prob: TileProblem, mapping: Mapping, lowered: LoweredOp, run: KernelRun,
                    ideal: bool) -> OpResult:
    """The result of ``op`` run as ``prob`` (``lowered.problem``, or its split-K copy) with
    ``mapping``: cycles with the launch overhead, bytes at every level, energy, roofline
    bounds and the engine's counters."""
    stats = run.stats
    busiest = int(np.argmax(stats[:, K.S_COMPUTE])) if len(stats) else 0
    compute = float(stats[busiest, K.S_COMPUTE]) if len(stats) else 0.0
    makespan = float(run.makespan)
    launch = launch_cycles(chip, lowered)
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
    # roofline terms at the chip's peaks
    if isinstance(lowered, LoweredOnArray) and macs:
        peak_macs = _peak_macs(chip, lowered)
        compute_bound = macs / peak_macs / lowered.mac_speedup()
    else:
        peak_macs = 0.0
        compute_bound = 0.0
    if lowered.kind == "vector":
        vu = chip.cores.vector_unit
        compute_bound = max(compute_bound, flops / (vu.lanes * vu.ops_per_lane_per_cycle * chip.cores.count))
    peak_bpc = chip.memory.dram.peak_bytes_per_s / chip.clock_hz
    memory_bound = 0.0 if ideal else (dram_rd + dram_wr) / peak_bpc
    roof = max(compute_bound, memory_bound)
    # the roofline's class at the op's own (compulsory) intensity, and the same test with
    # the traffic this mapping moves (memory-bound when the buffers cannot hold the reuse)
    min_bytes = float(op_min_dram_bytes(op))
    if prob.resident:
        # activations held on chip are no DRAM traffic (TPU v1's roofline counts weight bytes)
        held = activation_operand_bytes(op)
        min_bytes = max(0.0, min_bytes - sum(held.get(o, 0) for o in prob.resident))
    bound = "compute" if compute_bound >= min_bytes / peak_bpc else "memory"
    traffic_bound = "compute" if compute_bound >= memory_bound else "memory"
    util = macs / (cycles * peak_macs) if (cycles > 0 and peak_macs > 0) else 0.0
    # SRAM traffic: DMA fills and drains, plus the array's reads of its tiles
    sram_wr = float(stats[:, K.S_BYTES_A].sum() + stats[:, K.S_BYTES_B].sum() + stats[:, K.S_BYTES_PSUM_READ].sum())
    sram_rd = float(stats[:, K.S_BYTES_C_WRITE].sum())
    array_rd, array_wr, rf_bytes = _array_access_bytes(prob, mapping, run.hist, run.ranges, lowered)
    sram_rd += array_rd
    sram_wr += array_wr
    energy = _energy(chip, op, lowered, macs, flops, dram_rd, dram_wr, l2_hit, sram_rd, sram_wr, rf_bytes, seconds)
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
        "dram": _dram_details(run.dram_stats),
        "extrapolated": run.extrapolated,
    }
    achieved = (dram_rd + dram_wr) / seconds if seconds > 0 else 0.0
    return OpResult(
        name=op.name, kind=lowered.kind, cycles=cycles, compute_cycles=float(compute_c),
        stall_cycles=max(0.0, cycles - compute_c), seconds=seconds, macs=macs, flops=flops, utilization=util,
        dram_read_bytes=dram_rd, dram_write_bytes=dram_wr, l2_hit_bytes=l2_hit, sram_read_bytes=sram_rd,
        sram_write_bytes=sram_wr, energy_pj=energy["total"], energy_breakdown_pj=energy, roofline_cycles=roof,
        bound=bound, arithmetic_intensity=flops / min_bytes if min_bytes > 0 else float("inf"),
        achieved_dram_bytes_per_s=achieved, mapping=mapping.to_dict(), memory="ideal" if ideal else "modeled",
        details=details, traffic_bound=traffic_bound,
        dram_intensity=(flops / (dram_rd + dram_wr)) if (dram_rd + dram_wr) > 0 else float("inf"))


def _peak_macs(chip: ChipSpec, lowered: LoweredOnArray) -> float:
    """Chip-wide MACs per cycle of the array the op ran on, in its rate class."""
    arr = next(a for a in chip.cores.arrays if a.name == lowered.array)
    rate = lowered.macs_per_pe_per_cycle
    return arr.rows * arr.cols * arr.count * rate * chip.cores.count


def _array_access_bytes(prob: TileProblem, mapping: Mapping, hist, ranges, lowered: LoweredOp):
    """(SRAM read bytes, SRAM write bytes, register bytes) the arrays cause, from the
    dataflow's per-tile access counts for every tile shape the engine ran (GEMMs)."""
    if not isinstance(lowered, LoweredGemm):
        return 0.0, 0.0, 0.0

    df = get_dataflow(lowered.dataflow, **({"row_length": lowered.row_length}
                                           if lowered.row_length and lowered.dataflow == "rs" else {}))
    kpc = lowered.k_per_pe_cycle
    rows, cols, n_arr = lowered.rows, lowered.cols, lowered.arrays_per_core
    rd = wr = rf = 0.0
    shapes: dict[tuple[int, int, int], tuple[float, ...]] = {}
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
            words = shapes.get((sm, kp, sn_arr))
            if words is None:  # every core of a cyclic (or even block) mapping runs the same few shapes
                acc = df.accesses(sm, kp, sn_arr, rows, cols)
                words = shapes[(sm, kp, sn_arr)] = (
                    float(acc["sram_reads_input"]) * n_arr, float(acc["sram_reads_weight"]) * n_arr,
                    float(acc["sram_writes_output"]) * n_arr, float(acc.get("sram_reads_psum", 0.0)) * n_arr,
                    sum(float(v) for key, v in acc.items() if key.startswith("rf_")) * n_arr)
            words_in, words_w, words_out, words_ps, rf_words = words
            rd += n_steps * (words_in * prob.layout.a * kpc + words_w * prob.layout.b * kpc + words_ps * prob.layout.psum)
            wr += n_steps * words_out * prob.layout.psum
            rf += n_steps * rf_words * max(prob.layout.a, 1.0)
    return rd, wr, rf


def _energy(chip: ChipSpec, op, lowered: LoweredOp, macs, flops, dram_rd, dram_wr, l2_hit, sram_rd, sram_wr, rf_bytes,
            seconds) -> dict:
    out: dict[str, float] = {}
    if macs and isinstance(lowered, LoweredOnArray) and lowered.rate_class:
        eff_macs = macs / lowered.mac_speedup()
        out["mac"] = E.mac_energy_pj(chip, lowered.rate_class, lowered.array, eff_macs)
    vec_ops = flops if lowered.kind == "vector" else (
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


def merge_results(a: OpResult, b: OpResult) -> OpResult:
    """One result for an op run as two kernels back to back (``b`` after ``a``)."""
    seconds = a.seconds + b.seconds
    cycles = a.cycles + b.cycles
    work = summed_work((a, b))
    dram = a.dram_bytes + b.dram_bytes
    details = dict(a.details, second_kernel=b.to_dict())
    terms = [sum(r.details.get(key, 0.0) for r in (a, b)) for key in ("compute_bound_cycles", "memory_bound_cycles")]
    traffic_bound = "compute" if terms[0] >= terms[1] else "memory"
    return dataclasses.replace(
        a, cycles=cycles, compute_cycles=a.compute_cycles + b.compute_cycles,
        stall_cycles=a.stall_cycles + b.stall_cycles, seconds=seconds, **work,
        roofline_cycles=max(a.roofline_cycles, a.roofline_cycles + b.roofline_cycles),
        utilization=a.utilization * a.cycles / cycles if cycles else 0.0,
        dram_intensity=a.flops / dram if dram else a.dram_intensity, traffic_bound=traffic_bound,
        achieved_dram_bytes_per_s=dram / seconds if seconds else 0.0, details=details)


def stream_kernel_rate(chip: ChipSpec, op: VectorOp, res: OpResult, rule,
                       measured_body_ns: float | None = None) -> OpResult:
    """A library's memory-bound kernel at its measured rate (a stack's StreamKernelRule):
    its body is the ideal stream's body over the rule's bandwidth fraction, but never
    shorter than the rule's floor for the op's row length; the launch overhead stays.
    With ``measured_body_ns`` (the rule's ``measured_on`` chip's ideal body for the op, per
    core of this chip: sim.model.engine.run) the fraction applies to that chip's stream, not
    this one's: the kernel keeps its measured time there per core, and runs at this chip's
    ideal stream where that is slower.  Every term only lengthens the body, so the kernel
    never beats the ideal stream (nor the roofline)."""
    launch = chip.runtime.op_launch_overhead_ns * chip.clock_hz / 1e9 if chip.runtime is not None else 0.0
    body = max(0.0, res.cycles - launch)
    floor = (rule.floor_ns + rule.floor_ns_per_row_element * op.row_elements
             + rule.floor_ns_per_row * op.rows) * chip.clock_hz / 1e9
    if measured_body_ns is None:
        limited = body / rule.bandwidth_fraction
    else:
        limited = max(body, measured_body_ns * chip.clock_hz / 1e9 / rule.bandwidth_fraction)
    new_body = max(floor, limited)
    if new_body <= body:
        return res
    cycles = float(math.ceil(new_body + launch - 1e-9))
    seconds = cycles / chip.clock_hz
    dram = res.dram_read_bytes + res.dram_write_bytes
    details = dict(res.details, stream_kernel={"bandwidth_fraction": rule.bandwidth_fraction,
                                               "floor_cycles": floor, "ideal_body_cycles": body,
                                               "measured_on": rule.measured_on or None,
                                               "source": rule.source})
    return dataclasses.replace(res, cycles=cycles, stall_cycles=res.stall_cycles + (cycles - res.cycles),
                               seconds=seconds, utilization=res.utilization * res.cycles / cycles if cycles else 0.0,
                               achieved_dram_bytes_per_s=dram / seconds if seconds else 0.0, details=details)


def stack_kernel_rule(chip: ChipSpec, op, res: OpResult, rule, tiles=None) -> OpResult:
    """A GEMM kernel priced by its stack's rule (``tiles``: the library's (m, n, k) tile):
    :func:`gemm_row_work` for a RowWorkRule, :func:`gemm_thread_per_output` for a
    ThreadPerOutputRule (weight-only paths), :func:`gemm_partial_token_tile` for a
    PartialTokenTileRule (a sparse library's partly filled token tile)."""
    if isinstance(rule, ThreadPerOutputRule):
        return gemm_thread_per_output(chip, op, res, rule)
    if isinstance(rule, PartialTokenTileRule):
        return gemm_partial_token_tile(chip, op, res, rule, tiles)
    return gemm_row_work(chip, op, res, rule)


def _boost_mhz(chip: ChipSpec) -> float:
    """The clock a kernel that draws little power runs at: the boost clock, else clock_mhz."""
    return chip.power.boost_clock_mhz if chip.power is not None and chip.power.boost_clock_mhz else chip.clock_mhz


def _on_points(points, x: float) -> float:
    """``points`` ([x, y], x ascending) at ``x``: linear between them, extrapolated linearly
    below the first (from the first two), held beyond the last."""
    xs, ys = zip(*points)
    if len(xs) > 1 and x < xs[0]:
        return max(0.0, ys[0] + (x - xs[0]) * (ys[1] - ys[0]) / (xs[1] - xs[0]))
    return float(np.interp(x, xs, ys))


def partial_token_tile_cycles(m: int, k: int, n: int, count: int, cores: int, tiles, rule) -> dict:
    """Boost-clock cycles of a sparse library's fixed-tile kernel whose token tile (``tiles``'
    m) is partly filled (a stack's PartialTokenTileRule): its tiles run one per core at once
    (beyond the cores, a persistent grid of one CTA per core walks tiles / cores each), each
    k-step taking the rule's time at the tiles resident, interpolated in the token rows."""
    tm, tn, tk = tiles
    n_tiles = count * math.ceil(m / tm) * math.ceil(n / tn)
    resident = min(n_tiles, cores)
    per_core = n_tiles / resident
    # each measured row count's k-step at these resident tiles, then linear in the rows (held
    # beyond the rows measured)
    kstep = float(np.interp(m, [c.rows for c in rule.curves],
                            [_on_points(c.kstep_cycles, resident) for c in rule.curves]))
    steps = math.ceil(k / tk) * per_core
    return {"boost_cycles": float(steps * kstep), "resident_tiles": resident, "tiles": n_tiles,
            "ksteps_per_core": steps, "kstep_boost_cycles": kstep}


def gemm_partial_token_tile(chip: ChipSpec, op, res: OpResult, rule, tiles) -> OpResult:
    """A sparse GEMM kernel whose token tile is partly filled (a stack's PartialTokenTileRule):
    :func:`partial_token_tile_cycles` at the chip's boost clock plus the launch, or the
    engine's time where that is longer.  It only lengthens the kernel, so the result never
    beats the roofline.  Rows beyond the rule's ``max_rows`` keep the engine's time."""
    if tiles is None or op.m > rule.max_rows:
        return res
    boost_mhz = _boost_mhz(chip)
    got = partial_token_tile_cycles(op.m, op.k, op.n, op.count, chip.cores.count, tiles, rule)
    launch = float(res.details.get("launch_overhead_cycles", 0.0) or 0.0)
    kernel = launch + got["boost_cycles"] * chip.clock_mhz / boost_mhz
    return _lengthened(chip, res, max(res.cycles, kernel), dict(
        res.details, partial_token_tile=dict(got, boost_clock_mhz=boost_mhz, kernel_cycles=kernel,
                                             engine_cycles=res.cycles, source=rule.source)))


def bank_wavefronts(lanes: int, pitch_bytes: float, elem_bytes: float, banks: int, bank_bytes: int) -> float:
    """Wavefronts an L1 needs for ``lanes`` loads of ``elem_bytes`` each, ``pitch_bytes`` apart
    (lane i at i x pitch + the same offset): the most distinct ``bank_bytes`` words that fall in
    one of ``banks`` banks (lanes reading the same word share it), averaged over the offsets
    within a word, since a thread walks its row one element at a time."""
    steps = max(1, int(round(bank_bytes / elem_bytes))) if elem_bytes < bank_bytes else 1
    total = 0
    for j in range(steps):
        per_bank: dict[int, set] = {}
        for i in range(lanes):
            word = int((i * pitch_bytes + j * elem_bytes) // bank_bytes)
            per_bank.setdefault(word % banks, set()).add(word)
        total += max(len(w) for w in per_bank.values())
    return total / steps


def thread_per_output_cycles(m: int, k: int, n: int, count: int, cores: int, rule) -> dict:
    """Boost-clock cycles of a one-thread-per-output kernel (a stack's ThreadPerOutputRule):
    blocks of threads_n x threads_m threads over the n x m outputs, as many resident per core
    as its threads allow, in waves; a warp holds 32 // threads_n rows of A, so its iteration
    (one k) loads one element of each of threads_n weight rows (k elements apart) and one of
    each of its rows of A (k apart too); the L1 returns them in :func:`bank_wavefronts` and
    looks up one sector per row; per wave every core runs k iterations of its live warps, each
    at least the iteration latency apart."""
    tn, tm = rule.threads_n, rule.threads_m
    lanes_n = min(32, tn)
    rows_per_warp = max(1, 32 // tn)
    bx, by = math.ceil(n / tn), math.ceil(m / tm)
    last_rows = m - tm * (by - 1)
    # warps with a live thread: rows of A beyond m leave a block's later warps idle (they exit)
    warps = count * bx * ((by - 1) * math.ceil(tm / rows_per_warp) + math.ceil(last_rows / rows_per_warp))
    a_rows = min(rows_per_warp, m)
    wavefronts = (bank_wavefronts(lanes_n, k * rule.weight_bytes, rule.weight_bytes, rule.l1_banks, rule.l1_bank_bytes)
                  + bank_wavefronts(a_rows, k * rule.a_bytes, rule.a_bytes, rule.l1_banks, rule.l1_bank_bytes))
    sectors = lanes_n + a_rows   # each row its own 32-byte sector (rows over 32 bytes long)
    per_warp = max(wavefronts / rule.l1_wavefronts_per_cycle, sectors / rule.l1_sectors_per_cycle)
    blocks = count * bx * by
    resident = cores * max(1, rule.max_threads_per_core // (tn * tm))
    full, rest = divmod(blocks, resident)
    per_block = warps / blocks   # live warps of a block, on average
    # (waves, live warps per core in each).  Blocks that all fit at once are dealt round-robin:
    # some cores hold one more than others and set the time.  Beyond one wave a core takes a
    # new block as one finishes, which evens the load: the average per core.
    if not full:
        per_wave = [(1, per_block * math.ceil(rest / cores))]
    else:
        per_wave = [(full, per_block * resident / cores)] + ([(1, per_block * rest / cores)] if rest else [])
    cycles = sum(w * k * max(rule.iteration_latency_cycles, live * per_warp) for w, live in per_wave)
    return {"boost_cycles": float(cycles), "waves": full + (1 if rest else 0), "live_warps": warps,
            "sectors_per_iteration": sectors, "wavefronts_per_iteration": wavefronts}


def gemm_thread_per_output(chip: ChipSpec, op, res: OpResult, rule) -> OpResult:
    """A weight-only GEMM kernel with one thread per output (a stack's ThreadPerOutputRule,
    PyTorch's int8mm.cu): :func:`thread_per_output_cycles` at the chip's boost clock (the
    kernel draws little power: Nsight Compute read 1.98 GHz in it on an H100), plus the launch,
    or the engine's time for the GEMM (its weight stream) where that is longer.  It only
    lengthens the kernel, so the result never beats the roofline."""
    boost_mhz = _boost_mhz(chip)
    got = thread_per_output_cycles(op.m, op.k, op.n, op.count, chip.cores.count, rule)
    launch = float(res.details.get("launch_overhead_cycles", 0.0) or 0.0)
    kernel = launch + got["boost_cycles"] * chip.clock_mhz / boost_mhz
    return _lengthened(chip, res, max(res.cycles, kernel), dict(
        res.details, thread_per_output=dict(got, boost_clock_mhz=boost_mhz, kernel_cycles=kernel, source=rule.source)))


def _lengthened(chip: ChipSpec, res: OpResult, cycles: float, details: dict) -> OpResult:
    """``res`` taking ``cycles`` (rounded up) instead: the extra time stalls the arrays and
    pays the chip's static power; the events (MACs, bytes) are the engine's."""
    cycles = float(math.ceil(cycles - 1e-9))
    seconds = cycles / chip.clock_hz
    dram = res.dram_read_bytes + res.dram_write_bytes
    energy = dict(res.energy_breakdown_pj)
    if "static" in energy:
        energy["static"] = E.static_energy_pj(chip, seconds)
        energy["total"] = sum(v for k, v in energy.items() if k != "total")
    return dataclasses.replace(res, cycles=cycles, stall_cycles=res.stall_cycles + (cycles - res.cycles),
                               seconds=seconds, utilization=res.utilization * res.cycles / cycles if cycles else 0.0,
                               achieved_dram_bytes_per_s=dram / seconds if seconds else 0.0,
                               energy_pj=energy.get("total", res.energy_pj), energy_breakdown_pj=energy,
                               details=details)


def gemm_row_work(chip: ChipSpec, op, res: OpResult, rule) -> OpResult:
    """A weight-only GEMM kernel's per-row work on top of its engine time (a stack's
    RowWorkRule, e.g. tinygemm): ``m x k x n x count`` MACs at the rule's
    fraction of ``rule.array``'s peak rate, serial with the weight stream (the kernel's time
    grows by that much per row however the weights arrive: h200_micro_int4mm.csv).  It
    only lengthens the kernel, so the result never beats the roofline."""
    arr = next((a for a in chip.cores.arrays if a.name == rule.array), None)
    if arr is None:
        raise MappingError(f"stack rule row_work names array {rule.array!r}, which {chip.name} does not have "
                           f"(arrays: {', '.join(a.name for a in chip.cores.arrays)})")
    per_pe, _ = arr.rate_for(rule.rate_class)
    macs_per_cycle = arr.rows * arr.cols * arr.count * per_pe * chip.cores.count * rule.fraction
    extra = float(op.m) * op.k * op.n * op.count / macs_per_cycle
    return _lengthened(chip, res, res.cycles + extra, dict(
        res.details, row_work={"array": rule.array, "fraction": rule.fraction, "extra_cycles": extra,
                               "source": rule.source}))
