"""Orchestration: simulate one op on one chip → :class:`~sim.ir.results.OpResult`.

Steps (plain Python around one compiled kernel):

1. lower the op to a tile problem (:mod:`sim.model.engine.lower`);
2. map it (:func:`sim.model.mapper.search.search_top`): the candidate mappings worth
   simulating, split-K variants included;
3. run each candidate on the engine (:mod:`sim.model.engine.kernel_run`) - or, for problems
   with very many steps, run shortened copies and extrapolate
   (:mod:`sim.model.engine.extrapolate`);
4. turn the run into a result with energy and roofline terms
   (:mod:`sim.model.engine.assemble`), and keep the fastest candidate.

Results are memoised per (chip, op, options).  Collectives take the alpha-beta model of
:mod:`sim.model.engine.collectives` instead.
"""
from __future__ import annotations

import dataclasses
import functools
import itertools
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sim.model.engine.kernel_run as kernel_run
import sim.model.engine.progress as progress
import sim.model.kernels.engine as K
from sim.errors import MappingError
from sim.ir.lowered import LoweredAttention, LoweredGemm, LoweredOnArray, LoweredOp
from sim.ir.ops import Attention, Collective, Gemm, VectorOp
from sim.ir.results import OpResult
from sim.model.cost.power import at_clock
from sim.model.engine.assemble import (assemble_result, compute_floor_cycles, launch_cycles, stack_kernel_rule,
                                      merge_results, stream_kernel_rate)
from sim.model.engine.collectives import collective_result
from sim.model.engine.extrapolate import (extrapolated_run, extrapolation_plan, is_huge, sample_work, too_costly,
                                          unsteady_and_affordable)
from sim.model.engine.kernel_run import run_kernel
from sim.model.engine.memo import Memo
from sim.model.engine.threads import threads as candidate_threads
from sim.model.dataflow import get_dataflow
from sim.model.engine.lower import (FIDELITY, RS_ROW_LENGTH_CYCLE_TOLERANCE, RS_ROW_LENGTHS, Options,
                                    blocks_sharing_cores, lower_op, memory_budget)
from sim.model.engine.residency import hold_activations
from sim.model.mapper.compute import choose_array, compute_rate_class
from sim.model.mapper.search import RANK_TIE, search_top
from sim.model.memory.dram import stream_efficiency
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format
from sim.spec.registry import load_chip

#: candidate mappings whose estimate is within this factor of the best are simulated
REFINE_WITHIN = 1.25
_MEMO: "Memo[OpResult]" = Memo(4096)
#: an engine run whose makespan is within this fraction of its busiest core's compute cycles
#: is compute-bound, and stands for the same mapping's run at any lower clock: its compute
#: cycles (array steps) do not depend on the clock, while DRAM transfers and every latency
#: fixed in nanoseconds take fewer core cycles at a lower clock, so there the run can only
#: be faster, by at most this fraction.  DVFS and the kernel harness re-price an op at lower
#: clocks with the mapping of the top clock (Options.mapping_of, reference_clock_mhz) and
#: reuse such a run instead of simulating it again at each clock they try.  Against
#: simulating every clock (tests/test_clock_share.py): at most 0.2 % per op on Llama-3-70B
#: TP8 prefill + decode on h200_sxm, whose prefill GEMMs no longer cost three engine runs each
CLOCK_SHARE_TOLERANCE = 0.01
#: a candidate mapping is not simulated when its compute floor
#: (:func:`sim.model.engine.assemble.compute_floor_cycles`) exceeds the best simulated
#: candidate's time by more than this: a margin over the error of extrapolated runs, whose
#: makespans come out up to 0.11 % below their own compute cycles (o_proj of Llama-3-70B
#: TP8 prefill on h200_sxm), so a skipped candidate could never have won
PRUNE_MARGIN = 0.005
#: the engine run of the candidate each simulated op kept, by the op's memo key:
#: (mapping_key, KernelRun); what a lower clock's run may reuse
_CHOSEN_RUNS: "Memo[tuple[tuple, kernel_run.KernelRun]]" = Memo(4096)


