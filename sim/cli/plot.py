"""`sim plot KIND RESULTS...`: roofline and breakdown of `sim run --json` results, Pareto front and heat
map of sweeps (the figures are :mod:`sim.apps.plotting`; imported when the command runs, so that
`sim --help` does not load matplotlib)."""
from __future__ import annotations

import sys
from pathlib import Path

from sim.errors import SimError

#: the figures `sim plot` draws
PLOT_KINDS = ("roofline", "breakdown", "pareto", "heatmap")


def add_parser(sub) -> None:
    p = sub.add_parser(
        "plot", help="plot results: roofline, breakdown (from `sim run --json` output), pareto, heatmap (sweeps)",
        description="roofline / breakdown: RESULTS are JSON files written by `sim run ... --json`; pareto / "
                    "heatmap: RESULTS are sweep folders (sim sweep --out), results.parquet or CSV files.")
    p.add_argument("kind", choices=PLOT_KINDS)
    p.add_argument("results", nargs="+", help="result files or sweep folders")
    p.add_argument("--out", default=None, metavar="PNG", help="output file (default: KIND.png)")
    p.add_argument("--x", default=None, help="pareto: x metric (default area_mm2); heatmap: parameter across")
    p.add_argument("--y", default=None, help="pareto: y metric (default tokens_per_s); heatmap: parameter down")
    p.add_argument("--z", default=None, help="heatmap: metric shown as colour (default tokens_per_s)")
    p.add_argument("--color", default=None, help="pareto: colour points by this parameter")
    p.add_argument("--where", action="append", metavar="COLUMN=VALUE",
                   help="pareto/heatmap: keep only rows with this value (repeatable)")
    p.add_argument("--agg", default="best", choices=["best", "mean", "min", "max", "median"],
                   help="heatmap: how to combine points that differ in other parameters")
    p.add_argument("--chip", default=None, help="roofline: the chip (default: the result's chip name)")
    p.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE", help="roofline: chip overrides")
    p.add_argument("--title", default=None)
    p.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.plotting import (breakdown, filter_rows, heatmap, heatmap_axes, pareto, read_run_json, read_tables,
                                   roofline, swept_parameters)
    from sim.spec.registry import load_chip

    out = Path(args.out or f"{args.kind}.png")
    if out.is_dir():
        raise SimError(f"--out {out} is a folder; give the image's file name (e.g. {out / (args.kind + '.png')})")
    kind = args.kind
    if kind in ("roofline", "breakdown"):
        results = [read_run_json(p) for p in args.results]
        for p, r in zip(args.results, results):
            if not r["ops"]:
                raise SimError(f"{p}: the result has no ops to plot")
        if kind == "breakdown":
            if len(results) != 1:
                raise SimError("breakdown plots one result; give one JSON file")
            path = breakdown(results[0], out, title=args.title)
        else:
            if not args.chip and not isinstance(results[0].get("chip"), str):
                # was 'internal error: TypeError: expected str, bytes or os.PathLike object, not NoneType'
                raise SimError(f"{args.results[0]}: the result names no chip ('chip'); give the chip with --chip")
            chip = load_chip(args.chip or results[0].get("chip"), overrides=args.set or [])
            ops = [o for r in results for o in r["ops"]]
            head = ", ".join(f"{r.get('model', '')} {r.get('phase', '')}" for r in results)
            path = roofline(ops, chip, out, title=args.title or f"Roofline: {head} on {chip.name}")
    else:
        # the results' files name every problem with a table (a missing column, no parameter
        # that varies, --where matching nothing): 'no column area_mm2' named none
        files = ", ".join(args.results)
        df = read_tables(args.results)
        try:
            df = filter_rows(df, args.where)
        except SimError as exc:
            raise SimError(f"{files}: {exc}") from None
        try:
            if kind == "pareto":
                path = pareto(df, out, x=args.x or "area_mm2", y=args.y or "tokens_per_s", color=args.color,
                              title=args.title)
            else:
                params = swept_parameters(df)
                auto_x, auto_y = heatmap_axes(df)
                x = args.x or auto_x
                y = args.y or (auto_y if auto_y != x else next((q for q in params if q != x), None))
                if not x or not y:
                    raise SimError(f"{files}: a heatmap needs two parameters (--x and --y); the results vary "
                                   f"{', '.join(params) if params else 'none'}")
                path = heatmap(df, out, x=x, y=y, z=args.z or "tokens_per_s", title=args.title, agg=args.agg)
        except KeyError as exc:
            msg = str(exc.args[0]) if exc.args else str(exc)
            hint = "; choose columns with --x / --y" + (" / --z" if kind == "heatmap" else " / --color")
            raise SimError(f"{files}: {msg}{hint}") from None
        except SimError as exc:
            raise SimError(f"{files}: {exc}") from None
    print(f"wrote {path}", file=sys.stdout)
    return 0
