#!/usr/bin/env python3
"""Did a change move any prediction?  Predict stored case files now and diff with a record.

A refactor must leave every prediction where it was; a model change should move only what
it means to.  This script makes that a check anyone can run:

    # before the change (or at any revision): record the predictions
    python validation/check_predictions.py record before/ [CASES.csv ...]
    # after it
    python validation/check_predictions.py record after/
    python validation/check_predictions.py compare before/ after/ [--rel-tol 0]

    # or in one step, against the committed predictions of a validation run
    python validation/check_predictions.py compare validation/results/ now/

``record`` writes ``<stem>_predictions.csv`` per case file (default: the stored H200 dev
and holdout sets, the same files ``sim validate`` writes with ``--out``).  ``compare``
pairs files by name and rows by their case line, prints every case whose predicted time
moved by more than ``--rel-tol`` (default 0: identical), and exits 1 when any did.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_CASES = [ROOT / "validation" / "measurements" / "h200_dev.csv",
                 ROOT / "validation" / "measurements" / "h200_holdout.csv"]


def record(out: Path, cases: list[Path], chip: str, jobs: int) -> None:
    sys.path.insert(0, str(ROOT))
    from sim.apps.validation import validate

    out.mkdir(parents=True, exist_ok=True)
    for path in cases:
        # an interrupted record resumes where it stopped (the checkpoint names chip and cases)
        partial = out / f"{path.stem}_predictions.partial.jsonl"
        df = validate(chip, path, progress=True, jobs=jobs, checkpoint=partial)
        target = out / f"{path.stem}_predictions.csv"
        df.drop(columns=["wall_s"], errors="ignore").to_csv(target, index=False)
        partial.unlink(missing_ok=True)
        print(f"{target}: {len(df)} cases", file=sys.stderr)


def compare(before: Path, after: Path, rel_tol: float) -> int:
    import pandas as pd

    files = sorted(p.name for p in before.glob("*_predictions.csv") if (after / p.name).is_file())
    if not files:
        print(f"no *_predictions.csv file is in both {before} and {after}", file=sys.stderr)
        return 2
    moved = 0
    for name in files:
        a = pd.read_csv(before / name).set_index("line")
        b = pd.read_csv(after / name).set_index("line")
        common = a.index.intersection(b.index)
        pa, pb = a.loc[common, "predicted_ms"], b.loc[common, "predicted_ms"]
        both_missing = pa.isna() & pb.isna()
        rel = ((pb - pa).abs() / pa.abs()).where(~both_missing, 0.0).fillna(float("inf"))
        bad = rel[rel > rel_tol]
        print(f"{name}: {len(common)} cases compared, {len(bad)} moved by more than {rel_tol:g}"
              + (f"; {len(a.index.symmetric_difference(b.index))} only in one file" if len(common) != len(a) else ""))
        for line in bad.index[:50]:
            print(f"  line {line} {a.loc[line, 'kind']} {a.loc[line, 'dtype']}: "
                  f"{pa.loc[line]!r} -> {pb.loc[line]!r} ms")
        moved += len(bad)
    return 1 if moved else 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("record", help="predict case files and write <stem>_predictions.csv into OUT")
    r.add_argument("out", type=Path)
    r.add_argument("cases", type=Path, nargs="*", default=DEFAULT_CASES)
    r.add_argument("--chip", default="h200_sxm")
    r.add_argument("-j", "--jobs", type=int, default=2)
    c = sub.add_parser("compare", help="diff two folders of predictions; exit 1 when any moved")
    c.add_argument("before", type=Path)
    c.add_argument("after", type=Path)
    c.add_argument("--rel-tol", type=float, default=0.0, help="relative change allowed (default 0: identical)")
    args = p.parse_args(argv)
    if args.command == "record":
        record(args.out, args.cases, args.chip, args.jobs)
        return 0
    return compare(args.before, args.after, args.rel_tol)


if __name__ == "__main__":
    sys.exit(main())
