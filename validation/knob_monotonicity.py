#!/usr/bin/env python3
"""Does doubling a resource ever slow an op?  A seeded search over random ops and every knob.

    python validation/knob_monotonicity.py [--chips a,b] [--ops 8] [--seed 1] [-j 2]
                                           [--out validation/results/knob_monotonicity.json]

For each shipped chip (or ``--chips``) it draws ``--ops`` ops - GEMMs of random shape in
the chip's first array format (decode rows to prefill rows), a DRAM copy and an
elementwise add, as the ops of a model are - simulates each on the chip as shipped and with
one resource doubled (``double_knob``: DRAM pin rate, channels, clock, NoC bandwidth, cores,
array rows, array columns, core SRAM, chip SRAM, the chip SRAM's clock), and reports every
op that got slower by more than the tolerance: 1 % for rates and counts, 5 % for capacities
(more room can lead the mapper to a slightly slower tile; tests/test_knobs.py says why).

This is issue 12's invariant "more of anything never slows a run" checked where no test
looks: tests/test_knobs.py checks one GEMV and one copy per chip; this draws new ops.  The
summary (slowdowns by chip and knob, the worst of each) goes to ``--out`` as JSON and is
printed; the README's Known limitations cites it.  With the on-disk run cache off
(``SIM_NO_CACHE=1``) a run of the defaults takes about 20 s on two cores (2026-12-07).
``--refresh-off`` (a diagnostic, with ``--out`` elsewhere) runs both sides of every pair with the
DRAM refresh nearly off: 2026-12-07, 18 of 656 pairs slower instead of 23 - the channel and clock
pairs vanish (a short op's few refreshes fall differently against its requests), the array-row
and core-count ones stay.
"""
from __future__ import annotations

import argparse
import json
import random
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

#: the knobs doubled, and how much slower an op may get before it counts (see the docstring)
TOLERANCE = {"pin": 0.01, "channels": 0.01, "clock": 0.01, "noc": 0.01, "cores": 0.01, "rows": 0.01,
             "cols": 0.01, "sram": 0.05, "l2": 0.05, "l2_clock": 0.01}


def double_knob(chip, knob: str) -> str:
    """The ``--set`` override that doubles ``knob`` on ``chip``."""
    d = chip.memory.dram
    a = chip.cores.arrays[0]
    dram = f"memory.levels.{d.name}"
    if knob == "pin":
        return f"{dram}.data_rate_gbps_per_pin={2 * d.data_rate_gbps_per_pin:g}"
    if knob == "channels":
        return f"{dram}.channels={2 * d.channels}"
    if knob == "clock":
        return f"clock_mhz={2 * chip.clock_mhz:g}"
    if knob == "noc":
        return f"noc.bandwidth_bytes_per_cycle={2 * chip.noc.bandwidth_bytes_per_cycle:g}"
    if knob == "cores":
        return f"cores.count={2 * chip.cores.count}"
    if knob in ("rows", "cols"):
        return f"cores.arrays.{a.name}.{knob}={2 * getattr(a, knob)}"
    if knob == "sram":
        lv = chip.memory.core_srams[-1]
        return f"memory.levels.{lv.name}.capacity_kib={2 * lv.capacity_kib:g}"
    if knob == "l2":
        lv = chip.memory.chip_srams[-1]
        return f"memory.levels.{lv.name}.capacity_kib={2 * lv.capacity_kib:g}"
    if knob == "l2_clock":  # the chip SRAM on a clock of its own at twice the core clock: twice its bandwidth
        lv = chip.memory.chip_srams[-1]
        return f"memory.levels.{lv.name}.clock_mhz={2 * (lv.clock_mhz or chip.clock_mhz):g}"
    raise KeyError(knob)


def knobs_of(chip) -> list[str]:
    """The knobs that exist on ``chip`` (no chip SRAM: no l2 knobs)."""
    return [k for k in TOLERANCE if chip.memory.chip_srams or k not in ("l2", "l2_clock")]


def gemm_dtype(chip) -> str:
    """The format a GEMM is drawn in: bf16 where an array has it, else the first array's first."""
    if any("bf16" in a.macs_per_pe_per_cycle for a in chip.cores.arrays):
        return "bf16"
    return next(iter(chip.cores.arrays[0].macs_per_pe_per_cycle))


