"""Typed, frozen description of a software stack, read from ``stacks/*.yaml``.

A stack profile says how a software stack turns a model's ops into the kernels it
launches: which ops it fuses, which it splits, and on which library path (an array of
the chip, e.g. cuDNN's sm80 decode kernel on ``tensor_cores_sm80``) a kernel runs.  The
lowering itself is :mod:`sim.model.stacks`; this module only validates the declaration.  Array
names are the chip's: a profile that names an array the chip lacks is an error when it
is used on that chip, never a silent fallback.
"""
from __future__ import annotations

import ast
import bisect
import math
import operator
from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import AfterValidator, Field, PrivateAttr, field_validator, model_validator

from sim.errors import UnknownNameError
from sim.spec.dtypes import get_format
from sim.spec.spec_base import resolve_rate_class
from sim.spec.stack_attention import AttentionRule, DecodeSplitRule, FrozenSpec, VarlenLatency

__all__ = ["StackSpec", "AttentionRule", "DecodeSplitRule", "VarlenLatency"]


#: a tile side or split-K factor: 1 .. 2^20 (0 or -1 passed `sim check`)
_Pos = Annotated[int, Field(ge=1, le=1 << 20)]


def _known_format(name):
    """A number format `sim list formats` knows (bf17 in a profile passed `sim check`)."""
    try:
        get_format(name)
    except UnknownNameError as exc:
        raise ValueError(str(exc)) from None
    return name


_Format = Annotated[str, AfterValidator(_known_format)]

#: the kernel classes a profile's kernels (``op:``) and stream-kernel rules (``ops:``) may name: the
#: VectorOp names the LLM trace builder emits (``sim.model.workload.llm.VECTOR_OPS_PER_ELEMENT``, a
#: test keeps them in here), those the lowering and the engine add (fill, gather, cat, split-K /
#: split-KV reductions), ``sim validate``'s elementwise cases (mul, silu), and the eager PyTorch
#: kernels the shipped profiles split ops into.  A profile that needs a new class adds it here: an
#: unknown name (``op: teleport``) passed ``sim check`` and then matched no stream-kernel rule, so
#: the kernel ran at the ideal stream rate without a word.
#: the VectorOp classes the LLM trace builder emits (``sim.model.workload.llm.VECTOR_OPS_PER_ELEMENT``;
#: tests/test_bad_input_campaign3.py keeps the two equal)
TRACE_VECTOR_CLASSES = frozenset({
    "rmsnorm", "layernorm", "rope", "kv_append", "softmax", "silu_mul", "gelu_mul", "gelu", "relu", "add",
    "topk", "moe_dispatch", "moe_combine", "quant_act", "dequant", "block_scale",
})
#: the GEMMs against stored weights whose format conversions the trace builder emits as VectorOps of
#: their own (``<gemm>.quant_act``, ``<gemm>.dequant``, ``<gemm>.block_scale``); the MoE router stays
#: in the vector format
_QUANTISED_GEMMS = ("attn.qkv", "attn.o_proj", "mlp.gate_up", "mlp.up", "mlp.down", "moe.gate_up", "moe.up",
                    "moe.down", "lm_head")
#: the names of the VectorOps the LLM trace builder emits (:mod:`sim.model.workload.llm`; a test builds
#: traces of every kind - dense and MoE, gated or not, RoPE or learned positions, parallel attention,
#: fused and unfused attention, quantised formats - and keeps this set equal to the names they hold)
TRACE_VECTOR_OP_NAMES = frozenset({
    "attn_norm", "mlp_norm", "final_norm", "embed.add",
    "attn.rope", "attn.kv_append", "attn.softmax", "attn.qk.dequant", "attn.pv.dequant", "attn.residual",
    "mlp.act", "mlp.residual", "moe.topk", "moe.dispatch", "moe.act", "moe.combine", "moe.residual",
    "parallel.add", "residual",
} | {f"{g}.{c}" for g in _QUANTISED_GEMMS for c in ("quant_act", "dequant", "block_scale")})
#: the keys an ``unfused:`` rule may have: a trace op's name (``moe.act``) or its VectorOp class
#: (``rope``), the name winning (:func:`sim.model.stacks._vector_kernels`); a misspelt key
#: (``ropee``) passed ``sim check`` and was never applied
UNFUSED_KEYS = TRACE_VECTOR_CLASSES | TRACE_VECTOR_OP_NAMES

