"""`sim validate CHIP CASES.csv`: predict measured GPU cases and report the error
(:mod:`sim.apps.validation`, imported when the command runs)."""
from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from sim.errors import WorkloadError
from sim.spec.registry import load_chip


def add_parser(sub) -> None:
    v = sub.add_parser("validate", help="predict measured cases (CSV) and report the error")
    v.add_argument("chip", help="chip YAML path or name (e.g. h200_sxm)")
    v.add_argument("cases", help="case CSV: kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,"
                                 "hidden,ffn,bytes,measured_ms")
    v.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE", help="override a chip value")
    v.add_argument("--out", default=None, help="folder for predictions.csv, summary.json and scatter.png")
    v.add_argument("--resume", action="store_true",
                   help="with --out: keep the cases an interrupted run already predicted (its "
                        "predictions.partial.jsonl) and predict only the rest")
    v.add_argument("--json", action="store_true", help="the last line printed is one JSON summary object")
    v.add_argument("-j", "--jobs", type=int, default=None,
                   help="processes to predict with (default: the machine's cores, at most 8)")
    v.set_defaults(func=run)


def run(args) -> int:
    import pandas as pd

    from sim.apps.plotting import validation_scatter
    from sim.apps.validation import summarize, validate

    chip = load_chip(args.chip, overrides=args.set or [])
    jobs = args.jobs if args.jobs is not None else min(8, os.cpu_count() or 1)
    if jobs < 1:
        raise WorkloadError(f"--jobs must be at least 1 (got {jobs})")
    checkpoint = None
    if args.out:
        # every finished case is appended here at once, so Ctrl-C or a job limit loses nothing
        checkpoint = Path(args.out) / "predictions.partial.jsonl"
        if not args.resume and checkpoint.is_file():
            checkpoint.unlink()
    elif args.resume:
        raise WorkloadError("--resume needs --out (the folder an interrupted run wrote to)")
    try:
        df = validate(chip, args.cases, progress=not getattr(args, "quiet", False), jobs=jobs,
                      checkpoint=checkpoint)
    except KeyboardInterrupt:
        if checkpoint is not None:
            print(f"interrupted: the cases predicted so far are in {checkpoint}; "
                  "run the same command with --resume to finish", file=sys.stderr)
        return 130
    summary = summarize(df)
    summary["chip"] = chip.name
    summary["cases_file"] = str(args.cases)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "predictions.csv", index=False)
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        validation_scatter(df, out / "scatter.png", f"{chip.name}: predicted vs measured ({Path(args.cases).name})")
        checkpoint.unlink(missing_ok=True)  # predictions.csv now holds every row
    cols = ["line", "kind", "dtype", "measured_ms", "predicted_ms", "error_pct", "bound"]
    with pd.option_context("display.max_rows", 100000, "display.width", 200, "display.float_format",
                           lambda v: f"{v:,.4g}"):
        if not args.json:
            print(df[cols].to_string(index=False))
        table = [{"kind": k, **v} for k, v in summary["by_kind"].items()]
        table.append({"kind": "all", **{k: summary[k] for k in ("cases", "median_abs_error_pct",
                                                                 "p90_abs_error_pct", "max_abs_error_pct",
                                                                 "mean_signed_error_pct")}})
        print(pd.DataFrame(table).to_string(index=False), file=sys.stderr if args.json else sys.stdout)
    if summary["failed"]:
        print(f"{summary['failed']} case(s) could not be predicted (see the error column)", file=sys.stderr)
        failed = df[df["error"].fillna("").astype(str) != ""] if "error" in df else df.iloc[0:0]
        for _, r in failed.head(5).iterrows():
            print(f"  {args.cases}:{r['line']}: {r['error']}", file=sys.stderr)
        if len(failed) > 5:
            print(f"  ... and {len(failed) - 5} more", file=sys.stderr)
    if args.json:
        print(json.dumps(summary))
    if len(df) and summary["failed"] >= len(df):  # nothing predicted: not a success (as a sweep whose points all failed)
        where = f"; predictions.csv in {args.out}" if args.out else ""
        raise WorkloadError(f"{args.cases}: all {len(df)} case(s) failed to be predicted{where}")
    return 0
