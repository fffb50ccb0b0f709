#!/usr/bin/env python3
"""The energy of an fp8 multiply-add on the H200's tensor cores, from the clock heavy kernels
hold: ``energy.mac_pj.fp8`` of arch_configs/h200_sxm.yaml.

    python validation/fit_fp8_energy.py            # prints the table
    python validation/fit_fp8_energy.py --write    # and stores it (validation/results/fit_fp8_energy.json)

The stored table is what tests/test_power.py checks the chip files against; it re-prices a few
of its rows (the 20 together take about a minute), so a stale table fails there.

Evidence (validation/measurements/h200_micro_l2_counters{,_gemms}.csv, Nsight Compute with
``--clock-control none``: each kernel at the clock the GPU chose for it, from idle): the 20
large dense cuBLAS GEMMs run at 1,470-1,653 MHz in-kernel, far below the 1,980 MHz boost, so a
fast power limiter holds each at the power it allows.  Priced by the model at its own measured
clock, with its energy spread over its measured duration, every bf16 and fp16 kernel draws
847-951 W (17 kernels, within +-6 % of their median: one level, as a limiter would hold them),
and the three fp8 kernels 743-776 W while running at the LOWEST clocks (1,470-1,526 MHz): the
model gives fp8 work too little energy.  The table's fp8 MAC (sim.model.cost.energy: Horowitz's
multiplier scaled by the significand, plus an fp32-class add, at 5 nm) is 0.06 pJ, and a
tensor-core PE-cycle's overhead (``array_pe_cycle_pj``) is paid once per cycle whatever the
format, so an fp8 MAC, two per PE-cycle, costs half a bf16 MAC's share of it; what an fp8 MAC
adds per MAC at the doubled rate (the second accumulation into fp32, the wider operand
fan-out per cycle) is not in either table.

CALIBRATION: ``mac_pj.fp8`` such that each fp8 kernel, priced as above, draws the median power
of the bf16/fp16 kernels; the median over the fp8 kernels.  Energy is linear in ``mac_pj``, so
each kernel's value is solved from two pricings.

Checked on what it was not fitted to (2026-12-05): the whole-model fp8 W8A8 steps
(h200_models_{dev,holdout}.csv) went from a signed mean of -5.3 / -3.9 % to -2.2 / -0.5 %
(prefills -6.7 / -6.6 % -> -1.9 / -1.2 %); the harness's fp8 8192^3 and 16384^3 rows of
h200_micro.csv (median repeat) from -3.7 / -3.9 % to +2.0 / +6.4 %, the bf16 rows of the same
harness being +1.4 / +6.5 %.  Against it: from the first to the last five repeats of that
16384^3 run fp8 lost 9 % and bf16 15 %, which a higher fp8 average power does not explain; a
sustained fp8 loop with nvidia-smi beside the bf16 one (validation/gpu/micro_sustained_dtypes.py,
not yet run) would settle it.
"""
from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "validation"))

import fit_tensor_sustained as counters  # noqa: E402
from sim.apps.validation import _gemm_ops  # noqa: E402
from sim.apps.validation_cases import Case  # noqa: E402
from sim.model.cost.energy import mac_pj  # noqa: E402
from sim.model.cost.power import at_clock  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

CHIP = "h200_sxm"
STORED = ROOT / "validation" / "results" / "fit_fp8_energy.json"
#: the fit is made with the table's MAC energies (the chip file's measured fp8 value removed)
OVERRIDES = ["energy.mac_pj={}"]


def power_at_measured(row: dict, chip) -> float:
    """The kernel's modelled energy at its measured clock over its measured duration (W): the
    dynamic energy as modelled, the static power over the measured time."""
    op, opts = _gemm_ops(Case(0, "gemm", row["dtype"], {"m": row["m"], "k": row["k"], "n": row["n"]}, None))[-1]
    r = simulate_op(at_clock(chip, row["sm_mhz"]), op, opts)
    static = r.energy_breakdown_pj.get("static", 0.0)
    energy = (r.energy_pj - static) + static * row["kernel_s"] / r.seconds
    return energy * 1e-12 / row["kernel_s"]


def fit(chip_name: str = CHIP, overrides=()) -> dict:
    """{"mac_pj": fitted fp8 MAC energy, "level_w": the bf16/fp16 kernels' median power,
    "rows": [(workload, dtype, MHz, W as priced, solved mac_pj or None)]}."""
    chip = load_chip(chip_name, list(overrides))
    rows = counters.measured()
    priced = [power_at_measured(r, chip) for r in rows]
    others = [p for r, p in zip(rows, priced) if r["dtype"] != "fp8"]
    level = statistics.median(others)
    x0 = mac_pj(chip, "fp8")
    bumped = load_chip(chip_name, list(overrides) + [f"energy.mac_pj.fp8={x0 + 0.1!r}"])
    out, solved = [], []
    for r, p in zip(rows, priced):
        x = None
        if r["dtype"] == "fp8":
            slope = (power_at_measured(r, bumped) - p) / 0.1
            x = x0 + (level - p) / slope
            solved.append(x)
        out.append((r["workload"], r["dtype"], r["sm_mhz"], p, x))
    return {"mac_pj": statistics.median(solved), "table_mac_pj": x0, "level_w": level,
            "spread": (min(others) / level - 1, max(others) / level - 1), "rows": out}


def stored() -> dict:
    """The table ``--write`` stored, as :func:`fit` returns it."""
    d = json.loads(STORED.read_text())
    d["spread"] = tuple(d["spread"])
    d["rows"] = [tuple(r) for r in d["rows"]]
    return d


def main() -> int:
    res = fit(overrides=OVERRIDES)
    if "--write" in sys.argv[1:]:
        STORED.write_text(json.dumps({**res, "chip": CHIP, "overrides": OVERRIDES}, indent=1) + "\n")
    for w, dt, f, p, x in sorted(res["rows"], key=lambda t: t[3]):
        print(f"{w:28s} {dt:5s} {f:6.0f} MHz {p:6.0f} W" + (f"   mac_pj solved {x:.4f}" if x is not None else ""))
    lo, hi = res["spread"]
    print(f"bf16/fp16 level {res['level_w']:.0f} W ({lo:+.1%} .. {hi:+.1%}); table fp8 MAC {res['table_mac_pj']:.4f} pJ; "
          f"fitted energy.mac_pj.fp8 = {res['mac_pj']:.3f} pJ")
    return 0


if __name__ == "__main__":
    sys.exit(main())