KERNEL_CLASSES = TRACE_VECTOR_CLASSES | frozenset({
    # added by the lowering (sim.model.stacks) and the engine (sim.model.engine.run); validation cases
    "fill", "gather", "cat", "split_k_reduce", "split_kv_reduce", "mul", "silu",
    # eager PyTorch kernels the profiles name (copies, broadcasts, strided halves, reductions, indexing)
    "copy", "bcast_mul", "neg", "strided_cat", "strided_mul", "strided_silu", "sort", "sum", "div", "index",
    "index_add",
})


def _known_kernel_class(name):
    if name not in KERNEL_CLASSES:
        raise ValueError(str(UnknownNameError("kernel class", name, sorted(KERNEL_CLASSES))))
    return name


_KernelClass = Annotated[str, AfterValidator(_known_kernel_class)]


class MisalignedGemmRule(FrozenSpec):
    """GEMMs whose row strides are not aligned for the main kernels' loads: which kernels run
    instead.  Either by the strides' parity (``even_array`` / ``odd_array``: cuBLAS's 16-bit
    fallbacks) or by which stride breaks the alignment (``k_array`` when k does; ``n_array``,
    with its one tile ``n_tiles``, when only n does: torch._int_mm's int8 paths)."""

    align_elements: int = Field(ge=1, description="k and n must be multiples of this for the main path")
    dtypes: tuple[_Format, ...] = ("bf16", "fp16")
    even_array: str | None = Field(default=None, description="array of the kernels for even (but misaligned) strides")
    odd_array: str | None = Field(default=None, description="array of the kernels for odd strides")
    k_array: str | None = Field(default=None, description="array of the kernels when k breaks the alignment")
    n_array: str | None = Field(default=None, description="array of the kernels when only n breaks it")
    k_tiles: tuple[_Pos, _Pos, _Pos] | None = Field(
        default=None, description="the (m, n, k) tile of the kernels that run when k breaks it")
    n_tiles: tuple[_Pos, _Pos, _Pos] | None = Field(
        default=None, description="the (m, n, k) tile of the kernel that runs when only n breaks it")
    split_k: tuple[_Pos, ...] | None = Field(default=None, min_length=1,
                                             description="split-K factors of the k_array / n_array kernels")
    source: str = ""

    @model_validator(mode="after")
    def _one_way_to_choose(self):
        if (self.even_array is None) != (self.odd_array is None):
            raise ValueError("even_array and odd_array go together")
        if self.even_array is None and self.k_array is None and self.n_array is None:
            raise ValueError("name the kernels' arrays: even_array and odd_array, or k_array and/or n_array")
        if self.n_tiles is not None and self.n_array is None:
            raise ValueError("n_tiles needs n_array")
        if self.k_tiles is not None and self.k_array is None:
            raise ValueError("k_tiles needs k_array")
        return self

    def _library(self, array: str, tiles) -> dict:
        return {"array": array, **({"tiles": tiles} if tiles else {}),
                **({"split_k": self.split_k} if self.split_k else {})}

    def path(self, k: int, n: int) -> dict | None:
        """The library path of a GEMM of this rule's dtypes with these strides: ``{"array":
        ..., "tiles": ...}``, or None for the main path (aligned, or no kernel named)."""
        a = self.align_elements
        k_off, n_off = k % a != 0, n % a != 0
        if not (k_off or n_off):
            return None
        if k_off and self.k_array is not None:
            return self._library(self.k_array, self.k_tiles)
        if n_off and not k_off and self.n_array is not None:
            return self._library(self.n_array, self.n_tiles)
        if self.even_array is not None:
            return {"array": self.odd_array if (k % 2 or n % 2) else self.even_array}
        return None

    def arrays(self) -> list[tuple[str, str]]:
        """(key, array) of every array the rule names."""
        return [(key, v) for key, v in (("even_array", self.even_array), ("odd_array", self.odd_array),
                                        ("k_array", self.k_array), ("n_array", self.n_array)) if v]


