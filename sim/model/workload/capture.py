"""Capture a trace from a PyTorch ``nn.Module`` run on the meta device (no weights, no GPU).

torch is imported inside the functions only: the simulator core imports without it.

How it works
------------
The module runs once on ``meta`` tensors under two interposition layers:

* a ``TorchFunctionMode`` catches the calls that have a direct meaning for us before
  PyTorch decomposes them: ``F.linear`` → :class:`Gemm` (``m`` = the input's leading
  dimensions flattened, ``k = in_features``, ``n = out_features``, tag ``weight``),
  ``F.scaled_dot_product_attention`` → :class:`Attention` (GQA read from the K/V head
  count; causal from ``is_causal`` or a ``CausalBias`` mask), ``F.embedding`` →
  :class:`Copy` of the gathered rows;
* a ``TorchDispatchMode`` sees every remaining ATen op: ``mm / addmm / bmm / baddbmm``
  become Gemms (a weight Gemm when an operand is a parameter or a view of one),
  ``clone / copy_ / _to_copy`` (same dtype) become ``Copy`` ops named ``layout:<op>``
  (layout changes a framework makes, which :func:`compare_traces` skips by default),
  views, metadata queries and factory functions (``empty``, ``arange``...) are skipped,
  and every other op becomes a :class:`VectorOp` named after the ATen op with
  ``elements`` = output elements, 1 op each, bytes = tensor inputs read + outputs
  written.

**Leaf modules** are recorded as one VectorOp each, without looking inside: any module
with a ``sim_vector_op`` attribute (the reference model's norms, RoPE, KV-cache append,
activations), and the classes (or class names) given in ``leaf_modules`` (default:
``nn.LayerNorm``, ``nn.RMSNorm``, ``nn.GELU``, ``nn.SiLU``, ``nn.ReLU``, ``nn.Softmax``).
Their ``elements`` is the output elements (floating tensors) unless the module defines
``sim_elements(args, output) -> int``.

Placement: an op's layer is the first integer in the dotted path of the module that ran
it (``layers.3.attn.qkv`` → layer 3), its block the path component after it (``attn``),
its name the path after the layer index (``attn.qkv``), so op names are the same in every
layer.
"""
from __future__ import annotations

import copy
import math
from typing import Any, Iterable, Mapping

from sim.errors import WorkloadError
from sim.ir.ops import Attention, Copy, Gemm, VectorOp
from sim.model.workload.llm import Trace, TraceOp, compare_traces
from sim.spec.dtypes import get_format

_TORCH_DTYPES = {
    "float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float8_e4m3fn": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2", "int8": "int8", "int32": "int32",
}

_VIEW_OPS = {
    "view", "_unsafe_view", "t", "transpose", "permute", "expand", "unsqueeze", "squeeze", "slice",
    "select", "as_strided", "alias", "detach", "split", "split_with_sizes", "chunk", "unbind",
    "reshape", "_reshape_alias", "view_as", "expand_as", "unflatten", "flatten", "narrow",
    "diagonal", "movedim", "lift_fresh", "_unsafe_split", "unfold", "view_as_real", "view_as_complex",
}
_SKIP_OPS = {"empty_like", "zeros_like", "ones_like", "full_like", "sym_size", "sym_stride", "sym_numel",
             "sym_storage_offset", "is_contiguous", "size", "stride", "_local_scalar_dense", "dim",
             "new_empty", "new_empty_strided", "new_zeros", "new_ones", "new_full", "empty_strided",
             "resize_", "set_", "_has_compatible_shallow_copy_type", "is_same_size"}
_COPY_OPS = {"clone", "copy_", "copy", "contiguous", "_to_copy"}
_GEMM_OPS = {"mm", "addmm", "bmm", "baddbmm"}


def torch_dtype_name(dtype: Any) -> str:
    """Our format name of a torch dtype (``torch.bfloat16`` → ``"bf16"``)."""
    key = str(dtype).replace("torch.", "")
    if key not in _TORCH_DTYPES:
        raise WorkloadError(f"no number format for torch dtype {dtype} (known: {', '.join(_TORCH_DTYPES)})")
    return _TORCH_DTYPES[key]


