"""Plots (matplotlib, Agg backend, PNG): rooflines, latency/energy breakdowns, Pareto
fronts and heat maps of sweeps.  Every figure has a title and axis labels with units.

Plot functions take plain data (results, DataFrames) and a path, and return the path;
they never simulate.  ``sim plot KIND RESULTS...`` is the command-line front end
(`sim plot`, in :mod:`sim.cli.plot`).
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

import numpy as np

from sim.apps.store import read_results
from sim.apps.sweep.analysis import objectives_for, pareto_front
from sim.apps.sweep.spec import BREAKDOWN_PREFIXES, METRICS
from sim.errors import SimError
from sim.model.cost.energy import op_energy_components_pj

_KIND_COLORS = {"gemm": "#1f77b4", "attention": "#d62728", "vector": "#2ca02c", "copy": "#9467bd",
                "collective": "#8c564b", "conv2d": "#17becf"}
_COMPONENT_COLORS = {"mac": "#1f77b4", "vector": "#2ca02c", "registers": "#bcbd22", "noc": "#7f7f7f",
                     "static": "#c7c7c7"}
_LEVEL_PALETTE = ["#ff7f0e", "#9467bd", "#d62728", "#8c564b", "#e377c2", "#17becf"]

#: metric -> (axis label with unit, scale applied to the values)
METRIC_LABELS: dict[str, tuple[str, float]] = {
    "seconds": ("latency (ms)", 1e3),
    "ttft_s": ("time to first token (ms)", 1e3),
    "tpot_s": ("time per output token (ms)", 1e3),
    "tokens_per_s": ("throughput (tokens/s)", 1.0),
    "decode_tokens_per_s": ("decode throughput (tokens/s)", 1.0),
    "mfu": ("MFU (%)", 100.0),
    "mbu": ("MBU (%)", 100.0),
    "utilization": ("MAC utilisation (%)", 100.0),
    "memory_bound_share": ("time in memory-bound ops (%)", 100.0),
    "tflops": ("achieved throughput (TFLOP/s)", 1.0),
    "peak_tflops": ("peak throughput (TFLOP/s)", 1.0),
    "energy_j": ("energy (J)", 1.0),
    "energy_per_token_j": ("energy per token (mJ)", 1e3),
    "power_w": ("average power (W)", 1.0),
    "tokens_per_j": ("energy efficiency (tokens/J)", 1.0),
    "tokens_per_s_per_w": ("throughput per watt (tokens/s/W)", 1.0),
    "tokens_per_s_per_mm2": ("throughput per area (tokens/s/mm²)", 1.0),
    "tflops_per_w": ("TFLOP/s per watt", 1.0),
    "tflops_per_mm2": ("TFLOP/s per mm²", 1.0),
    "area_mm2": ("chip area (mm²)", 1.0),
    "mac_area_mm2": ("MAC array area (mm²)", 1.0),
    "sram_area_mm2": ("SRAM area (mm²)", 1.0),
    "sram_mib": ("on-chip SRAM (MiB)", 1.0),
    "pes": ("processing elements", 1.0),
    "dram_gb_per_s": ("DRAM bandwidth (GB/s)", 1.0),
    "kv_cache_bytes": ("KV cache (GB)", 1e-9),
    "dram_bytes": ("DRAM traffic (GB)", 1e-9),
    "cycles": ("cycles", 1.0),
    "arithmetic_intensity": ("arithmetic intensity (FLOP/byte)", 1.0),
}
_UNIT_SUFFIXES = [("_gbps_per_pin", "Gb/s per pin"), ("_gb_per_s", "GB/s"), ("_bytes_per_cycle", "B/cycle"),
                  ("_pj_per_byte", "pJ/B"), ("_kib", "KiB"), ("_mib", "MiB"), ("_gib", "GiB"), ("_mhz", "MHz"),
                  ("_ns", "ns"), ("_nm", "nm"), ("_bytes", "B"), ("_bits", "bits"), ("_mm2", "mm²"),
                  ("_cycles", "cycles"), ("_pj", "pJ"), ("_w", "W"), ("_j", "J"), ("_s", "s")]


def pd_num(s) -> bool:
    """True for a numeric (not boolean) pandas Series."""
    from pandas.api.types import is_bool_dtype, is_numeric_dtype

    return is_numeric_dtype(s.dtype) and not is_bool_dtype(s.dtype)


def _plt():
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def label_for(col: str) -> tuple[str, float]:
    """Axis label (with unit) and value scale for a metric or a parameter's dotted path."""
    if col in METRIC_LABELS:
        return METRIC_LABELS[col]
    for pre, what in (("energy_per_token_j.", "energy per token"), ("energy_j.", "energy")):
        if col.startswith(pre):
            comp = col[len(pre):]
            return (f"{what}, {comp} (mJ)" if pre.startswith("energy_per") else f"{what}, {comp} (J)",
                    1e3 if pre.startswith("energy_per") else 1.0)
    parts = col.split(".")
    if parts[0] == "workload" and len(parts) == 2:
        return (parts[1].replace("_", " ") + (" (tokens)" if parts[1].endswith("_len") else ""), 1.0)
    last = parts[-1]
    unit = ""
    for suf, u in _UNIT_SUFFIXES:
        if last.endswith(suf) and len(last) > len(suf):
            last, unit = last[: -len(suf)], u
            break
    words = last.replace("_", " ")
    owner = ""
    if len(parts) >= 2:
        prev = parts[-2]
        if prev.isdigit() and len(parts) >= 3:
            owner = parts[-3].rstrip("s")  # arrays.0 -> array
        elif prev not in ("levels", "cores", "memory"):
            owner = prev
        elif prev == "cores":
            owner = "core"
    text = f"{owner} {words}".strip()
    if parts[:2] == ["cores", "count"]:
        text = "cores"
    return (f"{text} ({unit})" if unit else text, 1.0)