class TokenRowsCurve(FrozenSpec):
    """A k-step's time against the tiles resident at once, measured at ``rows`` token rows."""

    rows: int = Field(ge=1, le=1 << 20, description="token rows of the tile the points were measured at")
    kstep_cycles: tuple[tuple[float, float], ...] = Field(
        min_length=1, description="[resident tiles, boost-clock cycles per k-step] points, tiles ascending")

    @field_validator("kstep_cycles")
    @classmethod
    def _points(cls, v):
        xs = [p[0] for p in v]
        if any(x < 1 for x in xs) or any(b <= a for a, b in zip(xs, xs[1:])):
            raise ValueError(f"resident tiles must be >= 1 and strictly ascending, got {xs}")
        if any(not (0 < p[1] < 1e9) for p in v):
            raise ValueError("cycles per k-step must be > 0")
        return v


class PartialTokenTileRule(FrozenSpec):
    """A sparse library's fixed-tile kernel whose token tile is at most ``max_rows`` full
    (cuSPARSELt's 2:4 kernel at <= 128 of its 256 token rows): each k-step of a tile takes
    a measured time that grows with the tiles resident at once, longer than the engine's
    k-step of the same tile (same bytes, same instructions; the warps wait on their loads).
    ``curves`` give, at measured token row counts, ``[resident tiles, cycles of the boost
    clock]`` points (the time x the boost clock: the kernel is latency-bound and draws little
    power); the kernel takes its launch plus k-steps x tiles per resident CTA x the k-step at
    its resident tiles, interpolated linearly in both (extrapolated linearly below the fewest
    tiles measured, held beyond the rows and tiles measured), or its engine time where that
    is longer."""

    max_rows: int = Field(ge=1, le=1 << 20, description="token rows (after padding) up to which the rule applies")
    curves: tuple[TokenRowsCurve, ...] = Field(min_length=1, description="one curve per measured token row "
                                                                          "count, rows ascending")
    source: str = Field(default="", description="the microbenchmark the numbers come from")

    @field_validator("curves")
    @classmethod
    def _rows_ascending(cls, v):
        rows = [c.rows for c in v]
        if any(b <= a for a, b in zip(rows, rows[1:])):
            raise ValueError(f"curves' rows must be strictly ascending, got {rows}")
        return v


class Sparse24GemmRule(FrozenSpec):
    """2:4 structured-sparse GEMMs run through a sparse library."""

    row_multiple: int = Field(ge=1, description="the input's rows are padded to a multiple of this "
                                                "(a fill and a copy of the padded input)")
    tiles: tuple[_Pos, _Pos, _Pos] | None = Field(default=None, description="the library's only (m, n, k) tile")
    split_k: tuple[_Pos, ...] | None = Field(default=None, min_length=1,
                                             description="split-K factors the library uses")
    partial_token_tile: PartialTokenTileRule | None = Field(
        default=None, description="the kernel's k-step when its token tile is at most max_rows full")


_EXPR_NAMES_DOC = ("n: elements of the unit the rule splits (rope: q or k; per expert: the op's elements over the "
                   "active experts; else the op's), eb: bytes of one activation element, table: elements of the "
                   "rope cos (or sin) rows, T: tokens, h: hidden size, E: experts, k: experts per token, X: active "
                   "experts, A: token-expert assignments (T*k), F: expert FFN width; GEMM kernels: m, k, n")


class StepKernel(FrozenSpec):
    """One memory-bound kernel of an op the stack runs unfused.  ``read`` / ``write`` (bytes),
    ``elements`` and ``row`` are numbers or arithmetic expressions (+ - * / // ( ) max min) over
    the names the lowering gives the op (see :attr:`UnfusedRule.kernels`)."""

    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="suffix of the kernel's op name")
    op: _KernelClass = Field(description="VectorOp name of the kernel: its class (stream_kernels rule; one of "
                                         "KERNEL_CLASSES)")
    read: float | str = Field(description="bytes read (expression)")
    write: float | str = Field(description="bytes written (expression)")
    elements: float | str | None = Field(default=None, description="elements it computes; default write / eb")
    ops_per_element: float = Field(default=1.0, ge=0.0)
    row: float | str | None = Field(default=None, description="row length of a row-wise kernel (softmax)")
    source: str = Field(default="", description="the PyTorch call it is")

    @field_validator("read", "write", "elements", "row", mode="before")
    @classmethod
    def _not_a_flag(cls, v):
        if isinstance(v, bool):  # YAML's true was read as 1 byte
            raise ValueError("must be a number or an expression, not a flag")
        return v

    @field_validator("read", "write", "elements", "row", mode="after")
    @classmethod
    def _arithmetic(cls, v):
        return _check_expression(v)

    def names(self) -> set[str]:
        import ast
        out: set[str] = set()
        for e in (self.read, self.write, self.elements, self.row):
            if isinstance(e, str):
                out |= {n.id for n in ast.walk(ast.parse(e, mode="eval")) if isinstance(n, ast.Name)}
        return out - {"max", "min"}