def _torch_dtype(name: str | Any):
    import torch

    if not isinstance(name, str):
        return name
    inverse = {v: k for k, v in _TORCH_DTYPES.items()}

    canon = get_format(name).name
    if canon not in inverse:
        raise WorkloadError(f"format {name} has no torch dtype for capture (valid: {', '.join(inverse)})")
    return getattr(torch, inverse[canon])


def _split_path(path: str) -> tuple[int | None, str, str]:
    parts = [p for p in path.split(".") if p]
    for i, p in enumerate(parts):
        if p.isdigit():
            rest = parts[i + 1:]
            return int(p), (rest[0] if rest else ""), ".".join(rest)
    return None, (parts[0] if parts else ""), ".".join(parts)


def capture_module(module: Any, example_inputs: Iterable[Any] = (), dtype: str | None = None, *,
                   kwargs: Mapping[str, Any] | None = None,
                   leaf_modules: Mapping[Any, str] | None = None, name: str | None = None) -> Trace:
    """Run ``module(*example_inputs, **kwargs)`` on the meta device and record its ops.

    ``example_inputs``: meta tensors, or shapes (tuples / ``torch.Size``) that become
    floating meta tensors of ``dtype``.  ``dtype`` (a format name such as ``"bf16"``):
    when given, the module's floating parameters are cast to it (on a copy) and shapes
    become tensors of it; default keeps the module's dtypes and makes shapes bf16.  A
    module that is not on the meta device is deep-copied and moved there first (this
    costs its weights' memory once).  ``leaf_modules``: extra ``{class or class name: op
    name}`` recorded as single VectorOps.

    Limitation: PyTorch cannot construct tensor subclasses such as
    ``torch.nn.attention.bias.CausalBias`` while a dispatch mode is active, so a module
    that builds one inside ``forward`` must receive it as an input (see
    :mod:`sim.model.workload.torch_reference`).  A top-left causal mask (``is_causal=True`` with
    fewer queries than keys) is recorded as the builder's bottom-right causal Attention.
    """
    import torch
    import torch.nn as nn

    if not isinstance(module, nn.Module):
        raise WorkloadError(f"capture_module needs an nn.Module, got {type(module).__name__}")
    tdtype = _torch_dtype(dtype) if dtype is not None else None
    module = _on_meta(module, tdtype)
    inputs = _meta_inputs(example_inputs, tdtype)
    kwargs = dict(kwargs or {})
    rec = _Recorder(module, _leaf_map(leaf_modules))
    handles = []
    for m in module.modules():
        handles.append(m.register_forward_pre_hook(rec.pre_hook, with_kwargs=True))
        handles.append(m.register_forward_hook(rec.post_hook, with_kwargs=True))
    fn_mode, dispatch_mode = _modes(rec)
    try:
        with torch.no_grad(), fn_mode, dispatch_mode:
            module(*inputs, **kwargs)
    finally:
        for h in handles:
            h.remove()
    meta = {"format": "sim-trace", "version": 1, "model": name or type(module).__name__, "captured": True,
            "inputs": [list(t.shape) if isinstance(t, torch.Tensor) else repr(t) for t in inputs]}
    return Trace(tuple(rec.records), meta)


def _on_meta(module: Any, tdtype: Any) -> Any:
    """``module`` with every parameter and buffer on the meta device and its floating
    parameters in ``tdtype`` (when given): a deep copy when either needs a change, so the
    caller's module is never touched."""
    on_meta = all(p.device.type == "meta" for p in module.parameters()) and \
        all(b.device.type == "meta" for b in module.buffers())
    needs_cast = tdtype is not None and any(p.is_floating_point() and p.dtype != tdtype for p in module.parameters())
    if not on_meta or needs_cast:
        module = copy.deepcopy(module)
        if not on_meta:
            module = module.to("meta")
        if needs_cast:
            module = module.to(tdtype)
    return module


