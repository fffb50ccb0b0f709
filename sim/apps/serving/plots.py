"""Plots of serving results (matplotlib, PNG): latency CDFs, a batch / KV / queue timeline,
and throughput against latency over arrival rates.  Each reads a :class:`ServingResult`;
none simulates."""
from __future__ import annotations

from pathlib import Path

import numpy as np


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def latency_cdf(result, path, metrics=("ttft", "tpot", "e2e")) -> Path:
    """Empirical CDFs of per-request latencies (milliseconds, log x)."""
    plt = _plt()
    fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.2))
    axes = np.atleast_1d(axes)
    fin = result.requests[result.requests["status"] == "finished"]
    for ax, m in zip(axes, metrics):
        x = np.sort(fin[f"{m}_s"].dropna().to_numpy()) * 1e3
        if len(x):
            ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post")
            ax.set_xscale("log")
        ax.set_xlabel(f"{m.upper()} (ms)")
        ax.set_ylabel("fraction of requests")
        ax.grid(alpha=0.3)
    s = result.summary
    fig.suptitle(f"{s['model']} on {s['replicas']} x {s['chip']}, {s['scheduler']}")
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p


def timeline(result, path) -> Path:
    """Batch size per iteration, KV-cache occupancy and waiting requests over simulated time."""
    plt = _plt()
    its, tl = result.iterations, result.timeline
    fig, axes = plt.subplots(3, 1, figsize=(8, 6), sharex=True)
    for rep, g in its.groupby("replica"):
        axes[0].plot(g["start_s"], g["decode_seqs"] + g["prefill_seqs"], lw=0.6, label=f"replica {rep}")
    axes[0].set_ylabel("sequences / iteration")
    axes[1].plot(tl["time_s"], tl["kv_utilisation"] * 100)
    axes[1].set_ylabel("KV cache used (%)")
    axes[2].plot(tl["time_s"], tl["waiting"])
    axes[2].set_ylabel("waiting requests")
    axes[2].set_xlabel("simulated time (s)")
    for a in axes:
        a.grid(alpha=0.3)
    if its["replica"].nunique() > 1:
        axes[0].legend(fontsize=7)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p


def throughput_latency(results, path, metric: str = "tpot_p99_s") -> Path:
    """Output tokens/s per chip against a latency percentile, one point per run (e.g. per rate)."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(5, 3.6))
    xs = [r.summary["output_tokens_per_s_per_chip"] for r in results]
    ys = [(r.summary.get(metric) or np.nan) * 1e3 for r in results]
    ax.plot(xs, ys, "o-")
    for r, x, y in zip(results, xs, ys):
        ax.annotate(f"{r.config.get('rate_per_s')}/s", (x, y), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlabel("output tokens/s per chip")
    ax.set_ylabel(metric.replace("_s", "") + " (ms)")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    p = Path(path)
    fig.savefig(p, dpi=120)
    plt.close(fig)
    return p