#: the binary operators of a profile expression, and what each computes (sim.model.stacks evaluates
#: with this table; the check below admits exactly these)
EXPRESSION_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
                     ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv}


def _check_expression(v):
    """A kernel's byte / element expression as the lowering evaluates it (sim.model.stacks._eval):
    a finite number >= 0, or + - * / // ( ) max min over names (no unary minus); anything else is refused here,
    when the profile is read, instead of failing (or running Python) when an op is lowered."""
    if v is None:
        return v
    if not isinstance(v, str):
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"must be a finite number >= 0 or an expression, got {v}")
        return v
    text = v.strip()
    if not text:
        raise ValueError("an empty expression (give a number or arithmetic over names, e.g. m*k*eb)")
    if len(text) > 1000:
        raise ValueError(f"an expression of {len(text):,} characters (at most 1,000)")
    try:
        tree = ast.parse(text, mode="eval")
    except (SyntaxError, ValueError) as exc:
        raise ValueError(f"{v!r} is not an arithmetic expression ({getattr(exc, 'msg', exc)})") from None

    def ok(node) -> bool:
        if isinstance(node, ast.Constant):
            return isinstance(node.value, (int, float)) and not isinstance(node.value, bool)
        if isinstance(node, ast.Name):
            return True
        if isinstance(node, ast.BinOp) and type(node.op) in EXPRESSION_BINOPS:
            if isinstance(node.op, (ast.Div, ast.FloorDiv)) and isinstance(node.right, ast.Constant) \
                    and node.right.value == 0:
                raise ValueError(f"{v!r} divides by zero")
            return ok(node.left) and ok(node.right)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            # every name is a size (>= 0), so a negated term only takes away: `-m*k` is never a
            # count, and was clamped to 0 without a word; a difference is written a - b (a negative
            # result for some shape is then an error naming this key when the op is lowered)
            raise ValueError(f"{v!r} negates a term (a unary minus): byte and element counts are never negative; "
                             "write a difference as a - b")
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min"):
            return bool(node.args) and not node.keywords and all(ok(a) for a in node.args)
        return False

    if not ok(tree.body):
        raise ValueError(f"{v!r} is not arithmetic over names: only numbers, names, + - * / // ( ), max() and "
                         "min() are allowed")
    return v


class UnfusedRule(FrozenSpec):
    """A model op the stack runs as several kernels (``unfused:`` in the profile, keyed by the
    trace op's name, e.g. ``moe.act``, or its VectorOp name, e.g. ``rope``; the name wins)."""

    per: Literal["op", "tensor", "expert"] = Field(
        default="op", description="op: the kernels once; tensor: once for q and once for k (rope); expert: "
                                  "once per active expert (eager MoE loops over experts)")
    kernels: tuple[StepKernel, ...] = Field(min_length=1, description="the kernels, in order; names: " + _EXPR_NAMES_DOC)
    source: str = ""

    @model_validator(mode="after")
    def _known_names(self):
        _check_names(self.kernels, {"n", "eb", "table", "T", "h", "E", "k", "X", "A", "F", "kv_rows"})
        return self


def _check_names(kernels, allowed: set[str]) -> None:
    for k in kernels:
        bad = sorted(k.names() - allowed)
        if bad:
            raise ValueError(f"kernel {k.name}: unknown name(s) {', '.join(bad)} (known: {', '.join(sorted(allowed))})")


