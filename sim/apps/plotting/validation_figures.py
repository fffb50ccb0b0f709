"""The validation scatter: predicted against measured time per case."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.apps.plotting.style import _plt, _save

_VALIDATION_COLORS = {"gemm": "#1f77b4", "attention": "#d62728", "layer": "#2ca02c", "copy": "#9467bd",
                      "model": "#ff7f0e", "bmm": "#17becf", "softmax": "#8c564b", "norm": "#e377c2",
                      "elementwise": "#7f7f7f"}
_DTYPE_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def validation_scatter(df, path: str | Path, title: str) -> Path:
    """Predicted against measured time of `sim validate`'s cases: colour by kind, marker by
    number format, the ±10 % / ±25 % bands under the points, and the overall median / p90
    |error| and signed mean in the corner."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.2, 6.6), dpi=120)
    ok = df.dropna(subset=["predicted_ms", "measured_ms"])
    if not ok.empty:
        lo = min(ok["measured_ms"].min(), ok["predicted_ms"].min()) / 1.5
        hi = max(ok["measured_ms"].max(), ok["predicted_ms"].max()) * 1.5
        x = np.array([lo, hi])
        ax.fill_between(x, x / 1.25, x * 1.25, color="0.9", zorder=0, label="±25 %")
        ax.fill_between(x, x / 1.1, x * 1.1, color="0.78", zorder=0, label="±10 %")
        ax.plot(x, x, color="k", lw=1, zorder=1)
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
        dtypes = sorted(ok["dtype"].astype(str).unique()) if "dtype" in ok.columns else ["?"]
        marker = {d: _DTYPE_MARKERS[i % len(_DTYPE_MARKERS)] for i, d in enumerate(dtypes)}
        for kind, g in ok.groupby("kind"):
            e = g["error_pct"].abs()
            color = _VALIDATION_COLORS.get(kind, "0.4")
            for d, gd in (g.groupby(g["dtype"].astype(str)) if "dtype" in g.columns else [("?", g)]):
                ax.scatter(gd["measured_ms"], gd["predicted_ms"], s=18, alpha=0.8, color=color, marker=marker[d],
                           edgecolor="k", lw=0.3, zorder=3)
            ax.scatter([], [], s=18, color=color, label=f"{kind} (n={len(g)}, median |err| {e.median():.1f} %)")
        for d in dtypes:
            ax.scatter([], [], s=18, color="white", edgecolor="k", lw=0.6, marker=marker[d], label=d)
        err = ok["error_pct"]
        ax.text(0.98, 0.03, f"all {len(ok)} cases: median |err| {err.abs().median():.1f} %, "
                f"p90 {err.abs().quantile(0.9):.1f} %\nsigned mean {err.mean():+.1f} %",
                transform=ax.transAxes, ha="right", va="bottom", fontsize=8,
                bbox={"boxstyle": "round,pad=0.3", "fc": "white", "ec": "0.6"})
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    if ax.get_legend_handles_labels()[0]:   # (no case predicted: nothing to name)
        ax.legend(fontsize=7, loc="upper left", ncol=1)
    fig.tight_layout()
    return _save(fig, path)