def _meta_inputs(example_inputs: Any, tdtype: Any) -> list[Any]:
    """The positional inputs as meta tensors: tensors moved to meta, shapes made into
    empty tensors of ``tdtype`` (bf16 by default), anything else passed as it is."""
    import torch

    if isinstance(example_inputs, torch.Tensor) or (
            isinstance(example_inputs, (tuple, torch.Size)) and example_inputs
            and all(isinstance(v, int) for v in example_inputs)):
        example_inputs = [example_inputs]  # one tensor or one shape
    inputs = []
    for x in example_inputs:
        if isinstance(x, torch.Tensor):
            inputs.append(x if x.device.type == "meta" else x.to("meta"))
        elif isinstance(x, (tuple, list, torch.Size)) and all(isinstance(v, int) for v in x):
            inputs.append(torch.empty(tuple(x), dtype=tdtype or torch.bfloat16, device="meta"))
        else:
            inputs.append(x)
    return inputs


def _leaf_map(leaf_modules: Mapping[Any, str] | None) -> dict[Any, str]:
    """``{module class or class name: op name}`` of the modules recorded as one VectorOp:
    the usual norms and activations, then the caller's ``leaf_modules``."""
    import torch.nn as nn

    leaf_map: dict[Any, str] = {nn.LayerNorm: "layernorm", nn.GELU: "gelu", nn.SiLU: "silu",
                                nn.ReLU: "relu", nn.Softmax: "softmax"}
    if hasattr(nn, "RMSNorm"):
        leaf_map[nn.RMSNorm] = "rmsnorm"
    leaf_map.update(leaf_modules or {})
    return leaf_map


def _tensors(obj: Any) -> list[Any]:
    """The tensors in ``obj`` (nested lists, tuples and dict values), in order."""
    import torch

    out = []
    if isinstance(obj, torch.Tensor):
        out.append(obj)
    elif isinstance(obj, (list, tuple)):
        for o in obj:
            out.extend(_tensors(o))
    elif isinstance(obj, dict):
        for o in obj.values():
            out.extend(_tensors(o))
    return out


def _nbytes(ts: Iterable[Any]) -> int:
    return sum(t.numel() * t.element_size() for t in ts)


def _gemm_dtypes(a: Any, b: Any) -> tuple[str, str | None]:
    """A Gemm's (dtype, weight_dtype): the second only where the operands differ."""
    ad = torch_dtype_name(a.dtype)
    bd = torch_dtype_name(b.dtype)
    return ad, (bd if bd != ad else None)


def _modes(rec: "_Recorder") -> tuple[Any, Any]:
    """The function and dispatch modes that hand every call to ``rec``.  Made here, not at
    module level, because their base classes come from torch, which is imported lazily."""
    from torch.overrides import TorchFunctionMode
    from torch.utils._python_dispatch import TorchDispatchMode

    class _FnMode(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kw=None):
            return rec.on_function(func, args, kw or {})

    class _DispatchMode(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kw=None):
            return rec.on_dispatch(func, args, kw or {})

    return _FnMode(), _DispatchMode()