class RowWorkRule(FrozenSpec):
    """Work a weight-only GEMM kernel does per (row of A, weight) on top of streaming its
    weights, at a rate below its tensor-core path - e.g. PyTorch's int4 "tinygemm"
    (torch._weight_int4pack_mm), whose time grows with the rows times the weights at a
    CUDA-core-class rate however few the rows.  The kernel takes its engine time (the
    weight stream and the tensor-core work) plus
    ``m x k x n / (fraction x peak MACs/s of `array`)``."""

    array: str = Field(min_length=1, description="chip array whose peak MAC rate the per-row work runs at a "
                                                 "fraction of (e.g. cuda_cores)")
    rate_class: str = Field(default="fp32", description="the array's rate class the fraction refers to")

    @field_validator("rate_class")
    @classmethod
    def _rate_class(cls, v):
        # an unknown class (fp33) passed sim check
        try:
            resolve_rate_class(v)
        except UnknownNameError as exc:
            raise ValueError(str(exc)) from None
        return v
    fraction: float = Field(gt=0.0, le=1.0, description="achieved fraction of that peak (a calibration)")
    source: str = Field(default="", description="the microbenchmark the numbers come from")


class ThreadPerOutputRule(FrozenSpec):
    """A weight-only GEMM kernel with one thread per output element, each walking its weight
    row one element at a time (PyTorch's ``int8mm.cu``, torch._weight_int8pack_mm): blocks of
    ``threads_n`` output columns x ``threads_m`` rows of A, so a warp's lanes read ``threads_n``
    weight rows at once and the rows of A they share.  No tensor core and no coalescing: a
    warp's iteration (one k) is served by its core's L1 in as many wavefronts as the most
    distinct words any of its ``l1_banks`` banks of ``l1_bank_bytes`` must return (weight rows
    ``k`` elements apart share a bank when the row pitch is a multiple of the banks' width: 16
    lanes, 16 wavefronts at k = 4096), and one tag lookup per distinct sector.  The kernel takes,
    per wave of resident blocks, ``k x max(iteration_latency_cycles, live warps per core x max(
    wavefronts / l1_wavefronts_per_cycle, sectors / l1_sectors_per_cycle))`` cycles of the chip's
    boost clock (``power.boost_clock_mhz``, else ``clock_mhz``: it draws little power and runs
    there), or its engine time (the weight stream) if that is longer."""

    threads_n: int = Field(default=16, ge=1, le=1024, description="threads of a block along the output columns")
    threads_m: int = Field(default=16, ge=1, le=1024, description="threads of a block along the rows of A")
    max_threads_per_core: int = Field(default=2048, ge=1, le=65536,
                                      description="threads a core holds at once (Hopper: 2,048 per SM)")
    weight_bytes: float = Field(default=1.0, gt=0.0, le=16.0, description="bytes of one weight element a lane loads")
    a_bytes: float = Field(default=4.0, gt=0.0, le=16.0, description="bytes of one element of A a lane loads "
                                                                      "(int8mm.cu: A converted to fp32)")
    l1_banks: int = Field(default=32, ge=1, le=1024, description="banks of a core's L1 data array (Hopper: 32)")
    l1_bank_bytes: int = Field(default=4, ge=1, le=256, description="bytes a bank returns per wavefront (Hopper: 4)")
    l1_wavefronts_per_cycle: float = Field(gt=0.0, le=1024.0, description="wavefronts a core's L1 returns per "
                                           "cycle of the boost clock (measured)")
    l1_sectors_per_cycle: float = Field(gt=0.0, le=1024.0, description="distinct 32-byte sectors a core's L1 "
                                        "looks up per cycle of the boost clock for such loads (measured)")
    iteration_latency_cycles: float = Field(ge=0.0, le=1e6, description="boost-clock cycles of one warp's "
                                            "iteration when nothing else competes (measured)")
    source: str = Field(default="", description="the microbenchmark the numbers come from")

    @model_validator(mode="after")
    def _block_fits(self):
        if self.threads_n * self.threads_m > self.max_threads_per_core:
            raise ValueError(f"a block of {self.threads_n} x {self.threads_m} threads is more than a core holds "
                             f"(max_threads_per_core {self.max_threads_per_core})")
        return self


