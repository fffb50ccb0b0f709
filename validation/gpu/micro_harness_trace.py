"""Every timed repeat of the kernel harness, in order, for GEMMs near the H200's power limit.

The stored kernel cases keep only the statistics of their repeats (median, p10, p90, ...).
This runs measure.py's own ``time_fn`` (31 warm-up calls, 3 + 3 probe repeats, then 20-200
repeats of flush + op, 25 behind each sleep kernel) on GEMMs whose power at the unthrottled
clock is above the 700 W limit, after 2 s of idle each, and writes every repeat's time in the
order it ran: when in the burst the clock falls, and how far, is what
``sim.apps.kernel_harness`` models.  Each case runs twice (a second pass in reverse order).

    python3 validation/gpu/micro_harness_trace.py --out DIR
    # writes DIR/h200_micro_harness_trace.csv and DIR/h200_micro_harness_trace_env.json
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure as M  # noqa: E402
import torch  # noqa: E402

#: (dtype, m, k, n): stored dev/holdout GEMM shapes from 0.2 to 5 ms, 800-940 W modelled at
#: 1650 MHz, plus the 4096^3 and 8192^3 squares
CASES = [
    ("bf16", 4096, 4096, 4096), ("bf16", 12800, 4096, 4096), ("bf16", 11776, 4096, 6144),
    ("bf16", 6656, 5120, 13824), ("bf16", 8192, 13824, 5120), ("bf16", 1280, 8192, 57344),
    ("bf16", 8192, 8192, 8192), ("bf16", 7296, 28672, 8192), ("fp16", 5120, 18176, 4544),
    ("fp16", 12672, 13824, 5120), ("fp8", 3584, 11392, 11904),
]
IDLE_S = 2.0


def smi(fields):
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=10).stdout.strip().splitlines()[0]
        return dict(zip(fields, [v.strip() for v in out.split(",")]))
    except Exception as e:  # noqa: BLE001
        return {"error": f"{type(e).__name__}: {e}"}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    ns = types.SimpleNamespace(out=args.out, dry_run=False, quick=False, deadline=3600.0, flush="read",
                               target_s=0.0, no_kernels=True)
    ctx = M.Ctx(ns)
    if not ctx.cuda:
        raise SystemExit("no CUDA device")
    M.set_fp32_strict()
    torch.manual_seed(1234)
    ctx.flush_buf = torch.empty(M.FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    ctx.flush_buf.zero_()
    ctx.flush_out = torch.zeros((), dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "smi_before": smi(["driver_version", "clocks.sm", "clocks.max.sm", "clocks.mem", "power.draw",
                              "power.limit", "temperature.gpu", "pstate"]),
           "harness": {"chunk": M.CHUNK, "flush_bytes": M.FLUSH_BYTES, "target_s": ctx.target_s,
                       "max_reps": ctx.max_reps, "idle_before_case_s": IDLE_S},
           "started": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    path = os.path.join(args.out, "h200_micro_harness_trace.csv")
    with open(path, "w", newline="") as fh:
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(["pass", "dtype", "m", "k", "n", "rep", "ms", "host_ms", "temperature_c_before"])
        for p, order in ((1, CASES), (2, list(reversed(CASES)))):
            for dt, m, k, n in order:
                fn, _, objs = M.build_gemm(ctx, {"m": m, "k": k, "n": n, "dtype": dt})
                torch.cuda.synchronize()
                time.sleep(IDLE_S)
                temp = smi(["temperature.gpu"]).get("temperature.gpu", "")
                info = {}
                times = M.time_fn(ctx, fn, info=info)
                for i, t in enumerate(times):
                    w.writerow([p, dt, m, k, n, i, f"{t:.6g}", info.get("host_ms", ""), temp])
                fh.flush()
                ctx.log(f"pass {p} {dt} {m}x{k}x{n}: {len(times)} reps, median {sorted(times)[len(times) // 2]:.4f} "
                        f"ms, first {times[0]:.4f}, last {times[-1]:.4f}")
                del fn, objs
                torch.cuda.empty_cache()
    env["smi_after"] = smi(["clocks.sm", "power.draw", "temperature.gpu"])
    with open(os.path.join(args.out, "h200_micro_harness_trace_env.json"), "w") as fh:
        json.dump(env, fh, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