def clear_cache() -> None:
    """Forget every memoised op result, engine run and DRAM pattern rate (benchmarks time
    cold runs)."""
    _MEMO.clear()
    _CHOSEN_RUNS.clear()
    kernel_run.clear()
    stream_efficiency.cache_clear()


def _chip_key(chip: ChipSpec) -> Any:
    return (chip.name, hash(chip))


def memoised(chip: ChipSpec, op, options: Options, compute) -> OpResult:
    """``compute()``'s result for (chip, op, options), remembered: identical questions return
    the same result object (the whole-model runs repeat the same layer's ops)."""
    return _MEMO.get_or_compute((_chip_key(chip), op, options), compute)


def simulate_op_at_clock(chip: ChipSpec, op, options: Options | None = None) -> OpResult:
    """Simulate ``op`` on ``chip`` at its ``clock_mhz`` (no power limit: the DVFS search of
    :mod:`sim.model.engine.dvfs` calls this at each clock it tries; everyone else calls
    :func:`sim.model.engine.simulate.simulate_op`)."""
    options = options or Options()
    if isinstance(op, Collective):
        return memoised(chip, op, options, lambda: collective_result(chip, op, options))
    return memoised(chip, op, options, lambda: _simulate_uncached(chip, op, options))


def _simulate_uncached(chip: ChipSpec, op, options: Options) -> OpResult:
    """A memo miss: a GEMM on a row-stationary array picks its row length first (:func:`_rs_gemm`);
    every other op is one tiled simulation.  (Decided here, so a memo hit pays nothing for it.)"""
    if isinstance(op, Gemm) and options.row_length is None and _runs_row_stationary(chip, op, options):
        return _rs_gemm(chip, op, options)
    return _simulate_tiled(chip, op, options)


def _runs_row_stationary(chip: ChipSpec, op: Gemm, options: Options) -> bool:
    try:
        choice = choose_array(chip, compute_rate_class(op.dtype, op.weight_dtype), sparse_2_4=op.sparsity == "2:4",
                              dataflow=options.dataflow, array_name=options.array)
    except MappingError:
        return False   # _simulate_tiled says why
    return choice.dataflow == "rs"


