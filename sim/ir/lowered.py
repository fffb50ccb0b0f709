"""A lowered op: the tile problem an op becomes, and what its lowering chose.

* :class:`TileProblem` - ``count`` instances of a three-loop tile nest over (m, n, k) with
  operand footprints (:class:`OperandLayout`) and a step cost; the mapper
  (:mod:`sim.model.mapper.search`) lays it onto a chip, the engine runs it;
* :class:`LoweredOp` - what :func:`sim.model.engine.lower.lower_op` returns: the problem and
  the lowering's choices, one typed class per kind (:class:`LoweredGemm`,
  :class:`LoweredAttention`, :class:`LoweredStream`).  ``compute_info()`` is the JSON form
  reported as ``OpResult.mapping["compute"]``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

PSUM_BYTES = 4  # fp32 / int32 accumulators


@dataclass(frozen=True)
class OperandLayout:
    """Bytes per element of each operand as stored in DRAM (scales/metadata included)."""

    a: float
    b: float
    c: float
    psum: float = PSUM_BYTES


@dataclass(frozen=True)
class ConvWindows:
    """Where an im2col operand A comes from: a convolution's ifmap, whose pixels the im2col
    matrix repeats once per window that uses them.  A tile of ``mt`` rows of A (output
    pixels, row-major within an image) and ``kt`` columns (``(channel, filter row, filter
    column)``, channel-major) needs only the ifmap pixels under its windows: ``kt /
    (kernel_h·kernel_w)`` channels of ``(rows_out − 1)·stride + kernel_h`` ifmap rows by
    ``(cols_out − 1)·stride + kernel_w`` columns (clipped to the ifmap; whole images when
    the tile spans several).  A tile narrower than one window covers ``ceil(kt / kernel_w)``
    filter rows and ``min(kt, kernel_w)`` columns of one channel.  :meth:`a_fraction` is
    that count over ``mt·kt``: what DMA moves of an A tile (and what the A footprint is in
    DRAM), while the array still reads every im2col entry from its buffer."""

    out_h: int
    out_w: int
    in_h: int          # the unpadded ifmap: padding is zeros no one reads
    in_w: int
    kernel_h: int
    kernel_w: int
    stride: int

    def a_fraction(self, mt, kt) -> np.ndarray:
        """Unique ifmap pixels under an (mt × kt) tile of the im2col matrix, over mt·kt
        (vectorised; in (0, 1])."""
        mt = np.maximum(np.asarray(mt, dtype=np.float64), 1.0)
        kt = np.maximum(np.asarray(kt, dtype=np.float64), 1.0)
        F, E, U = float(self.out_w), float(self.out_h), float(self.stride)
        R, S = float(self.kernel_h), float(self.kernel_w)
        window = R * S
        # filter rows / columns of one channel a tile narrower than a window spans
        r_span = np.where(kt >= window, R, np.minimum(R, np.ceil(kt / S)))
        s_span = np.where(kt >= S, S, kt)
        channels = np.where(kt >= window, kt / window, 1.0)
        images = mt / (E * F)
        rows_out = np.minimum(E, np.ceil(mt / F))
        cols_out = np.minimum(F, mt)
        rows_in = np.minimum(float(self.in_h), (rows_out - 1.0) * U + r_span)
        cols_in = np.where(mt >= F, float(self.in_w), np.minimum(float(self.in_w), (cols_out - 1.0) * U + s_span))
        per_channel = np.where(images >= 1.0, images * self.in_h * self.in_w, rows_in * cols_in)
        return np.minimum(1.0, channels * per_channel / (mt * kt))


@dataclass
class TileProblem:
    """A tile nest: ``count`` instances of (m, n, k) with operand footprints and a cost.

    ``a_dims``/``b_dims``/``c_dims`` are the loop dims each operand's tile spans (GEMM:
    A (m, k), B (n, k), C (m, n); attention: Q (m,), K/V (k,), O (m,)); ``*_fixed`` the
    elements of an untiled trailing extent (e.g. head_dim).  ``cycles_fn(mt, nt, kt)``
    returns one core's compute cycles for a step, vectorised over NumPy arrays;
    ``tail_fn(mt, nt, kt)``, when given, the cycles paid once per output-tile visit after
    its last step (an array's fill/drain when k-steps chain, see
    :func:`sim.model.mapper.compute.gemm_step_cycles`).
    ``causal`` skips (m-tile, k-tile) steps a causal mask removes (attention).
    """

    name: str
    count: int
    m: int
    n: int
    k: int
    layout: OperandLayout
    cycles_fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    tail_fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray] | None = None
    a_dims: tuple[str, ...] = ("m", "k")
    b_dims: tuple[str, ...] = ("n", "k")
    c_dims: tuple[str, ...] = ("m", "n")
    a_fixed: int = 0
    b_fixed: int = 0
    c_fixed: int = 0
    b_shared: bool = False
    # consecutive instances that read one copy of B (grouped-query attention run one query
    # head per instance: the heads of a group read the same K/V); b_shared: all of them
    b_share_group: int = 1
    reduction: bool = True
    has_b: bool = True
    causal: bool = False
    causal_past: int = 0
    causal_group: int = 1
    unit_m: int = 1        # preferred tile granularity (array size along the dim)
    unit_n: int = 1
    unit_k: int = 1
    fixed_tiles: tuple[int, int, int] | None = None   # force (mt, nt, kt)
    fixed_order: str | None = None
    tile_menu_m: tuple[int, ...] | None = None   # allowed tile sizes (a kernel library's menu)
    tile_menu_n: tuple[int, ...] | None = None
    tile_menu_k: tuple[int, ...] | None = None
    fixed_k: int | None = None                   # the k tile, when the library fixes it
    distribution: str = "any"                    # any | block | cyclic
    # a block split may use fewer cores than the chip has (a compiler places an op on the cores it
    # picks); not on a chip with a kernel library, whose grids the hardware spreads over every core
    fewer_cores: bool = True
    cluster: int = 1                             # cores sharing tile loads by multicast
    stages: int | None = None                    # tile buffers per operand (None: the chip's)
    # a kernel library that sizes its pipeline to fill shared memory: stages =
    # floor(stage_fill_bytes / (A + B tile bytes)), between 2 and max_stages (0: off)
    stage_fill_bytes: float = 0.0
    max_stages: int = 0
    # a library's tile-shape rule: one of tile_m, tile_n (rounded up to 8) a multiple of
    # tile_side_multiple, tile_m x tile_n at most tile_max_elements (0: no rule)
    tile_side_multiple: int = 0
    tile_max_elements: int = 0
    # accumulator elements one core holds (MappingSpec.accumulator_elements; 0: two tiles' worth)
    accumulator_elements: int = 0
    # the library's kernels as (tile_m, tile_n, smem stages): only these tiles are tried
    # (tile_m, tile_n, smem stages, k tile or 0 = the problem's k menu)
    tile_kernels: tuple[tuple[int, int, int, int], ...] | None = None
    # threads per block of each of tile_kernels (0: the block uses the whole core)
    tile_kernel_threads: tuple[int, ...] | None = None
    # the share of the array's rate each of tile_kernels sustains (None: all 1)
    tile_kernel_rate_shares: tuple[float, ...] | None = None
    # blocks sharing one core at once (SIMT kernels whose blocks have fewer threads than the
    # array has lanes): the engine runs cores x blocks_per_core block slots, each with this
    # share of the core's compute rate, fill port and request window
    blocks_per_core: int = 1
    # DRAM requests one core keeps in flight for this kernel (0: the chip's)
    max_outstanding: int = 0
    # requests in flight from the kernel's pipeline: (stages - 1) k-steps of A and B tiles
    inflight_from_stages: bool = False
    # the kernel's own fill port, bytes per core cycle (0: the core buffer's bytes_per_cycle)
    port_bytes_per_cycle: float = 0.0
    # edge tiles (and tiles larger than the problem) cost a full tile's compute
    pad_edge_tiles: bool = False
    # operands ("a", "b", "c") held whole in the core's buffer between ops: never loaded,
    # stored or re-read through DRAM (sim.model.engine.residency)
    resident: tuple[str, ...] = ()
    # A is a convolution's im2col matrix: DMA and DRAM move the ifmap pixels under a tile's
    # windows, not its im2col entries (None: A is stored as it is read)
    conv: ConvWindows | None = None
    macs: int = 0
    flops: float = 0.0

    def a_dram_fraction(self, mt, kt):
        """Bytes A moves per byte of its tiles as the array reads them (1 but for convolutions)."""
        return 1.0 if self.conv is None else self.conv.a_fraction(mt, kt)


@dataclass(frozen=True)
class LoweredOp:
    """An op lowered to a tile problem.  ``kind`` is the engine's kind of work: ``gemm``
    (Conv2d included), ``attention``, ``vector`` or ``copy``.  The fields are fixed once
    lowered; the problem itself is the mapper's mutable :class:`TileProblem` (the
    library's constraints are applied to it before the LoweredOp is final)."""

    problem: TileProblem
    kind: str

    def compute_info(self) -> dict[str, Any]:
        """The lowering's choices as plain data (the mapping's ``compute`` block)."""
        raise NotImplementedError


