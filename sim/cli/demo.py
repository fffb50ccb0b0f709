"""`sim demo`: the main job on the default chip and workload."""
from __future__ import annotations

from pathlib import Path


def add_parser(sub) -> None:
    d = sub.add_parser("demo", help="the main job: default chip and workload, summary table and report folder")
    d.add_argument("--out", default="reports/demo", metavar="DIR",
                   help="report folder: per-op CSVs, summary.json, roofline.png (default reports/demo)")
    d.add_argument("--chip", default="npu_128x128", help="chip name or YAML path (default npu_128x128)")
    d.add_argument("--model", default="llama3-8b", help="model name or YAML path (default llama3-8b)")
    d.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.demo import run_demo

    run_demo(Path(args.out), chip=args.chip, model=args.model, echo=print)
    return 0
