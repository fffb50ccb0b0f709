"""How a software stack turns a model's ops into the kernels it launches.

This is the one lowering from model ops (:mod:`sim.model.workload.llm`'s traces, or the ops of
a validation case) to kernels: ``sim run``, sweeps, serving and ``sim validate`` all price
the kernels :func:`lower_trace` / :func:`kernels` return, so what is validated is what
users run.  What differs between stacks is data, a profile in ``stacks/*.yaml``
(:class:`~sim.spec.stack_spec.StackSpec`):

* ``ideal``         - every op one kernel on the chip's default array (the trace as built);
* ``eager_pytorch`` - what eager PyTorch (also under CUDA-graph capture) launches on a GPU:
  RoPE, SiLU and the multiply as separate kernels, K and V cache writes as two copies, the
  attention output made contiguous, cuDNN's attention kernels, cuBLAS/CUTLASS paths;
* ``fused_serving`` - a fused serving stack: RoPE fused with the KV-cache write, residual
  add fused with the next norm, fused SiLU·mul, flash-decoding attention.

A chip names its default (``software_stack`` in its file; ``ideal`` when absent); ``--stack``
(CLI, sweeps) and ``stack=`` (Python) choose another.  Profiles are found like chips
(:mod:`sim.spec.catalog`: ``$SIM_STACK_DIR`` replaces the shipped folder, ``~/.config/sim/stacks``
adds to it).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Union

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem, MappingError, UnknownNameError
from sim.ir.ops import Attention, Copy, Gemm, VectorOp
from sim.spec.dtypes import get_format
from sim.spec.loader import load_model
from sim.spec.stack_spec import StackSpec

__all__ = ["DEFAULT_STACK", "Kernel", "StackSpec", "chip_stack", "kernels", "list_stacks", "load_stack",
           "lower_trace"]

#: the stack of a chip whose file names none: the trace as built, one kernel per op
DEFAULT_STACK = "ideal"

_cache: dict[tuple[str, int], StackSpec] = {}


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

    def options(self, base):
        """``base`` (the run's Options) with this kernel's library path; an array the user
        chose explicitly wins over the stack's."""
        return dataclasses.replace(base, array=base.array or self.array, tiles=self.tiles or base.tiles,
                                   split_k=self.split_k if self.split_k is not None else base.split_k,
                                   stream=base.stream or self.stream)


def list_stacks() -> list[str]:
    """Names of the available stack profiles (shipped and the user's), sorted."""
    return catalog.names("stacks")


def load_stack(name_or_path: Union[str, Path, StackSpec]) -> StackSpec:
    """A stack profile by name (``"eager_pytorch"``) or YAML path; errors name file, line and key."""
    if isinstance(name_or_path, StackSpec):
        return name_or_path
    text = str(name_or_path)
    path = Path(text).expanduser()
    if not (path.suffix in (".yaml", ".yml") or "/" in text):
        found = catalog.find("stacks", text)
        if found is None:
            raise UnknownNameError("stack", text, list_stacks())
        path = found
    try:
        key = (str(path.resolve()), path.stat().st_mtime_ns)
    except OSError:
        key = None
    if key is not None and key in _cache:
        return _cache[key]
    spec = load_model(StackSpec, path)
    if spec.name != path.stem:
        raise ConfigError(ConfigProblem(str(path), 1, "name", f"name {spec.name!r} must equal the file name "
                                                              f"{path.stem!r}"))
    if key is not None:
        _cache[key] = spec
    return spec


def chip_stack(chip, stack: Union[str, Path, StackSpec, None] = None) -> StackSpec:
    """The stack to lower with on ``chip``: ``stack`` if given, else the chip's default;
    every array the profile names must be one of the chip's."""
    spec = load_stack(stack if stack is not None else (getattr(chip, "software_stack", None) or DEFAULT_STACK))
    have = {a.name for a in chip.cores.arrays}
    missing = sorted(spec.arrays() - have)
    if missing:
        raise MappingError(f"stack '{spec.name}' runs kernels on array(s) {', '.join(missing)}, which chip "
                           f"'{chip.name}' does not have (its arrays: {', '.join(sorted(have))}); choose a stack "
                           f"that fits it ({', '.join(list_stacks())})")
    return spec


# ----------------------------------------------------------------------------- one op


def _elem_bytes(dtype: str | None) -> int:
    return max(1, get_format(dtype or "bf16").bits // 8)


def _gemm_kernels(op: Gemm, s: StackSpec) -> list[tuple[object, dict]]:
    g = s.gemm
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
        out.append((dataclasses.replace(op, m=m_pad), {"tiles": r.tiles, "split_k": r.split_k}))
        return out
    mis = g.misaligned
    if mis is not None and op.dtype in mis.dtypes and (op.k % mis.align_elements or op.n % mis.align_elements):
        array = mis.odd_array if (op.k % 2 or op.n % 2) else mis.even_array
        return [(op, {"array": array})]
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
    out.append((op, {"array": a.prefill_array} if a.prefill_array else {}))
    return out


def _output_copy(op: Attention, s: StackSpec) -> list[tuple[object, dict]]:
    """Inside a layer (not for a lone attention call): the attention output made contiguous
    before the output projection, for more than one query row (for one it is a view)."""
    if not (s.attention.output_copy and isinstance(op, Attention) and op.fused and op.q_len > 1):
        return []
    return [(Copy(f"{op.name}.transpose", op.batch * op.q_len * op.heads * op.head_dim * _elem_bytes(op.dtype)), {})]


def _vector_kernels(op: VectorOp, s: StackSpec) -> list[tuple[object, dict]]:
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


def kernels(op, stack: StackSpec) -> list[tuple[object, dict]]:
    """The kernels ``stack`` launches for one model op called on its own:
    ``[(op, {array, tiles, split_k}), ...]`` (:func:`lower_trace` adds what a layer adds
    between ops: fusions and the attention output copy)."""
    if isinstance(op, Gemm):
        return _gemm_kernels(op, stack)
    if isinstance(op, Attention) and op.fused:
        return _attention_kernels(op, stack)
    if isinstance(op, VectorOp):
        out = []
        for kop, lib in _vector_kernels(op, stack):
            rule = stack.stream_rule(kop.op, kop.row_elements)
            out.append((kop, dict(lib, stream=rule) if rule is not None else lib))
        return out
    return [(op, {})]


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
    for run in runs:
        fused = _fuse(run, stack) if (stack.fuse_residual_norm or stack.fuse_rope_kv_append) else \
            [(t.op, t) for t in run]
        for op, t in fused:
            for kop, lib in kernels(op, stack) + _output_copy(op, stack):
                out.append(Kernel(kop, array=lib.get("array"), tiles=lib.get("tiles"), split_k=lib.get("split_k"),
                                  stream=lib.get("stream"), layer=t.layer, block=t.block, repeat=t.repeat, stage=t.stage, source=op.name))
    return out