@dataclass(frozen=True)
class LoweredOnArray(LoweredOp):
    """An op that runs on a matrix array (GEMM, fused attention): which array, its shape,
    dataflow and rate class."""

    array: str
    rows: int
    cols: int
    arrays_per_core: int
    dataflow: str
    rate_class: str
    macs_per_pe_per_cycle: float

    def lanes(self) -> int:
        """The array's lanes on one core (rows x cols x arrays)."""
        return int(self.rows * self.cols * self.arrays_per_core)

    def mac_speedup(self) -> float:
        """How much faster MACs issue than dense (2:4 sparse units: their speedup)."""
        return 1.0


@dataclass(frozen=True)
class LoweredGemm(LoweredOnArray):
    sparse_2_4_units_used: bool
    sparse_speedup: float
    k_per_pe_cycle: float
    array_split: str
    row_length: int | None
    lowering: str | None = None   # "im2col" for a Conv2d

    def mac_speedup(self) -> float:
        return self.sparse_speedup if self.sparse_2_4_units_used else 1.0

    def compute_info(self) -> dict[str, Any]:
        out = {"kind": self.kind, "array": self.array, "rows": self.rows, "cols": self.cols,
               "arrays_per_core": self.arrays_per_core, "dataflow": self.dataflow, "rate_class": self.rate_class,
               "macs_per_pe_per_cycle": self.macs_per_pe_per_cycle,
               "sparse_2_4_units_used": self.sparse_2_4_units_used, "sparse_speedup": self.sparse_speedup,
               "k_per_pe_cycle": self.k_per_pe_cycle, "array_split": self.array_split,
               "row_length": self.row_length}
        if self.lowering is not None:
            out["lowering"] = self.lowering
        return out