class WeightOnlyGemmRule(FrozenSpec):
    """Kernels a weight-only GEMM path runs around its GEMM kernel (e.g. torch._weight_int8pack_mm
    converts its input and scales to fp32 and its fp32 output back); expressions over m, k, n, eb.
    The GEMM kernel's own cost beyond the engine's: ``row_work`` (:class:`RowWorkRule`) or
    ``thread_per_output`` (:class:`ThreadPerOutputRule`), at most one."""

    before: tuple[StepKernel, ...] = ()
    after: tuple[StepKernel, ...] = ()
    row_work: RowWorkRule | None = None
    thread_per_output: ThreadPerOutputRule | None = None
    source: str = ""

    @model_validator(mode="after")
    def _known_names(self):
        _check_names(self.before + self.after, {"m", "k", "n", "eb"})
        if self.row_work is not None and self.thread_per_output is not None:
            raise ValueError("give row_work or thread_per_output, not both (each prices the whole GEMM kernel)")
        return self

    @property
    def kernel_rule(self):
        """The rule that prices the path's GEMM kernel itself (None: the engine's GEMM alone)."""
        return self.row_work or self.thread_per_output


class GemmRule(FrozenSpec):
    dtype_arrays: dict[_Format, str] = Field(default_factory=dict,
                                         description="number format -> array its GEMMs run on")
    misaligned: tuple[MisalignedGemmRule, ...] = Field(
        default=(), description="rules for GEMMs whose strides break the main kernels' alignment, one per "
                                "group of dtypes (the first whose dtypes hold the GEMM's applies); one rule "
                                "may be written without the list")
    sparse_2_4: Sparse24GemmRule | None = None
    weight_only: dict[_Format, WeightOnlyGemmRule] = Field(
        default_factory=dict, description="weight format of a weight-only GEMM (bf16 activations) -> the "
                                          "kernels around it")
    moe_experts: Literal["grouped", "per_expert"] = Field(
        default="grouped", description="a MoE layer's experts of one token count: one grouped GEMM kernel "
                                       "(a fused-MoE library) or one kernel per expert (a loop over the experts)")

    @field_validator("misaligned", mode="before")
    @classmethod
    def _one_rule_is_a_list_of_one(cls, v):
        return [] if v is None else [v] if isinstance(v, dict) else v

    def misaligned_path(self, dtype: str, k: int, n: int) -> dict | None:
        """The library path of a GEMM whose strides break its dtype's alignment (None: the
        main path)."""
        rule = next((r for r in self.misaligned if dtype in r.dtypes), None)
        return None if rule is None else rule.path(k, n)


class StreamKernelRule(FrozenSpec):
    """The rate of one class of the library's memory-bound kernels (norms, softmax,
    activations, strided copies), measured against the chip's ideal stream.

    A kernel of this class takes ``max(floor, stream / bandwidth_fraction)`` plus the chip's
    launch overhead, where ``stream`` is the time the chip's memory model gives the op's
    bytes as one ideal stream and ``floor = floor_ns + floor_ns_per_row_element x row``: the
    shortest body the kernel has however few rows it gets (a row-per-block kernel walks its
    row in dependent steps, then reduces it across the block before it can write).  A kernel
    that matches no rule is the ideal stream (a chip or stack with no such data)."""

    ops: tuple[_KernelClass, ...] = Field(description="VectorOp names (rmsnorm, softmax, ...) of the class "
                                                      "(KERNEL_CLASSES), at least one")
    min_row_elements: int = Field(default=0, ge=0, description="rule applies to rows at least this long")
    max_row_elements: int | None = Field(default=None, ge=1, description="... and at most this long")
    bandwidth_fraction: float = Field(default=1.0, gt=0.0, le=1.0,
                                      description="share of the ideal stream's rate the kernel sustains")
    floor_ns: float = Field(default=0.0, ge=0.0, description="shortest kernel body, launch excluded")
    floor_ns_per_row_element: float = Field(default=0.0, ge=0.0,
                                            description="added to the floor per element of a row")
    # rows = elements / row length: an index kernel (index_select, index_add_) picks its
    # variant by the number of indices, and its small-index variant walks them one by one
    min_rows: int = Field(default=0, ge=0, description="rule applies to ops of at least this many rows")
    max_rows: int | None = Field(default=None, ge=1, description="... and at most this many")
    floor_ns_per_row: float = Field(default=0.0, ge=0.0, description="added to the floor per row")
    source: str = Field(default="", description="the measurement (file, rows) the numbers come from")
    measured_on: str = Field(default="", description="the shipped chip the fraction was measured on (set from "
                                                     "the stack's stream_kernels_measured_on): on any chip the "
                                                     "kernel then takes at least its time there, per core")

    @field_validator("ops", mode="after")
    @classmethod
    def _some_ops(cls, v):
        # here rather than min_length: an unknown name would also have read as "at least 1 item"
        if not v:
            raise ValueError("name at least one kernel class")
        return v

    def matches(self, op: str, row_elements: int, rows: int = 0) -> bool:
        return op in self.ops and row_elements >= self.min_row_elements and \
            (self.max_row_elements is None or row_elements <= self.max_row_elements) and \
            rows >= self.min_rows and (self.max_rows is None or rows <= self.max_rows)


