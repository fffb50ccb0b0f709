"""`sim list chips|dataflows|workloads|stacks|libraries|dram|networks|formats`: what is shipped (and the user's own)."""
from __future__ import annotations

from sim.errors import SimError


def add_parser(sub) -> None:
    ls = sub.add_parser("list", help="list chips, dataflows, workloads, software stacks, kernel libraries, DRAM "
                                     "technologies, convolutional networks or number formats")
    ls.add_argument("what", choices=["chips", "dataflows", "workloads", "stacks", "libraries", "dram", "networks", "formats"],
                    help="what to list")
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
    elif what == "stacks":
        from sim.spec.stack_catalog import list_stacks

        names = list_stacks()
    elif what == "libraries":
        from sim.spec.kernel_library import list_kernel_libraries

        names = list_kernel_libraries()
    elif what == "dram":
        from sim.spec.dram_technology import DRAM_TECHNOLOGIES

        names = list(DRAM_TECHNOLOGIES)
    elif what == "networks":
        import sim.spec.catalog as catalog

        names = catalog.names("networks")
    elif what == "formats":
        from sim.spec.dtypes import format_names

        names = format_names()
    else:  # pragma: no cover - argparse restricts choices
        raise SimError(f"unknown list '{what}'")
    for n in names:
        print(n)
    return 0