def _save(fig, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    _plt().close(fig)
    return path


def _get(r: Any, name: str, default: Any = 0):
    if isinstance(r, Mapping):
        return r.get(name, default)
    return getattr(r, name, default)


def _time_unit(seconds: float) -> tuple[str, float]:
    s = abs(seconds)
    if s >= 1:
        return "s", 1.0
    if s >= 1e-3:
        return "ms", 1e3
    if s >= 1e-6:
        return "µs", 1e6
    return "ns", 1e9


def _energy_unit(joules: float) -> tuple[str, float]:
    j = abs(joules)
    if j >= 1:
        return "J", 1.0
    if j >= 1e-3:
        return "mJ", 1e3
    if j >= 1e-6:
        return "µJ", 1e6
    return "nJ", 1e9


# --------------------------------------------------------------------------- roofline


def roofline(results: Sequence, chip, path: str | Path, title: str | None = None,
             rate_classes: Iterable[str] | None = None) -> Path:
    """Roofline of ``chip`` with each op of ``results`` placed by its arithmetic intensity
    (FLOP per simulated DRAM byte, `dram_intensity`) and achieved FLOP/s; marker area ∝ the op's share of time.

    ``results``: :class:`~sim.ir.results.OpResult` objects or the op rows of
    :func:`sim.apps.inference.run_llm` (mappings with flops, dram_bytes, seconds, kind, repeat).
    """
    plt = _plt()
    bw = chip.memory.dram.peak_bytes_per_s
    classes = list(rate_classes) if rate_classes else sorted(
        {c for a in chip.cores.arrays for c in a.macs_per_pe_per_cycle}, key=lambda c: -chip.peak_flops(c))
    fig, ax = plt.subplots(figsize=(8, 5.5), dpi=120)
    pts = [r for r in results if _get(r, "flops") and _get(r, "dram_bytes") > 0 and _get(r, "seconds") > 0]
    ai_vals = [_get(r, "flops") / _get(r, "dram_bytes") for r in pts] or [1.0]
    lo = min(min(ai_vals) / 4, 0.1)
    peaks = [chip.peak_flops(c) for c in classes]
    hi = max(max(ai_vals) * 4, max(peaks) / bw * 8)
    x = np.logspace(math.log10(lo), math.log10(hi), 200)
    ax.plot(x, x * bw, color="0.3", lw=1.2, ls="--", label=f"DRAM {bw / 1e9:,.0f} GB/s")
    groups: dict[float, list[str]] = {}
    for c, peak in zip(classes, peaks):  # formats with the same peak share one line
        groups.setdefault(peak, []).append(c)
    for peak, cs in groups.items():
        ax.plot(x, np.minimum(peak, x * bw), lw=1.8, label=f"{' / '.join(cs)} peak {peak / 1e12:,.1f} TFLOP/s")
        # above the markers, on a white ground: an op near the ridge must not hide its label
        ax.annotate(f"ridge {peak / bw:,.0f} FLOP/B", (peak / bw, peak), textcoords="offset points",
                    xytext=(4, -12), fontsize=7, color="0.2", zorder=6,
                    bbox={"boxstyle": "round,pad=0.15", "fc": "white", "ec": "none", "alpha": 0.85})
        ax.plot([peak / bw], [peak], marker="|", ms=9, color="0.2", zorder=6)
    total_t = sum(_get(r, "seconds") * (_get(r, "repeat", 1) or 1) for r in pts) or 1.0
    seen = set()
    for r in pts:
        kind = _get(r, "kind", "op")
        share = _get(r, "seconds") * (_get(r, "repeat", 1) or 1) / total_t
        label = kind if kind not in seen else None
        seen.add(kind)
        ax.scatter(_get(r, "flops") / _get(r, "dram_bytes"), _get(r, "flops") / _get(r, "seconds"),
                   s=20 + 600 * share, alpha=0.7, color=_KIND_COLORS.get(kind, "0.5"), edgecolor="k", lw=0.4,
                   label=label, zorder=3)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP per DRAM byte)")
    ax.set_ylabel("achieved throughput (FLOP/s)")
    ax.set_title(title or f"Roofline: {chip.name} (DRAM {bw / 1e9:,.0f} GB/s)")
    ax.grid(True, which="both", alpha=0.25)
    leg = ax.legend(fontsize=8, loc="lower right", title="marker area ∝ share of time", title_fontsize=7)
    for h in leg.legend_handles:
        if hasattr(h, "set_sizes"):
            h.set_sizes([40])
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- breakdown


