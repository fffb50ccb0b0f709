"""Lowering: an op on a chip → a :class:`~sim.ir.lowered.LoweredOp` (its
:class:`~sim.ir.lowered.TileProblem` and what the lowering chose), and the memory budget the
mapper fits tiles into (the arrays the Numba engine reads are built by
:mod:`sim.model.engine.arrays`).

Every op kind becomes the same three-loop tile nest:

=============  ===========================  ====================  ======================
op             A (read)                     B (read)              C (written)
=============  ===========================  ====================  ======================
GEMM           activations (m, k)           weights (n, k)        outputs (m, n)
attention      Q rows (m = q_len·group)     K and V rows (k)      O rows (m)
vector op      input rows (m)               -                     output rows (m)
copy           source rows (m)              -                     destination rows (m)
=============  ===========================  ====================  ======================
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Callable, TypeVar

import numpy as np

from sim.errors import MappingError, ShapeError
from sim.ir.lowered import (ConvWindows, LoweredAttention, LoweredGemm, LoweredOp, LoweredStream, OperandLayout,
                            TileProblem)
from sim.ir.ops import Attention, Conv2d, Copy, Gemm, VectorOp
from sim.model.dataflow import get_dataflow
from sim.model.mapper.compute import (ArrayChoice, choose_array, compute_rate_class, gemm_step_cycles, special_cycles,
                                      vector_cycles)
from sim.model.mapper.search import MemoryBudget, tile_sram_bytes, tiles_fit
from sim.model.mapper.tiling import accumulator_sets
from sim.model.memory.dram import dram_params
from sim.spec.chip import MappingSpec, kernel_entry
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format, sparse_2_4_bytes

#: vector-unit work to widen one quantised weight: convert and multiply by its scale
DEQUANT_OPS_PER_WEIGHT = 2
#: how much of a large problem is simulated before extrapolating (sim.model.engine.extrapolate): problems
#: above ``steps``/``chunks`` (per core steps, DRAM chunks) are extrapolated from samples of
#: about ``sample_chunks``; ``refine`` caps the candidate mappings simulated.  "fast" (for
#: large sweeps) is about 2.3x cheaper and a few percent less accurate (README, Speed).  Both
#: check that the samples are steady before extrapolating: "fast" without the check drew a
#: line through its first two samples and missed "high" by up to 26 % on the shipped decode
#: sweep (an up-projection at 144x144, 3 MiB, 9.6 Gb/s: 17.6 against 10.2 ms), so that
#: tokens/s fell with more HBM bandwidth (96x96, 4 MiB: 263 -> 222 from 9.6 to 10.4 Gb/s) or a
#: bigger array (128 -> 144: 425 -> 356); with the check, 2-4 % under "high" on those points
#: at 1.2x fast's old cost (2026-12-04, ten sweep points side by side)
FIDELITY = {
    "high": {"steps": 60_000, "chunks": 400_000, "sample_chunks": 100_000, "refine": 4, "refine_large": 2,
             "min_sample_rounds": (2, 4), "steady_check": True},
    "fast": {"steps": 30_000, "chunks": 60_000, "sample_chunks": 20_000, "refine": 1, "refine_large": 1,
             "min_sample_rounds": (1, 2), "steady_check": True},
}
#: elements per row when a 1-D stream (vector op, copy) is laid out as rows
STREAM_ROW_ELEMENTS = 1024
#: online-softmax work per score in a fused attention tile: max, subtract, exp, sum,
#: rescale (FlashAttention-2, Dao 2023, Algorithm 1): 4 plain lane ops and 1 exp
SOFTMAX_LANE_OPS_PER_SCORE = 4
SOFTMAX_SPECIAL_OPS_PER_SCORE = 1


@dataclass(frozen=True)
class Options:
    """How an op is simulated: dataflow (None = the array's default), memory model
    ('modeled' or 'ideal'), which array, and RS row length."""

    dataflow: str | None = None
    memory: str = "modeled"
    array: str | None = None
    row_length: int | None = None
    tiles: tuple[int, int, int] | None = None   # force (m, n, k) tiles (a library's only kernel)
    split_k: tuple[int, ...] | None = None      # the split-K factors allowed (None: the chip's menu)
    fidelity: str = "high"                      # high | fast: how much of a large problem is simulated
    stream: object = None                       # a stack's StreamKernelRule (sim.spec.stack_spec): a vector
                                                # kernel's achieved rate and floor; None: the ideal stream
    row_work: object = None                     # a stack's rule for a GEMM kernel's own cost (RowWorkRule:
                                                # tinygemm's per-row work; ThreadPerOutputRule: int8mm.cu's
                                                # scattered loads; PartialTokenTileRule: cuSPARSELt's partly
                                                # filled token tile); None: none
    combine_stream: object = None               # a stack's StreamKernelRule for the second kernel that sums
                                                # the op's partial results (cuBLAS's splitKreduce_kernel after
                                                # a split-K GEMM, cuDNN's lean_reduction_kernel after a split-KV
                                                # attention); None: the ideal stream
    mapping_of: tuple | None = None             # simulate only the candidate with this mapping_key when the
                                                # mapper still offers it (DVFS re-uses, at the clocks below
                                                # the chip's, the mapping it chose at the chip's clock)
    reference_clock_mhz: float | None = None    # with mapping_of, below this clock: the clock that mapping
                                                # was chosen at; a compute-bound engine run there stands for
                                                # the run here (sim.model.engine.run.CLOCK_SHARE_TOLERANCE)

    def __post_init__(self) -> None:
        if self.memory not in ("modeled", "ideal"):
            raise MappingError(f"memory must be 'modeled' or 'ideal', got {self.memory!r}")
        if self.fidelity not in FIDELITY:
            raise MappingError(f"fidelity must be one of {', '.join(FIDELITY)}, got {self.fidelity!r}")


def bytes_per_element(dtype: str) -> float:
    return get_format(dtype).bits_per_value / 8.0


def _dataflow_model(choice: ArrayChoice, opts: Options):
    if choice.dataflow == "rs" and opts.row_length is not None:
        return get_dataflow("rs", row_length=opts.row_length)
    return get_dataflow(choice.dataflow)


def _with_row_length(chip: ChipSpec, choice: ArrayChoice, df) -> ArrayChoice:
    """``choice`` with fold overlap derived for the row length the dataflow runs at: a
    row-stationary PE keeps ``row_length`` weights, so double-buffering them takes twice
    that many words (:meth:`sim.spec.compute_spec.ArraySpec.overlaps_folds`)."""
    words = int(getattr(df, "row_length", 1) or 1)
    if words <= 1:
        return choice
    arr = next(a for a in chip.cores.arrays if a.name == choice.name)
    return dataclasses.replace(choice, fold_overlap=arr.overlaps_folds(choice.dataflow, choice.rate_class, words))


def _array_units(df, choice: ArrayChoice) -> tuple[int, int, int]:
    """Preferred tile granularity along (m, n, k): the array dims mapped onto them."""
    units = {"m": 1, "n": 1, "k": 1}
    spec = df.spec
    kpack = max(1, int(round(choice.k_per_pe_cycle)))
    row_len = getattr(df, "row_length", 1) or 1
    units[spec.spatial_rows] = choice.rows * (kpack * row_len if spec.spatial_rows == "k" else 1)
    units[spec.spatial_cols] = choice.cols * (kpack if spec.spatial_cols == "k" else 1)
    if choice.count > 1:
        units["n"] *= 1
    return units["m"], units["n"], units["k"]


#: the RS row lengths tried for a GEMM (within the register file's weight words; see
#: sim.model.engine.run.simulate_op_at_clock)
RS_ROW_LENGTHS = (1, 2, 3, 4, 6, 8, 12, 16)
#: row lengths whose run is within this share of the fastest count as equally fast
RS_ROW_LENGTH_CYCLE_TOLERANCE = 0.01


def gemm_problem(chip: ChipSpec, op: Gemm, opts: Options) -> LoweredGemm:
    rate = compute_rate_class(op.dtype, op.weight_dtype)
    choice = choose_array(chip, rate, sparse_2_4=op.sparsity == "2:4", dataflow=opts.dataflow, array_name=opts.array)
    df = _dataflow_model(choice, opts)
    choice = _with_row_length(chip, choice, df)
    if op.sparsity == "2:4":
        b_bpe = sparse_2_4_bytes(op.b_dtype, op.k * op.n) / (op.k * op.n)
    else:
        b_bpe = bytes_per_element(op.b_dtype)
    layout = OperandLayout(a=bytes_per_element(op.dtype), b=b_bpe, c=bytes_per_element(op.c_dtype))
    split = "n"
    # weight-only quantisation: the weight tile is widened on the vector unit while the
    # array works on the previous tile (as fused W8A16/W4A16 kernels do), so a step costs
    # the slower of the two
    dequant = get_format(op.b_dtype).bits < get_format(op.dtype).bits

    def cycles_fn(mt, nt, kt):
        cyc = gemm_step_cycles(df, choice, mt, nt, kt, split)[0].astype(np.float64)
        if dequant:
            cyc = np.maximum(cyc, vector_cycles(chip, np.asarray(kt, dtype=np.float64) * np.asarray(nt)
                                                * DEQUANT_OPS_PER_WEIGHT))
        return cyc

    def tail_fn(mt, nt, kt):
        return gemm_step_cycles(df, choice, mt, nt, kt, split)[1].astype(np.float64)

    um, un, uk = _array_units(df, choice)
    prob = TileProblem(name=op.name, count=op.count, m=op.m, n=op.n, k=op.k, layout=layout, cycles_fn=cycles_fn,
                       tail_fn=tail_fn if choice.fold_overlap else None,
                       b_shared=op.b_shared, unit_m=um, unit_n=un * choice.count, unit_k=uk,
                       macs=op.macs, flops=op.flops)
    return LoweredGemm(problem=prob, kind="gemm", array=choice.name, rows=choice.rows, cols=choice.cols,
                       arrays_per_core=choice.count, dataflow=choice.dataflow, rate_class=choice.rate_class,
                       macs_per_pe_per_cycle=choice.macs_per_pe_per_cycle, sparse_2_4_units_used=choice.sparse_2_4,
                       sparse_speedup=choice.sparse_speedup if choice.sparse_2_4 else 1.0,
                       k_per_pe_cycle=choice.k_per_pe_cycle, array_split=split,
                       row_length=getattr(df, "row_length", None))


def attention_problem(chip: ChipSpec, op: Attention, opts: Options, cores: int) -> LoweredAttention:
    """FlashAttention-style fused attention: per (sequence, KV head) instance, a block of
    query rows (the ``heads/kv_heads`` query heads sharing a KV head, position-major)
    stays on chip while K and V tiles stream past; scores never leave the core.  A library
    that does not pack grouped query heads (``mapping.attention_gqa_packing``) runs one
    instance per query head instead, the heads of a group reading one copy of K/V.

    When there are fewer instances than cores and long contexts (decode), the key range is
    split into independent chunks (split-KV / FlashDecoding) so every core works; the
    partial results are combined by a small reduction counted in the same op.
    """
    try:
        choice = choose_array(chip, get_format(op.dtype).rate_class, dataflow=opts.dataflow, array_name=opts.array)
        math_dtype = op.dtype
    except MappingError:
        # no units for the activation format (an int8-only chip): attention runs at the KV
        # cache's format when the chip has units for that (int8 attention kernels)
        if get_format(op.kv_format).bits >= get_format(op.dtype).bits:
            raise
        choice = choose_array(chip, get_format(op.kv_format).rate_class, dataflow=opts.dataflow,
                              array_name=opts.array)
        math_dtype = op.kv_format
    df = _dataflow_model(choice, opts)
    choice = _with_row_length(chip, choice, df)
    ms = getattr(chip, "mapping", None)
    group = op.heads // op.kv_heads
    packing = ms.attention_gqa_packing if ms is not None else "always"
    packed = packing == "always" or (packing == "decode" and op.q_len == 1)
    # packed: one instance per (sequence, KV head) holds its group's query rows,
    # position-major; otherwise one instance per query head, the group's instances
    # consecutive and reading one copy of K/V
    share = 1 if packed else group
    if not packed:
        group = 1
    count = op.batch * op.kv_heads * share
    m = op.q_len * group
    d = op.head_dim
    kv_bpe = bytes_per_element(op.kv_format)
    kv_narrow = get_format(op.kv_format).bits < get_format(op.dtype).bits
    act_bpe = bytes_per_element(op.dtype)
    splits = 1
    # one query row per sequence sees every cached key, causal mask or not: a decode
    # step's attention is a full (splittable) pass over the cache
    causal = op.causal and op.q_len > 1
    may_split = ms is None or ms.attention_split_kv == "always" or op.q_len == 1
    if may_split and not causal and count < cores and op.kv_len >= 512:
        splits = max(1, min(cores // count, op.kv_len // 256))
    k_len = -(-op.kv_len // splits)
    layout = OperandLayout(a=act_bpe, b=kv_bpe, c=act_bpe if splits == 1 else 4.0, psum=4.0)

    def cycles_fn(mt, nt, kt):
        mt = np.asarray(mt, dtype=np.int64)
        kt = np.asarray(kt, dtype=np.int64)
        # on a fold_overlap array the MMAs of consecutive key blocks chain like a GEMM's
        # k-steps: fill/drain is paid once per query block (tail_fn), not per key block
        qk = gemm_step_cycles(df, choice, mt, kt, np.full_like(kt, d), "n")[0]
        pv = gemm_step_cycles(df, choice, mt, np.full_like(kt, d), kt, "n")[0]
        scores = mt * kt
        lane = vector_cycles(chip, scores * SOFTMAX_LANE_OPS_PER_SCORE)
        special = special_cycles(chip, scores * SOFTMAX_SPECIAL_OPS_PER_SCORE)
        if kv_narrow:  # a quantised KV cache is widened on the vector unit, tile by tile
            lane = lane + vector_cycles(chip, kt * 2 * d * DEQUANT_OPS_PER_WEIGHT)
        # QK^T -> exp -> PV is a dependency chain within a tile: the exponentials (on the
        # special-function units, far slower than the matrix units - FlashAttention-3,
        # Shah et al. 2024, sec. 3) add to the matrix work; the other softmax lane ops
        # (max, subtract, sum, rescale) issue on the vector lanes alongside it
        return np.maximum(qk + pv + special, lane).astype(np.float64)

    def tail_fn(mt, nt, kt):
        mt = np.asarray(mt, dtype=np.int64)
        kt = np.asarray(kt, dtype=np.int64)
        return (gemm_step_cycles(df, choice, mt, kt, np.full_like(kt, d), "n")[1]
                + gemm_step_cycles(df, choice, mt, np.full_like(kt, d), kt, "n")[1]).astype(np.float64)

    um, un, uk = _array_units(df, choice)
    stages = ms.attention_pipeline_stages if ms is not None else None
    prob = TileProblem(name=op.name, count=count * splits, m=m, n=1, k=k_len, layout=layout, cycles_fn=cycles_fn,
                       tail_fn=tail_fn if choice.fold_overlap else None, a_dims=("m",), b_dims=("k",), c_dims=("m",), a_fixed=d, b_fixed=2 * d, c_fixed=d,
                       reduction=True, causal=causal, causal_past=op.kv_len - op.q_len, causal_group=group,
                       unit_m=max(1, min(um, 128)), unit_n=1, unit_k=max(16, uk), fixed_order="mnk",
                       macs=op.macs, flops=op.flops, stages=stages, b_share_group=share)
    return LoweredAttention(problem=prob, kind="attention", array=choice.name, rows=choice.rows, cols=choice.cols,
                            arrays_per_core=choice.count, dataflow=choice.dataflow, rate_class=choice.rate_class,
                            macs_per_pe_per_cycle=choice.macs_per_pe_per_cycle, k_per_pe_cycle=choice.k_per_pe_cycle,
                            instances=count, kv_splits=splits, query_rows_per_instance=m, gqa_packed=packed,
                            fused=True, math_dtype=math_dtype)


def _fitting_row(chip: ChipSpec, prob: TileProblem, width: int) -> int:
    """``width`` (elements of one row of stream ``prob``), or fewer, so that one row's tile
    buffers as the mapper sizes them (``tile_sram_bytes`` at the buffer's pipeline depth,
    ``tiles_fit``) fit a core's tile buffer.  A stream whose elements carry many bytes - a
    split-KV reduction reads every split's fp32 partial output of an element - is walked in
    narrower rows, as its kernel walks what fits on chip (an MQA decode over 8k keys on
    h200_sxm had no tile that fit: 532 KiB for a 1,024-element row)."""
    if not chip.memory.core_srams:
        return width
    mem = memory_budget(chip, True)
    a, b, c = (float(x) for x in tile_sram_bytes(prob, 1, 1, 1, mem.buffers))
    if tiles_fit(mem, a, b, c):
        return width
    caps = ((mem.sram_bytes, a + b + c),) if mem.partition is None else tuple(zip(mem.partition, (a, b, c)))
    return max(1, int(width * min(cap / need for cap, need in caps if need > 0)))


def stream_problem(chip: ChipSpec, name: str, elements: int, read_bytes: float, write_bytes: float,
                   lane_ops_per_element: float, kind: str) -> LoweredStream:
    """A 1-D stream laid out as rows of ``STREAM_ROW_ELEMENTS`` (vector ops, copies), or of
    fewer where one such row would not fit a core's tile buffer (:func:`_fitting_row`)."""
    a_bpe = read_bytes / elements if read_bytes else 0.0
    c_bpe = write_bytes / elements if write_bytes else 0.0
    layout = OperandLayout(a=max(a_bpe, 1e-9), b=0.0, c=max(c_bpe, 1e-9), psum=max(c_bpe, 1e-9))

    def laid_out(width: int) -> TileProblem:
        def cycles_fn(mt, nt, kt):
            return vector_cycles(chip, np.asarray(mt, dtype=np.float64) * width * lane_ops_per_element)

        return TileProblem(name=name, count=1, m=-(-elements // width), n=1, k=1, layout=layout, cycles_fn=cycles_fn,
                           a_dims=("m",) if read_bytes else (), b_dims=(), c_dims=("m",) if write_bytes else (),
                           a_fixed=width if read_bytes else 0, c_fixed=width if write_bytes else 0,
                           reduction=False, has_b=False, unit_m=1, fixed_order="mnk")

    width = min(STREAM_ROW_ELEMENTS, elements)
    prob = laid_out(width)
    fitted = _fitting_row(chip, prob, width)
    if fitted < width:
        width, prob = fitted, laid_out(fitted)
    return LoweredStream(problem=prob, kind=kind, row_elements=width, stream_rows=prob.m)


def apply_library_constraints(chip: ChipSpec, prob: TileProblem, kind: str, array: str | None = None) -> TileProblem:
    """``prob`` restricted to a chip's kernel-library menu (``mapping:`` in the chip file): a new
    problem (``prob`` is left as it was); ``prob`` itself where the chip has no menu."""
    ms = getattr(chip, "mapping", None)
    if ms is None:
        return prob
    cluster = ms.cluster_size
    if kind == "attention" and ms.attention_cluster_size is not None:
        cluster = ms.attention_cluster_size
    if ms.cluster_arrays is not None and array not in ms.cluster_arrays:
        cluster = 1
    out = dataclasses.replace(prob, distribution=ms.distribution, cluster=cluster,
                              pad_edge_tiles=bool(ms.pad_edge_tiles))
    if kind == "gemm":
        return dataclasses.replace(out, **_gemm_library_fields(ms, out, array))
    if kind == "attention":
        # the attention tile is fitted to the problem as the menu's distribution, cluster and
        # edge-tile rule leave it
        return dataclasses.replace(out, **_attention_library_fields(chip, ms, out, array))
    return out


def _with_exposed_drain(chip: ChipSpec, low: LoweredOp, opts: Options) -> LoweredOp:
    """``low`` whose tiles, where they take more than half of the accumulators a core holds
    (``accumulator_elements``, :func:`sim.model.mapper.tiling.accumulator_sets`), pay the
    drain of their results out of the core at the tile buffer's port after their last
    k-step (added to the problem's tail): with one set of accumulators the next tile's MMAs
    wait for them (a cooperative kernel's epilogue), where two sets let one drain while the
    other accumulates (ping-pong).  Not under ideal memory, which moves no data."""
    prob = low.problem
    if not prob.accumulator_elements or opts.memory == "ideal" or not chip.memory.core_srams:
        return low
    port = chip.memory.core_srams[-1].bytes_per_cycle
    base, c_bytes, limit = prob.tail_fn, prob.layout.c, prob.accumulator_elements

    def tail_fn(mt, nt, kt):
        elements = np.asarray(mt, dtype=np.float64) * np.asarray(nt, dtype=np.float64)
        drain = np.where(accumulator_sets(limit, mt, nt) < 2, elements * c_bytes / port, 0.0)
        return drain if base is None else base(mt, nt, kt) + drain
    return dataclasses.replace(low, problem=dataclasses.replace(prob, tail_fn=tail_fn))


def _gemm_library_fields(ms: MappingSpec, prob: TileProblem, array: str | None) -> dict[str, Any]:
    """The :class:`TileProblem` fields a kernel library's menu sets on a GEMM on ``array``."""
    fields: dict[str, Any] = {"tile_menu_m": ms.tile_m, "tile_menu_n": ms.tile_n}
    # the narrower operand's element bytes: a k tile given in bytes spans that many of them
    narrow = min(prob.layout.a, prob.layout.b) if prob.has_b else prob.layout.a
    if ms.pipeline_fill_bytes and (ms.pipeline_fill_arrays is None or array in ms.pipeline_fill_arrays):
        fields.update(stage_fill_bytes=float(ms.pipeline_fill_bytes), max_stages=ms.pipeline_max_stages)
    if array in ms.array_kernels:
        kernels = [kernel_entry(t) for t in ms.array_kernels[array]]
        # (tile_m, tile_n, stages, k tile in elements or 0 for the mapping's)
        fields["tile_kernels"] = tuple((m, n, st, max(1, int(kb // max(narrow, 1e-9))) if kb else 0)
                                       for m, n, st, _, kb, _ in kernels)
        fields["tile_kernel_threads"] = tuple(t[3] for t in kernels)
        if any(t[5] != 1.0 for t in kernels):
            fields["tile_kernel_rate_shares"] = tuple(t[5] for t in kernels)
    if array in ms.array_outstanding_requests:
        fields["max_outstanding"] = ms.array_outstanding_requests[array]
    if array in ms.array_inflight_from_stages:
        fields["inflight_from_stages"] = True
    if array in ms.array_port_bytes_per_cycle:
        fields["port_bytes_per_cycle"] = float(ms.array_port_bytes_per_cycle[array])
    if ms.tile_rule_arrays is None or array in ms.tile_rule_arrays:
        fields.update(tile_side_multiple=ms.tile_one_side_multiple or 0, tile_max_elements=ms.tile_max_elements or 0,
                      accumulator_elements=ms.accumulator_elements or 0)
    if ms.tile_k_bytes:
        # the k tile spans tile_k_bytes of the narrower operand (a W8A16 kernel streams
        # 128-byte rows of int8 weights)
        fields["fixed_k"] = max(1, int(ms.tile_k_bytes // max(narrow, 1e-9)))
    return fields


def _attention_library_fields(chip: ChipSpec, ms: MappingSpec, prob: TileProblem, array: str | None) -> dict[str, Any]:
    """The :class:`TileProblem` fields a kernel library's menu sets on a fused attention on ``array``."""
    if array in ms.attention_tiles:
        q_rows, kv_rows = _fitting_attention_tile(chip, prob, *ms.attention_tiles[array])
        return {"fixed_tiles": kernel_tile(prob, (q_rows, 1, kv_rows))}
    # FlashAttention-style kernels use the same query-block menu; key blocks of 64+
    fields: dict[str, Any] = {"tile_menu_m": ms.tile_m}
    if ms.tile_n:
        kv = tuple(t for t in ms.tile_n if t >= 64)
        fields["tile_menu_k"] = kv or None
    return fields


def kernel_tile(prob: TileProblem, tiles) -> tuple[int, int, int]:
    """A library kernel's one (m, n, k) tile as the engine runs it: whole where edge tiles
    compute in full (``pad_edge_tiles``), otherwise cut to the problem."""
    if prob.pad_edge_tiles:
        return tuple(tiles)
    return tuple(min(t, d) for t, d in zip(tiles, (prob.m, prob.n, prob.k)))


def _fitting_attention_tile(chip: ChipSpec, prob: TileProblem, q_rows: int, kv_rows: int) -> tuple[int, int]:
    """The library's attention tile, or - where its buffers do not fit the core's SRAM
    (a large head dim) - the tile halved, keys first, as FlashAttention's kernels take
    smaller blocks for wider heads."""
    budget = memory_budget(chip, False)
    stages = prob.stages or budget.buffers
    while True:
        fits = bool(tiles_fit(budget, *tile_sram_bytes(prob, q_rows, 1, kv_rows, stages)))
        if fits or (q_rows <= 16 and kv_rows <= 16):
            return q_rows, kv_rows
        if kv_rows > 16 and kv_rows >= q_rows:
            kv_rows //= 2
        else:
            q_rows //= 2


#: the lowering of each op kind the engine simulates: op type -> ``(chip, op, opts, cores) ->
#: LoweredOp``.  A new op kind adds one entry (:func:`register_lowering`); ops the trace builder
#: rewrites before the engine sees them (unfused attention, dequantisation) have none.
LOWERINGS: dict[type, Callable[[Any, Any, Options, int], LoweredOp]] = {}

_Lowering = TypeVar("_Lowering", bound=Callable[..., LoweredOp])


def register_lowering(op_type: type) -> Callable[[_Lowering], _Lowering]:
    """Register the decorated function as the lowering of ``op_type`` (and its subclasses)."""
    def register(fn: _Lowering) -> _Lowering:
        LOWERINGS[op_type] = fn
        return fn
    return register


def lower_op(chip: ChipSpec, op, opts: Options, cores: int) -> LoweredOp:
    """``op`` on ``chip`` as a tile problem, within the chip's kernel-library menu: the lowering
    :data:`LOWERINGS` registers for its type (the nearest class of its MRO that has one)."""
    for cls in type(op).__mro__:
        lowering = LOWERINGS.get(cls)
        if lowering is not None:
            low = lowering(chip, op, opts, cores)
            if getattr(chip, "mapping", None) is None:
                return low
            # a library kernel's grid is dealt over every SM by the hardware: no op of such a
            # chip is placed on a subset of its cores (TileProblem.fewer_cores)
            return dataclasses.replace(low, problem=dataclasses.replace(low.problem, fewer_cores=False))
    raise ShapeError(f"op '{getattr(op, 'name', op)}' of kind {type(op).__name__} is not simulated by the engine "
                     f"(it lowers {', '.join(sorted(t.__name__ for t in LOWERINGS))})")


def _within_library(chip: ChipSpec, low: LoweredOp, kind: str, tiles: tuple[int, int, int] | None,
                    **changes: Any) -> LoweredOp:
    """``low`` with its problem restricted to the chip's kernel-library menu and, where the stack
    fixes one (``tiles``), its kernel tile; ``changes``: other fields of the lowered op."""
    prob = apply_library_constraints(chip, low.problem, kind, low.array)
    if tiles is not None:
        prob = dataclasses.replace(prob, fixed_tiles=kernel_tile(prob, tiles))
    return dataclasses.replace(low, problem=prob, **changes)


@register_lowering(Gemm)
def _lower_gemm(chip: ChipSpec, op: Gemm, opts: Options, cores: int) -> LoweredOp:
    return _with_exposed_drain(chip, _within_library(chip, gemm_problem(chip, op, opts), "gemm", opts.tiles), opts)


def conv_row_length(chip: ChipSpec, op: Conv2d, opts: Options) -> int | None:
    """The RS row length a convolution runs at: Eyeriss's 1-D row primitive keeps one filter
    row (``kernel_w`` weights) in a PE and slides the ifmap row past it, so row_length =
    kernel_w, capped at the weights a PE's register file holds (a wider filter row is split
    over PEs, as a GEMM's k is).  None where the chosen array does not run RS or the caller
    fixed the row length."""
    if opts.row_length is not None:
        return None
    gemm = op.as_gemm()
    choice = choose_array(chip, compute_rate_class(gemm.dtype, gemm.weight_dtype), dataflow=opts.dataflow,
                          array_name=opts.array)
    if choice.dataflow != "rs":
        return None
    words = get_dataflow("rs").spec.register_file_words.weight
    return max(1, min(op.kernel_w, words))


@register_lowering(Conv2d)
def _lower_conv2d(chip: ChipSpec, op: Conv2d, opts: Options, cores: int) -> LoweredOp:
    """im2col onto the array (each window a row of A) - on RS with the filter row held in the
    PEs (:func:`conv_row_length`) - with DMA and DRAM moving the ifmap pixels under a tile's
    windows, not their im2col copies (:class:`sim.ir.lowered.ConvWindows`)."""
    row_length = conv_row_length(chip, op, opts)
    if row_length is not None:
        opts = dataclasses.replace(opts, row_length=row_length)
    low = gemm_problem(chip, op.as_gemm(), opts)
    windows = ConvWindows(out_h=op.out_h, out_w=op.out_w, in_h=op.in_h, in_w=op.in_w, kernel_h=op.kernel_h,
                          kernel_w=op.kernel_w, stride=op.stride)
    low = dataclasses.replace(low, problem=dataclasses.replace(low.problem, conv=windows))
    # a stack's kernel tile is a GEMM's or an attention's, never an im2col convolution's
    return _with_exposed_drain(chip, _within_library(chip, low, "gemm", None, lowering="im2col"), opts)


@register_lowering(Attention)
def _lower_attention(chip: ChipSpec, op: Attention, opts: Options, cores: int) -> LoweredOp:
    if not op.fused:
        raise MappingError(f"attention '{op.name}': unfused attention is lowered into GEMMs and a softmax "
                           "by the trace builder; simulate those ops instead")
    # a stack's own kernel tile is (query rows, 1, key rows): StackSpec.attention.prefill_tiles
    return _within_library(chip, attention_problem(chip, op, opts, cores), "attention", opts.tiles)


@register_lowering(VectorOp)
def _lower_vector(chip: ChipSpec, op: VectorOp, opts: Options, cores: int) -> LoweredOp:
    return stream_problem(chip, op.name, op.elements, op.read_bytes, op.write_bytes, op.ops_per_element, "vector")


@register_lowering(Copy)
def _lower_copy(chip: ChipSpec, op: Copy, opts: Options, cores: int) -> LoweredOp:
    return stream_problem(chip, op.name, op.bytes, op.bytes, op.bytes, 0.0, "copy")


# --------------------------------------------------------------------------- budgets


def raster_group(cores: int) -> int:
    """Tile rows per rasterisation group in cyclic mode: about the square root of the
    cores, so a wave of output tiles is a near-square block (minimal distinct panels)."""
    return max(1, int(round(math.sqrt(max(1, cores)))))


def blocks_sharing_cores(prob: TileProblem, lanes: int) -> list[tuple[TileProblem, int]]:
    """A problem per group of the library's kernels that share a core the same way:
    (problem, blocks per core).  A SIMT kernel whose blocks have fewer threads than the
    array has lanes runs several blocks on one core, each at that share of its rate; the
    others (and problems without per-kernel threads) use the whole core.  A kernel whose
    compute loop sustains only a share of the array's rate (``tile_kernel_rate_shares``)
    takes 1 / share as many cycles per step (and per fill and drain)."""
    threads = prob.tile_kernel_threads
    shares = prob.tile_kernel_rate_shares
    if not prob.tile_kernels or ((not threads or not any(threads)) and not shares):
        return [(prob, 1)]
    groups: dict[tuple[int, float], list] = {}
    for i, kern in enumerate(prob.tile_kernels):
        thr = threads[i] if threads else 0
        f = max(1, lanes // thr) if thr else 1
        groups.setdefault((f, float(shares[i]) if shares else 1.0), []).append(kern)
    out = []
    for (f, share), kernels in sorted(groups.items()):
        one = dataclasses.replace(prob, tile_kernels=tuple(kernels), tile_kernel_threads=None,
                                  tile_kernel_rate_shares=None)
        if f == 1 and share == 1.0:
            out.append((one, 1))
            continue
        scale = f / share
        step, tail = prob.cycles_fn, prob.tail_fn
        out.append((dataclasses.replace(
            one, blocks_per_core=f,
            cycles_fn=lambda mt, nt, kt, _s=step, _x=scale: _s(mt, nt, kt) * _x,
            tail_fn=None if tail is None else (lambda mt, nt, kt, _t=tail, _x=scale: _t(mt, nt, kt) * _x)), f))
    return out


def memory_budget(chip: ChipSpec, ideal: bool) -> MemoryBudget:
    """Per-core tile buffer (the outermost core-scope SRAM, which DMA fills), its port,
    and the chip-level bandwidths."""
    srams = chip.memory.core_srams
    if not srams:
        raise MappingError(f"chip '{chip.name}' has no core-scope SRAM to hold tiles")
    buf = srams[-1]
    buffers = buf.buffers
    part = None
    level = f"memory.levels.{chip.memory.levels.index(buf)}"
    if buf.partition is not None:
        part = (buf.partition.input_kib * 1024.0, buf.partition.weight_kib * 1024.0,
                buf.partition.output_kib * 1024.0)
    dram = chip.memory.dram
    dram_bpc = dram.peak_bytes_per_s / chip.clock_hz
    l2 = sum(s.capacity_bytes for s in chip.memory.chip_srams)
    # Little's law: one core cannot move more than its outstanding requests per latency
    latency_ns = dram.t_rcd_ns + dram.t_cl_ns + dram.controller_latency_ns + dram.burst_ns
    per_core_bpc = dram.max_outstanding_requests_per_core * dram.access_bytes / latency_ns * 1e9 / chip.clock_hz
    return MemoryBudget(sram_bytes=float(buf.capacity_bytes), partition=part, buffers=buffers,
                        dram_bytes_per_cycle=dram_bpc,
                        port_bytes_per_cycle=float(min(buf.bytes_per_cycle, per_core_bpc)),
                        fill_bytes_per_cycle=float(buf.bytes_per_cycle),
                        noc_bytes_per_cycle=float(chip.noc.bandwidth_bytes_per_cycle), l2_bytes=float(l2),
                        ideal=ideal, latency_cycles=latency_ns * 1e-9 * chip.clock_hz,
                        l2_bytes_per_cycle=chip.memory.chip_sram_bytes_per_core_cycle(chip.clock_mhz) or 1e30,
                        dram=None if ideal else dram_params(dram),
                        sram_key=f"{level}.partition" if part is not None else f"{level}.capacity_kib")
