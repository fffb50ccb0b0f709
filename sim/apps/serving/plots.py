"""Plots of serving results (matplotlib, PNG): latency CDFs, a batch / KV / queue timeline,
throughput against latency over arrival rates, and a deployment search's Pareto front.
Each reads :class:`ServingResult` objects (or :func:`~sim.apps.serving.search.search`'s
DataFrame); none simulates."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from sim.apps.serving.search import pareto_front

DPI = 150
#: legible at the README's width (the figures are 8-12 inches wide)
STYLE = {"font.size": 10, "axes.titlesize": 11, "axes.labelsize": 10, "legend.fontsize": 9,
         "xtick.labelsize": 9, "ytick.labelsize": 9, "figure.titlesize": 12}
_NAMES = {"ttft": "TTFT", "tpot": "TPOT", "itl": "inter-token latency", "e2e": "end-to-end latency",
          "queue": "queueing delay"}


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(plt, fig, path) -> Path:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(p, dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return p


def _series(results, labels) -> list[tuple[str | None, object]]:
    """One result, a list of them or a {label: result} dict -> [(label, result)]."""
    if isinstance(results, dict):
        return list(results.items())
    if not isinstance(results, (list, tuple)):
        results = [results]
    labels = list(labels) if labels is not None else [None] * len(results)
    if len(labels) != len(results):
        raise ValueError(f"latency_cdf: {len(labels)} labels for {len(results)} results")
    return list(zip(labels, results))


def _plain_log(ax, axis: str = "x") -> None:
    """Log axis ticked 1-2-5 with plain numbers (50, 100, 1,000), not 5 x 10^1."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    a = ax.xaxis if axis == "x" else ax.yaxis
    plain = FuncFormatter(lambda v, _: f"{v:,.0f}" if v >= 1 else f"{v:g}")
    a.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    a.set_major_formatter(plain)
    lo, hi = sorted(ax.get_xlim() if axis == "x" else ax.get_ylim())
    # under a factor of 5 the 1-2-5 ticks may miss the range: label the minor ticks too
    a.set_minor_formatter(plain if lo > 0 and hi / lo < 5 else NullFormatter())


_OFFSETS = ((6, 3), (6, -11), (-6, 3), (-6, -11), (6, 14), (6, -22), (-6, 14), (-6, -22), (6, 25), (6, -33),
            (-6, 25), (-6, -33))
_NEAR = ((0, 9), (0, -17), (0, 19), (0, -27), (7, 3), (-7, 3), (7, -11), (-7, -11), (0, 29), (0, -37))


def _place_labels(ax, xy, texts, offsets=_OFFSETS, placed=None, color="0.2", fontsize=7.5) -> list:
    """Annotate points, each label at the first of ``offsets`` (points) where it overlaps no
    label placed before it (greedy, in display coordinates; ``placed`` carries the boxes of
    earlier calls, and is returned)."""
    renderer = ax.figure.canvas.get_renderer()
    placed = [] if placed is None else placed
    for (x, y), text in zip(xy, texts):
        best = None
        for dx, dy in offsets:
            t = ax.annotate(text, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=fontsize, color=color,
                            ha="left" if dx > 0 else "right" if dx < 0 else "center", va="bottom")
            t.update_positions(renderer)
            box = t.get_window_extent(renderer).expanded(1.05, 1.15)
            if not any(box.overlaps(b) for b in placed):
                best = (t, box)
                break
            t.remove()
        if best is None:   # no free place: the first offset
            t = ax.annotate(text, (x, y), xytext=offsets[0], textcoords="offset points", fontsize=fontsize, color=color,
                            va="bottom")
            t.update_positions(renderer)
            best = (t, t.get_window_extent(renderer))
        placed.append(best[1])
    return placed


def _rate(r) -> str:
    rate = r.config.get("rate_per_s")
    return f"{rate:g} req/s" if isinstance(rate, (int, float)) else "trace"