def _op_table(result: Mapping):
    import pandas as pd

    df = pd.DataFrame(result.get("ops") or [])
    if df.empty:
        return df
    if "repeat" not in df:
        df["repeat"] = 1
    if "total_seconds" not in df:
        df["total_seconds"] = df["seconds"] * df["repeat"]
    df["energy_j"] = df.get("energy_pj", 0.0) * df["repeat"] * 1e-12
    df["mem_s"] = np.where(df.get("bound", "") == "memory", df["total_seconds"], 0.0)
    g = df.groupby(["op", "kind"], as_index=False, sort=False)[["total_seconds", "energy_j", "mem_s"]].sum()
    g["memory_bound"] = g["mem_s"] > 0.5 * g["total_seconds"]
    return g


def _components(result: Mapping, components_j: Mapping[str, float] | None) -> dict[str, float] | None:
    if components_j:
        return {k: float(v) for k, v in components_j.items()}
    if result.get("energy_components_j"):
        return {k: float(v) for k, v in result["energy_components_j"].items()}
    ops = result.get("ops") or []
    if ops and all("energy_breakdown_pj" in o for o in ops):
        return {k: v * 1e-12 for k, v in op_energy_components_pj(ops).items()}
    return None


def breakdown(result: Mapping, path: str | Path, title: str | None = None, top: int = 12,
              components_j: Mapping[str, float] | None = None) -> Path:
    """Where the time and the energy of an LLM run go: latency by op, energy by op, and
    energy by memory level / component (mac, vector, each memory level, noc).

    ``result``: :func:`sim.apps.inference.run_llm`'s :class:`~sim.apps.results.LlmRun` (or its
    ``to_dict()``, as ``sim run --json`` writes it); ``components_j``: energy by
    component in J (:func:`sim.apps.energy_report.llm_energy_components_j`; read from the result's
    ``energy_components_j`` or its ops' ``energy_breakdown_pj`` when not given).  Ops are
    summed over layers; the ``top`` largest are shown, the rest as "other".
    """
    plt = _plt()
    g = _op_table(result)
    comps = _components(result, components_j)
    fig, axes = plt.subplots(1, 3, figsize=(16, 5.8), dpi=110, gridspec_kw={"width_ratios": [1.15, 1.15, 0.9]})
    tot_s = float(g["total_seconds"].sum()) if len(g) else 0.0
    tot_e = float(g["energy_j"].sum()) if len(g) else 0.0

    def bars(ax, col, total, unit_fn, xlabel, ptitle, mark_bound):
        if not len(g):
            ax.text(0.5, 0.5, "no ops in this result", ha="center", va="center", transform=ax.transAxes)
            ax.set_axis_off()
            return
        d = g.sort_values(col, ascending=False, kind="stable")
        head, rest = d.head(top), d.iloc[top:]
        names = list(head["op"])
        vals = list(head[col])
        kinds = list(head["kind"])
        mb = list(head["memory_bound"])
        if len(rest):
            names.append(f"other ({len(rest)} ops)")
            vals.append(float(rest[col].sum()))
            kinds.append("other")
            mb.append(False)
        unit, scale = unit_fn(max(vals) if vals else 0.0)
        y = np.arange(len(names))[::-1]
        colors = [_KIND_COLORS.get(k, "0.6") for k in kinds]
        hatches = ["//" if (m and mark_bound) else "" for m in mb]
        for yi, v, c, h in zip(y, vals, colors, hatches):
            ax.barh(yi, v * scale, color=c, hatch=h, edgecolor="k", lw=0.4)
        for yi, v in zip(y, vals):
            ax.text(v * scale, yi, f" {v / total:.0%}" if total else "", va="center", fontsize=8)
        ax.set_yticks(y)
        ax.set_yticklabels(names, fontsize=8)
        ax.set_xlabel(xlabel.format(unit=unit))
        ax.set_title(ptitle, fontsize=10)
        ax.set_xlim(0, max(vals) * scale * 1.18 if vals and max(vals) > 0 else 1)
        ax.grid(True, axis="x", alpha=0.25)

    tu, ts = _time_unit(tot_s)
    bars(axes[0], "total_seconds", tot_s, _time_unit, "time per iteration ({unit})",
         f"latency by op (total {tot_s * ts:,.3g} {tu})", True)
    eu, es = _energy_unit(tot_e)
    bars(axes[1], "energy_j", tot_e, _energy_unit, "energy per iteration ({unit})",
         f"energy by op (total {tot_e * es:,.3g} {eu})", False)
    from matplotlib.patches import Patch

    kinds_present = [k for k in _KIND_COLORS if len(g) and k in set(g["kind"])]
    handles = [Patch(facecolor=_KIND_COLORS[k], edgecolor="k", lw=0.4, label=k) for k in kinds_present]
    handles.append(Patch(facecolor="white", edgecolor="k", hatch="//", lw=0.4, label="memory-bound"))
    axes[0].legend(handles=handles, fontsize=7, loc="lower right")
    ax = axes[2]
    if comps:
        items = sorted(comps.items(), key=lambda kv: -kv[1])
        total = sum(v for _, v in items)
        unit, scale = _energy_unit(max(v for _, v in items) if items else 0.0)
        names = [k for k, _ in items]
        y = np.arange(len(items))[::-1]
        li = 0
        colors = []
        for k in names:
            if k in _COMPONENT_COLORS:
                colors.append(_COMPONENT_COLORS[k])
            else:
                colors.append(_LEVEL_PALETTE[li % len(_LEVEL_PALETTE)])
                li += 1
        ax.barh(y, [v * scale for _, v in items], color=colors, edgecolor="k", lw=0.4)
        for yi, (_, v) in zip(y, items):
            ax.text(v * scale, yi, f" {v / total:.0%}" if total else "", va="center", fontsize=8)
        ax.set_yticks(y)
        ax.set_yticklabels([("MACs" if k == "mac" else "vector unit" if k == "vector" else
                             "on-chip network" if k == "noc" else "static" if k == "static" else k)
                            for k in names], fontsize=9)
        ax.set_xlabel(f"energy per iteration ({unit})")
        ax.set_xlim(0, max(v for _, v in items) * scale * 1.2 if items else 1)
        ax.grid(True, axis="x", alpha=0.25)
        tok = result.get("energy_per_token_j")
        tu, tsc = _energy_unit(tok) if tok else ("J", 1.0)
        sub = f"\n({tok * tsc:,.3g} {tu} per generated token)" if tok else ""
        ax.set_title(f"energy by memory level and unit{sub}", fontsize=10)
    else:
        ax.text(0.5, 0.5, "energy by memory level:\nnot in this result\n(pass components_j)", ha="center",
                va="center", transform=ax.transAxes, fontsize=9, color="0.3")
        ax.set_title("energy by memory level and unit", fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
    head = title or (f"{result.get('model', '')} {result.get('phase', '')} on {result.get('chip', '')}"
                     f" (batch {result.get('batch', '?')})")
    fig.suptitle(head, fontsize=12)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- sweeps


def swept_parameters(df) -> list[str]:
    """The parameters a sweep's results vary, in their order."""
    return _varying(df, _params_of(df))


def heatmap_axes(df) -> tuple[str | None, str | None]:
    """The two swept parameters a heat map should put across and down by default: the pair
    whose value combinations fill the most of their grid (zipped parameters vary together
    and fill only its diagonal), ties broken by more cells, then by sweep order."""
    params = _independent(df, swept_parameters(df))
    if len(params) < 2:
        return (params[0] if params else None), None
    best, best_key = None, None
    for i, x in enumerate(params):
        for j, y in enumerate(params):
            if j <= i:
                continue
            pairs = df[[x, y]].dropna().drop_duplicates()
            cells = df[x].nunique(dropna=True) * df[y].nunique(dropna=True)
            key = (len(pairs) / cells if cells else 0.0, cells, -i, -j)
            if best_key is None or key > best_key:
                best, best_key = (x, y), key
    return best


def _varying(df, params: Sequence[str]) -> list[str]:
    return [p for p in params if p in df.columns and df[p].nunique(dropna=True) > 1]


def _params_of(df) -> list[str]:
    ps = list(df.attrs.get("parameters", [])) if hasattr(df, "attrs") else []
    if ps:
        return [p for p in ps if p in df.columns]
    skip = {"point", "workload", "chip", "error", "hash", "source"}

    return [c for c in df.columns if c not in skip and c not in METRICS
            and not any(c.startswith(p) for p in BREAKDOWN_PREFIXES)]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    return str(v)


def _short_label(p: str) -> tuple[str, str]:
    """(short name, unit) of a parameter for annotations: 'vmem', 'KiB'."""
    lab = label_for(p)[0]
    m = re.match(r"^(.*?)\s*\((.*)\)$", lab)
    name, unit = (m.group(1), m.group(2)) if m else (lab, "")
    parts = p.split(".")
    if len(parts) >= 3 and parts[-2] not in ("levels",) and not parts[-2].isdigit() and parts[0] == "memory":
        name = parts[-2]  # memory.levels.hbm.data_rate_gbps_per_pin -> hbm
    return name, unit


def _independent(df, params: Sequence[str]) -> list[str]:
    """Parameters minus those that only repeat another one (zipped twins such as rows and cols)."""
    out: list[str] = []
    for p in params:
        if any(df[p].equals(df[q]) for q in out):
            continue
        out.append(p)
    return out


def _short_point(row, params: Sequence[str]) -> str:
    parts = []
    for p in params:
        name, unit = _short_label(p)
        parts.append(f"{name} {_fmt(row[p])}" + (f" {unit}" if unit else ""))
    return ", ".join(parts)


#: a linear Pareto axis whose values span less than this fraction of their largest starts at zero
#: (a reader takes a full-height spread for a large difference; the campaign saw 8 % read so)
NARROW_SPREAD = 0.10


def pareto(df, path: str | Path, x: str = "area_mm2", y: str = "tokens_per_s", color: str | None = None,
           title: str | None = None, annotate: int = 6, logx: bool | None = None, logy: bool | None = None) -> Path:
    """Every point of a sweep (``x`` against ``y``), with the Pareto front - the points no
    other point beats on both - drawn as a line.  Directions follow the metric (more
    tokens/s is better, less area is better).  ``color``: a parameter (numeric: colour
    bar; otherwise legend); ``annotate``: label up to this many front points."""
    plt = _plt()
    for c in (x, y):
        if c not in df.columns:
            raise KeyError(f"no column '{c}' in the results (columns: {', '.join(map(str, df.columns))})")
    ok = df[df["error"].isna()] if "error" in df.columns else df
    ok = ok[np.isfinite(ok[x].astype(float)) & np.isfinite(ok[y].astype(float))]
    xl, xs = label_for(x)
    yl, ys = label_for(y)
    fig, ax = plt.subplots(figsize=(8.5, 6), dpi=120)
    params = _varying(ok, _params_of(df))
    if color is None and "source" in ok.columns and ok["source"].nunique() > 1:
        color = "source"
    if color is None and params:
        color = params[0]
    X = ok[x].to_numpy(float) * xs
    Y = ok[y].to_numpy(float) * ys
    if color and color in ok.columns:
        cv = ok[color]
        if pd_num(cv) and cv.nunique() > 6:
            sc = ax.scatter(X, Y, c=cv.to_numpy(float) * label_for(color)[1], cmap="viridis", s=18, alpha=0.75,
                            edgecolor="none", zorder=2)
            cb = fig.colorbar(sc, ax=ax, pad=0.02)
            cb.set_label(label_for(color)[0])
        else:
            cmap = plt.get_cmap("tab10")
            for i, val in enumerate(sorted(cv.dropna().unique(), key=lambda v: (str(type(v)), v))):
                m = (cv == val).to_numpy()
                lab = label_for(color)[0] if color != "source" else "results"
                ax.scatter(X[m], Y[m], color=cmap(i % 10), s=18, alpha=0.75, edgecolor="none", zorder=2,
                           label=f"{_fmt(val)}")
            ax.legend(title=re.sub(r"\s*\(.*\)$", "", lab) if color != "source" else "results", fontsize=8,
                      title_fontsize=8, loc="best")
    else:
        ax.scatter(X, Y, color="0.55", s=18, alpha=0.7, edgecolor="none", zorder=2, label="design points")
    n_front = 0
    caption = ""
    if len(ok):
        mask = pareto_front(ok, objectives_for(x, y)).to_numpy()
        n_front = int(mask.sum())
        fx, fy = X[mask], Y[mask]
        order = np.argsort(fx, kind="stable")
        fx, fy = fx[order], fy[order]
        ax.plot(fx, fy, color="#d62728", lw=1.6, zorder=3)
        ax.scatter(fx, fy, s=70, facecolor="none", edgecolor="#d62728", lw=1.6, zorder=4,
                   label=f"Pareto front ({n_front} point{'s' if n_front != 1 else ''})")
        front_rows = ok[mask].iloc[order]
        shown = _independent(ok, params)
        if annotate and shown:
            step = max(1, int(math.ceil(len(front_rows) / annotate)))
            lines = []
            for num, i in enumerate(range(0, len(front_rows), step), start=1):
                r = front_rows.iloc[i]
                ax.annotate(str(num), (fx[i], fy[i]), textcoords="offset points", xytext=(5, 5), fontsize=8,
                            color="#7f1d1d", fontweight="bold", zorder=5)
                lines.append(f"{num}: {_short_point(r, shown)}  ->  {_fmt_metric(r[x] * xs)}, {_fmt_metric(r[y] * ys)}")
            caption = "Pareto points (" + ", ".join(_short_label(p)[0] for p in shown) + f"  ->  {xl}, {yl}):\n" \
                + "\n".join(lines)
        if color is None or color not in ok.columns:
            ax.legend(fontsize=8, loc="best")
        else:
            from matplotlib.lines import Line2D

            leg = ax.get_legend()
            extra = Line2D([], [], color="#d62728", marker="o", mfc="none", lw=1.6,
                           label=f"Pareto front ({n_front} point{'s' if n_front != 1 else ''})")
            if leg is not None:
                ax.legend(handles=list(leg.legend_handles) + [extra], fontsize=8, loc="best",
                          title=leg.get_title().get_text(), title_fontsize=8)
            else:
                ax.legend(handles=[extra], fontsize=8, loc="best")
    for setter, vals, flag in ((ax.set_xscale, X, logx), (ax.set_yscale, Y, logy)):
        pos = vals[vals > 0] if len(vals) else vals
        if flag or (flag is None and len(pos) and pos.max() / pos.min() > 30):
            setter("log")
    best_x = "min" if objectives_for(x)[x] == "min" else "max"
    best_y = "max" if objectives_for(y)[y] == "max" else "min"
    notes = {}
    for axis, vals, get_scale, set_lim in (("x", X, ax.get_xscale, ax.set_xlim), ("y", Y, ax.get_yscale, ax.set_ylim)):
        # a narrow spread on a linear axis that starts near the data exaggerates it (8 % looked
        # like a factor of several): start such an axis at zero and say how narrow it is
        if get_scale() == "linear" and len(vals) and vals.min() > 0 and (vals.max() - vals.min()) / vals.max() < NARROW_SPREAD:
            set_lim(0, vals.max() * 1.05)
            notes[axis] = f"; the values span {(vals.max() - vals.min()) / vals.max():.1%}"
    ax.set_xlabel(f"{xl}  ({'lower' if best_x == 'min' else 'higher'} is better{notes.get('x', '')})")
    ax.set_ylabel(f"{yl}  ({'higher' if best_y == 'max' else 'lower'} is better{notes.get('y', '')})")
    name = df.attrs.get("sweep", "") if hasattr(df, "attrs") else ""
    ax.set_title(title or f"Pareto front{': ' + name if name else ''} ({len(ok)} points)")
    ax.grid(True, which="both", alpha=0.25)
    if caption:
        n_lines = caption.count("\n") + 1
        h = fig.get_figheight()
        extra = 0.16 * n_lines + 0.2
        fig.set_figheight(h + extra)
        fig.text(0.015, 0.01, caption, fontsize=7.5, family="monospace", va="bottom", ha="left", color="#3b0d0d")
        fig.tight_layout(rect=(0, extra / (h + extra), 1, 1))
    else:
        fig.tight_layout()
    return _save(fig, path)


def _fmt_metric(v: float) -> str:
    return f"{v:,.4g}"


def heatmap(df, path: str | Path, x: str, y: str, z: str = "tokens_per_s", title: str | None = None,
            agg: str = "best", annotate: bool | None = None, cmap: str = "viridis") -> Path:
    """A 2-D sweep as a heat map: parameter ``x`` across, ``y`` down, metric ``z`` as
    colour (with values written in the cells when they fit).  When other parameters vary
    too, each cell shows the ``agg`` over them: ``best`` (max, or min for costs such as
    latency and energy), ``mean``, ``min`` or ``max``."""
    plt = _plt()
    for c in (x, y, z):
        if c not in df.columns:
            raise KeyError(f"no column '{c}' in the results (columns: {', '.join(map(str, df.columns))})")
    ok = df[df["error"].isna()] if "error" in df.columns else df
    others = [p for p in _varying(ok, _params_of(df)) if p not in (x, y)
              and not (ok.groupby([x, y])[p].nunique(dropna=False) <= 1).all()]  # not a zipped twin
    how = agg
    if agg == "best":
        how = "max" if objectives_for(z)[z] == "max" else "min"
    if how not in ("mean", "min", "max", "median"):
        raise ValueError(f"agg must be best, mean, min, max or median, got {agg!r}")
    zl, zs = label_for(z)
    piv = ok.pivot_table(index=y, columns=x, values=z, aggfunc=how) * zs
    piv = piv.sort_index(ascending=False)
    fig, ax = plt.subplots(figsize=(max(6.5, 0.75 * piv.shape[1] + 3.5), max(4.5, 0.5 * piv.shape[0] + 2.5)), dpi=120)
    im = ax.imshow(piv.to_numpy(float), aspect="auto", cmap=cmap)
    cb = fig.colorbar(im, ax=ax, pad=0.02)
    cb.set_label(zl)
    ax.set_xticks(range(piv.shape[1]))
    ax.set_xticklabels([_fmt(v) for v in piv.columns], fontsize=8, rotation=45 if piv.shape[1] > 8 else 0)
    ax.set_yticks(range(piv.shape[0]))
    ax.set_yticklabels([_fmt(v) for v in piv.index], fontsize=8)
    ax.set_xlabel(label_for(x)[0])
    ax.set_ylabel(label_for(y)[0])
    vals = piv.to_numpy(float)
    if annotate is None:
        annotate = piv.shape[0] * piv.shape[1] <= 144
    if annotate and np.isfinite(vals).any():
        lo, hi = np.nanmin(vals), np.nanmax(vals)
        for i in range(vals.shape[0]):
            for j in range(vals.shape[1]):
                v = vals[i, j]
                if np.isfinite(v):
                    frac = (v - lo) / (hi - lo) if hi > lo else 0.5
                    ax.text(j, i, f"{v:.3g}", ha="center", va="center", fontsize=7,
                            color="white" if frac < 0.6 else "black")
    name = df.attrs.get("sweep", "") if hasattr(df, "attrs") else ""
    sub = ""
    if others:
        sub = f"\n{how} over {', '.join(re.sub(r'  *[(].*[)]$', '', label_for(o)[0]) for o in others)}"
    ax.set_title(title or f"{re.sub(r' [(].*[)]$', '', zl)}{': ' + name if name else ''}{sub}", fontsize=11)
    fig.tight_layout()
    return _save(fig, path)


# --------------------------------------------------------------------------- reading results for `sim plot`

def read_run_json(path: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SimError(f"{path}: not a JSON result from `sim run --json` ({exc})") from None
    if not isinstance(data, dict) or "ops" not in data:
        raise SimError(f"{path}: not a result of `sim run --json` (no 'ops')")
    return data


def read_tables(paths: Sequence[str]):
    import pandas as pd


    frames = []
    for p in paths:
        df = read_results(p)
        attrs = dict(df.attrs)
        if len(paths) > 1:
            df = df.assign(source=Path(p).name or str(p))
        frames.append((df, attrs))
    if len(frames) == 1:
        df, attrs = frames[0]
    else:
        df = pd.concat([f for f, _ in frames], ignore_index=True)
        attrs = frames[0][1]
    if "error" in df.columns:
        df["error"] = df["error"].where(df["error"].notna() & (df["error"].astype(str) != ""), None)
    df.attrs = attrs
    return df


def filter_rows(df, where: Sequence[str] | None):
    """The rows of ``df`` matching every ``COLUMN=VALUE`` of ``where`` (numbers compared as numbers)."""
    for w in where or []:
        if "=" not in w:
            raise SimError(f"--where expects COLUMN=VALUE, got '{w}'")
        col, val = w.split("=", 1)
        if col not in df.columns:
            raise SimError(f"--where: no column '{col}' (columns: {', '.join(map(str, df.columns))})")
        s = df[col]
        if pd_num(s):
            try:
                df = df[np.isclose(s.astype(float), float(val))]
            except ValueError:
                raise SimError(f"--where {col}: '{val}' is not a number") from None
        else:
            df = df[s.astype(str) == val]
        if df.empty:
            raise SimError(f"--where {w}: no rows left")
    return df


# --------------------------------------------------------------------------- validation

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
    ax.legend(fontsize=7, loc="upper left", ncol=1)
    fig.tight_layout()
    return _save(fig, path)
