"""Shape-only operators: what a workload asks the chip to do, with no data.

Every op is a frozen dataclass (hashable, so results can be memoised per (chip, op)).
Dimensions are validated on construction: a zero or negative size raises
:class:`~sim.errors.ShapeError` naming the op and the field.
"""
from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any, Union

from sim.errors import ShapeError
from sim.spec.dtypes import get_format, sparse_2_4_bytes


def _positive(op: Any, *names: str) -> None:
    for name in names:
        value = getattr(op, name)
        if isinstance(value, bool) or not isinstance(value, int):
            try:
                as_int = int(value)
            except (TypeError, ValueError, OverflowError):   # OverflowError: an infinite float
                raise ShapeError(f"{type(op).__name__} '{op.name}': {name} must be a whole number, got {value!r}") from None
            if as_int != value:
                raise ShapeError(f"{type(op).__name__} '{op.name}': {name} must be a whole number, got {value!r}")
            object.__setattr__(op, name, as_int)
            value = as_int
        if value <= 0:
            raise ShapeError(f"{type(op).__name__} '{op.name}': {name} must be positive, got {value}")


#: the largest problem an op may describe (products of its dimensions): beyond this, byte
#: and cycle counts would overflow 64-bit integers in the engine
MAX_PROBLEM = 2 ** 60


def _bounded(op: Any, *names: str) -> None:
    total = 1
    for name in names:
        total *= getattr(op, name)
    if total > MAX_PROBLEM:
        dims = " x ".join(f"{n}={getattr(op, n):,}" for n in names)
        raise ShapeError(f"{type(op).__name__} '{op.name}': problem too large to simulate ({dims} = {total:.3g}, "
                         f"the limit is {MAX_PROBLEM:.3g})")


def _check_dtype(op: Any, *names: str) -> None:
    for name in names:
        value = getattr(op, name)
        if value is not None:
            object.__setattr__(op, name, get_format(value).name)


#: weight sparsity patterns an op can carry: None (dense), "2:4" (structured, compressed,
#: half the MACs on arrays with 2:4 units) or "unstructured" (no format or unit uses it)
SPARSITIES = (None, "2:4", "unstructured")


@dataclass(frozen=True)
class Gemm:
    """C[m×n] = A[m×k] · B[k×n], ``count`` independent times.

    In LLM layers A is the activations and B the weights.  ``weight_dtype`` narrower than
    ``dtype`` is weight-only quantisation (B is widened before use); ``sparsity="2:4"``
    stores B 2:4 structured-sparse (values plus 2-bit indices; arrays with 2:4 units skip
    the pruned half); ``sparsity="unstructured"`` marks zeros at arbitrary places, which a
    dense array stores and multiplies like any other value.  ``b_shared`` means every one of the ``count``
    instances uses the same B (e.g. one weight matrix for several micro-batches).
    """

    name: str
    m: int
    k: int
    n: int
    count: int = 1
    dtype: str = "bf16"
    weight_dtype: str | None = None
    out_dtype: str | None = None
    sparsity: str | None = None
    b_shared: bool = False
    tags: tuple[str, ...] = field(default=(), compare=False)

    def __post_init__(self) -> None:
        _positive(self, "m", "k", "n", "count")
        _bounded(self, "m", "k", "n", "count")
        _check_dtype(self, "dtype", "weight_dtype", "out_dtype")
        if self.sparsity not in SPARSITIES:
            raise ShapeError(f"Gemm '{self.name}': sparsity must be one of {SPARSITIES}, got {self.sparsity!r}")
        if self.sparsity == "2:4" and self.k % 4:
            raise ShapeError(f"Gemm '{self.name}': 2:4 sparsity needs k divisible by 4, got k={self.k}")

    kind = "gemm"

    @property
    def b_dtype(self) -> str:
        return self.weight_dtype or self.dtype

    @property
    def c_dtype(self) -> str:
        if self.out_dtype:
            return self.out_dtype
        return "int32" if get_format(self.dtype).kind == "int" else self.dtype

    @property
    def macs(self) -> int:
        """Dense multiply-accumulates (2:4 sparsity halves the work done, not this count)."""
        return self.m * self.k * self.n * self.count

    @property
    def flops(self) -> int:
        return 2 * self.macs

    def a_bytes(self) -> int:
        return get_format(self.dtype).bytes_for(self.m * self.k) * self.count

    def b_bytes(self) -> int:
        per = (sparse_2_4_bytes(self.b_dtype, self.k * self.n) if self.sparsity == "2:4"
               else get_format(self.b_dtype).bytes_for(self.k * self.n))
        return per * (1 if self.b_shared else self.count)

    def c_bytes(self) -> int:
        return get_format(self.c_dtype).bytes_for(self.m * self.n) * self.count

    def min_dram_bytes(self) -> int:
        """Compulsory traffic: every input read once, the output written once."""
        return self.a_bytes() + self.b_bytes() + self.c_bytes()


