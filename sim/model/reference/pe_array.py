"""PE-level reference simulator: every PE register, every cycle, real numbers.

This is the ground truth the closed-form models in :mod:`sim.model.dataflow` are tested against.
It is deliberately plain - Python loops over cycles and PEs - and slow: use it on arrays of
at most ~8×8 and dimensions of a few dozen.

What it simulates (docs/dataflows.md has the pictures):

* **Output-stationary** (``_run_output_stationary``): tokens of the row operand enter the
  left edge of array row i at cycle ``t + i`` and move right one PE per cycle; tokens of
  the column operand enter the top of column j at ``t + j`` and move down.  A PE multiplies
  the two tokens it holds, accumulates locally, and sends its result out when its last
  token (``t = T - 1``) has been used.

* **Reduction down the columns** (``_run_reduction``: WS, IS, RS, and the RS convolution):
  the stationary words are first loaded (shifted down the columns, or multicast along the
  rows) in ``R·L`` cycles; then each array row i receives a stream of ``(token, slot)``
  control tokens at its left edge from cycle ``R·L + i`` on, one per cycle, that move right
  one PE per cycle.  A PE does the MAC of the slot it is told, accumulates L slots locally,
  and in the token's last slot adds the partial sum that the PE above left in its output
  register the cycle before.  The bottom valid PE sends the sum down the column's output
  path to the SRAM; the first row reads a partial sum back from the SRAM when a previous
  fold already wrote one for the same output.

Edge folds are padded the way SCALE-Sim pads them: positions outside the problem carry
bubbles that take time but do no work and touch no storage, so every fold lasts as long as
a full one.  A fold ends with its last output slot (the bottom-right PE finishing its last
token); folds run back to back.

Every SRAM read/write and every register-file read/write of a real word is counted, with
the conventions of docs/dataflows.md; bubbles count nothing.  Internal inconsistencies (a
partial sum arriving a cycle late, a weight not loaded in time, two tokens meeting out of
step) raise ``RuntimeError``: that is a bug in this file, never a user error.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

import numpy as np

from sim.errors import ShapeError
from sim.model.dataflow.base import Dataflow
from sim.model.dataflow.registry import get_dataflow
from sim.model.dataflow.report import ACCESS_FIELDS

Word = tuple[Any, Any]  # (value, address)


@dataclass
class ReferenceResult:
    """What the reference simulation produced."""

    output: np.ndarray
    compute_cycles: int          # duration: folds back to back, each ending at its last output slot
    fold_cycles: list[int]       # duration of each fold, in the order they ran
    macs: int
    counts: dict[str, int] = field(default_factory=dict)  # keys: sim.model.dataflow.ACCESS_FIELDS

    @property
    def scalesim_cycles(self) -> int:
        """Index of the last cycle (SCALE-Sim's "Total Cycles")."""
        return self.compute_cycles - 1

    @property
    def folds(self) -> int:
        return len(self.fold_cycles)


class _Counts:
    def __init__(self) -> None:
        self.c: Counter[str] = Counter()

    def add(self, key: str, n: int = 1) -> None:
        self.c[key] += n

    def result(self) -> dict[str, int]:
        return {k: int(self.c.get(k, 0)) for k in ACCESS_FIELDS}


def _grid(R: int, C: int, value: Any = None) -> list[list[Any]]:
    return [[value] * C for _ in range(R)]


_CYCLE_CAP = 5_000_000


# --------------------------------------------------------------------------- output-stationary


def _run_output_stationary(Xr: np.ndarray, Xc: np.ndarray, R: int, C: int,
                           row_name: str, col_name: str, cnt: _Counts) -> tuple[np.ndarray, list[int], int]:
    """OS on an R×C array: out[Sr×Sc] = Xr[Sr×T] · Xc[T×Sc]."""
    Sr, T = Xr.shape
    Sc = Xc.shape[1]
    out = np.zeros((Sr, Sc), dtype=object)
    fold_cycles: list[int] = []
    macs = 0
    for fc in range(-(-Sc // C)):
        for fr in range(-(-Sr // R)):
            r0, c0 = fr * R, fc * C
            ur, uc = min(R, Sr - r0), min(C, Sc - c0)
            a = _grid(R, C)      # (t, value | None) in each PE's row-operand register
            b = _grid(R, C)      # (t, value | None) in each PE's column-operand register
            acc = _grid(R, C)
            last_slot = -1
            cycle = 0
            while True:
                if cycle > _CYCLE_CAP:
                    raise RuntimeError("reference OS fold does not terminate")
                na, nb = _grid(R, C), _grid(R, C)
                for i in range(R):
                    for j in range(C - 1, 0, -1):
                        tok = a[i][j - 1]
                        if tok is not None and tok[1] is not None:
                            if j < uc:
                                cnt.add(f"hops_{row_name}")
                            else:
                                tok = (tok[0], None)    # padded column: gated, bubble only
                        na[i][j] = tok
                    t = cycle - i
                    if 0 <= t < T:
                        v = Xr[r0 + i, t] if i < ur else None
                        if v is not None:
                            cnt.add(f"sram_reads_{row_name}")
                        na[i][0] = (t, v)
                for j in range(C):
                    for i in range(R - 1, 0, -1):
                        tok = b[i - 1][j]
                        if tok is not None and tok[1] is not None:
                            if i < ur:
                                cnt.add(f"hops_{col_name}")
                            else:
                                tok = (tok[0], None)
                        nb[i][j] = tok
                    t = cycle - j
                    if 0 <= t < T:
                        v = Xc[t, c0 + j] if j < uc else None
                        if v is not None:
                            cnt.add(f"sram_reads_{col_name}")
                        nb[0][j] = (t, v)
                a, b = na, nb
                busy = False
                for i in range(R):
                    for j in range(C):
                        ta, tb = a[i][j], b[i][j]
                        if ta is None and tb is None:
                            continue
                        busy = True
                        if ta is None or tb is None or ta[0] != tb[0]:
                            raise RuntimeError(f"OS operands out of step at PE({i},{j}) cycle {cycle}")
                        t = ta[0]
                        if ta[1] is not None and tb[1] is not None:
                            cnt.add(f"rf_writes_{row_name}")
                            cnt.add(f"rf_writes_{col_name}")
                            cnt.add(f"rf_reads_{row_name}")
                            cnt.add(f"rf_reads_{col_name}")
                            p = ta[1] * tb[1]
                            macs += 1
                            if acc[i][j] is not None:
                                p += acc[i][j]
                                cnt.add("rf_reads_psum")
                            if t == T - 1:
                                out[r0 + i, c0 + j] = p
                                cnt.add("sram_writes_output")
                                last_slot = max(last_slot, cycle)
                                acc[i][j] = None
                            else:
                                acc[i][j] = p
                                cnt.add("rf_writes_psum")
                        elif (ta[1] is None) != (tb[1] is None) and i < ur and j < uc:
                            raise RuntimeError(f"OS half a word at valid PE({i},{j})")
                        if t == T - 1:
                            last_slot = max(last_slot, cycle)
                if not busy and cycle >= T + R - 1 and cycle >= T + C - 1:
                    break
                cycle += 1
            fold_cycles.append(last_slot + 1)
    return out, fold_cycles, macs


# --------------------------------------------------------------------------- reduction engine


@dataclass
class _Fold:
    """One fold of a reduction-down-the-columns dataflow, as index maps.

    ``weight(i, j, l)`` -> (value, address) of the stationary word of PE(i, j), slot l, or None
    (padding); ``inp(i, j, t, l)`` -> the streamed word that slot needs for token t;
    ``out_addr(j, t)`` -> the output address column j produces for token t.
    """

    T: int
    weight: Callable[[int, int, int], Optional[Word]]
    inp: Callable[[int, int, int, int], Optional[Word]]
    out_addr: Callable[[int, int], Any]


def _run_reduction(folds: list[_Fold], R: int, C: int, L: int, *, stat: str, stream: str,
                   weight_delivery: str, input_delivery: str, window: int,
                   cnt: _Counts, sram_out: dict[Any, Any]) -> tuple[list[int], int]:
    """Run the folds back to back; results land in ``sram_out`` (address -> value)."""
    fold_cycles: list[int] = []
    macs = 0
    for fold in folds:
        T = fold.T
        wrf = [[[None] * L for _ in range(C)] for _ in range(R)]
        stage = _grid(R, C)                     # weights passing through (column_shift)
        tok = _grid(R, C)                       # (t, l, carried word | None)
        win = [[deque(maxlen=window) for _ in range(C)] for _ in range(R)]
        acc = _grid(R, C)
        outreg = _grid(R, C)                    # (t, value) for the PE below
        pending: list[tuple[int, Any, Any]] = []   # (cycle, address, value) on the output path
        valid_pe: list[list[bool]] = _grid(R, C, False)
        load_cycles = R * L
        last_slot = -1
        order = [(i, l) for i in range(R - 1, -1, -1) for l in range(L)]   # deepest PE first
        cycle = 0
        while True:
            if cycle > _CYCLE_CAP:
                raise RuntimeError("reference fold does not terminate")
            # ---- stationary load
            if weight_delivery == "column_shift":
                for j in range(C):
                    for p in range(R - 2, -1, -1):
                        item = stage[p][j]
                        if item is None:
                            continue
                        stage[p][j] = None
                        dest, l, w = item
                        cnt.add(f"hops_{stat}")
                        cnt.add(f"rf_writes_{stat}")
                        if p + 1 == dest:
                            wrf[dest][j][l] = w
                        else:
                            stage[p + 1][j] = item
                    if cycle < load_cycles:
                        dest, l = order[cycle]
                        word = fold.weight(dest, j, l)
                        if word is not None:
                            cnt.add(f"sram_reads_{stat}")
                            cnt.add(f"rf_writes_{stat}")
                            if dest == 0:
                                wrf[0][j][l] = word[0]
                            else:
                                stage[0][j] = (dest, l, word[0])
            elif weight_delivery == "row_multicast":
                if cycle < load_cycles:
                    i, l = divmod(cycle, L)
                    words = [fold.weight(i, j, l) for j in range(C)]
                    real = [w for w in words if w is not None]
                    if real:
                        if len({w[1] for w in real}) != 1:
                            raise RuntimeError("row multicast of different weights")
                        cnt.add(f"sram_reads_{stat}")
                        for j, w in enumerate(words):
                            if w is not None:
                                wrf[i][j][l] = w[0]
                                cnt.add(f"rf_writes_{stat}")
            else:
                raise ValueError(weight_delivery)
            if cycle == load_cycles:
                if any(stage[p][j] is not None for p in range(R) for j in range(C)):
                    raise RuntimeError("stationary words still in flight when the stream starts")
                for i in range(R):
                    for j in range(C):
                        valid_pe[i][j] = any(w is not None for w in wrf[i][j])
            # ---- control tokens move right; the left edge injects (t, l)
            new = _grid(R, C)
            for i in range(R):
                for j in range(C - 1, 0, -1):
                    tk = tok[i][j - 1]
                    if tk is not None and tk[2] is not None:
                        if valid_pe[i][j] and wrf[i][j][tk[1]] is not None:
                            cnt.add(f"hops_{stream}")
                        else:
                            tk = (tk[0], tk[1], None)
                    new[i][j] = tk
                s = cycle - load_cycles - i
                if 0 <= s < T * L:
                    t, l = divmod(s, L)
                    carried = None
                    if input_delivery == "row_systolic" and wrf[i][0][l] is not None:
                        need = fold.inp(i, 0, t, l)
                        if need is None:
                            raise RuntimeError("valid slot without an input word")
                        if not any(a == need[1] for _, a in win[i][0]):
                            cnt.add(f"sram_reads_{stream}")
                            carried = need
                    new[i][0] = (t, l, carried)
            tok = new
            # ---- PEs
            old_out = [row[:] for row in outreg]
            delivered: set[Any] = set()
            busy = False
            for i in range(R):
                for j in range(C):
                    tk = tok[i][j]
                    if tk is None:
                        continue
                    busy = True
                    t, l, carried = tk
                    w = wrf[i][j][l]
                    if w is None:
                        if carried is not None:
                            raise RuntimeError("input word delivered to a padded slot")
                    else:
                        need = fold.inp(i, j, t, l)
                        if need is None:
                            raise RuntimeError(f"no input word for PE({i},{j}) t={t} l={l}")
                        held = [v for v, a in win[i][j] if a == need[1]]
                        if held:
                            if carried is not None:
                                raise RuntimeError("word delivered although the PE holds it")
                            x = held[0]
                        else:
                            if input_delivery == "row_systolic":
                                if carried is None or carried[1] != need[1]:
                                    raise RuntimeError(f"input word missing at PE({i},{j}) t={t} l={l}")
                            else:
                                delivered.add(need[1])
                            win[i][j].append(need)
                            cnt.add(f"rf_writes_{stream}")
                            x = need[0]
                        cnt.add(f"rf_reads_{stream}")
                        cnt.add(f"rf_reads_{stat}")
                        prod = x * w
                        macs += 1
                        if l < L - 1:
                            if acc[i][j] is None:
                                acc[i][j] = prod
                            else:
                                acc[i][j] = acc[i][j] + prod
                                cnt.add("rf_reads_psum")
                            cnt.add("rf_writes_psum")
                        else:
                            total = prod
                            if acc[i][j] is not None:
                                total += acc[i][j]
                                acc[i][j] = None
                                cnt.add("rf_reads_psum")
                            addr = fold.out_addr(j, t)
                            if i > 0 and valid_pe[i - 1][j]:
                                above = old_out[i - 1][j]
                                if above is None or above[0] != t:
                                    raise RuntimeError(f"partial sum late at PE({i},{j}) t={t} cycle {cycle}")
                                total += above[1]
                                cnt.add("rf_reads_psum")
                                cnt.add("hops_psum")
                            elif i == 0 and addr in sram_out:
                                total += sram_out[addr]
                                cnt.add("sram_reads_psum")
                            if i + 1 < R and valid_pe[i + 1][j]:
                                outreg[i][j] = (t, total)
                                cnt.add("rf_writes_psum")
                            else:
                                pending.append((cycle + (R - 1 - i), addr, total))
                    if i == R - 1 and l == L - 1:
                        last_slot = max(last_slot, cycle)
            if delivered:
                cnt.add(f"sram_reads_{stream}", len(delivered))
            still = []
            for when, addr, value in pending:
                if when == cycle:
                    sram_out[addr] = value
                    cnt.add("sram_writes_output")
                    last_slot = max(last_slot, cycle)
                elif when < cycle:
                    raise RuntimeError("missed an output slot")
                else:
                    still.append((when, addr, value))
            pending = still
            if not busy and not pending and cycle >= load_cycles + T * L + R - 1:
                break
            cycle += 1
        fold_cycles.append(last_slot + 1)
    return fold_cycles, macs


# --------------------------------------------------------------------------- GEMM drivers


def _check_matrices(A: np.ndarray, B: np.ndarray, rows: int, cols: int) -> tuple[np.ndarray, np.ndarray]:
    A = np.asarray(A)
    B = np.asarray(B)
    if A.ndim != 2 or B.ndim != 2 or A.shape[1] != B.shape[0]:
        raise ShapeError(f"need A[m×k] and B[k×n], got {A.shape} and {B.shape}")
    if min(A.shape + B.shape) < 1:
        raise ShapeError("empty matrices")
    if int(rows) < 1 or int(cols) < 1:
        raise ShapeError(f"array must be at least 1×1, got {rows}×{cols}")
    return A.astype(object), B.astype(object)


def _stationary_slot(i: int, l: int, k0: int, ku: int, L: int) -> Optional[int]:
    """k index held in slot l of PE row i (right-aligned in a partly filled last PE)."""
    ur = -(-ku // L)
    if i < ur - 1:
        return k0 + i * L + l
    if i == ur - 1:
        last = ku - (ur - 1) * L
        if l >= L - last:
            return k0 + i * L + (l - (L - last))
    return None


def simulate_gemm(dataflow: str | Dataflow, A: np.ndarray, B: np.ndarray, rows: int, cols: int,
                  **options: Any) -> ReferenceResult:
    """Simulate C = A·B PE by PE under ``dataflow`` (name or model; ``options`` e.g. row_length)."""
    df = get_dataflow(dataflow, **options)
    A, B = _check_matrices(A, B, rows, cols)
    R, C = int(rows), int(cols)
    m, k = A.shape
    n = B.shape[1]
    spec = df.spec
    cnt = _Counts()
    if not spec.reduction_on_rows:
        if spec.spatial_rows == "m":
            out, fc, macs = _run_output_stationary(A, B, R, C, "input", "weight", cnt)
        else:
            out_t, fc, macs = _run_output_stationary(B.T, A.T, R, C, "weight", "input", cnt)
            out = out_t.T
        return ReferenceResult(np.array(out.tolist(), dtype=np.int64) if _all_int(out) else out,
                               sum(fc), fc, macs, cnt.result())
    L = spec.row_length
    if spec.stationary_operand == "input":     # IS: stationary A^T (k × m), stream B^T
        Z, X, stat, stream = A.T, B.T, "input", "weight"
    else:                                      # WS / RS: stationary B (k × n), stream A
        Z, X, stat, stream = B, A, "weight", "input"
    Sc = Z.shape[1]
    T = X.shape[0]
    folds: list[_Fold] = []
    cap = R * L
    for fc_ in range(-(-Sc // C)):
        for fr in range(-(-k // cap)):
            k0, c0 = fr * cap, fc_ * C
            ku, uc = min(cap, k - k0), min(C, Sc - c0)

            def weight(i, j, l, k0=k0, ku=ku, uc=uc, c0=c0):
                kk = _stationary_slot(i, l, k0, ku, L)
                if kk is None or j >= uc:
                    return None
                return (Z[kk, c0 + j], ("Z", kk, c0 + j))

            def inp(i, j, t, l, k0=k0, ku=ku, uc=uc):
                kk = _stationary_slot(i, l, k0, ku, L)
                if kk is None or j >= uc:
                    return None
                return (X[t, kk], ("X", t, kk))

            def out_addr(j, t, c0=c0, uc=uc):
                return (t, c0 + j) if j < uc else None

            folds.append(_Fold(T, weight, inp, out_addr))
    sram: dict[Any, Any] = {}
    fc, macs = _run_reduction(folds, R, C, L, stat=stat, stream=stream, weight_delivery="column_shift",
                              input_delivery="row_systolic", window=1, cnt=cnt, sram_out=sram)
    out = np.zeros((T, Sc), dtype=object)
    for (t, c), v in sram.items():
        out[t, c] = v
    if stat == "input":
        out = out.T                            # IS produced C^T (n × m)
    return ReferenceResult(np.array(out.tolist(), dtype=np.int64) if _all_int(out) else out,
                           sum(fc), fc, macs, cnt.result())


def _all_int(a: np.ndarray) -> bool:
    return all(isinstance(v, (int, np.integer)) and abs(int(v)) < 2**62 for v in a.flat)


# --------------------------------------------------------------------------- convolutions


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
