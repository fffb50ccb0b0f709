"""`sim list chips|dataflows|workloads|formats`: what is shipped."""
from __future__ import annotations

from sim.errors import SimError


def add_parser(sub) -> None:
    ls = sub.add_parser("list", help="list shipped chips, dataflows, workloads or number formats")
    ls.add_argument("what", choices=["chips", "dataflows", "workloads", "formats"], help="what to list")
    ls.set_defaults(func=run)


def run(args) -> int:
    what = args.what
    if what == "chips":
        from sim.spec.registry import list_chips

        names = list_chips()
    elif what == "dataflows":
        from sim.model.dataflow import list_dataflows

        names = list_dataflows()
    elif what == "workloads":
        from sim.model.workload.models import list_models

        names = list_models()
    elif what == "formats":
        from sim.spec.dtypes import format_names

        names = format_names()
    else:  # pragma: no cover - argparse restricts choices
        raise SimError(f"unknown list '{what}'")
    for n in names:
        print(n)
    return 0