def latency_cdf(result, path, metrics=("ttft", "tpot", "e2e"), labels=None) -> Path:
    """Empirical CDFs of per-request latencies (milliseconds, log x), one panel per metric.

    ``result``: one :class:`ServingResult`, or a list of them (``labels`` names each; by default
    its scheduler) or a ``{label: result}`` dict, overlaid in the same axes."""
    plt = _plt()
    series = _series(result, labels)
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(metrics), figsize=(4 * len(metrics), 3.6))
        axes = np.atleast_1d(axes)
        for i, (label, r) in enumerate(series):
            fin = r.requests[r.requests["status"] == "finished"]
            name = label or r.summary["scheduler"]
            for ax, m in zip(axes, metrics):
                x = np.sort(fin[f"{m}_s"].dropna().to_numpy()) * 1e3
                if len(x):
                    ax.step(x, np.arange(1, len(x) + 1) / len(x), where="post", lw=1.6, color=f"C{i}", label=name)
                    p99 = float(np.percentile(x, 99))
                    ax.plot([p99], [0.99], "o", ms=4, color=f"C{i}")
        for ax, m in zip(axes, metrics):
            ax.set_xscale("log")
            _plain_log(ax, "x")
            ax.axhline(0.99, color="0.5", lw=0.7, ls=":")
            ax.axhline(0.5, color="0.5", lw=0.7, ls=":")
            ax.set_ylim(0, 1.02)
            ax.set_title(_NAMES.get(m, m))
            ax.set_xlabel(f"{m.upper()} (ms, log scale)")
            ax.grid(alpha=0.3, which="both")
        axes[0].set_ylabel("fraction of requests")
        if len(series) > 1:
            axes[0].legend(loc="lower right")
        s = series[0][1].summary
        what = s["scheduler"] if len(series) == 1 else "dots: p99"
        n = int((series[0][1].requests["status"] == "finished").sum())
        fig.suptitle(f"{s['model']} on {s['replicas']} x {s['chip']}, {_rate(series[0][1])}, "
                     f"{n:,} requests ({what})")
        fig.tight_layout()
        return _save(plt, fig, path)


def timeline(result, path) -> Path:
    """Batch size per iteration, KV-cache occupancy and waiting requests over simulated time."""
    plt = _plt()
    its, tl, s = result.iterations, result.timeline, result.summary
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(3, 1, figsize=(9, 6.5), sharex=True)
        for rep, g in its.groupby("replica"):
            axes[0].plot(g["start_s"], g["decode_seqs"] + g["prefill_seqs"], lw=0.7, label=f"replica {rep}")
        axes[0].set_ylabel("sequences\nper iteration")
        axes[0].set_ylim(bottom=0)
        axes[1].plot(tl["time_s"], tl["kv_utilisation"] * 100, color="C1")
        axes[1].axhline(100, color="0.4", lw=0.8, ls="--")
        axes[1].set_ylim(0, 108)
        axes[1].set_ylabel("KV cache\nused (%)")
        axes[2].plot(tl["time_s"], tl["waiting"], color="C2")
        axes[2].set_ylim(bottom=0)
        axes[2].set_ylabel("waiting\nrequests")
        axes[2].set_xlabel("simulated time (s)")
        for a in axes:
            a.grid(alpha=0.3)
        if its["replica"].nunique() > 1:
            axes[0].legend(fontsize=8, loc="upper right")
        kv = s.get("kv_tokens_per_replica")
        kv = f", KV cache {kv:,} tokens/replica" if kv else ""
        ttft = (s.get("ttft_p99_s") or np.nan) * 1e3
        fig.suptitle(f"{s['model']} on {s['replicas']} x {s['chip']}, {s['scheduler']}, {_rate(result)}{kv}\n"
                     f"{s.get('preemptions', 0):,} preemptions, TTFT p99 {ttft:,.0f} ms")
        fig.tight_layout()
        return _save(plt, fig, path)


