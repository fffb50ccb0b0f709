"""Figures of one run: the roofline of its ops and its latency/energy breakdown."""
from __future__ import annotations

import math
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np

from sim.apps.plotting.style import (_COMPONENT_COLORS, _KIND_COLORS, _LEVEL_PALETTE, _energy_unit, _get, _plt, _save,
                                     _time_unit)
from sim.model.cost.energy import op_energy_components_pj
from sim.spec.chip import ChipSpec


def roofline(results: Sequence, chip: ChipSpec, path: str | Path, title: str | None = None,
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


