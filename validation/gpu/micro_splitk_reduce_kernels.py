#!/usr/bin/env python3
"""cuBLAS's split-K GEMMs kernel by kernel: the GEMM kernel, the ``splitKreduce_kernel`` that
sums its fp32 partial outputs, and the gap between them, per call (issue 11).

    python3 validation/gpu/micro_splitk_reduce_kernels.py --out DIR [--calls 30]

The stored H200 GEMMs that cuBLAS runs with split-K (97 of 609 calls: h200_case_stats.csv)
come out 3-4 % fast in the median and ~9 % below 30 us, as the split-KV decode calls did before
their combine kernel was priced (micro_cudnn_decode_kernels.py).  This records, for a grid of
bf16 F.linear shapes none of which is a stored case (m 1-256 rows, k 2,048-28,672, n
1,024-14,336: where cuBLAS's heuristic picks split-K), each kernel's own CUPTI duration and the
gap, after the harness's L2 flush (a 256 MiB read, measure.py's default), and the CUDA-event
time of the call as measure.py takes it.  Shapes cuBLAS runs without split-K are recorded too
(one kernel).  Standalone: torch, numpy and the standard library only.

Writes DIR/<gpu>_micro_splitk_reduce_kernels.csv and DIR/<gpu>_micro_splitk_reduce_kernels_env.json.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import time

import numpy as np
import torch
import torch.nn.functional as F

FLUSH_BYTES = 256 << 20
M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
KN = ((2048, 1024), (4096, 1024), (4096, 4096), (8192, 1024), (8192, 2048), (14336, 4096), (28672, 1024),
      (28672, 4096), (5120, 14336), (12288, 2048))


def smi(fields: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({type(e).__name__})"


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else float("nan")


def one_shape(m: int, k: int, n: int, flush_buf, flush_out, calls: int) -> dict:
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    w = (torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * k ** -0.5).to(torch.bfloat16)

    def fn():
        return F.linear(x, w)

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for e0, e1 in ev:
        torch.sum(flush_buf, 0, out=flush_out)
        e0.record()
        fn()
        e1.record()
    torch.cuda.synchronize()
    events_us = [e0.elapsed_time(e1) * 1e3 for e0, e1 in ev]
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            torch.sum(flush_buf, 0, out=flush_out)
            fn()
        torch.cuda.synchronize()
    kern = sorted((float(e.time_range.start), float(e.time_range.end), e.name) for e in prof.events()
                  if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    # per call: the kernels after the flush's reduce_kernel, up to the next flush
    gemm, red, gap, names_g, names_r = [], [], [], set(), set()
    i = 0
    while i < len(kern):
        s, t, nm = kern[i]
        if "reduce_kernel" in nm and "splitKreduce" not in nm:
            i += 1
            continue
        # a GEMM kernel, maybe followed by cuBLAS's split-K reduction
        gemm.append(t - s)
        names_g.add(nm[:160])
        if i + 1 < len(kern) and "splitKreduce" in kern[i + 1][2]:
            s2, t2, nm2 = kern[i + 1]
            red.append(t2 - s2)
            gap.append(s2 - t)
            names_r.add(nm2[:160])
            i += 1
        i += 1
    row = dict(dtype="bf16", m=m, k=k, n=n, calls=calls, gemm_kernel=" | ".join(sorted(names_g)),
               reduce_kernel=" | ".join(sorted(names_r)), reduced_calls=len(red),
               gemm_us_median=pct(gemm, 50), gemm_us_p10=pct(gemm, 10), gemm_us_p90=pct(gemm, 90),
               reduce_us_median=pct(red, 50), reduce_us_p10=pct(red, 10), reduce_us_p90=pct(red, 90),
               gap_us_median=pct(gap, 50), gap_us_p10=pct(gap, 10), gap_us_p90=pct(gap, 90),
               events_us_median=pct(events_us, 50), events_us_p10=pct(events_us, 10),
               events_us_p90=pct(events_us, 90))
    del x, w
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--calls", type=int, default=30)
    ap.add_argument("--deadline", type=float, default=300.0, help="stop starting new shapes after this many seconds")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    name = torch.cuda.get_device_name(0)
    tag = "h200" if "H200" in name else "h100" if "H100" in name else "gpu"
    try:
        blas = str(torch.backends.cuda.preferred_blas_library())
    except Exception as e:  # noqa: BLE001
        blas = f"unknown ({type(e).__name__})"
    env = {"gpu": name, "torch": torch.__version__, "cuda": torch.version.cuda, "blas": blas,
           "smi_idle": smi("name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"),
           "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "calls_per_shape": args.calls,
           "flush": "torch.sum over a 256 MiB buffer before each call (measure.py's default)"}
    flush_buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda").uniform_()
    flush_out = torch.empty((), dtype=torch.float32, device="cuda")
    # warm the clock up before the first shape (an idle GPU sits at a low clock)
    a = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    t = time.time()
    while time.time() - t < 2.0:
        a @ a
    torch.cuda.synchronize()
    del a
    path = os.path.join(args.out, f"{tag}_micro_splitk_reduce_kernels.csv")
    rows, t0 = [], time.time()
    shapes = [(m, k, n) for k, n in KN for m in M]
    for i, (m, k, n) in enumerate(shapes):
        if time.time() - t0 > args.deadline:
            print(f"deadline: {len(shapes) - i} shapes left", flush=True)
            break
        try:
            row = one_shape(m, k, n, flush_buf, flush_out, args.calls)
        except Exception as e:  # noqa: BLE001
            row = dict(dtype="bf16", m=m, k=k, n=n, error=f"{type(e).__name__}: {str(e)[:200]}")
        rows.append(row)
        cols = list(dict.fromkeys(k2 for r in rows for k2 in r))
        with open(path, "w", newline="") as f:  # rewritten after every shape
            w = csv.DictWriter(f, fieldnames=cols)
            w.writeheader()
            w.writerows(rows)
        print(i, m, k, n, {k2: (round(row[k2], 2) if isinstance(row.get(k2), float) else row.get(k2))
                           for k2 in ("gemm_us_median", "reduce_us_median", "gap_us_median", "events_us_median",
                                      "reduced_calls")}, flush=True)
    env["smi_after"] = smi("clocks.sm,clocks.mem,power.draw,temperature.gpu")
    with open(os.path.join(args.out, f"{tag}_micro_splitk_reduce_kernels_env.json"), "w") as f:
        json.dump(env, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
