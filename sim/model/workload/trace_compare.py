"""Op-for-op comparison of two traces (:func:`compare_traces`): the shape signature each
op kind must match and the readable difference list.

It checks the builder against captured or reference traces (:mod:`sim.model.workload.capture`,
the tests); it is separate because it is a checking tool, not part of building or
simulating a trace.  :mod:`sim.model.workload.llm` re-exports :func:`compare_traces`.
"""
from __future__ import annotations

import difflib

from sim.errors import WorkloadError
from sim.ir.ops import Attention, Collective, Conv2d, Copy, Gemm, Op, VectorOp
from sim.model.workload.trace import Trace, TraceOp

def _signature(op: Op, check_dtypes: bool) -> tuple:
    if isinstance(op, Gemm):
        sig: tuple = ("gemm", op.m, op.k, op.n, op.count)
        return sig + ((op.dtype, op.b_dtype, op.sparsity) if check_dtypes else ())
    if isinstance(op, Attention):
        sig = ("attention", op.batch, op.heads, op.kv_heads, op.head_dim, op.q_len, op.kv_len, op.scored_pairs())
        return sig + ((op.dtype, op.kv_format) if check_dtypes else ())
    if isinstance(op, VectorOp):
        return ("vector", op.op, op.elements)
    if isinstance(op, Copy):
        return ("copy", op.bytes)
    if isinstance(op, Collective):
        return ("collective", op.collective, op.bytes, op.participants)
    if isinstance(op, Conv2d):
        return ("conv2d", op.batch, op.in_h, op.in_w, op.in_channels, op.out_channels,
                op.kernel_h, op.kernel_w, op.stride, op.padding)
    return (op.kind, op)


_SIG_NAMES = {
    "gemm": ("m", "k", "n", "count", "dtype", "b_dtype", "sparsity"),
    "attention": ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "scored_pairs", "dtype", "kv_dtype"),
    "vector": ("op", "elements"),
    "copy": ("bytes",),
    "collective": ("collective", "bytes", "participants"),
    "conv2d": ("batch", "in_h", "in_w", "in_channels", "out_channels", "kernel_h", "kernel_w", "stride", "padding"),
}


def _label(t: TraceOp, i: int) -> str:
    where = f"layer {t.layer}" if t.layer is not None else "no layer"
    return f"#{i} {t.op.kind} '{t.op.name}' ({where})"


def _describe_sig(sig: tuple) -> str:
    names = _SIG_NAMES.get(sig[0], ())
    return sig[0] + "(" + ", ".join(f"{n}={v}" for n, v in zip(names, sig[1:])) + ")"


def compare_traces(a: Trace, b: Trace, *, vector: str = "elements", check_dtypes: bool = False,
                   ignore_layout_copies: bool = True, max_differences: int = 50) -> list[str]:
    """Op-for-op comparison of two traces (both expanded first); ``[]`` means they match.

    What must match, in order:

    * Gemm: ``m, k, n, count`` (+ dtypes, sparsity with ``check_dtypes``);
    * Attention: ``batch, heads, kv_heads, head_dim, q_len, kv_len`` and the number of
      scored (query, key) pairs — so a decode step with or without a causal flag matches;
    * Collective: kind, bytes, participants; Copy: bytes; Conv2d: its shape;
    * VectorOp (``vector="elements"``): the ``op`` name and the element count.  With
      ``vector="ignore"`` VectorOps are left out (useful for traces captured from
      arbitrary modules, whose elementwise ops are finer-grained than the builder's).

    Names, blocks and byte counts of VectorOps are not compared.  Copies whose name
    starts with ``layout`` (contiguous/clone copies a framework makes to change a
    tensor's layout) are skipped unless ``ignore_layout_copies=False``.
    """
    if vector not in ("elements", "ignore"):
        raise WorkloadError(f"compare_traces: vector must be 'elements' or 'ignore', got {vector!r}")

    def keep(t: TraceOp) -> bool:
        if isinstance(t.op, VectorOp) and vector == "ignore":
            return False
        if isinstance(t.op, Copy) and ignore_layout_copies and t.op.name.startswith("layout"):
            return False
        return True

    xa = [(i, t) for i, t in enumerate(a.expanded().ops) if keep(t)]
    xb = [(i, t) for i, t in enumerate(b.expanded().ops) if keep(t)]
    sa = [_signature(t.op, check_dtypes) for _, t in xa]
    sb = [_signature(t.op, check_dtypes) for _, t in xb]
    diffs: list[str] = []
    matcher = difflib.SequenceMatcher(a=sa, b=sb, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        if tag == "replace" and (i2 - i1) == (j2 - j1):
            for di in range(i2 - i1):
                (ia, ta), (ib, tb) = xa[i1 + di], xb[j1 + di]
                x, y = sa[i1 + di], sb[j1 + di]
                if x[0] != y[0]:
                    diffs.append(f"{_label(ta, ia)} vs {_label(tb, ib)}: {_describe_sig(x)} vs {_describe_sig(y)}")
                else:
                    names = _SIG_NAMES.get(x[0], ())
                    fd = [f"{n} {u} vs {v}" for n, u, v in zip(names, x[1:], y[1:]) if u != v]
                    diffs.append(f"{_label(ta, ia)} vs {_label(tb, ib)}: " + ", ".join(fd))
            continue
        for k in range(i1, i2):
            ia, ta = xa[k]
            diffs.append(f"only in first: {_label(ta, ia)} {_describe_sig(sa[k])}")
        for k in range(j1, j2):
            ib, tb = xb[k]
            diffs.append(f"only in second: {_label(tb, ib)} {_describe_sig(sb[k])}")
    if len(diffs) > max_differences:
        more = len(diffs) - max_differences
        diffs = diffs[:max_differences] + [f"... and {more} more differences"]
    return diffs
