"""Shared pieces of every figure: colours, axis labels with units, the Agg backend, saving."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import numpy as np

from sim.errors import SimError

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


def require_numeric(df, columns):
    """``df`` with each of ``columns`` (those it has) as numbers: a column read as text whose
    every value is a number is converted; one holding something else raises
    :class:`~sim.errors.SimError` naming the column, the value and its point (a hand-edited
    or damaged results file: ``'21é.2'`` made an internal error deep in matplotlib)."""
    import pandas as pd

    for col in dict.fromkeys(c for c in columns if c is not None and c in df.columns):
        s = df[col]
        if pd_num(s):
            continue
        num = pd.to_numeric(s, errors="coerce") if s.dtype != bool else s.astype(float) * np.nan
        bad = s.notna() & num.isna()
        if bad.any():
            i = bad.idxmax()
            where = f"point {df.at[i, 'point']}" if "point" in df.columns else f"row {i}"
            raise SimError(f"column '{col}' holds {s[i]!r} ({where}), not a number; a figure needs numbers there")
        df = df.assign(**{col: num})
    return df


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
    ext = path.suffix.lstrip(".").lower()
    formats = fig.canvas.get_supported_filetypes()
    if ext and ext not in formats:
        # matplotlib's "Format 'xyz' is not supported" was an internal error
        _plt().close(fig)
        raise SimError(f"--out {path}: cannot write a .{ext} figure (formats: {', '.join(sorted(formats))})")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    _plt().close(fig)
    return path


def _get(r: Any, name: str, default: Any = 0):
    if isinstance(r, Mapping):
        return r.get(name, default)
    return getattr(r, name, default)


def _si_unit(value: float, unit: str) -> tuple[str, float]:
    """(``unit`` with the SI prefix that puts ``value`` at 1 or more, the scale to apply):
    none, milli, micro, else nano."""
    v = abs(value)
    for prefix, scale in (("", 1.0), ("m", 1e3), ("µ", 1e6)):
        if v >= 1.0 / scale:
            return prefix + unit, scale
    return "n" + unit, 1e9


def _time_unit(seconds: float) -> tuple[str, float]:
    return _si_unit(seconds, "s")


def _energy_unit(joules: float) -> tuple[str, float]:
    return _si_unit(joules, "J")


# --------------------------------------------------------------------------- roofline


