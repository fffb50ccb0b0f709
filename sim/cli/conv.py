"""`sim conv CHIP NETWORK`: a convolutional network's layers on a chip (frames/s, DRAM accesses
per MAC, energy), as the accelerator papers report them."""
from __future__ import annotations

import json

from sim.cli._common import check_formats, chip_from_args, chip_options, engine_progress, print_kv, print_table
from sim.errors import SimError
from sim.ir.results import _json_default


def add_parser(sub) -> None:
    c = sub.add_parser("conv", help="run a convolutional network's layers (networks/, e.g. alexnet) on a chip")
    chip_options(c)
    c.add_argument("network", help="a network from networks/ (see `sim list networks`) or a path to one")
    c.add_argument("--batch", type=int, default=1, help="images processed together (Eyeriss measured AlexNet at 4)")
    c.add_argument("--dtype", default=None,
                   help="operand format (default: the first of bf16, fp16, fp8, int8, fp32 the chip computes)")
    c.add_argument("--dataflow", help="ws, os, is or rs (default: the array's default)")
    c.add_argument("--memory", choices=["ideal", "modeled"], default="modeled",
                   help="ideal: stall-free array cycles; modeled: buffer and DRAM timing")
    c.add_argument("--json", action="store_true", help="print one JSON object (totals and a list of layers)")
    c.set_defaults(func=run)


def run(args) -> int:
    from sim.apps.cnn import run_network
    from sim.spec.network_spec import load_network

    check_formats(args)
    if args.batch < 1:
        raise SimError(f"--batch must be >= 1, got {args.batch}")
    chip = chip_from_args(args)
    net = load_network(args.network)
    with engine_progress(args):
        r = run_network(chip, net, batch=args.batch, dtype=args.dtype, dataflow=args.dataflow, memory=args.memory)
    if args.json:
        print(json.dumps(r.to_dict(), default=_json_default))
        return 0
    print(f"{r.network} on {r.chip}: batch {r.batch}, {r.dtype}, dataflow {r.dataflow}, memory {r.memory}")
    print_table(r.layers.to_dict(orient="records"),
                ["layer", "out", "macs", "ms", "utilization", "dram_read_bytes", "dram_write_bytes",
                 "compulsory_dram_bytes", "dram_accesses_per_mac", "energy_mj", "dataflow", "row_length", "bound",
                 "tiles"])
    print_kv({"seconds": r.seconds, "frames_per_s": r.frames_per_s, "macs": r.macs, "dram_bytes": r.dram_bytes,
              "dram_accesses_per_mac": r.dram_accesses_per_mac, "energy_j": r.energy_j,
              "utilization": r.utilization})
    return 0
