"""Looking at sweep results: Pareto fronts and the best point for a metric."""
from __future__ import annotations

from typing import Mapping

import numpy as np

__all__ = ["pareto_front", "objectives_for", "LOWER_IS_BETTER"]

#: metrics where smaller is better (everything else: larger is better)
LOWER_IS_BETTER = ("seconds", "ttft_s", "tpot_s", "energy_j", "energy_per_token_j", "power_w", "area_mm2",
                   "mac_area_mm2", "sram_area_mm2", "cycles", "dram_bytes", "kv_cache_bytes", "bytes_per_chip")


def objectives_for(*metrics: str) -> dict[str, str]:
    """``{metric: 'min' | 'max'}`` by each metric's usual direction."""
    out = {}
    for m in metrics:
        lower = m in LOWER_IS_BETTER or m.startswith("energy_j.") or m.startswith("energy_per_token_j.")
        out[m] = "min" if lower else "max"
    return out


def pareto_front(df, objectives: Mapping[str, str] | None = None, *, x: str | None = None, y: str | None = None):
    """Boolean Series: True for the rows no other row dominates.

    ``objectives``: ``{column: 'min' | 'max'}``; or ``x``/``y`` column names, each with
    its usual direction (:func:`objectives_for`).  Rows with an error or a missing value in
    any objective are never on the front.  Equal rows are all kept.
    """
    import pandas as pd

    if objectives is None:
        if x is None or y is None:
            raise ValueError("pareto_front needs objectives or both x and y")
        objectives = objectives_for(x, y)
    cols = list(objectives)
    for c in cols:
        if c not in df.columns:
            raise KeyError(f"no column '{c}' in the results (columns: {', '.join(map(str, df.columns))})")
        if objectives[c] not in ("min", "max"):
            raise ValueError(f"objective for '{c}' must be 'min' or 'max', got {objectives[c]!r}")
    vals = np.column_stack([df[c].to_numpy(dtype="float64") * (1.0 if objectives[c] == "min" else -1.0)
                            for c in cols]) if len(df) else np.zeros((0, len(cols)))
    ok = np.isfinite(vals).all(axis=1)
    if "error" in df.columns:
        ok &= df["error"].isna().to_numpy()
    idx = np.flatnonzero(ok)
    v = vals[idx]
    front = np.zeros(len(df), dtype=bool)
    keep = np.ones(len(idx), dtype=bool)
    for start in range(0, len(idx), 512):  # chunks keep memory at 512 x n
        blk = v[start:start + 512]
        le = (v[None, :, :] <= blk[:, None, :]).all(axis=2)
        lt = (v[None, :, :] < blk[:, None, :]).any(axis=2)
        keep[start:start + 512] = ~(le & lt).any(axis=1)
    front[idx[keep]] = True
    return pd.Series(front, index=df.index, name="pareto")
