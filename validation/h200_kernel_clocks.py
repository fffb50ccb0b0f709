#!/usr/bin/env python3
"""Each kernel family at its own clock: the engine's time at the SM clock Nsight Compute saw
inside the kernel, against the kernel's measured duration (README, "Power and clocks").

    python validation/h200_kernel_clocks.py [CHIP] [NCU_CSV ...]
    python validation/h200_kernel_clocks.py --measured h200_sxm h200_micro_clock_bf16_sizes.csv h200_micro_l2_counters_gemms.csv

The default files are the H200 runs of ``validation/gpu/next_clock_physics.sh`` (session 27):
``h200_micro_clock_kinds.csv`` (int8 sm80 kernels, fp32 SIMT kernels, misaligned bf16 CUTLASS
kernels, cuDNN's prefill attention) and ``h200_micro_clock_bf16_sizes.csv`` (cuBLAS's nvjet
bf16 kernels from 256 to 8,192 rows), each with the kernel's duration and
``sm__cycles_elapsed.avg.per_second`` under ``--clock-control none``.  For every workload it
prints the in-kernel clock, the measured time, the engine's time at that clock (the case's
longest kernel as ``sim validate`` lowers it, DVFS off, launch overhead excluded) and at the
chip's ``clock_mhz``, the model's power at the in-kernel clock, and, from the ``_timed.csv``
beside each file, the clock and board power nvidia-smi read while the kernel ran back to back
for 0.5 s.  An error at the kernel's own clock is the engine's per-cycle error for that
family, apart from any clock question.

``--measured`` prices them on the chip with its calibrations replaced by what the counters
measured (:func:`measured_overrides`): the L2 on its own clock at the rate it delivered, and the tensor
pipe busy 0.937 of the cycles in large dense kernels (``validation/fit_tensor_sustained.py``).
On cuBLAS's 23 bf16/fp16/fp8 GEMMs of h200_micro_clock_bf16_sizes.csv and
h200_micro_l2_counters_gemms.csv (session 27) that takes the per-cycle error from -8..+21 %
(median |error| 3.7 %) to -6..+3 % on 21 of them (median of all 23 1.6 %; the other two, a 256-row and a
k = 896 GEMM, -14 and -12 %); what it leaves to do is the clock each kernel runs at (README,
"Power and clocks").
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.apps.validation import case_kernels  # noqa: E402
from sim.apps.validation_cases import Case  # noqa: E402
from sim.model.cost.power import at_clock, op_power_w  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

sys.path.insert(0, str(ROOT / "validation"))
from fit_tensor_sustained import measured_l2  # noqa: E402

MEAS = ROOT / "validation" / "measurements"
FILES = ("h200_micro_clock_kinds.csv", "h200_micro_clock_bf16_sizes.csv")
#: the tensor kernels' median in-kernel SM clock (the eleven under the power limit in
#: h200_micro_clock_kinds.csv / h200_micro_clock_bf16_sizes.csv, session 27)
TENSOR_KERNEL_MHZ = 1769
#: the tensor pipe's busy share in large dense kernels: validation/fit_tensor_sustained.py's
#: result (its fit simulates 18 GEMMs, so it is not rerun here)
PIPE_BUSY_SHARE = 0.937


def measured_overrides() -> list[str]:
    """``--measured``: the L2 at the clock and rate its counters measured
    (``fit_tensor_sustained.measured_l2``: ~1,706.7 MHz, ~6,600 B per L2 cycle), the SM-L2
    crossbar at that rate per SM cycle of the tensor kernels' clock, and the tensor pipe's busy
    share."""
    l2 = measured_l2()
    values = dict(o.split("=", 1) for o in l2)
    l2_bytes_per_s = float(values["memory.levels.l2.bytes_per_cycle"]) * float(values["memory.levels.l2.clock_mhz"])
    return l2 + [f"noc.bandwidth_bytes_per_cycle={l2_bytes_per_s / TENSOR_KERNEL_MHZ!r}",
                 f"cores.arrays.0.sustained_fraction={PIPE_BUSY_SHARE!r}"]


def workload_case(workload: str) -> Case:
    """The case a ``micro_l2_counters.py`` workload name stands for."""
    if workload.startswith("sdpa"):
        b, h, kv, d, q, k, c = map(int, re.findall(r"\d+", workload)[:7])
        return Case(0, "attention", "bf16", dict(batch=b, heads=h, kv_heads=kv, head_dim=d, q_len=q, kv_len=k,
                                                 causal=c), None)
    m, k, n = map(int, re.findall(r"(\d+)x(\d+)x(\d+)", workload)[0])
    return Case(0, "gemm", workload.split("_")[0], dict(m=m, k=k, n=n), None)


def model_kernel(chip, case: Case):
    """The case's longest kernel simulated on ``chip`` (the one Nsight Compute timed)."""
    return max((simulate_op(chip, op, opts) for op, opts in case_kernels(chip, case)), key=lambda r: r.seconds)


