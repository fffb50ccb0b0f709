"""Plots (matplotlib, Agg backend, PNG): rooflines, breakdowns, Pareto fronts, heat
maps, predicted-vs-measured.  Every figure has a title and axis labels with units.

Plot functions take plain data (results, DataFrames) and a path; they never simulate.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

_KIND_COLORS = {"gemm": "#1f77b4", "attention": "#d62728", "vector": "#2ca02c", "copy": "#9467bd",
                "collective": "#8c564b", "conv2d": "#17becf"}


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def roofline(results: Sequence, chip, path: str | Path, title: str | None = None,
             rate_classes: Iterable[str] | None = None) -> Path:
    """Roofline of ``chip`` with each op of ``results`` placed by its arithmetic intensity
    (FLOP per DRAM byte) and achieved FLOP/s; marker area ∝ the op's share of time."""
    plt = _plt()
    path = Path(path)
    bw = chip.memory.dram.peak_bytes_per_s
    classes = list(rate_classes) if rate_classes else sorted(
        {c for a in chip.cores.arrays for c in a.macs_per_pe_per_cycle}, key=lambda c: -chip.peak_flops(c))
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    pts = [r for r in results if getattr(r, "flops", 0) and r.dram_bytes > 0 and r.seconds > 0]
    ai_vals = [r.flops / r.dram_bytes for r in pts] or [1.0]
    lo = min(min(ai_vals) / 4, 0.1)
    peaks = [chip.peak_flops(c) for c in classes]
    hi = max(max(ai_vals) * 4, max(peaks) / bw * 8)
    x = np.logspace(math.log10(lo), math.log10(hi), 200)
    ax.plot(x, x * bw, color="0.3", lw=1.2, ls="--")
    for c, peak in zip(classes, peaks):
        ax.plot(x, np.minimum(peak, x * bw), lw=1.8, label=f"{c} peak {peak / 1e12:,.1f} TFLOP/s")
        ax.annotate(f"ridge {peak / bw:,.0f} FLOP/B", (peak / bw, peak), textcoords="offset points",
                    xytext=(4, -12), fontsize=7, color="0.3")
    total_t = sum(r.seconds * getattr(r, "repeat", 1) for r in pts) or 1.0
    seen = set()
    for r in pts:
        kind = r.kind
        share = r.seconds * getattr(r, "repeat", 1) / total_t
        label = kind if kind not in seen else None
        seen.add(kind)
        ax.scatter(r.flops / r.dram_bytes, r.flops / r.seconds, s=20 + 600 * share, alpha=0.7,
                   color=_KIND_COLORS.get(kind, "0.5"), edgecolor="k", lw=0.4, label=label, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("achieved throughput (FLOP/s)")
    ax.set_title(title or f"Roofline: {chip.name} (DRAM {bw / 1e9:,.0f} GB/s)")
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
