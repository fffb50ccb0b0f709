"""`sim show CHIP`: a chip's peaks, memories and ridge points."""
from __future__ import annotations

import json

from sim.cli._common import chip_from_args, chip_options, print_table
from sim.ir.results import _json_default


def add_parser(sub) -> None:
    sh = sub.add_parser("show", help="a chip's summary: peaks per number format, memories, ridge points")
    chip_options(sh)
    sh.add_argument("--json", action="store_true", help="print one JSON object")
    sh.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.single_op import chip_summary

    chip = chip_from_args(args)
    info = chip_summary(chip)
    if args.json:
        print(json.dumps(info, default=_json_default))
        return 0
    print(f"{info['name']}: {info['description']}" if info.get("description") else info["name"])
    print(f"  clock {info['clock_mhz']:,g} MHz, {info['cores']:,} core(s), vector unit "
          f"{info['vector_ops_per_cycle_per_core']:,g} ops/cycle/core")
    print(f"  software stack {info['software_stack']}"
          + (f", kernel library {info['kernel_library']}" if info.get("kernel_library") else ""))
    for a in info["arrays"]:
        rates = ", ".join(f"{k} {v:g}" for k, v in a["macs_per_pe_per_cycle"].items())
        print(f"  array {a['name']}: {a['count']} x {a['rows']}x{a['cols']} per core, MACs/PE/cycle: {rates}; "
              f"dataflows {', '.join(a['dataflows'])} (default {a['default_dataflow']})"
              + ("; 2:4 sparsity" if a["sparsity_2_4"] else ""))
        overlap = "folds overlap (stationary operand double-buffered)" if a["fold_overlap"] else \
            "every fold pays its own fill and drain"
        print(f"    {overlap}{' (derived from the register file)' if a['fold_overlap_derived'] else ''}; "
              f"edge folds {'padded to the whole array' if a['pads_edge_folds'] else 'span the PEs they use'}")
    print("\nmemories (inner to outer):")
    print_table(info["memories"])
    print("\npeaks and ridge points (FLOP per DRAM byte at which compute and DRAM time are equal):")
    print_table([{"format": r["format"], "peak_tflops": r["peak_tflops"],
                   "sparse_2_4_tflops": r.get("sparse_2_4_tflops", ""), "ridge_flop_per_byte": r["ridge_flop_per_byte"],
                   "runs_as": r["runs_as"]} for r in info["peaks"]])
    return 0
