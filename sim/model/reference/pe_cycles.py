"""The PE-level reference's cycle loops (see :mod:`sim.model.reference.pe_array`): every PE
register, every cycle, real numbers, for the two ways operands meet in the array -
output-stationary (``_run_output_stationary``) and reduction down the columns
(``_run_reduction``: WS, IS, RS and the RS convolution, one :class:`_Fold` of index maps
at a time, its registers and per-cycle steps in :class:`_ReductionFold`) - and the access
counts they keep (``_Counts``).  Plain Python, deliberately.
"""
from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy as np

from sim.model.dataflow.report import ACCESS_FIELDS

Word = tuple[Any, Any]  # (value, address)


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


def _run_output_stationary(Xr: np.ndarray, Xc: np.ndarray, R_array: int, C_array: int,
                           row_name: str, col_name: str, cnt: _Counts,
                           trim: bool = False) -> tuple[np.ndarray, list[int], int]:
    """OS on an R×C array: out[Sr×Sc] = Xr[Sr×T] · Xc[T×Sc].  ``trim``: an edge fold runs
    on the rows and columns it uses only (no padding bubbles)."""
    Sr, T = Xr.shape
    Sc = Xc.shape[1]
    out = np.zeros((Sr, Sc), dtype=object)
    fold_cycles: list[int] = []
    macs = 0
    for fc in range(-(-Sc // C_array)):
        for fr in range(-(-Sr // R_array)):
            r0, c0 = fr * R_array, fc * C_array
            ur, uc = min(R_array, Sr - r0), min(C_array, Sc - c0)
            R, C = (ur, uc) if trim else (R_array, C_array)
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


class _ReductionFold:
    """The registers of an R×C array during one fold of a reduction dataflow, and the
    steps one cycle takes on them, in the order the cycle loop calls them: the stationary
    load (:meth:`load_column_shift` or :meth:`load_row_multicast`), :meth:`start_stream`
    once the load is done, :meth:`move_tokens`, :meth:`run_pes`, :meth:`retire_outputs`.

    A class rather than one long loop so that each hardware mechanism reads on its own;
    the state is what a PE or the array edge holds between cycles.
    """

    def __init__(self, fold: _Fold, R: int, C: int, L: int, *, stat: str, stream: str, input_delivery: str,
                 window: int, cnt: _Counts, sram_out: dict[Any, Any], trim: bool = False) -> None:
        self.fold, self.R, self.C, self.L = fold, R, C, L
        # trim: the stationary load fills only the rows that hold a word, and control tokens
        # run only in those rows and in the columns that hold one (no padding bubbles); the
        # results still take the output path to the bottom edge
        self.rows_used, self.cols_used = R, C
        if trim:
            used = [(i, j) for i in range(R) for j in range(C) for l in range(L) if fold.weight(i, j, l) is not None]
            self.rows_used = max(i for i, _ in used) + 1
            self.cols_used = max(j for _, j in used) + 1
        self.stat, self.stream, self.input_delivery = stat, stream, input_delivery
        self.cnt, self.sram_out = cnt, sram_out
        self.wrf = [[[None] * L for _ in range(C)] for _ in range(R)]
        self.stage = _grid(R, C)                     # weights passing through (column_shift)
        self.tok = _grid(R, C)                       # (t, l, carried word | None)
        self.win = [[deque(maxlen=window) for _ in range(C)] for _ in range(R)]
        self.acc = _grid(R, C)
        self.outreg = _grid(R, C)                    # (t, value) for the PE below
        self.pending: list[tuple[int, Any, Any]] = []   # (cycle, address, value) on the output path
        self.valid_pe: list[list[bool]] = _grid(R, C, False)
        self.load_cycles = self.rows_used * L
        self.last_slot = -1
        self.order = [(i, l) for i in range(self.rows_used - 1, -1, -1) for l in range(L)]   # deepest PE first

    # ---- stationary load

    def load_column_shift(self, cycle: int) -> None:
        """Stationary words enter each column at the top and shift down one PE a cycle,
        deepest destination first, until they reach their PE."""
        R, stage, wrf, cnt, stat = self.R, self.stage, self.wrf, self.cnt, self.stat
        for j in range(self.C):
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
            if cycle < self.load_cycles:
                dest, l = self.order[cycle]
                word = self.fold.weight(dest, j, l)
                if word is not None:
                    cnt.add(f"sram_reads_{stat}")
                    cnt.add(f"rf_writes_{stat}")
                    if dest == 0:
                        wrf[0][j][l] = word[0]
                    else:
                        stage[0][j] = (dest, l, word[0])

    def load_row_multicast(self, cycle: int) -> None:
        """One SRAM read a cycle fills one slot of a whole PE row (every column gets the
        same word, so the words must share one address)."""
        if cycle < self.load_cycles:
            i, l = divmod(cycle, self.L)
            words = [self.fold.weight(i, j, l) for j in range(self.C)]
            real = [w for w in words if w is not None]
            if real:
                if len({w[1] for w in real}) != 1:
                    raise RuntimeError("row multicast of different weights")
                self.cnt.add(f"sram_reads_{self.stat}")
                for j, w in enumerate(words):
                    if w is not None:
                        self.wrf[i][j][l] = w[0]
                        self.cnt.add(f"rf_writes_{self.stat}")

    def start_stream(self) -> None:
        """The load is over: nothing may still be in flight, and a PE is valid when it
        holds at least one stationary word (padding PEs pass tokens on without work)."""
        R, C = self.R, self.C
        if any(self.stage[p][j] is not None for p in range(R) for j in range(C)):
            raise RuntimeError("stationary words still in flight when the stream starts")
        for i in range(R):
            for j in range(C):
                self.valid_pe[i][j] = any(w is not None for w in self.wrf[i][j])

    # ---- streaming

    def move_tokens(self, cycle: int) -> None:
        """Control tokens move right; the left edge injects (t, l) and, for a row-systolic
        input, the word PE(i, 0) needs unless its window holds it already."""
        R, C, L, T = self.R, self.C, self.L, self.fold.T
        tok, wrf, valid_pe, cnt, stream = self.tok, self.wrf, self.valid_pe, self.cnt, self.stream
        new = _grid(R, C)
        for i in range(self.rows_used):
            for j in range(self.cols_used - 1, 0, -1):
                tk = tok[i][j - 1]
                if tk is not None and tk[2] is not None:
                    if valid_pe[i][j] and wrf[i][j][tk[1]] is not None:
                        cnt.add(f"hops_{stream}")
                    else:
                        tk = (tk[0], tk[1], None)
                new[i][j] = tk
            s = cycle - self.load_cycles - i
            if 0 <= s < T * L:
                t, l = divmod(s, L)
                carried = None
                if self.input_delivery == "row_systolic" and wrf[i][0][l] is not None:
                    need = self.fold.inp(i, 0, t, l)
                    if need is None:
                        raise RuntimeError("valid slot without an input word")
                    if not any(a == need[1] for _, a in self.win[i][0]):
                        cnt.add(f"sram_reads_{stream}")
                        carried = need
                new[i][0] = (t, l, carried)
        self.tok = new

    def run_pes(self, cycle: int) -> tuple[bool, int]:
        """Every PE with a token does its MAC; returns whether any PE had a token and the
        MACs done.  A multicast input is one SRAM read per distinct word this cycle."""
        old_out = [row[:] for row in self.outreg]
        delivered: set[Any] = set()
        busy = False
        macs = 0
        for i in range(self.R):
            for j in range(self.C):
                tk = self.tok[i][j]
                if tk is None:
                    continue
                busy = True
                t, l, carried = tk
                w = self.wrf[i][j][l]
                if w is None:
                    if carried is not None:
                        raise RuntimeError("input word delivered to a padded slot")
                else:
                    x = self._input_word(i, j, t, l, carried, delivered)
                    self.cnt.add(f"rf_reads_{self.stream}")
                    self.cnt.add(f"rf_reads_{self.stat}")
                    macs += 1
                    self._accumulate(i, j, t, l, x * w, old_out, cycle)
                if i == self.R - 1 and l == self.L - 1:
                    self.last_slot = max(self.last_slot, cycle)
        if delivered:
            self.cnt.add(f"sram_reads_{self.stream}", len(delivered))
        return busy, macs

    def _input_word(self, i: int, j: int, t: int, l: int, carried: Optional[Word], delivered: set[Any]) -> Any:
        """The streamed value PE(i, j) multiplies for token t, slot l: from its window if
        it holds the word, else the one the token carried (row systolic) or the multicast
        (``delivered`` collects the multicast addresses)."""
        need = self.fold.inp(i, j, t, l)
        if need is None:
            raise RuntimeError(f"no input word for PE({i},{j}) t={t} l={l}")
        held = [v for v, a in self.win[i][j] if a == need[1]]
        if held:
            if carried is not None:
                raise RuntimeError("word delivered although the PE holds it")
            return held[0]
        if self.input_delivery == "row_systolic":
            if carried is None or carried[1] != need[1]:
                raise RuntimeError(f"input word missing at PE({i},{j}) t={t} l={l}")
        else:
            delivered.add(need[1])
        self.win[i][j].append(need)
        self.cnt.add(f"rf_writes_{self.stream}")
        return need[0]

    def _accumulate(self, i: int, j: int, t: int, l: int, prod: Any, old_out: list[list[Any]], cycle: int) -> None:
        """Add a product to PE(i, j)'s partial sum; on the row's last slot, add the partial
        sum from the PE above (or the SRAM, at the top) and pass the total down or out."""
        cnt, acc, R = self.cnt, self.acc, self.R
        if l < self.L - 1:
            if acc[i][j] is None:
                acc[i][j] = prod
            else:
                acc[i][j] = acc[i][j] + prod
                cnt.add("rf_reads_psum")
            cnt.add("rf_writes_psum")
            return
        total = prod
        if acc[i][j] is not None:
            total += acc[i][j]
            acc[i][j] = None
            cnt.add("rf_reads_psum")
        addr = self.fold.out_addr(j, t)
        if i > 0 and self.valid_pe[i - 1][j]:
            above = old_out[i - 1][j]
            if above is None or above[0] != t:
                raise RuntimeError(f"partial sum late at PE({i},{j}) t={t} cycle {cycle}")
            total += above[1]
            cnt.add("rf_reads_psum")
            cnt.add("hops_psum")
        elif i == 0 and addr in self.sram_out:
            total += self.sram_out[addr]
            cnt.add("sram_reads_psum")
        if i + 1 < R and self.valid_pe[i + 1][j]:
            self.outreg[i][j] = (t, total)
            cnt.add("rf_writes_psum")
        else:
            self.pending.append((cycle + (R - 1 - i), addr, total))

    def retire_outputs(self, cycle: int) -> None:
        """Results whose trip down the output path ends this cycle are written to SRAM."""
        still = []
        for when, addr, value in self.pending:
            if when == cycle:
                self.sram_out[addr] = value
                self.cnt.add("sram_writes_output")
                self.last_slot = max(self.last_slot, cycle)
            elif when < cycle:
                raise RuntimeError("missed an output slot")
            else:
                still.append((when, addr, value))
        self.pending = still


def _run_reduction(folds: list[_Fold], R: int, C: int, L: int, *, stat: str, stream: str,
                   weight_delivery: str, input_delivery: str, window: int,
                   cnt: _Counts, sram_out: dict[Any, Any], trim: bool = False) -> tuple[list[int], int]:
    """Run the folds back to back; results land in ``sram_out`` (address -> value).
    ``trim``: edge folds use only their rows and columns (see :class:`_ReductionFold`)."""
    fold_cycles: list[int] = []
    macs = 0
    for fold in folds:
        f = _ReductionFold(fold, R, C, L, stat=stat, stream=stream, input_delivery=input_delivery,
                           window=window, cnt=cnt, sram_out=sram_out, trim=trim)
        cycle = 0
        while True:
            if cycle > _CYCLE_CAP:
                raise RuntimeError("reference fold does not terminate")
            if weight_delivery == "column_shift":
                f.load_column_shift(cycle)
            elif weight_delivery == "row_multicast":
                f.load_row_multicast(cycle)
            else:
                raise ValueError(weight_delivery)
            if cycle == f.load_cycles:
                f.start_stream()
            f.move_tokens(cycle)
            busy, n = f.run_pes(cycle)
            macs += n
            f.retire_outputs(cycle)
            if not busy and not f.pending and cycle >= f.load_cycles + fold.T * L + f.rows_used - 1:
                break
            cycle += 1
        fold_cycles.append(f.last_slot + 1)
    return fold_cycles, macs


# --------------------------------------------------------------------------- GEMM drivers