def rows(chip_name: str = "h200_sxm", files=FILES, overrides=None, nominal: bool = True,
         only=None) -> pd.DataFrame:
    """One row per kernel of ``files``: see the module docstring.  ``nominal=False`` skips the
    pricing at the chip's ``clock_mhz``; ``only`` keeps the named workloads."""
    chip = load_chip(chip_name, overrides=overrides)
    launch_s = chip.runtime.op_launch_overhead_ns * 1e-9 if chip.runtime is not None else 0.0
    out = []
    for name in files:
        path = Path(name) if Path(name).exists() else MEAS / name
        d = pd.read_csv(path, thousands=",")
        pv = d.pivot_table(index=["workload", "kernel"], columns="metric", values="value", aggfunc="first")
        timed_path = path.with_name(path.stem + "_timed.csv")
        timed = pd.read_csv(timed_path).set_index("workload") if timed_path.exists() else None
        for (workload, kernel), r in pv.iterrows():
            own_mhz = float(r["sm__cycles_elapsed.avg.per_second"]) / 1e6
            measured_s = float(r["gpu__time_duration.sum"]) * 1e-9
            if "2:4" in workload or workload.startswith("sparse") or (only is not None and workload not in only):
                continue
            case = workload_case(workload.replace("dense_", "bf16_"))
            own = model_kernel(at_clock(chip, own_mhz), case)
            at_nominal = model_kernel(at_clock(chip, chip.clock_mhz), case) if nominal else None
            row = {"workload": workload, "kernel": kernel[:60], "in_kernel_mhz": own_mhz, "l2_mhz":
                   float(r["lts__cycles_elapsed.avg.per_second"]) / 1e6, "measured_us": measured_s * 1e6,
                   "model_own_clock_us": (own.seconds - launch_s) * 1e6,
                   "model_clock_mhz_us": (at_nominal.seconds - launch_s) * 1e6 if nominal else float("nan"),
                   "model_power_w_own_clock": op_power_w(own)}
            # the model's power at the kernel's own clock, its energy spread over the measured
            # duration (how validation/fit_fp8_energy.py prices a kernel a limiter holds)
            events_pj = sum(v for key, v in own.energy_breakdown_pj.items() if key not in ("total", "static"))
            row["model_power_w_measured_time"] = chip.power.idle_w + events_pj * 1e-12 / measured_s
            row["error_own_clock_pct"] = (row["model_own_clock_us"] / row["measured_us"] - 1) * 100
            row["error_clock_mhz_pct"] = (row["model_clock_mhz_us"] / row["measured_us"] - 1) * 100
            if timed is not None and workload in timed.index:
                row["loop_smi_mhz"] = float(timed.loc[workload, "sm_clock_mhz_median_second_half"])
                row["loop_smi_w"] = float(timed.loc[workload, "power_w_median_second_half"])
            out.append(row)
    return pd.DataFrame(out)


def main(argv: list[str]) -> int:
    overrides = None
    if argv and argv[0] == "--measured":
        overrides, argv = measured_overrides(), argv[1:]
    chip = argv[0] if argv else "h200_sxm"
    df = rows(chip, argv[1:] or FILES, overrides)
    pd.set_option("display.width", 250)
    cols = ["workload", "in_kernel_mhz", "measured_us", "model_own_clock_us", "error_own_clock_pct",
            "error_clock_mhz_pct", "model_power_w_own_clock", "model_power_w_measured_time", "loop_smi_mhz",
            "loop_smi_w"]
    print(df[[c for c in cols if c in df]].round(1).to_string(index=False))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