def draw_ops(chip, n_gemms: int, rng: random.Random) -> list:
    """``n_gemms`` GEMMs of random shape, a copy and an elementwise add (1-16 MiB)."""
    from sim.ir.ops import Copy, Gemm, VectorOp
    dtype = gemm_dtype(chip)
    ops = [Gemm(f"gemm{i}", rng.choice([1, 8, 16, 32, 64, 128, 256, 512, 1024, 2048]),
                rng.choice([256, 512, 1024, 2048, 4096]), rng.choice([256, 512, 1024, 2048, 4096]), dtype=dtype)
           for i in range(n_gemms)]
    nb = rng.choice([1 << 20, 4 << 20, 16 << 20])
    return ops + [Copy("copy", nb), VectorOp("add", "add", nb // 2, 1.0, nb, nb // 2)]


#: ``--refresh-off``: the DRAM's refresh interval set to the schema's largest (1 ms, a few refreshes
#: in a run of these ops) on both sides of every pair - a diagnostic: how many slowdowns come from
#: where refreshes fall against a short op's requests (every op starts at the same refresh phase)
REFRESH_OFF_NS = 1_000_000


def _chip_rows(name: str, n_gemms: int, seed: int, refresh_off: bool = False) -> list[dict]:
    """Every (op, knob) of one chip: the op's seconds as shipped and with the knob doubled."""
    sys.path.insert(0, str(ROOT))
    from sim.apps.single_op import simulate
    from sim.spec.registry import load_chip

    chip = load_chip(name)
    base_set = [f"memory.levels.{chip.memory.dram.name}.t_refi_ns={REFRESH_OFF_NS}"] if refresh_off else []
    base_chip = load_chip(name, base_set) if base_set else chip
    rng = random.Random(f"{seed}:{name}")
    rows = []
    for op in draw_ops(chip, n_gemms, rng):
        base = simulate(base_chip, op).seconds
        for knob in knobs_of(chip):
            t = simulate(load_chip(name, base_set + [double_knob(chip, knob)]), op).seconds
            rows.append({"chip": name, "op": repr(op), "knob": knob, "base_s": base, "doubled_s": t,
                         "speedup": base / t, "slower": base / t < 1 - TOLERANCE[knob]})
    return rows


def summarise(rows: list[dict]) -> dict:
    """Slowdowns by chip and knob: how many (op, knob) pairs, how many slowed, the worst."""
    out = {"pairs": len(rows), "slower": sum(r["slower"] for r in rows), "by_chip_knob": {}}
    for r in rows:
        key = f"{r['chip']}/{r['knob']}"
        s = out["by_chip_knob"].setdefault(key, {"pairs": 0, "slower": 0, "worst_speedup": 1e9, "worst_op": None})
        s["pairs"] += 1
        s["slower"] += r["slower"]
        if r["speedup"] < s["worst_speedup"]:
            s["worst_speedup"], s["worst_op"] = r["speedup"], r["op"]
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--chips", help="comma-separated chip names (default: every shipped chip)")
    ap.add_argument("--ops", type=int, default=6, help="random GEMMs per chip (a copy and an add are added)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("-j", "--jobs", type=int, default=2)
    ap.add_argument("--out", type=Path, default=ROOT / "validation" / "results" / "knob_monotonicity.json")
    ap.add_argument("--refresh-off", action="store_true",
                    help="diagnostic: DRAM refresh (nearly) off on both sides of every pair (write --out elsewhere)")
    args = ap.parse_args()
    sys.path.insert(0, str(ROOT))
    import sim
    chips = args.chips.split(",") if args.chips else sim.list_chips()
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        rows = [r for part in pool.map(_chip_rows, chips, [args.ops] * len(chips), [args.seed] * len(chips),
                                       [args.refresh_off] * len(chips))
                for r in part]
    summary = summarise(rows)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"seed": args.seed, "ops_per_chip": args.ops + 2, "tolerance": TOLERANCE,
                                    **({"refresh_off_t_refi_ns": REFRESH_OFF_NS} if args.refresh_off else {}),
                                    "summary": summary, "rows": rows}, indent=1) + "\n")
    print(f"{summary['slower']} of {summary['pairs']} (op, doubled knob) pairs slower beyond tolerance")
    for key, s in sorted(summary["by_chip_knob"].items()):
        if s["slower"]:
            print(f"  {key:32s} {s['slower']}/{s['pairs']}  worst x{s['worst_speedup']:.3f}  {s['worst_op']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
