"""What every command shares: the chip from its arguments, the one table and key-value format of
human-readable output, notes on stderr, and the chip arguments themselves."""
from __future__ import annotations

import sys
from typing import Any

from sim.errors import SimError
from sim.ir.results import format_number
from sim.spec.registry import load_chip


def chip_options(sp) -> None:
    """The positional chip and its ``--set`` overrides."""
    sp.add_argument("chip", help="chip YAML path or a name from arch_configs/ (see `sim list chips`)")
    sp.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE",
                    help="override a chip config value, e.g. --set clock_mhz=1400 (repeatable)")


def chip_from_args(args) -> Any:
    overrides = list(getattr(args, "set", None) or [])
    arr = getattr(args, "array", None)
    if arr:
        try:
            rows, cols = (int(x) for x in arr.lower().split("x"))
        except ValueError:
            raise SimError(f"--array must look like ROWSxCOLS (e.g. 128x128), got '{arr}'") from None
        overrides += [f"cores.arrays.0.rows={rows}", f"cores.arrays.0.cols={cols}"]
    return load_chip(args.chip, overrides=overrides)


def print_table(rows: list[dict], columns: list[str] | None = None, file=None) -> None:
    """A table in the one number format of every human-readable output
    (:func:`sim.ir.results.format_number`: thousands separators, SI units for bytes)."""
    import pandas as pd

    df = pd.DataFrame(rows)
    if columns:
        df = df[[c for c in columns if c in df.columns]]
    for c in df.columns:
        df[c] = [format_number(v, str(c)) for v in df[c]]
    with pd.option_context("display.max_columns", None, "display.width", 200):
        print(df.to_string(index=False), file=file or sys.stdout)


def print_kv(d: dict, file=None) -> None:
    width = max(len(k) for k in d) if d else 0
    for k, v in d.items():
        print(f"  {k:<{width}}  {format_number(v, k)}", file=file or sys.stdout)


def note(args, msg: str) -> None:
    """A remark on stderr (a default chosen, a fallback taken); silent under ``-q``."""
    if not getattr(args, "quiet", False):
        print(f"note: {msg}", file=sys.stderr)


def check_formats(args) -> None:
    """--dtype / --weight-dtype / --kv-dtype: an unknown number format is named with its option
    (the bare "unknown number format 'int9'" does not say which of the three it was)."""
    from sim.errors import UnknownNameError
    from sim.spec.dtypes import get_format

    for opt in ("dtype", "weight_dtype", "kv_dtype"):
        v = getattr(args, opt, None)
        if v is None:
            continue
        try:
            get_format(v)
        except UnknownNameError as exc:
            raise SimError(f"--{opt.replace('_', '-')}: {exc}") from None