@dataclass(frozen=True)
class Conv2d:
    """2-D convolution, NCHW, ``out_channels`` filters of ``kernel_h×kernel_w×in_channels``.

    Output size follows the usual formula ``(H + 2·pad − R) // stride + 1``; SCALE-Sim's
    topology files use ``pad = 0`` with a ceiling, see :mod:`sim.apps.scalesim_compat`.
    ``groups`` splits the channels and filters into that many independent convolutions
    (AlexNet's CONV2/4/5 run two: each filter sees half the input channels).

    DRAM sizes (:meth:`a_bytes`, :meth:`min_dram_bytes`) are the tensors' own - the ifmap
    once, not its im2col copy, whose entries repeat an ifmap pixel once per window using it.
    """

    name: str
    in_h: int
    in_w: int
    in_channels: int
    out_channels: int
    kernel_h: int
    kernel_w: int
    stride: int = 1
    padding: int = 0
    batch: int = 1
    dtype: str = "int8"
    out_h_override: int | None = None
    out_w_override: int | None = None
    groups: int = 1

    kind = "conv2d"

    def __post_init__(self) -> None:
        _positive(self, "in_h", "in_w", "in_channels", "out_channels", "kernel_h", "kernel_w", "stride", "batch")
        _bounded(self, "in_h", "in_w", "in_channels", "out_channels", "kernel_h", "kernel_w", "batch")
        if self.padding < 0:
            raise ShapeError(f"Conv2d '{self.name}': padding must be >= 0, got {self.padding}")
        _positive(self, "groups")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            raise ShapeError(f"Conv2d '{self.name}': groups={self.groups} must divide in_channels "
                             f"({self.in_channels}) and out_channels ({self.out_channels})")
        _check_dtype(self, "dtype")
        if self.out_h <= 0 or self.out_w <= 0:
            raise ShapeError(
                f"Conv2d '{self.name}': a {self.kernel_h}x{self.kernel_w} filter does not fit a "
                f"{self.in_h}x{self.in_w} input with padding {self.padding}")

    @property
    def out_h(self) -> int:
        if self.out_h_override is not None:
            return self.out_h_override
        return (self.in_h + 2 * self.padding - self.kernel_h) // self.stride + 1

    @property
    def out_w(self) -> int:
        if self.out_w_override is not None:
            return self.out_w_override
        return (self.in_w + 2 * self.padding - self.kernel_w) // self.stride + 1

    def as_gemm(self) -> Gemm:
        """im2col lowering: M = output pixels × batch, K = R·S·C, N = filters; one GEMM per
        group (``count``), each over its share of the channels and filters."""
        return Gemm(self.name, m=self.out_h * self.out_w * self.batch,
                    k=self.kernel_h * self.kernel_w * (self.in_channels // self.groups),
                    n=self.out_channels // self.groups, count=self.groups, dtype=self.dtype)

    @property
    def macs(self) -> int:
        return self.as_gemm().macs

    @property
    def flops(self) -> int:
        return 2 * self.macs

    def a_bytes(self) -> int:
        """The ifmap (unpadded: padding is zeros no one reads)."""
        return get_format(self.dtype).bytes_for(self.in_h * self.in_w * self.in_channels) * self.batch

    def b_bytes(self) -> int:
        return get_format(self.dtype).bytes_for(
            self.kernel_h * self.kernel_w * (self.in_channels // self.groups) * self.out_channels)

    def c_bytes(self) -> int:
        return self.as_gemm().c_bytes()

    def min_dram_bytes(self) -> int:
        return self.a_bytes() + self.b_bytes() + self.c_bytes()


@dataclass(frozen=True)
class Attention:
    """Scaled-dot-product attention of ``q_len`` new queries against ``kv_len`` keys.

    ``heads`` query heads share ``kv_heads`` key/value heads (GQA; MQA when 1).
    ``fused=True`` is a FlashAttention-style kernel (no score traffic to DRAM);
    ``fused=False`` is lowered by the trace builder into explicit GEMMs and a softmax.
    With ``causal`` the query block is the last ``q_len`` positions of ``kv_len``.
    """

    name: str
    batch: int
    heads: int
    kv_heads: int
    head_dim: int
    q_len: int
    kv_len: int
    causal: bool = True
    dtype: str = "bf16"
    kv_dtype: str | None = None
    fused: bool = True

    kind = "attention"

    def __post_init__(self) -> None:
        _positive(self, "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len")
        _bounded(self, "batch", "heads", "head_dim", "q_len", "kv_len")
        _check_dtype(self, "dtype", "kv_dtype")
        if self.heads % self.kv_heads:
            raise ShapeError(f"Attention '{self.name}': heads ({self.heads}) must be a multiple of kv_heads ({self.kv_heads})")
        if self.q_len > self.kv_len:
            raise ShapeError(f"Attention '{self.name}': q_len ({self.q_len}) cannot exceed kv_len ({self.kv_len})")

    @property
    def kv_format(self) -> str:
        return self.kv_dtype or self.dtype

    def scored_pairs(self) -> int:
        """(query, key) pairs actually computed per head, per sequence (causal masks half)."""
        if not self.causal:
            return self.q_len * self.kv_len
        past = self.kv_len - self.q_len
        # query i (0-based among the new ones) sees past + i + 1 keys
        return self.q_len * past + self.q_len * (self.q_len + 1) // 2

    @property
    def macs(self) -> int:
        return 2 * self.batch * self.heads * self.head_dim * self.scored_pairs()

    @property
    def flops(self) -> int:
        return 2 * self.macs


@dataclass(frozen=True)
class VectorOp:
    """Elementwise / reduction work on the vector unit (norms, softmax, activations, RoPE).

    ``ops_per_element`` counts vector-lane operations per element (e.g. RMSNorm ~ 4:
    square, accumulate, scale, multiply by weight).
    """

    name: str
    op: str
    elements: int
    ops_per_element: float
    read_bytes: int
    write_bytes: int
    #: the length of the rows a row-wise kernel (norm, softmax) reduces over; 0 = a 1-D stream
    row_elements: int = 0

    kind = "vector"

    def __post_init__(self) -> None:
        _positive(self, "elements")
        _bounded(self, "elements")
        if self.ops_per_element < 0 or self.read_bytes < 0 or self.write_bytes < 0 or self.row_elements < 0:
            raise ShapeError(f"VectorOp '{self.name}': ops and bytes must be >= 0")

    @property
    def rows(self) -> int:
        """Rows of ``row_elements`` (elements / row length, rounded up); 0 for a 1-D stream."""
        return -(-self.elements // self.row_elements) if self.row_elements else 0

    @property
    def macs(self) -> int:
        return 0

    @property
    def flops(self) -> float:
        return self.elements * self.ops_per_element


@dataclass(frozen=True)
class Copy:
    """Device-memory to device-memory copy of ``bytes`` bytes (read once, written once)."""

    name: str
    bytes: int

    kind = "copy"

    def __post_init__(self) -> None:
        _positive(self, "bytes")
        _bounded(self, "bytes")

    macs = 0
    flops = 0


@dataclass(frozen=True)
class Collective:
    """A collective across chips: all_reduce, all_gather, reduce_scatter or send (p2p)."""

    name: str
    collective: str
    bytes: int
    participants: int
    algorithm: str = "ring"

    kind = "collective"

    def __post_init__(self) -> None:
        _positive(self, "bytes", "participants")
        if self.collective not in ("all_reduce", "all_gather", "reduce_scatter", "send"):
            raise ShapeError(f"Collective '{self.name}': unknown collective {self.collective!r}")
        if self.algorithm not in ("ring", "tree"):
            raise ShapeError(f"Collective '{self.name}': algorithm must be 'ring' or 'tree'")

    macs = 0
    flops = 0


Op = Union[Gemm, Conv2d, Attention, VectorOp, Copy, Collective]
OP_TYPES: dict[str, type] = {t.kind: t for t in (Gemm, Conv2d, Attention, VectorOp, Copy, Collective)}


def op_min_dram_bytes(op: Op) -> int:
    """Compulsory DRAM traffic of one op (inputs read once, outputs written once)."""
    if isinstance(op, Gemm):
        return op.min_dram_bytes()
    if isinstance(op, Conv2d):
        return op.min_dram_bytes()
    if isinstance(op, Attention):
        a, kv = get_format(op.dtype), get_format(op.kv_format)
        q = a.bytes_for(op.q_len * op.head_dim) * op.heads * op.batch
        kvb = 2 * kv.bytes_for(op.head_dim) * op.kv_len * op.kv_heads * op.batch
        return 2 * q + kvb
    if isinstance(op, VectorOp):
        return op.read_bytes + op.write_bytes
    if isinstance(op, Copy):
        return 2 * op.bytes
    return 0  # collectives move bytes over links, counted apart


def op_to_dict(op: Op) -> dict[str, Any]:
    """Plain-dict form (for CSV/JSONL traces): ``kind`` plus the dataclass fields."""
    out: dict[str, Any] = {"kind": op.kind}
    for f in fields(op):
        out[f.name] = getattr(op, f.name)
    return out


def op_from_dict(data: dict[str, Any]) -> Op:
    """Inverse of :func:`op_to_dict`; unknown kinds or fields raise ShapeError."""
    data = dict(data)
    kind = data.pop("kind", None)
    if kind not in OP_TYPES:
        raise ShapeError(f"unknown op kind {kind!r} (valid: {', '.join(OP_TYPES)})")
    cls = OP_TYPES[kind]
    names = {f.name for f in fields(cls)}
    extra = set(data) - names
    if extra:
        raise ShapeError(f"{kind} op: unknown fields {sorted(extra)} (valid: {sorted(names)})")
    if "tags" in data and isinstance(data["tags"], list):
        data["tags"] = tuple(data["tags"])
    try:
        return cls(**data)
    except TypeError as exc:
        raise ShapeError(f"{kind} op: {exc}") from None


def with_name(op: Op, name: str) -> Op:
    return replace(op, name=name)
