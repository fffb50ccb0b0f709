#!/usr/bin/env python3
"""How the block scheduler deals a grid whose blocks lose most of their warps at once:
torch's int8 weight-only kernel, instrumented, block by block.

Why (README, Known limitations, "int8 weight-only decode at 1-8 rows"): ``torch._weight_int8pack_mm``
runs one thread per output in 16 x 16 blocks; at 1-8 rows 7 (or 6) of a block's 8 warps return at
once, and a grid larger than one wave of 8 blocks per SM then takes about twice the model's time:
Nsight Compute saw the busiest SM sent 26-28 blocks where the average is 13.6-16
(``h100_micro_int8mm_sched_ncu.csv``), which no rule predicted for other grids.  Here a copy of the
kernel (the body of aten/src/ATen/native/cuda/int8mm.cu on torch 2.11: bf16 activations, int8
weights [n, k], bf16 scales, fp32 accumulation, block (16, 16), grid (ceil(n / 16), ceil(m / 16)))
records, from each block's thread (0, 0), its SM (%smid) and %globaltimer when it starts and when
its loop ends, so the dispatch order, the blocks per SM and how long each ran are read directly.
The real kernel is timed beside it (CUDA events, median of 20) to show the copy behaves alike.

    python3 validation/gpu/micro_block_dispatch.py --out DIR
    # DIR/<gpu>_micro_block_dispatch.csv       case, m, k, n, block, sm, start_ns, end_ns
    #                                          (ns from the grid's first start)
    # DIR/<gpu>_micro_block_dispatch_cases.csv case, m, k, n, blocks, copy_us, torch_us,
    #                                          busiest SM's blocks, mean blocks per SM
    # DIR/<gpu>_micro_block_dispatch_env.json
    python3 validation/gpu/micro_block_dispatch.py --dry-run --out DIR   # no GPU: argument check only
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from micro_csv import write_rows  # noqa: E402

SRC = r"""
#include <cuda_bf16.h>
extern "C" __global__ void int8mm_traced(const __nv_bfloat16* __restrict__ x, const signed char* __restrict__ w,
                                         const __nv_bfloat16* __restrict__ scale, __nv_bfloat16* __restrict__ out,
                                         int B, int K, int N, unsigned long long* trace) {
    unsigned long long t0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    const int b = blockIdx.y * blockDim.y + threadIdx.y;
    const int n = blockIdx.x * blockDim.x + threadIdx.x;
    const int blk = blockIdx.y * gridDim.x + blockIdx.x;
    const bool first = threadIdx.x == 0 && threadIdx.y == 0;
    if (first) {
        unsigned int smid;
        asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
        trace[blk * 3 + 0] = smid;
        trace[blk * 3 + 1] = t0;
    }
    if (b >= B || n >= N) return;
    float acc = 0.0f;
    for (int k = 0; k < K; ++k) {
        acc += __bfloat162float(x[b * K + k]) * (float)w[n * K + k];
    }
    out[b * N + n] = __float2bfloat16(acc * __bfloat162float(scale[n]));
    if (first) {
        unsigned long long t1;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1));
        trace[blk * 3 + 2] = t1;
    }
}
"""

#: (m, k, n): the grids of h100_micro_int8mm_sched_ncu.csv (1,056 / 1,792 / 2,112 blocks), Falcon-7B's
#: 18,176-wide weight (1,136 blocks: a small overflow of one wave), and sizes between; 1, 4 and 16 rows
CASES = [(1, 4096, 16896), (1, 4096, 18176), (1, 4096, 20480), (1, 4096, 24576), (1, 4096, 28672),
         (1, 2048, 33792), (4, 4096, 18176), (4, 4096, 28672), (8, 4096, 28672), (16, 4096, 28672),
         (1, 4096, 57344)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--reps", type=int, default=3, help="traced launches per case (each stored)")
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if a.dry_run:
        print("cases:", CASES)
        return 0
    import cupy as cp
    import torch

    gpu = torch.cuda.get_device_name(0)
    tag = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    fn = cp.RawModule(code=SRC, options=("-std=c++17",)).get_function("int8mm_traced")
    env = {"gpu": gpu, "torch": torch.__version__, "cupy": cp.__version__,
           "sms": torch.cuda.get_device_properties(0).multi_processor_count,
           "smi_start": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,"
                                        "power.draw,power.limit,temperature.gpu", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip(),
           "kernel_attributes": None, "args": vars(a), "cases": CASES}
    try:   # registers per thread etc. (they set how many blocks an SM may hold)
        env["kernel_attributes"] = dict(fn.attributes)
    except Exception as exc:  # noqa: BLE001 - informative only
        env["kernel_attributes"] = repr(exc)
    blocks_rows, case_rows = [], []
    for ci, (m, k, n) in enumerate(CASES):
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randint(-128, 127, (n, k), device="cuda", dtype=torch.int8)
        s = torch.rand(n, device="cuda", dtype=torch.bfloat16)
        out = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        gx, gy = -(-n // 16), -(-m // 16)
        nb = gx * gy
        trace = cp.zeros((nb, 3), dtype=cp.uint64)
        xp = cp.from_dlpack(x.view(torch.int16))
        args = (xp, cp.from_dlpack(w), cp.from_dlpack(s.view(torch.int16)), cp.from_dlpack(out.view(torch.int16)),
                cp.int32(m), cp.int32(k), cp.int32(n), trace)
        # the real kernel, and the copy, timed by events (median of 20 after 3 warm-ups)
        ref = torch._weight_int8pack_mm(x, w, s)
        fn((gx, gy, 1), (16, 16, 1), args)
        torch.cuda.synchronize()
        err = float((out.float() - ref.float()).abs().max())

        def timed(call):
            for _ in range(3):
                call()
            times = []
            for _ in range(20):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                call()
                e1.record()
                torch.cuda.synchronize()
                times.append(e0.elapsed_time(e1) * 1e3)
            return statistics.median(times)

        torch_us = timed(lambda: torch._weight_int8pack_mm(x, w, s))
        copy_us = timed(lambda: fn((gx, gy, 1), (16, 16, 1), args))
        busiest = []
        for rep in range(a.reps):
            trace[...] = 0
            torch.cuda.synchronize()
            fn((gx, gy, 1), (16, 16, 1), args)
            torch.cuda.synchronize()
            t = cp.asnumpy(trace)
            t0 = int(t[:, 1].min())
            per_sm: dict[int, int] = {}
            for b in range(nb):
                sm, st, en = int(t[b, 0]), int(t[b, 1]) - t0, int(t[b, 2]) - t0 if int(t[b, 2]) else -1
                per_sm[sm] = per_sm.get(sm, 0) + 1
                blocks_rows.append({"case": ci, "rep": rep, "m": m, "k": k, "n": n, "block": b, "sm": sm,
                                    "start_ns": st, "end_ns": en})
            busiest.append(max(per_sm.values()))
        case_rows.append({"case": ci, "m": m, "k": k, "n": n, "blocks": nb, "copy_us": round(copy_us, 2),
                          "torch_us": round(torch_us, 2), "max_abs_diff_vs_torch": err,
                          "busiest_sm_blocks": ",".join(map(str, busiest)),
                          "mean_blocks_per_sm": round(nb / env["sms"], 2)})
        print(case_rows[-1], flush=True)
    write_rows(os.path.join(a.out, f"{tag}_micro_block_dispatch.csv"), blocks_rows)
    write_rows(os.path.join(a.out, f"{tag}_micro_block_dispatch_cases.csv"), case_rows)
    with open(os.path.join(a.out, f"{tag}_micro_block_dispatch_env.json"), "w") as fh:
        json.dump(env, fh, indent=1, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())
