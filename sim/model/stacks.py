"""How a software stack turns a model's ops into the kernels it launches.

This is the one lowering from model ops (:mod:`sim.model.workload.llm`'s traces, or the ops of
a validation case) to kernels: ``sim run``, sweeps, serving and ``sim validate`` all price
the kernels :func:`lower_trace` / :func:`kernels` return, so what is validated is what
users run.  What differs between stacks is data, a profile in ``stacks/*.yaml``
(:class:`~sim.spec.stack_spec.StackSpec`):

* ``ideal``         - every op one kernel on the chip's default array (the trace as built);
* ``eager_pytorch`` - what eager PyTorch (also under CUDA-graph capture) launches on a GPU for
  the model code of validation/gpu/measure_models.py: Hugging Face-style RoPE as its
  elementwise kernels (mul, neg, cat, mul, add for q and for k), SiLU and the multiply apart,
  K and V cache writes as two copies per attention call, the groups' attention outputs
  concatenated, the eager MoE loop's per-expert gathers / scales / index_adds, the weight-only
  int8 path's casts, the LM head's row gather, cuDNN's attention kernels, cuBLAS/CUTLASS paths
  (the kernel lists are data: ``unfused:`` and friends in the profile);
* ``fused_serving`` - a fused serving stack: RoPE fused with the KV-cache write, residual
  add fused with the next norm, fused SiLU·mul, flash-decoding attention.

A chip names its default (``software_stack`` in its file; ``ideal`` when absent); ``--stack``
(CLI, sweeps) and ``stack=`` (Python) choose another.  Profiles are found like chips
(:mod:`sim.spec.catalog`: the folders ``$SIM_STACK_DIR`` names and ``~/.config/sim/stacks`` are
searched before the shipped folder).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Union

from sim.errors import ConfigError, ConfigProblem, MappingError, StackProfileError, UnknownNameError
from sim.ir.ops import Attention, Copy, Gemm, VectorOp
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format
from sim.spec.stack_catalog import DEFAULT_STACK, line_in, list_stacks, load_stack, stack_array_problems
from sim.spec.stack_spec import EXPRESSION_BINOPS, StackSpec, StepKernel

__all__ = ["DEFAULT_STACK", "Kernel", "StackSpec", "chip_stack", "kernels", "launched", "list_stacks", "load_stack",
           "lower_trace", "stack_array_problems"]


@dataclass(frozen=True)
class Kernel:
    """One kernel a stack launches: the op it computes, the library path (array), a fixed
    tile and split-K menu where the library has one, and where it sits in the trace."""

    op: object
    array: str | None = None
    tiles: tuple[int, int, int] | None = None
    split_k: tuple[int, ...] | None = None
    layer: int | None = None
    block: str = ""
    repeat: int = 1
    stage: int = 0
    source: str = ""          # the name of the model op it comes from
    stream: object = None     # the stack's StreamKernelRule for a memory-bound kernel (None: ideal stream)
    row_work: object = None   # the stack's rule for a GEMM kernel's own cost (RowWorkRule,
                              # ThreadPerOutputRule or PartialTokenTileRule; None: none)
    combine_stream: object = None  # the stack's StreamKernelRule for the kernel summing split-K / split-KV partials

    def options(self, base):
        """``base`` (the run's Options) with this kernel's library path; an array the user
        chose explicitly wins over the stack's."""
        return dataclasses.replace(base, array=base.array or self.array, tiles=self.tiles or base.tiles,
                                   split_k=self.split_k if self.split_k is not None else base.split_k,
                                   stream=base.stream or self.stream, row_work=base.row_work or self.row_work,
                                   combine_stream=base.combine_stream or self.combine_stream)


def chip_stack(chip: ChipSpec, stack: Union[str, Path, StackSpec, None] = None) -> StackSpec:
    """The stack to lower with on ``chip``: ``stack`` if given, else the chip's default;
    every array the profile names must be one of the chip's (else a ConfigError naming the
    profile's file, line and key)."""
    name = stack if stack is not None else (getattr(chip, "software_stack", None) or DEFAULT_STACK)
    try:
        spec = load_stack(name)
    except UnknownNameError as exc:
        src = getattr(chip, "source_path", None)
        if stack is not None or src is None or not getattr(chip, "software_stack", None):
            raise
        # the chip names a stack that does not exist: name the --set edit, else the chip's file and line
        edit = next((o for o in getattr(chip, "overrides", ()) if o.split("=", 1)[0].strip() == "software_stack"),
                    None)
        if edit is not None:
            raise ConfigError(ConfigProblem(f"--set {edit}", 0, "software_stack", str(exc))) from None
        raise ConfigError(ConfigProblem(str(src), line_in(src, ("software_stack",)), "software_stack",
                                        str(exc))) from None
    problems = stack_array_problems(spec, chip)
    if problems:
        raise StackProfileError(problems, header=f"stack '{spec.name}' does not fit chip '{chip.name}' (choose a stack "
                                           f"that does: {', '.join(list_stacks())}, or fix the profile)")
    return spec


# ----------------------------------------------------------------------------- one op


def _elem_bytes(dtype: str | None) -> int:
    return max(1, get_format(dtype or "bf16").bits // 8)




@functools.lru_cache(maxsize=None)
def _parse(expr: str):
    return ast.parse(expr, mode="eval").body


def _eval(expr, env: dict, where: str) -> float:
    """A profile's byte / element expression: a number, or + - * / // ( ) max min over ``env``
    (what sim.spec.stack_spec._check_expression admits)."""
    if not isinstance(expr, str):
        return float(expr)

    def ev(node) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        if isinstance(node, ast.Name):
            if node.id not in env:
                raise MappingError(f"stack kernel {where}: {expr!r} names {node.id!r}, which this op does not "
                                   f"give (it gives: {', '.join(sorted(env))})")
            return float(env[node.id])
        if isinstance(node, ast.BinOp) and type(node.op) in EXPRESSION_BINOPS:
            return EXPRESSION_BINOPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("max", "min") \
                and node.args and not node.keywords:
            return (max if node.func.id == "max" else min)(ev(a) for a in node.args)
        raise MappingError(f"stack kernel {where}: {expr!r} is not arithmetic over names")

    return ev(_parse(expr))


def _step_kernels(prefix: str, steps: tuple[StepKernel, ...], env: dict, stack: StackSpec,
                  loc: tuple) -> list[VectorOp]:
    """The memory-bound kernels a profile lists for one unit of an op, sized from ``env``;
    ``loc`` is the key path of ``steps`` in the profile (``unfused.rope.kernels``), named with the
    profile's file and line when a count comes out negative for this op."""
    out = []
    eb = env.get("eb", 2)
    for i, k in enumerate(steps):
        where = f"{prefix}.{k.name}"

        def count(field: str, expr) -> float:
            try:
                v = _eval(expr, env, where)
            except (ZeroDivisionError, OverflowError) as exc:
                # `n/(eb-2)` passed sim check and divided by zero for a 2-byte op (exit 3)
                why = "divides by zero" if isinstance(exc, ZeroDivisionError) else "overflows"
                raise _bad_count(stack, loc + (i, field), expr, env, why) from None
            if v < 0:  # was clamped to 0 without a word (`read: m - 2*k`)
                raise _bad_count(stack, loc + (i, field), expr, env, f"is {v:g}",
                                 "; a byte or element count cannot be negative")
            return v

        read = int(round(count("read", k.read)))
        write = int(round(count("write", k.write)))
        el = count("elements", k.elements) if k.elements is not None else write / eb
        row = int(round(count("row", k.row))) if k.row is not None else 0
        out.append(VectorOp(where, k.op, max(1, int(round(el))), k.ops_per_element, read, write, row_elements=row))
    return out


def _bad_count(stack: StackSpec, loc: tuple, expr, env: dict, what: str, why: str = "") -> StackProfileError:
    """A profile's count that this op cannot have, named at the profile's file, line and key."""
    path = stack.source_path
    names = ", ".join(f"{n}={env[n]:g}" for n in sorted(env) if isinstance(env[n], (int, float)))
    return StackProfileError(ConfigProblem(
        str(path) if path is not None else f"stack '{stack.name}'", line_in(path, loc) if path is not None else 0,
        ".".join(map(str, loc)), f"{expr!r} {what} for this op ({names}){why}"))


def _gemm_kernels(op: Gemm, s: StackSpec) -> list[tuple[object, dict]]:
    g = s.gemm
    wo = g.weight_only.get(op.weight_dtype) if op.weight_dtype else None
    if wo is not None and op.dtype in ("bf16", "fp16"):
        # a weight-only path's own conversions around its GEMM kernel, per GEMM it runs
        env = {"m": op.m, "k": op.k, "n": op.n, "eb": _elem_bytes(op.dtype)}
        main = _gemm_main(op, s)
        if wo.kernel_rule is not None:
            # the path's GEMM kernel (whatever shape the library gave it), not its helper kernels
            main = [(kop, dict(lib, row_work=wo.kernel_rule)) if isinstance(kop, Gemm) else (kop, lib)
                    for kop, lib in main]
        out: list[tuple[object, dict]] = []
        for _ in range(op.count):
            out += [(k, {}) for k in _step_kernels(op.name, wo.before, env, s,
                                                   ("gemm", "weight_only", op.weight_dtype, "before"))]
        out += main
        for _ in range(op.count):
            out += [(k, {}) for k in _step_kernels(op.name, wo.after, env, s,
                                                   ("gemm", "weight_only", op.weight_dtype, "after"))]
        return out
    return _gemm_main(op, s)


def _gemm_main(op: Gemm, s: StackSpec) -> list[tuple[object, dict]]:
    g = s.gemm
    if g.moe_experts == "per_expert" and op.count > 1 and op.name.startswith("moe."):
        # a loop over the experts: one GEMM kernel each (every expert's own weights)
        one = _gemm_main(dataclasses.replace(op, count=1), s)
        return [pair for _ in range(op.count) for pair in one]
    if op.sparsity == "2:4" and g.sparse_2_4 is not None and op.dtype in ("bf16", "fp16"):
        # the sparse library pads the input's rows: a fill of the padded buffer and a
        # copy of the input into it, then its fixed-tile kernel
        r = g.sparse_2_4
        m_pad = -(-op.m // r.row_multiple) * r.row_multiple
        out: list[tuple[object, dict]] = []
        eb = _elem_bytes(op.dtype) * op.count
        if m_pad != op.m:
            out.append((VectorOp(f"{op.name}.pad_fill", "fill", m_pad * op.k * op.count, 0.0, 0, m_pad * op.k * eb),
                        {}))
            out.append((Copy(f"{op.name}.pad_copy", op.m * op.k * eb), {}))
        lib = {"tiles": r.tiles, "split_k": r.split_k}
        if r.partial_token_tile is not None:
            # its k-step when the token tile is at most max_rows full (assemble.gemm_partial_token_tile)
            lib["row_work"] = r.partial_token_tile
        out.append((dataclasses.replace(op, m=m_pad), lib))
        return out
    path = g.misaligned_path(op.dtype, op.k, op.n)
    if path is not None:
        return [(op, path)]
    array = g.dtype_arrays.get(op.dtype)
    return [(op, {"array": array} if array else {})]


def _attention_kernels(op: Attention, s: StackSpec) -> list[tuple[object, dict]]:
    a = s.attention
    if op.q_len == 1:
        return [(op, {"array": a.decode_array} if a.decode_array else {})]
    out: list[tuple[object, dict]] = []
    if a.prefill_stats_fill:
        rows = op.batch * op.heads * op.q_len
        out.append((VectorOp(f"{op.name}.stats_fill", "fill", rows, 0.0, 0, rows * 4), {}))
    lib = {"array": a.prefill_array} if a.prefill_array else {}
    if a.prefill_tiles is not None:
        lib["tiles"] = (a.prefill_tiles[0], 1, a.prefill_tiles[1])
    out.append((op, lib))
    return out


def _output_copy(op: Attention, s: StackSpec) -> list[tuple[object, dict]]:
    """Inside a layer (not for a lone attention call): the attention output made contiguous
    before the output projection, for more than one query row (for one it is a view)."""
    if not (s.attention.output_copy and isinstance(op, Attention) and op.fused and op.q_len > 1):
        return []
    return [(Copy(f"{op.name}.transpose", op.batch * op.q_len * op.heads * op.head_dim * _elem_bytes(op.dtype)), {})]


def _unfused_kernels(op: VectorOp, rule, ctx: dict, stack: StackSpec, key: str) -> list[tuple[object, dict]]:
    """An op the profile runs as several kernels (``unfused:``): its kernels per unit - once,
    for q and for k (RoPE), or per active expert - sized by the op and its layer (``ctx``)."""
    eb = ctx.get("eb") or (op.write_bytes / op.elements if op.op == "rope" else 2)
    env = {k: v for k, v in ctx.items() if v is not None}
    env["eb"] = eb
    if rule.per == "tensor":
        kv = ctx.get("kv_rows")   # elements of k (the kv_append's half), when the layer has one
        units = [("q", op.elements - kv), ("k", kv)] if kv and 0 < kv < op.elements else [("x", op.elements)]
        env["table"] = max(0.0, (op.read_bytes - op.write_bytes) / eb)
    elif rule.per == "expert":
        x = int(ctx.get("X") or 1)
        units = [(f"e{i}", op.elements / x) for i in range(x)]
    else:
        units = [("", op.elements)]
    out: list[tuple[object, dict]] = []
    for tag, n in units:
        out += [(k, {}) for k in _step_kernels(f"{op.name}.{tag}" if tag else op.name, rule.kernels,
                                               dict(env, n=n), stack, ("unfused", key, "kernels"))]
    return out


def _vector_kernels(op: VectorOp, s: StackSpec, ctx: dict | None = None) -> list[tuple[object, dict]]:
    key = op.name if op.name in s.unfused else op.op
    rule = s.unfused.get(key)
    if rule is not None:
        return _unfused_kernels(op, rule, ctx or {}, s, key)
    if op.op == "kv_append" and s.kv_append == "split":
        half = VectorOp(f"{op.name}.half", op.op, op.elements // 2, op.ops_per_element, op.read_bytes // 2,
                        op.write_bytes // 2)
        return [(half, {}), (half, {})]
    if op.op in ("silu_mul", "gelu_mul") and s.gated_activation == "separate":
        # the activation of gate, then a multiply by up: two elementwise kernels
        n = op.elements
        per = op.write_bytes // n if n else 2
        act_ops = op.ops_per_element - 1.0  # the multiply is the second kernel's one op
        act = VectorOp(f"{op.name}.{op.op.split('_')[0]}", op.op, n, act_ops, n * per, n * per)
        mul = VectorOp(f"{op.name}.mul", "add", n, 1.0, 2 * n * per, n * per)
        return [(act, {}), (mul, {})]
    return [(op, {})]


def _with_stream(pairs: list, stack: StackSpec) -> list[tuple[object, dict]]:
    out = []
    for kop, lib in pairs:
        rule = stack.stream_rule(kop.op, kop.row_elements, kop.rows) if isinstance(kop, VectorOp) else None
        out.append((kop, dict(lib, stream=rule) if rule is not None else lib))
    return out


def _with_combine(pairs: list, stack: StackSpec) -> list[tuple[object, dict]]:
    """``pairs`` with each kernel the engine may split carrying the stack's rule for the second
    kernel that sums its partial results, where the stack has one: a GEMM's split-K reduction
    (cuBLAS's splitKreduce_kernel), a decode attention's split-KV combine (cuDNN's
    lean_reduction_kernel)."""
    out = []
    for kop, lib in pairs:
        kind = "split_k_reduce" if isinstance(kop, Gemm) else \
            "split_kv_reduce" if isinstance(kop, Attention) and kop.q_len == 1 else None
        rule = stack.stream_rule(kind) if kind else None
        out.append((kop, dict(lib, combine_stream=rule) if rule is not None else lib))
    return out


def kernels(op, stack: StackSpec, ctx: dict | None = None) -> list[tuple[object, dict]]:
    """The kernels ``stack`` launches for one model op called on its own:
    ``[(op, {array, tiles, split_k}), ...]`` (:func:`lower_trace` adds what a layer adds
    between ops: fusions, the attention output copy / concatenation, the LM head's gather).
    ``ctx``: sizes of the op's layer an unfused op's kernels need (:func:`_layer_context`)."""
    if isinstance(op, Gemm):
        return _with_combine(_with_stream(_gemm_kernels(op, stack), stack), stack)
    if isinstance(op, Attention) and op.fused:
        return _with_combine(_attention_kernels(op, stack), stack)
    if isinstance(op, VectorOp):
        return _with_stream(_vector_kernels(op, stack, ctx), stack)
    return [(op, {})]


def launched(op, stack: StackSpec, options) -> list[tuple[object, object]]:
    """``[(kernel op, Options), ...]``: the kernels ``stack`` launches for ``op`` called on
    its own (:func:`kernels`), each with ``options`` plus its library path
    (:meth:`Kernel.options`) - what one op's call costs (``sim gemm``, ``sim validate``'s
    single-op cases)."""
    return [(kop, Kernel(kop, **lib).options(options)) for kop, lib in kernels(op, stack)]


def _layer_context(ops: list) -> dict:
    """Sizes of one layer (one run of trace ops) that an unfused op's kernels are written in:
    eb (activation element bytes), h, the k rows of RoPE (kv_rows), and for MoE T, E, k, X, A, F."""
    ctx: dict = {}
    x = 0
    for op in ops:
        if isinstance(op, VectorOp) and op.op in ("rmsnorm", "layernorm") and "eb" not in ctx and op.elements:
            ctx["eb"] = op.write_bytes / op.elements
            ctx["h"] = op.row_elements
        elif isinstance(op, VectorOp) and op.op == "kv_append":
            ctx["kv_rows"] = op.elements // 2
        elif isinstance(op, Gemm) and op.name == "moe.router":
            ctx.update(T=op.m, h=op.k, E=op.n)
        elif isinstance(op, Gemm) and op.name in ("moe.gate_up", "moe.up"):
            x += op.count
            ctx["F"] = op.n // 2 if op.name == "moe.gate_up" else op.n
    if x:
        ctx["X"] = x
    for op in ops:
        if isinstance(op, VectorOp) and op.op == "moe_dispatch" and ctx.get("h"):
            ctx["A"] = op.elements / ctx["h"]
            if ctx.get("T"):
                ctx["k"] = ctx["A"] / ctx["T"]
    return ctx


# ----------------------------------------------------------------------------- fusions


def _is_norm(op) -> bool:
    return isinstance(op, VectorOp) and op.op in ("rmsnorm", "layernorm")


def _is_residual(op) -> bool:
    return isinstance(op, VectorOp) and op.op == "add" and op.name.endswith("residual")


def _residual_norm(add: VectorOp, norm: VectorOp) -> VectorOp:
    # one pass: read x and the residual (and the norm's weights), write the new residual
    # stream and the normalised tensor; the norm no longer re-reads what the add wrote
    return VectorOp(f"{add.name}+{norm.name}", norm.op, norm.elements, (add.flops + norm.flops) / norm.elements,
                    add.read_bytes + max(0, norm.read_bytes - add.write_bytes), add.write_bytes + norm.write_bytes,
                    row_elements=norm.row_elements)


def _rope_kv(rope: VectorOp, kv: VectorOp) -> VectorOp:
    # one pass over q, k and v: q and k rotated in registers, q written back, k and v
    # written to the cache (the rotated k is not written twice, nor re-read)
    k_bytes = kv.read_bytes // 2
    return VectorOp(f"{rope.name}+kv_append", "rope", rope.elements + kv.elements // 2,
                    (rope.flops + kv.flops) / (rope.elements + kv.elements // 2),
                    rope.read_bytes + kv.read_bytes - k_bytes, max(0, rope.write_bytes - k_bytes) + kv.write_bytes)


def _fuse(run: list, s: StackSpec) -> list:
    """Fuse within one run of trace ops that share (layer, repeat, stage): a body of layers."""
    ops = [t.op for t in run]
    out_ops: list = []
    i = 0
    while i < len(ops):
        a = ops[i]
        b = ops[i + 1] if i + 1 < len(ops) else None
        if s.fuse_rope_kv_append and isinstance(a, VectorOp) and a.op == "rope" and isinstance(b, VectorOp) \
                and b.op == "kv_append":
            out_ops.append((_rope_kv(a, b), run[i]))
            i += 2
            continue
        if s.fuse_residual_norm and _is_residual(a) and _is_norm(b):
            out_ops.append((_residual_norm(a, b), run[i]))
            i += 2
            continue
        out_ops.append((a, run[i]))
        i += 1
    if s.fuse_residual_norm and len(out_ops) >= 2 and _is_norm(out_ops[0][0]) and _is_residual(out_ops[-1][0]):
        # a body of repeated layers starts with a norm and ends with a residual add: each
        # layer's trailing add fuses with the next layer's leading norm (the last layer's
        # with the final norm), so a body of n layers runs n fused kernels in their place
        norm, add = out_ops[0][0], out_ops[-1][0]
        out_ops = out_ops[1:-1] + [(_residual_norm(add, norm), out_ops[-1][1])]
    return out_ops


def _per_group(op: VectorOp, atts: list) -> list[VectorOp]:
    """``op`` (a layer's cache write) split over its attention calls by their new tokens."""
    tok = [a.batch * a.q_len for a in atts]
    total = sum(tok)
    out = []
    for i, t in enumerate(tok):
        f = t / total
        out.append(VectorOp(f"{op.name}.g{i}", op.op, max(1, round(op.elements * f)), op.ops_per_element,
                            round(op.read_bytes * f), round(op.write_bytes * f), row_elements=op.row_elements))
    return out


def lower_trace(trace: Iterable, stack: StackSpec) -> list[Kernel]:
    """Every kernel ``stack`` launches for a trace (:class:`~sim.model.workload.llm.TraceOp` items),
    in order, each with its trace position and repeat count.  Dequantisation ops are
    skipped: they run inside the GEMM that consumes the narrow operand (sim.model.engine.lower)."""
    items = [t for t in trace if getattr(t.op, "op", None) != "dequant"]
    runs: list[list] = []
    for t in items:
        key = (t.layer, t.repeat, t.stage)
        if runs and t.layer is not None and (runs[-1][0].layer, runs[-1][0].repeat, runs[-1][0].stage) == key:
            runs[-1].append(t)
        else:
            runs.append([t])
    out: list[Kernel] = []
    eb = 2
    gathered = False
    for run in runs:
        fused = _fuse(run, stack) if (stack.fuse_residual_norm or stack.fuse_rope_kv_append) else \
            [(t.op, t) for t in run]
        ctx = _layer_context([t.op for t in run]) if stack.unfused else {}
        eb = ctx.get("eb", eb) if ctx else next((o.write_bytes / o.elements for o in (t.op for t in run)
                                                 if _is_norm(o) and o.elements), eb)
        atts = [op for op, _ in fused if isinstance(op, Attention) and op.fused]
        for op, t in fused:
            pairs = []
            if stack.lm_head_gather and not gathered and t.block == "lm_head" and t.layer is None \
                    and not _is_norm(op):
                # x.index_select(0, last): the LM head's rows gathered from every new position
                gathered = True
                head = next((u.op for u in items if u.block == "lm_head" and isinstance(u.op, Gemm)), None)
                if head is not None:
                    el = head.m * head.k
                    pairs.append((VectorOp("lm_head.gather", "gather", el, 0.0, int(el * eb) + 8 * head.m,
                                           int(el * eb), row_elements=head.k), {}))
            if stack.kv_append_per_group and len(atts) > 1 and isinstance(op, VectorOp) and op.op == "kv_append":
                # one cache write (or pair) per attention call: each group's share of the tokens
                pairs += [kp for part in _per_group(op, atts) for kp in kernels(part, stack, ctx)]
            else:
                pairs += kernels(op, stack, ctx)
            pairs += _output_copy(op, stack)
            if stack.attention.output_concat and len(atts) > 1 and op is atts[-1]:
                # torch.cat of the groups' attention outputs before the output projection
                el = sum(a.batch * a.q_len * a.heads * a.head_dim for a in atts)
                b = el * _elem_bytes(op.dtype)
                pairs.append((VectorOp("attn.concat", "cat", el, 0.0, b, b), {}))
            for kop, lib in _with_stream(pairs, stack):
                # every library option the lowering chose (array, tiles, split_k, stream, row_work)
                out.append(Kernel(kop, **lib, layer=t.layer, block=t.block, repeat=t.repeat, stage=t.stage, source=op.name))
    return out
