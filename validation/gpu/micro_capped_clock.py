"""The SM clock a GEMM runs at under the power cap: in-kernel cycle counters against nvidia-smi.

Why: back to back, the 8192^3 bf16 GEMM runs ~12 % slower than its single, uncapped run
scaled by nvidia-smi's clock (h200_micro_l2_counters_timed.csv: 1.734 ms at 1,425 MHz
against 1.415 ms at 1,562 MHz from its own cycle counters).  Either the clock nvidia-smi
samples is not the one the SMs average under the cap, or the kernel loses more than its
clock.  This runs GEMMs back to back for ``--seconds`` under Nsight Compute, which profiles
only a few launches late in the loop (``--launch-skip``; the others run unprofiled), reading
each profiled kernel's duration and SM clock from its own counters, while nvidia-smi samples
the clock and power.

    python3 validation/gpu/micro_capped_clock.py --out DIR
    # DIR/h200_micro_capped_clock.csv      shape, launch, kernel us, SM MHz (counters)
    # DIR/h200_micro_capped_clock_smi.csv  nvidia-smi samples during the loop
    # DIR/h200_micro_capped_clock_env.json, DIR/ncu_<shape>.log
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from micro_csv import write_rows, write_table  # noqa: E402

#: (name, m, k, n, launches skipped before profiling, launches profiled)
SHAPES = [("bf16_8192x8192x8192", 8192, 8192, 8192, 2500, 3),
          ("bf16_512x4096x28672", 512, 4096, 28672, 12000, 3)]
METRICS = "gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second"


def target(name: str) -> int:
    import torch
    import torch.nn.functional as F
    m, k, n, skip, count = next((m, k, n, s, c) for nm, m, k, n, s, c in SHAPES if nm == name)
    x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
    t0 = time.time()
    for i in range(skip + count + 50):
        F.linear(x, w)
        if i % 64 == 0:
            torch.cuda.synchronize()
    torch.cuda.synchronize()
    print(f"TARGET {name} {skip + count + 50} launches in {time.time() - t0:.2f} s", flush=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--target")
    a = ap.parse_args()
    if a.target:
        return target(a.target)
    os.makedirs(a.out, exist_ok=True)
    env = {"smi_start": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,power.draw,"
                                        "power.limit,temperature.gpu", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip(), "shapes": SHAPES}
    rows, smi_rows = [], []
    for name, m, k, n, skip, count in SHAPES:
        time.sleep(3)
        smi = subprocess.Popen(["nvidia-smi", "--query-gpu=timestamp,clocks.sm,power.draw,clocks_event_reasons.active",
                                "--format=csv,noheader,nounits", "-lms=50"], stdout=subprocess.PIPE, text=True)
        # gemm kernels only (nvjet); skip counts launches of matching kernels
        cmd = ["ncu", "--clock-control", "none", "--csv", "--page", "raw", "--metrics", METRICS,
               "--kernel-name", "regex:nvjet|gemm", "--launch-skip", str(skip), "--launch-count", str(count),
               sys.executable, os.path.abspath(__file__), "--target", name]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        smi.terminate()
        out, _ = smi.communicate(timeout=10)
        smi_rows += [[name] + [x.strip() for x in line.split(",")] for line in out.splitlines() if line.count(",") == 3]
        with open(os.path.join(a.out, f"ncu_{name}.log"), "w") as f:
            f.write(p.stdout[-20000:] + "\n--- stderr ---\n" + p.stderr[-5000:])
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith('"')]
        if len(lines) < 3:
            print(name, "no ncu table", p.stderr[-500:])
            continue
        t = list(csv.reader(lines))
        head = t[0]
        for i, r in enumerate(t[2:]):
            us = float(r[head.index("gpu__time_duration.sum")].replace(",", "")) / 1e3
            hz = float(r[head.index("sm__cycles_elapsed.avg.per_second")].replace(",", ""))
            rows.append({"shape": name, "m": m, "k": k, "n": n, "launch": skip + i, "kernel_us": round(us, 3),
                         "sm_mhz_counters": round(hz / 1e6, 1), "kernel": r[head.index("Kernel Name")][:100]})
            print(rows[-1], flush=True)
    write_rows(os.path.join(a.out, "h200_micro_capped_clock.csv"), rows)
    write_table(os.path.join(a.out, "h200_micro_capped_clock_smi.csv"),
                ["shape", "timestamp", "sm_mhz", "power_w", "reasons"], smi_rows)
    with open(os.path.join(a.out, "h200_micro_capped_clock_env.json"), "w") as f:
        json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