class HostRule(FrozenSpec):
    """What the host (CPU and framework) spends issuing one serving iteration's work.

    An eager iteration launches its kernels one by one from the framework: the device cannot
    run ahead of the launches, so the iteration takes ``max(device time, host time)``, the host
    time being ``eager_ns_per_kernel`` per kernel plus, per attention call (one per layer and
    prompt chunk, one per layer for the decoding sequences), what the framework's attention
    dispatch costs beyond its kernels (:meth:`eager_host_ns`); a CUDA-graph iteration builds its
    inputs and replays the graph (``graph_replay_ns``) before the device starts, so that time
    adds to the device's.  Used by request-level serving (:mod:`sim.apps.serving`), which
    decides per iteration whether it replays a graph; single-op and single-iteration runs price
    the device alone."""

    eager_ns_per_kernel: float = Field(ge=0.0, description="host time per kernel an eager iteration launches "
                                                           "(framework dispatch, Python, the launch itself)")
    eager_ns_per_attention_call: float = Field(
        default=0.0, ge=0.0, description="host time of one prompt chunk's attention call beyond its kernels")
    eager_ns_per_masked_attention_call: float = Field(
        default=0.0, ge=0.0, description="added to a call for a chunk behind cached tokens (a causal mask "
                                         "aligned to the bottom right)")
    eager_ns_per_decode_attention_call: float = Field(
        default=0.0, ge=0.0, description="host time of one layer's attention call for the decoding sequences "
                                         "beyond its kernels")
    graph_replay_ns: float = Field(default=0.0, ge=0.0,
                                   description="host time of one CUDA-graph iteration before the device starts "
                                               "(input tensors, copies, the replay call)")
    source: str = Field(default="", description="the measurement (file, rows) the numbers come from")

    def eager_host_ns(self, kernels: float, attention_calls: float = 0.0, masked_calls: float = 0.0,
                      decode_calls: float = 0.0) -> float:
        """Host time (ns) of an eager iteration that launches ``kernels`` kernels and makes
        those attention calls (``masked_calls`` are among ``attention_calls``)."""
        return (kernels * self.eager_ns_per_kernel + attention_calls * self.eager_ns_per_attention_call
                + masked_calls * self.eager_ns_per_masked_attention_call
                + decode_calls * self.eager_ns_per_decode_attention_call)


class GraphRule(FrozenSpec):
    """How a serving stack's CUDA graphs are shaped (used by request-level serving only).

    Graphs are captured once per size, so an iteration replayed from a graph runs the graph of
    the smallest size that holds it, padding rows included: its dense work (projections, MLP,
    norms, RoPE, cache writes) runs over the smallest of ``token_buckets`` at least its new
    tokens, and its LM head over the smallest at least its rows that need logits.  An iteration
    larger than every bucket is priced unpadded.  Attention is priced for the real sequences
    (padding rows of a graph read nothing: an empty split-KV program, an empty prefill tile)."""

    token_buckets: tuple[_Pos, ...] = Field(min_length=1, description="the token counts graphs are captured "
                                                                      "at, ascending")
    source: str = Field(default="", description="the program whose graphs these are")

    @field_validator("token_buckets", mode="after")
    @classmethod
    def _ascending(cls, v):
        if any(b <= a for a, b in zip(v, v[1:])):
            raise ValueError(f"must be strictly ascending, got {list(v)}")
        return v

    def bucket(self, n: float) -> float:
        """The bucket an iteration of ``n`` rows replays (``n`` itself beyond the largest)."""
        if n <= 0:
            return n
        i = bisect.bisect_left(self.token_buckets, n)
        return self.token_buckets[i] if i < len(self.token_buckets) else n