def throughput_latency(results, path, metric="tpot_p99_s") -> Path:
    """Output tokens/s per chip against a latency percentile, one point per run (e.g. per rate).

    ``metric``: a summary key, or a tuple of them (one panel each).  ``results``: a list of
    runs (one curve) or a ``{label: [runs]}`` dict (one curve each, e.g. per scheduler)."""
    plt = _plt()
    metrics = (metric,) if isinstance(metric, str) else tuple(metric)
    series = list(results.items()) if isinstance(results, dict) else [(None, list(results))]
    with plt.rc_context(STYLE):
        fig, axes = plt.subplots(1, len(metrics), figsize=(5.2 * len(metrics), 4))
        axes = np.atleast_1d(axes)
        for ax, m in zip(axes, metrics):
            ys_all, pts = [], []
            for i, (label, runs) in enumerate(series):
                xs = [r.summary["output_tokens_per_s_per_chip"] for r in runs]
                ys = [(r.summary.get(m) or np.nan) * 1e3 for r in runs]
                ys_all += ys
                ax.plot(xs, ys, "o-", color=f"C{i}", label=label, lw=1.6, ms=5)
                pts.append((i, runs, xs, ys))
            ys_all = [y for y in ys_all if np.isfinite(y) and y > 0]
            if ys_all and max(ys_all) / min(ys_all) > 8:
                ax.set_yscale("log")
                _plain_log(ax, "y")
            ax.margins(x=0.08, y=0.12)
            fig.canvas.draw()        # the scales are final: the labels' boxes can be measured
            placed = []
            for i, runs, xs, ys in pts:   # the rates, the first curve's above left, the others' below right
                rate = [f"{r.config.get('rate_per_s'):g}" if isinstance(r.config.get("rate_per_s"), (int, float))
                        else "" for r in runs]
                offs = ((-5, 4), (-5, 14), (5, 4)) if i == 0 else ((5, -12), (5, -22), (-5, -12))
                _place_labels(ax, list(zip(xs, ys)), rate, offsets=offs, placed=placed, color=f"C{i}", fontsize=8)
            name, _, pct = m.removesuffix("_s").rpartition("_")
            ax.set_title(f"{_NAMES.get(name, name)} {pct}")
            ax.set_xlabel("output tokens/s per chip")
            ax.set_ylabel(f"{name.upper()} {pct} (ms" + (", log scale)" if ax.get_yscale() == "log" else ")"))
            ax.grid(alpha=0.3, which="both")
        if len(series) > 1:
            axes[0].legend(loc="upper left")
        s = series[0][1][0].summary if series[0][1] else None
        if s:
            n = len(series[0][1][0].requests)
            fig.suptitle(f"{s['model']} on {s['replicas']} x {s['chip']}: throughput against latency, "
                         f"{n:,} requests per rate (numbers: arrival rate, req/s)")
        fig.tight_layout()
        return _save(plt, fig, path)


_LABELS = {"replicas": lambda v: f"{v} rep", "tensor_parallel": lambda v: f"TP{v}",
           "token_budget": lambda v: f"{v}", "scheduler": str, "prefill_replicas": lambda v: f"{v} prefill",
           "max_batch": lambda v: f"batch {v}"}
_AXIS_NAMES = {"token_budget": "chunk budget, tokens", "scheduler": "scheduler", "max_batch": "max batch",
               "prefill_replicas": "prefill replicas", "replicas": "replicas", "tensor_parallel": "TP"}
_GROUP_COLOURS = ("C0", "C1", "C4", "C9", "C6", "C8", "C5", "C7")


def _group_name(key, cols) -> str:
    row = dict(zip(cols, key))
    parts = []
    if "replicas" in row and "tensor_parallel" in row:      # 2 x TP4: two replicas of four chips
        parts.append(f"{row.pop('replicas')} \u00d7 TP{row.pop('tensor_parallel')}")
    parts += [_LABELS.get(c, lambda v, c=c: f"{c}={v}")(v) for c, v in row.items()]
    return ", ".join(parts)


def pareto_rows(df, x: str = "tokens_per_s_per_user", y: str = "output_tokens_per_s_per_chip") -> list:
    """Index labels of ``df``'s Pareto front: rows meeting the SLOs (``meets_slo``, all rows
    without that column) that no other such row beats in both ``x`` and ``y`` (maximised)."""
    ok = df[x].notna() & df[y].notna()
    if "meets_slo" in df:
        ok &= df["meets_slo"].fillna(False).astype(bool)
    sub = df[ok]
    mask = pareto_front(list(zip(sub[x].astype(float), sub[y].astype(float))))
    return [i for i, m in zip(sub.index, mask) if m]


