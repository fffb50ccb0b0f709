"""`sim check FILE...`: validate chip, dataflow, model, sweep and stack files."""
from __future__ import annotations

import sys


def add_parser(sub) -> None:
    c = sub.add_parser("check", help="validate config files (chips, dataflows, models, sweeps, software stacks)")
    c.add_argument("files", nargs="+", metavar="FILE",
                   help="config files, folders of them or chip names; each file's kind (chip, dataflow, model, "
                        "sweep or software stack) is recognised by its keys or its folder")
    c.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.check import check_files

    checked: list = []
    problems = check_files(args.files, checked=checked)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    kinds: dict[str, int] = {}
    for _path, kind in checked:
        kinds[kind] = kinds.get(kind, 0) + 1
    if getattr(args, "verbose", 0):
        for path, kind in checked:
            print(f"  {path}: {kind}")
    print(f"ok: {len(checked)} file(s) valid (" + ", ".join(f"{n} {k}" for k, n in kinds.items()) + ")")
    return 0