def _known_unfused_key(name):
    """An ``unfused:`` key the trace builder can emit (:data:`UNFUSED_KEYS`)."""
    if name not in UNFUSED_KEYS:
        msg = str(UnknownNameError("op", name, sorted(UNFUSED_KEYS)))
        raise ValueError(msg.replace("(valid: ", "(valid: a model op of the LLM trace or its VectorOp class: ", 1))
    return name


_UnfusedKey = Annotated[str, AfterValidator(_known_unfused_key)]


class StackSpec(FrozenSpec):
    """One software stack, as declared in ``stacks/<name>.yaml``."""

    schema_version: Literal[1]
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="short name, equal to the file stem")
    description: str = Field(min_length=1)
    kv_append: Literal["one", "split"] = Field(
        default="one", description="the K and V cache writes: one kernel, or two copies (split)")
    kv_append_per_group: bool = Field(
        default=False, description="the cache writes run once per attention call (a group of sequences with "
                                   "the same new and cached lengths), each group's share of the bytes")
    gated_activation: Literal["fused", "separate"] = Field(
        default="fused", description="SiLU/GELU and the multiply by up: one kernel, or two (separate)")
    fuse_rope_kv_append: bool = Field(
        default=False, description="RoPE and the KV-cache write are one kernel (reads q/k once)")
    fuse_residual_norm: bool = Field(
        default=False, description="a residual add and the norm that follows are one kernel")
    attention: AttentionRule = AttentionRule()
    gemm: GemmRule = GemmRule()
    unfused: dict[_UnfusedKey, UnfusedRule] = Field(
        default_factory=dict, description="model ops run as several memory-bound kernels (trace op name or "
                                          "VectorOp name -> rule)")
    lm_head_gather: bool = Field(
        default=False, description="the LM head's rows (the last position of each sequence) are gathered by "
                                   "one index kernel before it")
    stream_kernels: tuple[StreamKernelRule, ...] = Field(
        default=(), description="achieved rates of the library's memory-bound kernel classes (first match)")
    stream_kernels_measured_on: str = Field(
        default="", description="the shipped chip stream_kernels were measured on (a name in arch_configs/): "
                                "a kernel slower than that chip's memory keeps its time there, per core, on "
                                "any chip; empty: the fractions apply to every chip's own memory")
    host: HostRule | None = Field(
        default=None, description="host cost of issuing a serving iteration's kernels (None: the host is "
                                  "never the bottleneck)")
    graphs: GraphRule | None = Field(
        default=None, description="the sizes a serving stack's CUDA graphs are captured at (None: a graph "
                                  "iteration runs unpadded)")
    references: tuple[str, ...] = ()

    #: the file the profile was read from (set by sim.model.stacks.load_stack; None when built in Python)
    _source_path: Optional[Path] = PrivateAttr(default=None)

    @property
    def source_path(self) -> Optional[Path]:
        return self._source_path

    def array_refs(self) -> list[tuple[tuple, str]]:
        """Every array name the profile refers to, with the key path it is given at."""
        a, g = self.attention, self.gemm
        out: list[tuple[tuple, str]] = [(("attention", k), v) for k, v in
                                        (("decode_array", a.decode_array), ("prefill_array", a.prefill_array)) if v]
        out += [(("gemm", "dtype_arrays", f), v) for f, v in g.dtype_arrays.items()]
        for i, rule in enumerate(g.misaligned):
            out += [(("gemm", "misaligned", i, key), v) for key, v in rule.arrays()]
        out += [(("gemm", "weight_only", f, "row_work", "array"), w.row_work.array)
                for f, w in g.weight_only.items() if w.row_work is not None]
        return out

    def arrays(self) -> set[str]:
        """Every array name the profile refers to."""
        return {a for _, a in self.array_refs()}

    def stream_rule(self, op: str, row_elements: int = 0, rows: int = 0) -> StreamKernelRule | None:
        """The first stream-kernel class ``op`` (a VectorOp name) with ``rows`` rows of
        ``row_elements`` falls in."""
        rule = next((r for r in self.stream_kernels if r.matches(op, row_elements, rows)), None)
        if rule is not None and not rule.measured_on and self.stream_kernels_measured_on:
            rule = rule.model_copy(update={"measured_on": self.stream_kernels_measured_on})
        return rule
