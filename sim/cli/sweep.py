"""``sim sweep SPEC.yaml``: the command-line front end of :func:`sim.apps.sweep.sweep`."""
from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from sim.cli._common import print_table
from sim.errors import SimError

__all__ = ["add_parser", "run"]


def _positive_int(text: str) -> int:

    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, got '{text}'") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {v}")
    return v


def _seconds(text: str) -> float:

    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got '{text}'") from None
    if not math.isfinite(v) or v <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds > 0, got '{text}'")
    return v


def add_parser(sub) -> None:
    s = sub.add_parser(
        "sweep", help="design-space sweep from a YAML spec: resumable, local processes or Dask",
        description="Run every point of a sweep spec (a base chip, workloads, parameters to vary, metrics to "
                    "keep) and write one row per point to OUT/results.csv and OUT/results.parquet.  Finished "
                    "points are stored in OUT as they complete; re-running the same command skips them (a "
                    "killed sweep resumes where it stopped).  See docs/sweeps.md.")
    s.add_argument("spec", help="sweep spec YAML (see sweeps/*.yaml)")
    s.add_argument("--out", default=None, metavar="DIR",
                   help="results store folder (default: reports/sweeps/NAME); reused points are skipped")
    s.add_argument("-j", "--jobs", type=_positive_int, default=None,
                   help="local worker processes, or LocalCluster workers (default: all cores)")
    s.add_argument("--scheduler", default=None, metavar="tcp://HOST:PORT|local",
                   help="run on a Dask cluster (address of its scheduler) or on a Dask LocalCluster ('local')")
    s.add_argument("--connect-timeout", type=_seconds, default=5.0, metavar="S",
                   help="seconds to wait for a Dask scheduler (default 5)")
    s.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE",
                   help="override a value of the base chip for every point (repeatable)")
    s.add_argument("--csv", default=None, metavar="FILE", help="also export the table to this CSV file")
    s.add_argument("--retry-errors", action="store_true", help="re-simulate stored points that failed")
    s.add_argument("--dry-run", action="store_true", help="list the points and check them; simulate nothing")
    s.add_argument("--top", type=_positive_int, default=12, help="rows of the summary table (default 12)")
    s.add_argument("-q", "--quiet", action="store_true", help="no progress bar or summary")
    s.set_defaults(func=run)


def _summary_table(df, top: int):
    """The Pareto front of the first throughput metric against area (or the first rows)."""
    from sim.apps.sweep.analysis import pareto_front

    ok = df[df["error"].isna()]
    params = list(df.attrs.get("parameters", []))
    metrics = list(df.attrs.get("metrics", []))
    y = next((m for m in ("tokens_per_s", "tflops") if m in ok.columns), None)
    x = next((m for m in ("area_mm2", "energy_per_token_j", "energy_j") if m in ok.columns), None)
    cols = ["point", "workload"] + params + [m for m in metrics if "." not in m][:6]
    if y and x and len(ok):
        front = ok[pareto_front(ok, x=x, y=y)].sort_values(x, kind="stable")
        title = f"Pareto front ({len(front)} of {len(ok)} points): max {y}, min {x}"
        return title, front[[c for c in cols if c in front.columns]].head(top)
    return f"first {min(top, len(df))} of {len(df)} points", df[[c for c in cols if c in df.columns]].head(top)


def _check_csv(path: Path) -> None:
    """--csv must name a file in an existing folder: said before the sweep runs, not after."""
    if path.is_dir():
        raise SimError(f"--csv {path} is a folder; give a file name (e.g. {path / 'results.csv'})")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise SimError(f"--csv {path}: the folder {parent} does not exist")


def run(args) -> int:
    from sim.apps.store import export_csv
    from sim.apps.sweep.run import check_not_all_failed, load_spec, plan, run_sweep

    loaded = load_spec(args.spec)
    quiet = bool(args.quiet)
    if args.csv and not args.dry_run:
        _check_csv(Path(args.csv))
    if args.dry_run:
        df = plan(loaded, args.set)
        bad = df[df["error"].notna()]
        print(f"sweep {loaded.name}: {len(df)} point(s) ({len(loaded.spec.workloads)} workload(s) x "
              f"{len(df) // max(1, len(loaded.spec.workloads))} parameter combination(s)), {len(bad)} invalid")
        show = df.drop(columns=["hash"]).head(args.top)
        print_table(show.to_dict("records"))
        for _, r in bad.head(5).iterrows():
            print(f"  point {r['point']}: {r['error']}", file=sys.stderr)
        return 0
    out = Path(args.out) if args.out else Path("reports") / "sweeps" / loaded.name

    def log(msg: str) -> None:
        if not quiet:
            print(msg, file=sys.stderr)

    df, stats = run_sweep(loaded, out=out, jobs=args.jobs, scheduler=args.scheduler, progress=not quiet,
                          retry_errors=args.retry_errors, overrides=args.set, connect_timeout=args.connect_timeout,
                          log=log)
    if args.csv:
        try:
            export_csv(df, args.csv)
        except OSError as exc:  # the results are stored: say where, and what went wrong with the copy
            raise SimError(f"--csv {args.csv}: cannot write it ({exc.strerror or exc}); the results are in "
                           f"{out / 'results.csv'}") from None
    check_not_all_failed(df, stats.name, stats, str(out / "results.csv"))  # exit 2, not a success
    if not quiet:
        print(f"sweep {stats.name}: {stats.points} point(s) in {stats.seconds:.1f} s - {stats.new} simulated, "
              f"{stats.reused} reused from the store, {stats.failed} failed")
        print(f"results: {out / 'results.csv'} (and results.parquet; store in {out})"
              + (f"; CSV copy {args.csv}" if args.csv else ""))
        failed = df[df["error"].notna()]
        for _, r in failed.head(3).iterrows():
            print(f"  point {r['point']} failed: {r['error']}", file=sys.stderr)
        if len(failed) > 3:
            print(f"  ... and {len(failed) - 3} more failed point(s) (see the 'error' column)", file=sys.stderr)
        title, table = _summary_table(df, args.top)
        if len(table):
            print(f"\n{title}:")
            print_table(table.to_dict("records"))
    return 0
