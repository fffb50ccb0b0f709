"""`sim scalesim CFG TOPOLOGY`: a SCALE-Sim run's COMPUTE_REPORT fields and ours."""
from __future__ import annotations

import json

from sim.cli._common import print_table


def add_parser(sub) -> None:
    s = sub.add_parser("scalesim", help="run a SCALE-Sim .cfg and topology CSV; report its COMPUTE_REPORT fields and ours")
    s.add_argument("cfg", help="SCALE-Sim .cfg file ([architecture_presets], [run_presets])")
    s.add_argument("topology", help="SCALE-Sim topology CSV (convolution or 'name, M, N, K,' GEMM format)")
    s.add_argument("--format", choices=["auto", "conv", "gemm"], default="auto",
                   help="topology format (SCALE-Sim's -i conv|gemm); auto detects from the header")
    s.add_argument("--chip", default="scalesim_32x32", help="base chip for the memory system (default scalesim_32x32)")
    s.add_argument("--memory", choices=["ideal", "modeled"], default="modeled",
                   help="our own numbers with ideal or modeled memory")
    s.add_argument("--json", action="store_true", help="one JSON object per layer per line")
    s.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.scalesim_compat import run_scalesim

    rows = run_scalesim(args.cfg, args.topology, topology_format=args.format, chip=args.chip,
                        memory=args.memory)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    print_table(rows, ["layer", "dataflow", "m", "n", "k", "scalesim_total_cycles", "scalesim_stall_cycles",
                        "overall_util_pct", "mapping_efficiency_pct", "compute_util_pct", "cycles", "stall_cycles",
                        "dram_read_bytes", "energy_pj"])
    return 0
