"""What every command shares: the chip from its arguments, the one table and key-value format of
human-readable output, notes on stderr, and the chip arguments themselves."""
from __future__ import annotations

import contextlib
import sys
import time
from typing import Any, Iterator

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
    if arr is not None:  # (an empty --array was ignored)
        try:
            rows, cols = (int(x) for x in arr.lower().split("x"))
        except ValueError:
            raise SimError(f"--array must look like ROWSxCOLS (e.g. 128x128), got '{arr}'") from None
        overrides += [f"cores.arrays.0.rows={rows}", f"cores.arrays.0.cols={cols}"]
    return load_chip(args.chip, overrides=overrides)


def print_table(rows: list[dict], columns: list[str] | None = None, file=None) -> None:
    """A table in the one number format of every human-readable output
    (:func:`sim.ir.results.format_number`: thousands separators, SI units for bytes), columns
    right-aligned, ``-`` where a row has no value."""
    # plain Python, not pandas: `sim run` and `sim show` would import it for this alone (~0.25 s)
    names = list(dict.fromkeys(k for r in rows for k in r))  # in order of first appearance
    if columns:
        names = [c for c in columns if c in names]
    cells = [[str(c) for c in names]] + [["-" if r.get(c) is None else format_number(r[c], str(c)) for c in names]
                                         for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(names))]
    print("\n".join(" ".join(v.rjust(w) for v, w in zip(row, widths)) for row in cells), file=file or sys.stdout)


def print_kv(d: dict, file=None) -> None:
    width = max(len(k) for k in d) if d else 0
    for k, v in d.items():
        print(f"  {k:<{width}}  {format_number(v, k)}", file=file or sys.stdout)


def note(args, msg: str) -> None:
    """A remark on stderr (a default chosen, a fallback taken); silent under ``-q``."""
    if not getattr(args, "quiet", False):
        print(f"note: {msg}", file=sys.stderr)


#: seconds between progress lines of one long simulation (``engine_progress``); the first
#: comes only after this long, so a quick answer prints none
PROGRESS_INTERVAL_S = 5.0


@contextlib.contextmanager
def engine_progress(args, interval_s: float | None = None) -> Iterator[None]:
    """While the block runs, a line on stderr at most every ``interval_s`` seconds (default
    :data:`PROGRESS_INTERVAL_S`) saying
    which candidate mapping and engine run a long simulation is at (terminal or not; silent
    under ``-q``)."""
    if getattr(args, "quiet", False):
        yield
        return
    from sim.model.engine.progress import listening

    interval_s = PROGRESS_INTERVAL_S if interval_s is None else interval_s
    start = time.monotonic()
    last = [start]

    def show(event) -> None:
        now = time.monotonic()
        if now - last[0] >= interval_s:
            last[0] = now
            print(f"[{now - start:,.0f} s] {event.describe()}", file=sys.stderr, flush=True)

    with listening(show):
        yield


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
