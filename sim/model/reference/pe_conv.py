"""Convolutions on the PE-level reference (see :mod:`sim.model.reference.pe_array`): the
textbook direct convolution and im2col (the ground truth of the values), and
:func:`simulate_conv`, a convolution run on the array as the GEMM of its im2col lowering
(WS / OS / IS) or with Eyeriss-style row-stationary folds.
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from sim.errors import ShapeError
from sim.model.dataflow.base import Dataflow
from sim.model.dataflow.registry import get_dataflow
from sim.model.reference.pe_array import ReferenceResult, simulate_gemm
from sim.model.reference.pe_cycles import _Counts, _Fold, _run_reduction


def direct_conv(ifmap: np.ndarray, filters: np.ndarray, stride: int = 1, padding: int = 0) -> np.ndarray:
    """Textbook convolution (cross-correlation), NCHW: out[b, f, e, x]."""
    ifmap = np.asarray(ifmap, dtype=np.int64)
    filters = np.asarray(filters, dtype=np.int64)
    Nb, Cin, H, W = ifmap.shape
    Nf, Cf, FH, FW = filters.shape
    if Cf != Cin:
        raise ShapeError(f"filters have {Cf} channels, ifmap {Cin}")
    x = np.pad(ifmap, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    E = (H + 2 * padding - FH) // stride + 1
    F = (W + 2 * padding - FW) // stride + 1
    out = np.zeros((Nb, Nf, E, F), dtype=np.int64)
    for e in range(E):
        for xx in range(F):
            win = x[:, :, e * stride:e * stride + FH, xx * stride:xx * stride + FW]
            out[:, :, e, xx] = np.einsum("bcrs,fcrs->bf", win, filters)
    return out


def im2col(ifmap: np.ndarray, FH: int, FW: int, stride: int = 1, padding: int = 0) -> np.ndarray:
    """The im2col matrix: rows (b, e, x), columns (c, r, s)."""
    ifmap = np.asarray(ifmap)
    Nb, Cin, H, W = ifmap.shape
    x = np.pad(ifmap, ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    E = (H + 2 * padding - FH) // stride + 1
    F = (W + 2 * padding - FW) // stride + 1
    rows = []
    for b in range(Nb):
        for e in range(E):
            for xx in range(F):
                rows.append(x[b, :, e * stride:e * stride + FH, xx * stride:xx * stride + FW].reshape(-1))
    return np.array(rows)


def simulate_conv(dataflow: str | Dataflow, ifmap: np.ndarray, filters: np.ndarray, rows: int, cols: int, *,
                  stride: int = 1, padding: int = 0, columns: str = "output_rows",
                  **options: Any) -> ReferenceResult:
    """Simulate a convolution PE by PE; the output is out[b, f, e, x].

    WS/OS/IS run the im2col GEMM; RS runs Eyeriss's 1-D row primitive in the orientation
    ``columns`` ("output_rows" or "filters"), as described in :mod:`sim.model.dataflow.conv`.
    """
    df = get_dataflow(dataflow, **options)
    ifmap = np.asarray(ifmap, dtype=np.int64)
    filters = np.asarray(filters, dtype=np.int64)
    if (ifmap.ndim != 4 or filters.ndim != 4 or ifmap.shape[1] != filters.shape[1]
            or min(ifmap.shape + filters.shape) < 1):
        raise ShapeError("need ifmap[N,C,H,W] and filters[F,C,R,S] with the same C, "
                         f"got {ifmap.shape} and {filters.shape}")
    if int(stride) < 1 or int(padding) < 0 or int(rows) < 1 or int(cols) < 1:
        raise ShapeError("stride, rows and cols must be >= 1 and padding >= 0")
    Nb, Cin, H, W = ifmap.shape
    Nf, _, FH, S = filters.shape
    U = int(stride)
    E = (H + 2 * padding - FH) // U + 1
    F = (W + 2 * padding - S) // U + 1
    if E < 1 or F < 1:
        raise ShapeError(f"a {FH}x{S} filter does not fit a {H}x{W} ifmap with padding {padding}")
    if not df.spec.is_row_stationary:
        A = im2col(ifmap, FH, S, U, padding)
        Bm = filters.reshape(Nf, -1).T
        res = simulate_gemm(df, A, Bm, rows, cols)
        res.output = res.output.reshape(Nb, E, F, Nf).transpose(0, 3, 1, 2)
        return res
    R, C = int(rows), int(cols)
    I = np.pad(ifmap, ((0, 0), (0, 0), (padding, padding), (padding, padding))).astype(object)
    Wt = filters.astype(object)
    P = Cin * FH
    Qr = -(-P // R)
    folds: list[_Fold] = []

    def pair(q: int, i: int) -> Optional[tuple[int, int]]:
        g = q * R + i
        return divmod(g, FH) if g < P else None

    if columns == "output_rows":
        T = Nb * F
        for f in range(Nf):
            for p in range(-(-E // C)):
                for q in range(Qr):
                    def weight(i, j, l, f=f, p=p, q=q):
                        cr = pair(q, i)
                        if cr is None or p * C + j >= E:
                            return None
                        c, r = cr
                        return (Wt[f, c, r, l], ("W", f, c, r, l))

                    def inp(i, j, t, l, p=p, q=q):
                        cr = pair(q, i)
                        e = p * C + j
                        if cr is None or e >= E:
                            return None
                        c, r = cr
                        b, xx = divmod(t, F)
                        h, w = e * U + r, xx * U + l
                        return (I[b, c, h, w], ("I", b, c, h, w))

                    def out_addr(j, t, f=f, p=p):
                        e = p * C + j
                        if e >= E:
                            return None
                        b, xx = divmod(t, F)
                        return (b, f, e, xx)

                    folds.append(_Fold(T, weight, inp, out_addr))
        wd, idl = "row_multicast", "multicast"
    elif columns == "filters":
        T = Nb * E * F
        for p in range(-(-Nf // C)):
            for q in range(Qr):
                def weight(i, j, l, p=p, q=q):
                    cr = pair(q, i)
                    f = p * C + j
                    if cr is None or f >= Nf:
                        return None
                    c, r = cr
                    return (Wt[f, c, r, l], ("W", f, c, r, l))

                def inp(i, j, t, l, p=p, q=q):
                    cr = pair(q, i)
                    if cr is None or p * C + j >= Nf:
                        return None
                    c, r = cr
                    b, rest = divmod(t, E * F)
                    e, xx = divmod(rest, F)
                    h, w = e * U + r, xx * U + l
                    return (I[b, c, h, w], ("I", b, c, h, w))

                def out_addr(j, t, p=p):
                    f = p * C + j
                    if f >= Nf:
                        return None
                    b, rest = divmod(t, E * F)
                    e, xx = divmod(rest, F)
                    return (b, f, e, xx)

                folds.append(_Fold(T, weight, inp, out_addr))
        wd, idl = "column_shift", "row_systolic"
    else:
        raise ShapeError(f"columns must be 'output_rows' or 'filters', got {columns!r}")
    cnt = _Counts()
    sram: dict[Any, Any] = {}
    fc, macs = _run_reduction(folds, R, C, S, stat="weight", stream="input", weight_delivery=wd,
                              input_delivery=idl, window=S, cnt=cnt, sram_out=sram)
    out = np.zeros((Nb, Nf, E, F), dtype=np.int64)
    for (b, f, e, xx), v in sram.items():
        out[b, f, e, xx] = v
    return ReferenceResult(out, sum(fc), fc, macs, cnt.result())
