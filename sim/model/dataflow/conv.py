"""Convolutions on the array.

* WS / OS / IS lower a convolution by im2col to the GEMM ``M = out_h·out_w·batch``,
  ``K = kernel_h·kernel_w·in_channels``, ``N = out_channels`` and use the GEMM fold model
  unchanged - what SCALE-Sim does.  SCALE-Sim's convolution topology has no padding and
  rounds the output size up: ``out = ceil((H - R + stride) / stride)``;
  :func:`scalesim_conv_gemm` returns the GEMM it builds.  Inputs are counted as im2col
  entries (an ifmap pixel used by several windows is read once per window), as SCALE-Sim
  counts them.

* RS uses Eyeriss's 1-D row primitive (Chen/Emer/Sze, ISCA'16): a PE keeps one filter row
  (``kernel_w`` = S weights) in its register file, the matching ifmap row slides past
  through an S-word window register file (each new output pixel brings ``min(stride, S)``
  new pixels; the first of a row brings S), and for each output pixel the PE accumulates S
  products locally before the partial sum is reduced down the column.  Two orientations:

  ``columns="output_rows"`` (default, Eyeriss's logical PE set): array rows hold filter rows
  (channel-major: the FH rows of channel 0, then of channel 1, ... - the logical set replicated
  down the array for consecutive channels, their partial sums accumulating vertically;
  channels that do not fit are further row folds), array columns hold output rows, and the
  output columns × batch stream in time.  Filters are processed in time, one filter per
  pass.  A filter row is read once per fold and multicast along its array row (filter rows
  reused horizontally); an ifmap row is multicast to the PEs that need it in the same cycle -
  with stride 1 those lie on an anti-diagonal (ifmap rows reused diagonally).

  ``columns="filters"``: array rows hold filter rows as above, array columns hold filters,
  and (batch, output row, output column) stream in time; ifmap values enter at the left edge
  and move right (reused horizontally across filters).  Its fold structure is the RS GEMM
  mapping of the im2col GEMM with ``row_length = kernel_w``; for a 1×1 convolution it *is*
  the RS GEMM mapping, access for access.

  Per fold both take ``R·S + S·T + (R - 1) + (C - 1)`` cycles, the RS GEMM skeleton.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

import numpy as np

from sim.errors import MappingError, ShapeError
from sim.model.dataflow.report import FoldReport, as_dims, finish_report, safe_ratio

if TYPE_CHECKING:  # annotations only: the Dataflow class calls into this module
    from sim.model.dataflow.base import Dataflow

Columns = Literal["output_rows", "filters"]


class ConvGemm(NamedTuple):
    """GEMM dimensions of an im2col-lowered convolution, with the output size used."""

    m: int
    k: int
    n: int
    out_h: int
    out_w: int


def scalesim_conv_gemm(ifmap_h: int, ifmap_w: int, filt_h: int, filt_w: int,
                       channels: int, num_filters: int, stride: int) -> ConvGemm:
    """The GEMM SCALE-Sim builds for a convolution topology row (no padding, output rounded up).

    ``out = ceil((ifmap - filt + stride) / stride)`` per axis (``topology_utils.py``);
    M = out_h·out_w, K = filt_h·filt_w·channels, N = num_filters.  Note the rounding up: when
    ``(ifmap - filt)`` is not a multiple of the stride SCALE-Sim adds one output row/column
    whose window runs past the input.
    """
    (ih, iw, fh, fw, ch, nf, st), _ = as_dims(ifmap_h=ifmap_h, ifmap_w=ifmap_w, filt_h=filt_h, filt_w=filt_w,
                                              channels=channels, num_filters=num_filters, stride=stride)
    ih, iw, fh, fw, ch, nf, st = (int(x) for x in (ih, iw, fh, fw, ch, nf, st))
    if fh > ih or fw > iw:
        raise ShapeError(f"a {fh}x{fw} filter does not fit a {ih}x{iw} ifmap")
    out_h = -(-(ih - fh + st) // st)
    out_w = -(-(iw - fw + st) // st)
    return ConvGemm(m=out_h * out_w, k=fh * fw * ch, n=nf, out_h=out_h, out_w=out_w)


def conv_report(dataflow: Dataflow, conv: Any, rows: int, cols: int, *,
                columns: Columns = "output_rows") -> FoldReport:
    """Schedule and accesses of a Conv2d on a rows×cols array under ``dataflow``."""
    if dataflow.spec.is_row_stationary:
        return rs_conv_report(dataflow, conv, rows, cols, columns=columns)
    g = conv.as_gemm()
    return dataflow.fold_report(g.m, g.k, g.n, rows, cols)


def _conv_dims(conv: Any) -> dict[str, int]:
    d = dict(Nb=conv.batch, C=conv.in_channels, Nf=conv.out_channels, FH=conv.kernel_h,
             S=conv.kernel_w, U=conv.stride, E=conv.out_h, F=conv.out_w,
             H=conv.in_h + 2 * conv.padding, W=conv.in_w + 2 * conv.padding)
    for key in ("E", "F"):
        if d[key] < 1:
            raise ShapeError(f"Conv2d '{conv.name}': output size must be >= 1")
    if (d["E"] - 1) * d["U"] + d["FH"] > d["H"] or (d["F"] - 1) * d["U"] + d["S"] > d["W"]:
        raise ShapeError(
            f"Conv2d '{conv.name}': an {d['E']}x{d['F']} output with stride {d['U']} needs windows "
            f"beyond the {d['H']}x{d['W']} (padded) input; row-stationary needs "
            "(out-1)*stride + kernel <= in + 2*padding")
    return d


def rs_conv_report(dataflow: Dataflow, conv: Any, rows: int, cols: int, *,
                   columns: Columns = "output_rows") -> FoldReport:
    """Row-stationary convolution (Eyeriss 1-D row primitive); see the module docstring."""
    spec = dataflow.spec
    if not spec.is_row_stationary:
        raise MappingError(f"dataflow '{spec.name}' is not row-stationary; use conv_report")
    (R, C), scalar = as_dims(rows=rows, cols=cols)
    if not scalar:
        raise ShapeError("convolution reports take one array size (int rows and cols), not arrays")
    R, C = int(R), int(C)
    d = _conv_dims(conv)
    Nb, Cin, Nf, FH, S, U, E, F = (d[x] for x in ("Nb", "C", "Nf", "FH", "S", "U", "E", "F"))
    rf = spec.register_file_words
    if S > rf.weight:
        raise MappingError(
            f"Conv2d '{conv.name}': a PE holds one filter row of {S} weights but "
            f"register_file_words.weight is {rf.weight}")
    if S > rf.input:
        raise MappingError(
            f"Conv2d '{conv.name}': the sliding ifmap window of a {S}-wide filter needs {S} input "
            f"words per PE but register_file_words.input is {rf.input}")
    P = Cin * FH                      # filter rows (channel, r) reduced down the columns
    Qr = -(-P // R)                   # row folds
    new_per_run = S + (F - 1) * min(U, S)   # ifmap words a PE receives per output row
    macs = Nb * Nf * Cin * FH * S * E * F
    if columns == "output_rows":
        Sc, T, passes = E, Nb * F, Nf
        Pc = -(-E // C)
        folds = passes * Pc * Qr
        runs = Nb                     # sliding-window restarts per PE per fold
        sram_w = Nf * Pc * P * S
        rf_w_w = Nf * P * S * E
        hops_w = 0
        rf_w_in = Nf * P * E * runs * new_per_run
        if U == 1:
            # PEs on an anti-diagonal of one channel share an ifmap row in the same cycle
            q = np.arange(Qr, dtype=np.int64)
            first = q * R
            last = np.minimum((q + 1) * R, P) - 1
            nseg = int(np.sum(last // FH - first // FH + 1))
            streams = nseg * E + Pc * (P - nseg)
        else:
            streams = E * P
        sram_in = Nf * runs * new_per_run * streams
        hops_in = 0
        outputs = Nf * Qr * E * T
        hops_ps = Nf * E * T * (P - Qr)
        col_folds = Pc
        map_eff = (P * E) / (Qr * Pc * R * C)
    elif columns == "filters":
        Sc, T, passes = Nf, Nb * E * F, 1
        Pn = -(-Nf // C)
        folds = Pn * Qr
        runs = Nb * E
        sram_w = Nf * P * S
        full, rem = divmod(P, R)
        tri = full * R * (R + 1) // 2 + rem * (rem + 1) // 2
        tri_h = full * R * (R - 1) // 2 + rem * (rem - 1) // 2
        rf_w_w = Nf * S * tri
        hops_w = Nf * S * tri_h
        rf_w_in = Nf * P * runs * new_per_run
        sram_in = Pn * P * runs * new_per_run
        hops_in = (Nf - Pn) * P * runs * new_per_run
        outputs = Qr * Nf * T
        hops_ps = Nf * T * (P - Qr)
        col_folds = Pn
        map_eff = (P * Nf) / (Qr * Pn * R * C)
    else:
        raise MappingError(f"columns must be 'output_rows' or 'filters', got {columns!r}")
    per = R * S + S * T + R + C - 2
    cycles = folds * per
    values = dict(
        dataflow=spec.name, rows=R, cols=C, m=Nb * E * F, k=Cin * FH * S, n=Nf, row_length=S,
        Sr=P, Sc=Sc, T=T, row_folds=Qr, col_folds=col_folds, passes=passes, folds=folds,
        cycles_per_fold=per, compute_cycles=cycles, scalesim_cycles=cycles - 1, macs=macs,
        mapping_efficiency=float(map_eff),
        utilization=float(safe_ratio(macs, cycles * R * C)),
        scalesim_overall_utilization=float(safe_ratio(macs, (cycles - 1) * R * C)),
        scalesim_compute_utilization=float(safe_ratio(macs, cycles * R * C)),
        sram_reads_input=sram_in, sram_reads_weight=sram_w, sram_writes_output=outputs,
        sram_reads_psum=outputs - Nf * E * F * Nb,
        rf_reads_input=macs, rf_writes_input=rf_w_in, rf_reads_weight=macs, rf_writes_weight=rf_w_w,
        rf_reads_psum=macs - outputs, rf_writes_psum=macs - outputs,
        hops_input=hops_in, hops_weight=hops_w, hops_psum=hops_ps,
        scalesim_sram_reads_input=sram_in, scalesim_sram_reads_weight=sram_w,
        scalesim_sram_writes_output=outputs,
    )
    return finish_report(values, scalar=True)