@dataclass(frozen=True)
class LoweredAttention(LoweredOnArray):
    """Fused (FlashAttention-style) attention: ``instances`` (sequence, KV head) or
    (sequence, query head) instances, the key range split ``kv_splits`` ways."""

    k_per_pe_cycle: float
    instances: int
    kv_splits: int
    query_rows_per_instance: int
    gqa_packed: bool
    fused: bool
    math_dtype: str

    def compute_info(self) -> dict[str, Any]:
        return {"kind": self.kind, "array": self.array, "rows": self.rows, "cols": self.cols,
                "arrays_per_core": self.arrays_per_core, "dataflow": self.dataflow, "rate_class": self.rate_class,
                "macs_per_pe_per_cycle": self.macs_per_pe_per_cycle, "k_per_pe_cycle": self.k_per_pe_cycle,
                "instances": self.instances, "kv_splits": self.kv_splits,
                "query_rows_per_instance": self.query_rows_per_instance, "gqa_packed": self.gqa_packed,
                "fused": self.fused, "math_dtype": self.math_dtype}


@dataclass(frozen=True)
class LoweredStream(LoweredOp):
    """A 1-D stream (vector op, copy) laid out as ``stream_rows`` rows of ``row_elements``."""

    row_elements: int
    stream_rows: int

    def compute_info(self) -> dict[str, Any]:
        return {"kind": self.kind, "row_elements": self.row_elements, "rows": self.stream_rows}
