"""Figures of a sweep: Pareto fronts and heat maps over the swept parameters."""
from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from sim.apps.plotting.style import _plt, _save, label_for, pd_num, require_numeric
from sim.apps.sweep.analysis import objectives_for, pareto_front
from sim.apps.sweep.spec import BREAKDOWN_PREFIXES, METRICS
from sim.errors import SimError


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
    for c in (x, y) + ((color,) if color is not None else ()):
        if c not in df.columns:  # (an unknown --color drew the points uncoloured without a word)
            raise KeyError(f"no column '{c}' in the results (columns: {', '.join(map(str, df.columns))})")
    ok = df[df["error"].isna()] if "error" in df.columns else df
    ok = require_numeric(ok, (x, y))
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
    if len({x, y, z}) < 3:
        raise SimError(f"a heat map needs three different columns: x {x!r}, y {y!r}, colour {z!r}")
    ok = df[df["error"].isna()] if "error" in df.columns else df
    ok = require_numeric(ok, (z,))
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

