"""Reading results for ``sim plot``: run JSON, result tables, row filters."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Sequence

import numpy as np

from sim.apps.plotting.style import pd_num
from sim.apps.store import read_results
from sim.errors import SimError, quoted


def read_run_json(path: str) -> dict:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise SimError(f"{path}: cannot read ({exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SimError(f"{path}: not a JSON result from `sim run --json` ({exc})") from None
    except (ValueError, RecursionError):  # a number of over 4,300 digits; objects nested thousands deep
        raise SimError(f"{path}: not a JSON result from `sim run --json` (a number too long to read, or "
                       "nesting too deep)") from None
    if not isinstance(data, dict) or "ops" not in data:
        raise SimError(f"{path}: not a result of `sim run --json` (no 'ops')")
    ops = data["ops"]
    if not isinstance(ops, list) or not all(isinstance(o, dict) for o in ops):
        raise SimError(f"{path}: 'ops' must be a list of op objects, as `sim run --json` writes it; got "
                       f"{type(ops).__name__}" + (" items that are not objects" if isinstance(ops, list) else ""))
    for i, o in enumerate(ops):
        missing = [k for k in ("op", "kind", "seconds") if k not in o]
        if missing:
            raise SimError(f"{path}: ops.{i} has no {', '.join(repr(k) for k in missing)} (every op of "
                           "`sim run --json` has op, kind and seconds)")
        for key in ("op", "kind"):
            if not isinstance(o[key], str):  # a list failed grouping the ops (exit 3)
                raise SimError(f"{path}: ops.{i}.{key} must be a name, got {quoted(o[key])}")
        for key in ("seconds", "flops", "dram_bytes", "energy_j", "repeat"):
            if key in o and (key == "seconds" or o[key] is not None) and not _finite_count(o[key]):
                # NaN / Infinity (json reads them) drew a figure with the op missing, exit 0; a
                # 400-digit integer or a string failed inside numpy (exit 3)
                raise SimError(f"{path}: ops.{i}.{key} must be a finite number >= 0, got {quoted(o[key])}")
        flops, seconds = float(o.get("flops") or 0.0), float(o["seconds"])
        if flops > 0 and seconds > 0 and not np.isfinite(flops / seconds):
            raise SimError(f"{path}: ops.{i}: {flops:g} FLOPs in {seconds:g} s is no rate (seconds too small)")
    return data


def _finite_count(v) -> bool:
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return False
    try:
        return bool(np.isfinite(float(v))) and v >= 0
    except OverflowError:
        return False


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