def _rs_gemm(chip: ChipSpec, op: Gemm, options: Options) -> OpResult:
    """A GEMM on a row-stationary array at the row length the mapper picks.  Row length 1
    (WS's schedule) is simulated first; on that mapping's tiles, of the longer rows of
    :data:`RS_ROW_LENGTHS` within the register file's weight words whose closed-form array
    schedule is within :data:`RS_ROW_LENGTH_CYCLE_TOLERANCE` of row 1's, the one whose array
    moves the fewest words through the buffer is simulated too, and kept when its run is
    within that tolerance of row 1's time and costs less energy.  A longer row keeps ``L``
    products accumulating in the PE before a partial sum moves, so the buffer sees ``L``
    times fewer partial sums (Eyeriss, Chen et al. ISCA 2016)."""
    base = simulate_op_at_clock(chip, op, dataclasses.replace(options, row_length=1))
    words = get_dataflow("rs").spec.register_file_words.weight
    tiles = (int(base.mapping["tile_m"]), int(base.mapping["tile_n"]), int(base.mapping["tile_k"]))

    def on_tiles(L: int) -> tuple[float, float]:
        """(array cycles, buffer words) of one tile at row length L (closed forms)."""
        low = lower_op(chip, op, dataclasses.replace(options, row_length=L), chip.cores.count)
        prob = low.problem
        cycles = float(prob.cycles_fn(*tiles)) + (float(prob.tail_fn(*tiles)) if prob.tail_fn is not None else 0.0)
        kp = max(1, -(-tiles[2] // max(1, int(round(low.k_per_pe_cycle)))))
        acc = get_dataflow("rs", row_length=L).accesses(tiles[0], kp, tiles[1], low.rows, low.cols)
        moved = sum(float(acc[key]) for key in ("sram_reads_input", "sram_reads_weight", "sram_writes_output",
                                                 "sram_reads_psum"))
        return cycles, moved

    base_cycles, base_words = on_tiles(1)
    best_L, best_words = 1, base_words
    for L in RS_ROW_LENGTHS[1:]:
        if L > words:
            break
        cycles, moved = on_tiles(L)
        if cycles <= base_cycles * (1 + RS_ROW_LENGTH_CYCLE_TOLERANCE) and moved < best_words:
            best_L, best_words = L, moved   # folds that round up on these tiles are skipped
    if best_L == 1:
        return base
    longer = simulate_op_at_clock(chip, op, dataclasses.replace(options, row_length=best_L, tiles=tiles))
    if longer.seconds <= base.seconds * (1 + RS_ROW_LENGTH_CYCLE_TOLERANCE) and longer.energy_pj < base.energy_pj:
        return longer
    return base


def _simulate_tiled(chip: ChipSpec, op, options: Options) -> OpResult:
    ideal = options.memory == "ideal"
    cores = chip.cores.count
    lowered = lower_op(chip, op, options, cores)
    spilled = lowered, memory_budget(chip, ideal and not lowered.problem.causal)
    lowered, budget = spilled if ideal else hold_activations(chip, op, *spilled)
    prob = lowered.problem
    ms = getattr(chip, "mapping", None)
    fid = FIDELITY[options.fidelity]
    if ideal:
        top, tie = 1, None
    elif ms is not None:
        top, tie = min(ms.refine_candidates, fid["refine"]), None
    else:
        # no kernel library: the distinct tiles the estimate cannot tell apart are simulated
        top, tie = fid["refine"], RANK_TIE
    try:
        cands = _candidates(chip, lowered, cores, budget, top, ideal, options.split_k, tie)
    except MappingError:
        if not lowered.problem.resident:
            raise
        # the tiles do not fit beside the held activations: they live in DRAM after all
        lowered, budget = spilled
        prob = lowered.problem
        cands = _candidates(chip, lowered, cores, budget, top, ideal, options.split_k, tie)
    if options.mapping_of is not None:
        same = [c for c in cands if mapping_key(c[2], c[3]) == options.mapping_of]
        if not same:  # ranked lower at this clock: look for it among every mapping the search keeps
            same = _candidates(chip, lowered, cores, budget, _WIDE_SEARCH, ideal, options.split_k, None,
                               want=options.mapping_of)
        cands = same[:1] or cands  # the mapper cannot build it here: every candidate, as without
    too_costly_skipped = 0
    if options.mapping_of is None:
        cands, too_costly_skipped = _affordable(chip, lowered, cores, budget, ideal, options, cands)
    # large problems: fewer candidates, each is costly to simulate
    large = fid["refine_large"]
    if len(cands) > large and extrapolation_plan(chip, cands[0][1], cands[0][2], ideal, options.fidelity) is not None:
        cands = cands[:large]
    shared = _reference_run(chip, op, options)
    progress.op_started(op.name)
    extra = {}  # what the result's mapping says besides the candidate's own split
    if too_costly_skipped:
        extra["candidates_too_costly_to_sample"] = too_costly_skipped
    if prob.resident:
        extra["activations_on_chip"] = list(prob.resident)

    def floor_seconds(p, mapping) -> float:
        """The candidate's array work alone (0 where it has no compute floor: never ruled out)."""
        floor = compute_floor_cycles(p, mapping)
        return 0.0 if floor is None else (floor + launch_cycles(chip, lowered)) / chip.clock_hz

    def simulate(index: int, p, mapping, split: int) -> tuple:
        """(result, (key, kernel run), (problem, mapping, split, plan)) of one candidate."""
        if progress.active():
            progress.candidate_started(op.name, index, len(cands), _tile_words(mapping, split))
        mapping = dataclasses.replace(mapping, compute=dict(lowered.compute_info(), split_k=split,
                                                            candidates_simulated=len(cands), **extra))
        key = mapping_key(mapping, split)
        plan = None
        if shared is not None and key == shared[0]:
            # the reference clock's run, said in the result's mapping
            run = shared[1].copy()
            mapping = dataclasses.replace(mapping, compute=dict(
                mapping.compute, run_shared_from_clock_mhz=float(options.reference_clock_mhz)))
        else:
            plan = extrapolation_plan(chip, p, mapping, ideal, options.fidelity)
            run = extrapolated_run(chip, p, mapping, ideal, plan, options.fidelity) if plan is not None else None
            if run is None:
                run = run_kernel(chip, p, mapping, ideal)
        res, kernel = _candidate_result(chip, op, options, lowered, p, mapping, split, run, plan)
        return res, (key, kernel), (p, mapping, split, plan)

    # a candidate whose array work alone takes longer than the best candidate simulated
    # before it (in estimate order) cannot win and is not simulated.  With several threads the
    # first candidate runs at once with every other whose array work fits within the first
    # one's estimated time (the others wait for the first one's simulated time, which may rule
    # them out); then every one the one-at-a-time walk would have skipped is dropped again,
    # so the candidates raced are exactly the walk's
    rest = list(enumerate(cands))[1:]
    done = {}
    if rest and candidate_threads() > 1:
        state = progress.current()

        def simulate_reporting(index: int, p, mapping, split: int) -> tuple:
            with progress.shared(state):  # (the op's engine runs counted once)
                return simulate(index, p, mapping, split)

        first_estimate_s = (cands[0][0] + launch_cycles(chip, lowered)) / chip.clock_hz
        eager = [(i, c) for i, c in rest if floor_seconds(c[1], c[2]) <= first_estimate_s * (1 + PRUNE_MARGIN)]
        with ThreadPoolExecutor(max_workers=min(candidate_threads(), 1 + len(rest)),
                                thread_name_prefix="sim-candidate") as pool:
            futures = {i: pool.submit(simulate_reporting, i, *c[1:]) for i, c in [(0, cands[0])] + eager}
            first_s = futures[0].result()[0].seconds
            futures.update({i: pool.submit(simulate_reporting, i, *c[1:]) for i, c in rest
                            if i not in futures and floor_seconds(c[1], c[2]) <= first_s * (1 + PRUNE_MARGIN)})
            done = {i: f.result() for i, f in futures.items()}
    first = done.get(0) or simulate(0, *cands[0][1:])
    best = first[0]
    ran = [first]  # (result, (key, kernel run), (problem, mapping, split, plan)) of each candidate simulated
    for index, (est, p, mapping, split) in rest:
        if floor_seconds(p, mapping) > best.seconds * (1 + PRUNE_MARGIN):
            continue  # its array work alone takes longer than the best candidate's whole run: it cannot win
        got = done.get(index) or simulate(index, p, mapping, split)
        ran.append(got)
        if got[0].seconds < best.seconds:
            best = got[0]
    best, chosen = _best_in_full(chip, op, options, lowered, ran)
    _CHOSEN_RUNS.put((_chip_key(chip), op, options), chosen)
    if options.stream is not None and isinstance(op, VectorOp) and not ideal:
        best = stream_kernel_rate(chip, op, best, options.stream, _measured_body_ns(chip, op, options))
    if options.row_work is not None and isinstance(op, Gemm) and not ideal:
        best = stack_kernel_rule(chip, op, best, options.row_work, options.tiles)
    return best


@functools.lru_cache(maxsize=32)
def _reference_chip(name: str, clock_mhz: float):
    """(the shipped chip ``name`` at ``clock_mhz``, its memo key): loaded once per clock, not
    per vector op (a chip file takes ~35 ms to read and check)."""
    ref = at_clock(load_chip(name), clock_mhz)
    return ref, _chip_key(ref)


def _measured_body_ns(chip: ChipSpec, op: VectorOp, options: Options) -> float | None:
    """The body (launch excluded, ns) a stream kernel had on the shipped chip its rule was
    measured on, at this chip's clock and scaled by the ratio of their cores: what the kernel
    takes at least on any chip (None without such a chip).  A kernel slower than its chip's
    memory is limited by what each core keeps in flight against the memory's latency (PyTorch's
    non-vectorized and row-per-block kernels: `stacks/eager_pytorch.yaml`), which a faster or
    slower HBM does not change: the H100 ran those kernels of an 8B prefill 1.035-1.047x as
    long as the H200, where a fraction of each chip's own HBM rate gave 1.32-1.40x."""
    name = options.stream.measured_on
    if not name:
        return None
    ref, ref_key = _reference_chip(name, chip.clock_mhz)
    if ref_key == _chip_key(chip):
        return None  # the chip it was measured on: its own stream over the fraction
    res = simulate_op_at_clock(ref, op, dataclasses.replace(options, stream=None))
    launch = ref.runtime.op_launch_overhead_ns * ref.clock_hz / 1e9 if ref.runtime is not None else 0.0
    body_ns = max(0.0, res.cycles - launch) / ref.clock_hz * 1e9
    return body_ns * ref.cores.count / chip.cores.count


#: how many of the best-estimated mappings a huge problem looks through for one whose samples
#: are affordable when none of its usual candidates' are
_HUGE_SEARCH = 64


def _affordable(chip: ChipSpec, lowered: LoweredOp, cores: int, budget, ideal: bool, options: Options, cands: list):
    """(candidates, how many were dropped): a huge problem's candidates whose extrapolation
    samples cost at most SAMPLE_BUDGET (:func:`sim.model.engine.extrapolate.too_costly`), best
    estimate first; when none of ``cands`` is, the best-estimated affordable one among the
    ``_HUGE_SEARCH`` best mappings whose estimate is within RANK_TIE of the best one, else
    the candidate whose samples cost least.  Every candidate of a problem of at most
    HUGE_WORK is kept."""
    fid = options.fidelity
    plans = [extrapolation_plan(chip, p, m, ideal, fid) for _, p, m, _ in cands]
    if not any(too_costly(plan, fid) for plan in plans):
        return cands, 0
    kept = [c for c, plan in zip(cands, plans) if not too_costly(plan, fid)]
    if not kept:
        best = min(c[0] for c in cands)
        wide = [c for c in _candidates(chip, lowered, cores, budget, _HUGE_SEARCH, ideal, options.split_k, None)
                if c[0] <= best * RANK_TIE]
        kept = [c for c in wide if not too_costly(extrapolation_plan(chip, c[1], c[2], ideal, fid), fid)][:1]
        if not kept:
            kept = [min(zip(cands, plans), key=lambda cp: sample_work(cp[1], fid))[0]]
    return kept, len(cands) - sum(c in kept for c in cands)


def _best_in_full(chip: ChipSpec, op, options: Options, lowered: LoweredOp, ran: list) -> tuple[OpResult, tuple]:
    """(result, (mapping key, kernel run)) of the fastest candidate in ``ran``, where a
    winner whose samples never became steady and whose full run is affordable
    (:func:`unsteady_and_affordable`) is simulated in full before it may win: its full run
    replaces its extrapolation and the race is run again, so a candidate whose unsteady
    samples looked fast cannot beat one simulated in full only to lose to it once run in
    full itself (a 4096x8192x8192 GEMM on the documents-only A100: a 128x64 tile
    extrapolated to 2.54e6 cycles, 3.13e6 in full, against 2.72e6 for 128x128 in full).
    Full runs are paid only for candidates that would win, at most once each."""
    ideal = options.memory == "ideal"
    ran = list(ran)
    while True:
        i = min(range(len(ran)), key=lambda j: ran[j][0].seconds)
        res, (key, kernel), (p, mapping, split, plan) = ran[i]
        if not unsteady_and_affordable(kernel, plan):
            return res, (key, kernel)
        if progress.active():
            progress.candidate_started(op.name, i, len(ran), _tile_words(mapping, split) + ", in full")
        full = run_kernel(chip, p, mapping, ideal)
        res, kernel = _candidate_result(chip, op, options, lowered, p, mapping, split, full)
        ran[i] = (res, (key, kernel), (p, mapping, split, None))


def _tile_words(mapping, split: int) -> str:
    """A candidate's tile in words, for progress."""
    return f"{mapping.tile_m}x{mapping.tile_n}x{mapping.tile_k}" + (f", split-K {split}" if split > 1 else "")


def _candidate_result(chip: ChipSpec, op, options: Options, lowered: LoweredOp, p, mapping, split: int,
                      run: kernel_run.KernelRun, plan=None) -> tuple[OpResult, kernel_run.KernelRun]:
    """The op's result with ``run`` as the engine run of one candidate (problem ``p``,
    ``mapping``, split-K factor ``split``), and the run it kept: a full one where an
    extrapolation beat the roofline (except for a problem above HUGE_WORK, whose full run would
    take hours: there the result says ``below_roofline``); split-K and split-KV second passes added."""
    ideal = options.memory == "ideal"
    res = assemble_result(chip, op, p, mapping, lowered, run, ideal)
    if run.extrapolated and res.cycles < res.roofline_cycles:
        if is_huge(plan):
            res.details["extrapolated"] = dict(res.details.get("extrapolated") or {}, below_roofline=True)
        else:
            # an extrapolation that beats the roofline is wrong: simulate in full
            run = run_kernel(chip, p, mapping, ideal)
            res = assemble_result(chip, op, p, mapping, lowered, run, ideal)
    # the second pass that sums the partial results, at the stack's measured rate and floor for
    # that kernel where it has one (options.combine_stream)
    combine = Options(memory=options.memory, fidelity=options.fidelity, stream=options.combine_stream)
    if split > 1:
        res = merge_results(res, simulate_op_at_clock(chip, _split_k_reduction(op, split), combine))
    if isinstance(lowered, LoweredAttention) and lowered.kv_splits > 1:
        res = merge_results(res, simulate_op_at_clock(chip, _split_kv_reduction(op, lowered.kv_splits), combine))
    return res, run


def _reference_run(chip: ChipSpec, op, options: Options) -> tuple[tuple, kernel_run.KernelRun] | None:
    """(mapping key, engine run) of ``op`` at ``options.reference_clock_mhz`` when this run
    below that clock may reuse it (the same mapping, compute-bound within
    CLOCK_SHARE_TOLERANCE), else None.  The reference is simulated again when it is no
    longer remembered, so the answer never depends on what was asked before."""
    ref_mhz = options.reference_clock_mhz
    if ref_mhz is None or options.mapping_of is None or not float(chip.clock_mhz) < float(ref_mhz):
        return None
    ref_chip = chip.model_copy(update={"clock_mhz": float(ref_mhz)})
    ref_options = dataclasses.replace(options, mapping_of=None, reference_clock_mhz=None)
    memo_key = (_chip_key(ref_chip), op, ref_options)
    chosen = _CHOSEN_RUNS.get(memo_key)
    while chosen is None:  # (another thread may evict it between the two steps: ask again)
        _simulate_tiled(ref_chip, op, ref_options)
        chosen = _CHOSEN_RUNS.get(memo_key)
    key, run = chosen
    if key != options.mapping_of or not len(run.stats):
        return None
    compute_cycles = float(run.stats[:, K.S_COMPUTE].max())
    # (an extrapolated run's makespan may fall below its extrapolated compute cycles:
    # such a run is not known to be compute-bound)
    if not abs(run.makespan - compute_cycles) <= CLOCK_SHARE_TOLERANCE * compute_cycles:
        return None
    return key, run


#: the Mapping fields that, with the split-K factor, tell two candidate mappings of one op apart
_KEY_FIELDS = ("distribution", "partition", "tile_m", "tile_n", "tile_k", "loop_order")


def mapping_key(mapping, split: int) -> tuple:
    """What tells two candidate mappings of one op apart: split-K factor, distribution,
    partition, tiles and loop order."""
    return _key(split, lambda f: getattr(mapping, f))


def result_mapping_key(result) -> tuple | None:
    """The :func:`mapping_key` of the mapping an :class:`OpResult` ran (None without one)."""
    m = result.mapping or {}
    if "tile_m" not in m:
        return None
    return _key((m.get("compute") or {}).get("split_k") or 1, m.__getitem__)


def _key(split, field) -> tuple:
    return (int(split),) + tuple(tuple(field(f)) if f == "partition" else field(f) for f in _KEY_FIELDS)


#: how many of the best-estimated mappings per split-K factor are searched for one wanted by key
_WIDE_SEARCH = 4096


def _candidates(chip: ChipSpec, lowered: LoweredOp, cores: int, budget, top: int, ideal: bool,
                split_menu: tuple[int, ...] | None = None, tie: float | None = None, want: tuple | None = None):
    """(estimate, problem, mapping, split-K factor) of the best ``top`` mappings - with
    ``tie``, of the best ``top`` distinct tiles (loop orders of one tile count once) whose
    estimates are within ``tie`` of the best one.

    GEMMs may split k from the chip's ``split_k`` menu: S slices of k run as S times as
    many instances writing fp32 partial sums, then a reduction pass sums them (its
    traffic is part of the estimate)."""
    prob = lowered.problem
    ms = getattr(chip, "mapping", None)
    menu = (1,)
    if ms is not None and isinstance(lowered, LoweredGemm) and not ideal:
        menu = tuple(split_menu or ms.array_split_k.get(lowered.array, ms.split_k))
    out = []
    head = set()   # ids of each split's `top` best (search_top's order): the band's pool
    error = None
    # streams have no array (and no per-kernel threads: blocks_sharing_cores ignores lanes)
    lanes = lowered.lanes() if isinstance(lowered, LoweredOnArray) else 1
    for (group, blocks), S in itertools.product(blocks_sharing_cores(prob, lanes), sorted(set(menu))):
        if (S > 1 and prob.k // S < max(1, prob.fixed_k or prob.unit_k)) or (want is not None and S != want[0]):
            continue
        p = group if S == 1 else dataclasses.replace(group, count=prob.count * S, k=-(-prob.k // S),
                                                      layout=dataclasses.replace(prob.layout, c=prob.layout.psum))
        try:
            # loop orders of a tile come in pairs that the estimate cannot tell apart; on a
            # library chip the band takes its extra kinds from beyond each split's `top` - except
            # for one candidate (`fidelity: fast`), the pick alone: search_top's first is its best
            # whatever it is asked for
            asked = top if tie is None and top == 1 else 6 * top
            maps = search_top(p, cores * blocks, budget.shared_by(blocks), asked)
        except MappingError as exc:
            error = exc
            continue
        extra = 0.0
        if S > 1:
            out_el = prob.count * prob.m * prob.n
            # the reduction pass streams contiguously: at the DRAM's sequential rate, after
            # one memory round trip - a second kernel cannot ask for its first partial sums
            # before it starts, so that latency is never hidden behind the first pass (left
            # out, a 128x2048x512 bf16 GEMM on h200_sxm with twice the HBM channels ranked
            # 6- and 8-way splits 9 % ahead of the unsplit tile; the 8-way reduction alone took
            # 1,362 cycles against 349 estimated, and the split ran 18 % slower than unsplit)
            seq = stream_efficiency(budget.dram, 1, 0) if budget.dram is not None else 1.0
            extra = (S * out_el * 4 + out_el * prob.layout.c) / (budget.dram_bytes_per_cycle * seq) \
                + budget.latency_cycles
            if chip.runtime is not None:
                extra += chip.runtime.op_launch_overhead_ns * chip.clock_hz / 1e9
        for rank, m in enumerate(maps):
            out.append((m.estimated_cycles + extra, p, m, S))
            if rank < top:
                head.add(id(out[-1]))
    if want is not None:
        return [c for c in out if mapping_key(c[2], c[3]) == want][:1]
    if not out:
        raise error if error is not None else MappingError(f"op '{prob.name}': no mapping found")
    if tie is not None:
        # the mapper's pick first, then distinct tiles within the tie band in the order of
        # their estimates - first those of a k tile not yet taken (the k tile sets both
        # the length of the DRAM rows a tile is read in and the folds per output tile,
        # what the estimate sees least exactly), then the rest
        lo = min(c[0] for c in out)
        seen, band = set(), []
        for c in out:
            m = c[2]
            key = (c[3], m.distribution, m.partition, m.tile_m, m.tile_n, m.tile_k)
            if c[0] <= lo * tie and key not in seen:
                seen.add(key)
                band.append(c)
        if not band:
            return out[:1]
        # then tile shapes not yet taken (a shape the band holds on another split reads its
        # operands in the same pattern: on eyeriss with two cores a 64x28x256 tile on one and
        # on two cores filled a large problem's two places, and 8x64x256, which the one-core
        # chip simulated and won with, 12 % faster, was not run), then the rest
        kept = band[:1]
        for key in (lambda m: m.tile_k, lambda m: (m.tile_m, m.tile_n, m.tile_k)):
            _take_new_keys(kept, band, key, top)
        taken = {id(c) for c in kept}
        return kept + [c for c in band if id(c) not in taken][:top - len(kept)]
    out.sort(key=lambda c: c[0])
    # only candidates the estimate cannot tell apart are worth simulating
    heads = [c for c in out if id(c) in head]
    near = [c for c in out if c[0] <= heads[0][0] * REFINE_WITHIN]
    # (one candidate - `fidelity: fast`, ideal memory - is the pick alone)
    return diverse_band([c for c in near if id(c) in head], near, top, EXTRA_KINDS if top > 1 else 0)


#: tiles of a kind the band lacks that a chip with a kernel library simulates beside it
#: (:func:`diverse_band`)
EXTRA_KINDS = 2


def diverse_band(head: list, near: list, top: int, extra: int = 0) -> list:
    """What a chip with a kernel library simulates: the best ``top`` of ``head`` (each
    split's best mappings, in estimate order) with each k tile's best first
    (:func:`distinct_k_tiles_first`), then up to ``extra`` more from ``near`` (every mapping
    within REFINE_WITHIN of the best estimate, in estimate order): the best of each kind -
    (count of cores used, whether the tile is longer along m) - that the band lacks.

    The estimate tells least exactly how a tile that leaves cores idle compares with one
    that fills them (the panels a wave's tiles share, each core's share of the DRAM), and
    a tile from its transpose (which operand's panel the wave shares), and four near-equal
    estimates are often four tiles of one kind.  The band itself is what was simulated
    before, so at a given clock no op's answer gets slower (under DVFS a faster mapping may
    draw more power and run at a lower clock); the extra kinds cost engine runs.  Measured on
    the 2-core build machine (2026-12-07, cycles of the op): a100_sxm4_80gb's 1024x512x1024
    bf16 GEMM with its HBM channels doubled simulated four 64-SM tiles (12.2-13.9k) where
    64x64x32 on all 108 SMs, ranked fifth, runs 11.2k - so the faster memory made the op 6 %
    slower than the chip as shipped, whose band held the 108-SM tile; h100_sxm's 64x512x2048
    at 1980 MHz simulated three 64-SM tiles wider than tall and a 43-SM one (3.5-3.8k) where
    64x32 on 64 SMs, ranked sixth, runs 3.0k."""
    band = distinct_k_tiles_first(head[:top])
    return _take_new_keys(band, near, lambda m: (m.cores_used, m.tile_m >= m.tile_n), len(band) + extra)


def _take_new_keys(kept: list, cands: list, key, limit: int) -> list:
    """``kept`` with, appended in place, the first of ``cands`` (in their order) of each value
    of ``key`` (of a candidate's mapping) that ``kept`` does not hold yet, until it has
    ``limit`` candidates."""
    seen = {key(c[2]) for c in kept}
    taken = {id(c) for c in kept}
    for c in cands:
        if len(kept) >= limit:
            break
        if id(c) not in taken and key(c[2]) not in seen:
            kept.append(c)
            taken.add(id(c))
            seen.add(key(c[2]))
    return kept


def distinct_k_tiles_first(cands: list) -> list:
    """``cands`` (in estimate order) with the best candidate of each k tile first, then the
    rest in estimate order.  The k tile sets the length of the DRAM rows a tile is read in
    (row-buffer hits, activations per byte) and how many loads a pipeline stage keeps in
    flight - what the estimate sees least exactly - so a large problem that simulates only
    its first few candidates sees each k tile of a kernel list with several (the sm80
    lists: 32- and 64-element k tiles) rather than two of one.  With one k tile the order
    is unchanged."""
    firsts, seen = [], set()
    for c in cands:
        if c[2].tile_k not in seen:
            seen.add(c[2].tile_k)
            firsts.append(c)
    taken = {id(c) for c in firsts}
    return firsts + [c for c in cands if id(c) not in taken]


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
