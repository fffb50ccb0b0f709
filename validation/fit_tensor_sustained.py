#!/usr/bin/env python3
"""The sustained tensor-core rate the GEMMs Nsight Compute timed at their own SM clock imply,
with the L2 as those counters measured it, and how the model then fits each of them.

    python validation/fit_tensor_sustained.py

validation/measurements/h200_micro_l2_counters{,_gemms}.csv hold, for 18 large dense cuBLAS
GEMMs (bf16, fp16, fp8; every dim >= 1,536 and k >= 1,536: many waves of full tiles), the
kernel's duration and the SM clock it ran at (``--clock-control none``: the GPU's own).  At
that clock they reach 87-94 % of the [WP] tensor-core peak, while the engine, with the L2
bandwidth those counters measured, keeps the tensor cores ~99 % busy on them: wgmma issue
gaps, barrier waits between k-steps and the epilogue's share of a tile are not events the
engine models.  So:

* ``fraction``: median over those GEMMs of (modelled kernel time at the measured clock, with
  the tensor cores at [WP]'s rate - ``sustained_fraction`` 1 - and without the launch
  overhead) / (measured kernel time): the chip's ``tensor_cores`` ``sustained_fraction``.

h200_sxm does not use it (``sustained_fraction`` stays 1 and its L2 keeps the tighter
calibrated rate its comment explains): with both the fraction (0.937) and the measured L2 the
per-kernel sets improve but whole models and the power-capped 8192^3 loop come out too fast
(README, "Known limitations").  This script keeps the derivation for when that is resolved.
"""
from __future__ import annotations

import re
import statistics
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.apps.validation import _gemm_ops  # noqa: E402
from sim.apps.validation_cases import Case  # noqa: E402
from sim.model.cost.power import at_clock  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

MEAS = ROOT / "validation" / "measurements"
FILES = ("h200_micro_l2_counters.csv", "h200_micro_l2_counters_gemms.csv")
#: the GEMMs used: large on every side, so that whole waves of full tiles dominate
MIN_SIDE, MIN_K = 1536, 1536


def measured() -> list[dict]:
    out = []
    for name in FILES:
        d = pd.read_csv(MEAS / name, thousands=",")
        pv = d.pivot_table(index="workload", columns="metric", values="value", aggfunc="first")
        for w, r in pv.iterrows():
            dims = re.findall(r"(\d+)x(\d+)x(\d+)", w)
            kind = w.split("_")[0]
            if not dims or "2:4" in w or kind == "sparse":
                continue
            m, k, n = map(int, dims[0])
            if min(m, n) < MIN_SIDE or k < MIN_K:
                continue
            out.append({"workload": w, "dtype": "bf16" if kind == "dense" else kind, "m": m, "k": k, "n": n,
                        "kernel_s": float(r["gpu__time_duration.sum"]) * 1e-9,
                        "sm_mhz": float(r["sm__cycles_elapsed.avg.per_second"]) / 1e6})
    return out


def measured_l2() -> list[str]:
    """Overrides that put the L2 where the counters measured it (tests/test_l2_clock.py does
    the same): its own clock (median over every kernel) and the best L2 -> SM crossbar rate of a
    kernel without TMA multicast, per L2 cycle."""
    d = pd.read_csv(MEAS / FILES[0], thousands=",")
    pv = d.pivot_table(index="workload", columns="metric", values="value", aggfunc="first")
    l2_hz = float(pv["lts__cycles_elapsed.avg.per_second"].median())
    solo = pv[pv["launch__cluster_dim_x"] * pv["launch__cluster_dim_y"] <= 1]
    best = float((solo["l1tex__m_xbar2l1tex_read_bytes.sum"] / (solo["gpu__time_duration.sum"] * 1e-9)).max())
    return [f"memory.levels.l2.clock_mhz={l2_hz / 1e6!r}", f"memory.levels.l2.bytes_per_cycle={best / l2_hz!r}"]


def modelled_s(row: dict, fraction: float = 1.0, chip_name: str = "h200_sxm") -> float:
    """The engine's kernel time (launch overhead excluded) at the measured SM clock, as
    ``sim validate`` lowers the case (the library path), with the measured L2 and the tensor
    cores' ``sustained_fraction`` at ``fraction``."""
    chip = at_clock(load_chip(chip_name, overrides=measured_l2() + [f"cores.arrays.0.sustained_fraction={fraction!r}"]),
                    row["sm_mhz"])
    op, opts = _gemm_ops(Case(0, "gemm", row["dtype"], {"m": row["m"], "k": row["k"], "n": row["n"]}, None))[-1]
    r = simulate_op(chip, op, opts)
    launch_s = chip.runtime.op_launch_overhead_ns * 1e-9 if chip.runtime is not None else 0.0
    return r.seconds - launch_s


def fit(chip_name: str = "h200_sxm") -> dict:
    rows = measured()
    ratios = [modelled_s(r, 1.0, chip_name) / r["kernel_s"] for r in rows]
    return {"fraction": statistics.median(ratios), "rows": rows, "ratios": ratios}


def main() -> int:
    res = fit()
    f = res["fraction"]
    print(f"{'workload':26s} {'MHz':>6s} {'measured us':>12s} {'model/measured at 1':>20s} {'error at fraction':>18s}")
    for r, q in zip(res["rows"], res["ratios"]):
        fitted = modelled_s(r, f) / r["kernel_s"] - 1
        print(f"{r['workload']:26s} {r['sm_mhz']:6.0f} {r['kernel_s'] * 1e6:12.1f} {q:20.3f} {fitted:+18.1%}")
    print(f"tensor_cores sustained_fraction (median of {len(res['ratios'])}): {f:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