class _Recorder:
    """The ops one capture records, and the state its module hooks and torch modes share:
    the dotted path of the module running now (``path_stack``), how many leaf modules or
    recorded calls are open (``suppress``: what runs inside them is not recorded again),
    and the ids of parameters and of views of them (a Gemm on one is a weight Gemm)."""

    def __init__(self, module: Any, leaf_map: dict[Any, str]) -> None:
        self.leaf_map = leaf_map
        self.suppress = 0
        self.path_stack: list[str] = [""]
        self.records: list[TraceOp] = []
        self.param_ids: dict[int, Any] = {id(p): p for p in module.parameters()}
        self.keep_alive: list[Any] = []   # views in param_ids: their ids must stay unique
        self.names = {id(m): n for n, m in module.named_modules()}

    def leaf_op(self, mod: Any) -> str | None:
        op = getattr(mod, "sim_vector_op", None)
        if op:
            return str(op)
        for key, val in self.leaf_map.items():
            if (isinstance(key, type) and isinstance(mod, key)) or (isinstance(key, str) and type(mod).__name__ == key):
                return val
        return None

    def place(self, op_name: str) -> tuple[int | None, str, str]:
        layer, block, rest = _split_path(self.path_stack[-1])
        return layer, block, (f"{rest}:{op_name}" if rest else op_name)

    def record(self, op_factory, op_name: str, own_name: bool = False) -> None:
        layer, block, nm = self.place(op_name)
        if own_name:
            nm = _split_path(self.path_stack[-1])[2] or op_name
        op = op_factory(nm)
        self.records.append(TraceOp(op, layer, block or "", 1, 0))

    def is_param(self, t: Any) -> bool:
        import torch

        return isinstance(t, torch.Tensor) and id(t) in self.param_ids

    def _call_suppressed(self, func, args, kw) -> Any:
        """Run ``func`` without recording what it decomposes into (it is recorded already)."""
        self.suppress += 1
        try:
            return func(*args, **kw)
        finally:
            self.suppress -= 1

    # ............................................................ module hooks

    def pre_hook(self, mod, args, kw) -> None:
        self.path_stack.append(self.names.get(id(mod), self.path_stack[-1]))
        if self.leaf_op(mod) is not None:
            self.suppress += 1

    def post_hook(self, mod, args, kw, output) -> None:
        op = self.leaf_op(mod)
        try:
            if op is not None:
                self.suppress -= 1
                if self.suppress == 0:
                    if hasattr(mod, "sim_elements"):
                        elements = int(mod.sim_elements(args, output))
                    else:
                        elements = sum(t.numel() for t in _tensors(output) if t.is_floating_point())
                    read = _nbytes(_tensors(args)) + _nbytes(p for p in mod.parameters(recurse=True))
                    write = _nbytes(_tensors(output))
                    if elements > 0:
                        ops_pe = float(getattr(mod, "sim_ops_per_element", 1.0))
                        self.record(lambda nm: VectorOp(nm, op, elements, ops_pe, read, write), op, own_name=True)
        finally:
            self.path_stack.pop()

    # ............................................................ function level

    def on_function(self, func, args, kw) -> Any:
        """``F.linear`` → a Gemm, ``F.embedding`` → a Copy, ``F.scaled_dot_product_attention``
        → an Attention, recorded before PyTorch decomposes them; everything else runs on."""
        import torch.nn.functional as F

        if self.suppress or func not in (F.linear, F.scaled_dot_product_attention, F.embedding):
            return func(*args, **kw)
        if func is F.linear:
            x = args[0] if args else kw["input"]
            w = args[1] if len(args) > 1 else kw["weight"]
            b = args[2] if len(args) > 2 else kw.get("bias")
            k = w.shape[-1]
            n = w.shape[0] if w.dim() == 2 else 1
            m = x.numel() // k if k else 0
            ad, wd = _gemm_dtypes(x, w)
            tags = ("weight",) + (("bias",) if b is not None else ())
            if m > 0:
                self.record(lambda nm: Gemm(nm, m, k, n, 1, dtype=ad, weight_dtype=wd, tags=tags), "linear",
                            own_name=True)
        elif func is F.embedding:
            idx = args[0] if args else kw["input"]
            w = args[1] if len(args) > 1 else kw["weight"]
            nb = idx.numel() * w.shape[-1] * w.element_size()
            if nb > 0:
                self.record(lambda nm: Copy(nm, nb), "embedding", own_name=True)
        else:
            return self.sdpa(func, args, kw)
        return self._call_suppressed(func, args, kw)

    def sdpa(self, func, args, kw) -> Any:
        import torch

        names_ = ("query", "key", "value", "attn_mask", "dropout_p", "is_causal", "scale", "enable_gqa")
        a = dict(zip(names_, args))
        a.update(kw)
        q, k, v = a["query"], a["key"], a["value"]
        mask = a.get("attn_mask")
        is_causal = bool(a.get("is_causal", False))
        # Attention ops are bottom-right causal (queries are the last q_len positions);
        # a top-left mask (is_causal with q_len < kv_len) is recorded as causal as well.
        causal = is_causal
        if not is_causal and mask is not None:
            try:
                from torch.nn.attention.bias import CausalBias
            except ImportError:  # pragma: no cover - old torch
                CausalBias = None
            causal = CausalBias is not None and isinstance(mask, CausalBias)
        batch = math.prod(q.shape[:-3]) if q.dim() > 3 else 1
        dt = torch_dtype_name(q.dtype)
        kvd = torch_dtype_name(k.dtype)
        rest = _split_path(self.path_stack[-1])[2]
        layer, block, _ = self.place("sdpa")
        try:
            att_op = Attention(f"{rest}:sdpa" if rest else "sdpa", batch=batch, heads=q.shape[-3],
                               kv_heads=k.shape[-3], head_dim=q.shape[-1], q_len=q.shape[-2],
                               kv_len=k.shape[-2], causal=causal, dtype=dt,
                               kv_dtype=kvd if kvd != dt else None, fused=True)
        except Exception as exc:
            raise WorkloadError(f"capture: cannot describe scaled_dot_product_attention at "
                                f"'{self.path_stack[-1]}' as an Attention op: {exc}") from None
        self.records.append(TraceOp(att_op, layer, block or "", 1, 0))
        if all(t.device.type == "meta" for t in [q, k, v]):
            return torch.empty(tuple(q.shape[:-1]) + (v.shape[-1],), dtype=q.dtype, device=q.device)
        return self._call_suppressed(func, args, kw)

    # ............................................................ dispatch level

    def on_dispatch(self, func, args, kw) -> Any:
        """Every ATen op not inside a recorded call: views and metadata skipped (a view of
        a parameter counts as a parameter), the rest recorded by :meth:`record_aten`."""
        out = func(*args, **kw)
        if self.suppress:
            return out
        base = func.overloadpacket.__name__
        ins = _tensors(args) + _tensors(kw)
        outs = _tensors(out)
        is_view = base in _VIEW_OPS or any(
            r.alias_info is not None and not r.alias_info.is_write for r in func._schema.returns)
        if is_view:
            if any(self.is_param(t) for t in ins):
                for t in outs:
                    self.param_ids[id(t)] = t
                    self.keep_alive.append(t)
            return out
        if not outs or not ins or base in _SKIP_OPS:
            return out
        self.record_aten(base, args, ins, outs)
        return out

    def record_aten(self, base: str, args: Any, ins: list[Any], outs: list[Any]) -> None:
        """One ATen op as a Gemm (``mm``, ``addmm``, ``bmm``, ``baddbmm``), a Copy (layout
        copies and embedding gathers), a ``convert`` VectorOp (a copy that changes the
        dtype) or a VectorOp named after the op."""
        if base in _GEMM_OPS:
            a_i, b_i = (1, 2) if base in ("addmm", "baddbmm") else (0, 1)
            A, B = args[a_i], args[b_i]
            weight = self.is_param(A) or self.is_param(B)
            if base in ("mm", "addmm"):
                cnt, m, k, n = 1, A.shape[0], A.shape[1], B.shape[1]
            else:
                cnt, m, k, n = A.shape[0], A.shape[1], A.shape[2], B.shape[2]
            ad, bd = _gemm_dtypes(A, B)
            tags = ("weight",) if weight else ("activations",)
            if min(cnt, m, k, n) > 0:
                self.record(lambda nm: Gemm(nm, m, k, n, cnt, dtype=ad, weight_dtype=bd, tags=tags), base)
            return
        if base in _COPY_OPS:
            src = ins[-1] if base == "copy_" else ins[0]
            if base == "_to_copy" and outs[0].dtype != src.dtype:
                el = outs[0].numel()
                if el:
                    self.record(lambda nm: VectorOp(nm, "convert", el, 1.0, _nbytes([src]), _nbytes(outs)), "convert")
                return
            nb = _nbytes([src])
            if nb:
                self.record(lambda nm: Copy(nm if nm.startswith("layout") else "layout:" + nm, nb), base)
            return
        if base == "embedding":
            nb = _nbytes(outs)
            if nb:
                self.record(lambda nm: Copy(nm, nb), base)
            return
        el = sum(t.numel() for t in outs)
        if el:
            op = "softmax" if base in ("_softmax", "softmax") else base
            self.record(lambda nm: VectorOp(nm, op, el, 1.0, _nbytes(ins), _nbytes(outs)), base)


__all__ = ["capture_module", "compare_traces", "torch_dtype_name"]
