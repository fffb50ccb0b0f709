#!/usr/bin/env python3
"""cuBLAS's split-K GEMMs kernel by kernel: the GEMM kernel, the ``splitKreduce_kernel`` that
sums its fp32 partial outputs, and the gap between them, per call (issue 11).

    python3 validation/gpu/micro_splitk_reduce_kernels.py --out DIR [--calls 30] [--m 1,2,4,...]
        [--stem-suffix _mlarge]

The stored H200 GEMMs that cuBLAS runs with split-K (97 of 609 calls: h200_case_stats.csv)
come out 3-4 % fast in the median and ~9 % below 30 us, as the split-KV decode calls did before
their combine kernel was priced (micro_cudnn_decode_kernels.py).  This records, for a grid of
bf16 F.linear shapes none of which is a stored case (m 1-256 rows, k 2,048-28,672, n
1,024-14,336: where cuBLAS's heuristic picks split-K), each kernel's own CUPTI duration and the
gap, after the harness's L2 flush (a 256 MiB read, measure.py's default), and the CUDA-event
time of the call as measure.py takes it.  Shapes cuBLAS runs without split-K are recorded too
(one kernel).  Standalone: torch, numpy and the standard library only.

Writes DIR/<gpu>_micro_splitk_reduce_kernels<suffix>.csv and
DIR/<gpu>_micro_splitk_reduce_kernels<suffix>_env.json (``--stem-suffix``, empty by default).
``--m`` replaces the row counts M (a comma-separated list), e.g. ``--m 256,384,512,768,1024,1536,2048
--stem-suffix _mlarge`` for the rows where cuBLAS's split-K choice and the model disagree on the H200.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel_timeline import Flush, gpu_tag, measure_all, pct, smi, timed_calls, write_env, write_rows, warm_clock  # noqa: E402

M = (1, 2, 4, 8, 16, 32, 64, 128, 256)
KN = ((2048, 1024), (4096, 1024), (4096, 4096), (8192, 1024), (8192, 2048), (14336, 4096), (28672, 1024),
      (28672, 4096), (5120, 14336), (12288, 2048))


def one_shape(m: int, k: int, n: int, flush: Flush, calls: int) -> dict:
    x = torch.randn(m, k, dtype=torch.bfloat16, device="cuda")
    w = (torch.randn(n, k, dtype=torch.bfloat16, device="cuda") * k ** -0.5).to(torch.bfloat16)

    def fn():
        return F.linear(x, w)

    events_us, kern = timed_calls(fn, flush, calls)
    # per call: the kernels after the flush's reduce_kernel, up to the next flush
    gemm, red, gap, names_g, names_r = [], [], [], set(), set()
    i = 0
    while i < len(kern):
        s, t, nm = kern[i]
        if ("reduce_kernel" in nm and "splitKreduce" not in nm) or nm.startswith("Memset"):
            i += 1
            continue  # the flush's sum; a workspace memset
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
    ap.add_argument("--m", default=",".join(str(m) for m in M),
                    help="comma-separated row counts (default: %(default)s)")
    ap.add_argument("--stem-suffix", default="", help="appended to the output files' stem, e.g. _m256")
    args = ap.parse_args()
    ms = tuple(int(v) for v in args.m.split(",") if v.strip())
    stem = f"{gpu_tag()}_micro_splitk_reduce_kernels{args.stem_suffix}"
    os.makedirs(args.out, exist_ok=True)
    name = torch.cuda.get_device_name(0)
    try:
        blas = str(torch.backends.cuda.preferred_blas_library())
    except Exception as e:  # noqa: BLE001
        blas = f"unknown ({type(e).__name__})"
    env = {"gpu": name, "torch": torch.__version__, "cuda": torch.version.cuda, "blas": blas,
           "smi_idle": smi("name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"),
           "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "calls_per_shape": args.calls,
           "flush": "torch.sum over a 256 MiB buffer before each call (measure.py's default)",
           "m": list(ms), "kn": [list(kn) for kn in KN]}
    flush = Flush()
    warm_clock()  # an idle GPU sits at a low clock (the decode run's first events show it)
    path = os.path.join(args.out, f"{stem}.csv")
    shapes = [(m, k, n) for k, n in KN for m in ms]
    measure_all(shapes, lambda s: one_shape(*s, flush, args.calls), lambda s: dict(dtype="bf16", m=s[0], k=s[1], n=s[2]),
                path, args.deadline, ("m", "k", "n", "gemm_us_median", "reduce_us_median", "gap_us_median",
                                      "events_us_median", "reduced_calls"))
    write_env(env, os.path.join(args.out, f"{stem}_env.json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