def pareto(df, path, x: str = "tokens_per_s_per_user", y: str = "output_tokens_per_s_per_chip",
           label_columns=None, title: str | None = None) -> Path:
    """A deployment search's result (:func:`~sim.apps.serving.search.search`): output tokens/s
    per chip against tokens/s per user, one point per deployment, filled where it meets the
    SLOs (``meets_slo``), hollow where it does not, the Pareto front among the SLO-meeting ones
    (:func:`pareto_rows`) connected.  ``label_columns`` (default: the search axes among
    replicas, tensor_parallel, token_budget, scheduler, prefill_replicas, max_batch): the last
    is written beside each point, the others pick its colour.  Rows without ``x`` or ``y`` (a
    deployment that could not run) are left out."""
    from matplotlib.lines import Line2D

    plt = _plt()
    cols = list(label_columns) if label_columns is not None else [c for c in _LABELS if c in df]
    group_cols, text_col = (cols[:-1], cols[-1]) if cols else ([], None)
    ok = df[x].notna() & df[y].notna()
    meets = df["meets_slo"].fillna(False).astype(bool) if "meets_slo" in df else ok
    front = pareto_rows(df, x, y)
    d = df[ok]
    groups = list(d.groupby(group_cols, sort=True)) if group_cols else [((), d)]
    with plt.rc_context(STYLE):
        fig, ax = plt.subplots(figsize=(8, 5))
        handles = []
        if front:
            f = df.loc[front].sort_values(x)
            ax.plot(f[x], f[y], "-", color="0.15", lw=1.4, marker="o", ms=13, mfc="none", mew=1.2, zorder=2,
                    gid="pareto_front")
            handles.append(Line2D([], [], color="0.15", lw=1.4, marker="o", ms=11, mfc="none", mew=1.2,
                                  label="Pareto front (meets the SLOs)"))
        for k, (key, g) in enumerate(groups):
            c = _GROUP_COLOURS[k % len(_GROUP_COLOURS)]
            key = key if isinstance(key, tuple) else (key,)
            m = meets[g.index]
            ax.scatter(g.loc[m, x], g.loc[m, y], s=45, color=c, zorder=3)
            ax.scatter(g.loc[~m, x], g.loc[~m, y], s=45, facecolors="white", edgecolors=c, lw=1.5, zorder=3)
            if group_cols:
                handles.append(Line2D([], [], ls="", marker="o", color=c, label=_group_name(key, group_cols)))
        handles.append(Line2D([], [], ls="", marker="o", mfc="white", mec="0.4", mew=1.5,
                              label="hollow: misses the SLOs"))
        ax.set_xlabel("tokens/s per user (1 / TPOT p50)")
        ax.set_ylabel("output tokens/s per chip")
        ax.set_ylim(bottom=0, top=float(d[y].max()) * 1.15 if len(d) else None)
        ax.margins(x=0.1)
        ax.grid(alpha=0.3)
        legend_title = (" \u00d7 ".join(_AXIS_NAMES.get(c, c) for c in group_cols) if group_cols else "") + \
            (f"\n(numbers: {_AXIS_NAMES.get(text_col, text_col)})" if text_col else "")
        ax.legend(handles=handles, loc="upper right", title=legend_title.strip() or None, title_fontsize=8.5,
                  fontsize=8.5)
        if title:
            ax.set_title(title)
        if text_col:
            fig.canvas.draw()        # the limits are final: the labels' boxes can be measured
            placed = []
            for k, (key, g) in enumerate(groups):
                g = g.sort_values(x)
                placed = _place_labels(ax, list(zip(g[x], g[y])),
                                       [_LABELS.get(text_col, str)(v) for v in g[text_col]], offsets=_NEAR,
                                       placed=placed, color=_GROUP_COLOURS[k % len(_GROUP_COLOURS)], fontsize=8)
        fig.tight_layout()
        return _save(plt, fig, path)
