"""Sustained square GEMMs per data type under the power cap: the clock and power the H200
settles at with bf16 and with fp8 tensor-core work.

Why: the model's tensor-core energy per PE-cycle (``energy.array_pe_cycle_pj`` of
arch_configs/h200_sxm.yaml) is calibrated on ONE loop, bf16 8192^3 (h200_sustained_matmul.csv),
and the whole-model fp8 prefills come out 7 % too fast while the bf16 ones are right, as if
fp8 work drew more power than the model gives it.  This runs, in one lease, an 8192^3 GEMM
back to back for ``--seconds`` per data type (bf16 ``torch.matmul``; fp8 e4m3 ``torch._scaled_mm``
with per-tensor scales and a bf16 output, as the W8A8 whole-model cases run), after ``--idle``
seconds of idle each, timing every chunk of ``--chunk`` GEMMs with CUDA events, with
nvidia-smi sampled every 50 ms (SM clock, power, clock-event reasons).

    python3 validation/gpu/micro_sustained_dtypes.py --out DIR
    # DIR/h200_micro_sustained_dtypes.csv        dtype, chunk, t_s (from the loop's start), ms per GEMM, TFLOP/s
    # DIR/h200_micro_sustained_dtypes_cases.csv  dtype, the second half's median TFLOP/s, SM MHz, W
    # DIR/h200_micro_sustained_dtypes_smi.csv    every nvidia-smi sample
    # DIR/h200_micro_sustained_dtypes_env.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

from graph_timing import smi  # noqa: E402
from micro_csv import write_rows  # noqa: E402
from smi_sampler import Smi  # noqa: E402


def gemm(dtype: str, n: int):
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    if dtype == "bf16":
        return lambda: torch.matmul(a, b)
    a8 = a.to(torch.float8_e4m3fn)
    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()      # column-major B, as _scaled_mm wants
    one = torch.ones((), device="cuda", dtype=torch.float32)
    return lambda: torch._scaled_mm(a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--n", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--idle", type=float, default=5.0)
    ap.add_argument("--chunk", type=int, default=20)
    ap.add_argument("--dtypes", default="bf16,fp8,bf16")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "smi_start": smi("name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,"
                            "temperature.gpu"), "args": vars(a)}
    flop = 2.0 * a.n ** 3
    s = Smi("clocks.sm,power.draw,clocks_event_reasons.active")
    t0 = time.perf_counter()
    rows, cases = [], []
    for run, dtype in enumerate(a.dtypes.split(",")):
        fn = gemm(dtype, a.n)
        fn()
        torch.cuda.synchronize()
        time.sleep(a.idle)
        start = time.perf_counter()
        evs = []
        while time.perf_counter() - start < a.seconds:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(a.chunk):
                fn()
            e1.record()
            evs.append((e0, e1))
            if len(evs) > 2:
                evs[-3][1].synchronize()     # keep the host at most two chunks ahead
        torch.cuda.synchronize()
        end = time.perf_counter()
        t = 0.0
        for i, (e0, e1) in enumerate(evs):
            ms = e0.elapsed_time(e1) / a.chunk
            rows.append({"run": run, "dtype": dtype, "chunk": i, "t_s": round(t, 5), "ms_per_gemm": round(ms, 5),
                         "tflops": round(flop / ms / 1e9, 2)})
            t += ms * a.chunk / 1e3
        half = [r["tflops"] for r in rows if r["run"] == run and r["t_s"] >= t / 2]
        first = [r["tflops"] for r in rows if r["run"] == run][:3]
        mid = start + (end - start) / 2
        cases.append({"run": run, "dtype": dtype, "n": a.n, "gemms": len(evs) * a.chunk, "seconds": round(t, 3),
                      "first_chunks_tflops": first, "second_half_tflops": round(statistics.median(half), 2),
                      "sm_mhz": s.between(mid, end, 1), "power_w": s.between(mid, end, 2)})
        print(cases[-1], flush=True)
        del fn
        torch.cuda.empty_cache()
    s.stop()
    write_rows(os.path.join(a.out, "h200_micro_sustained_dtypes.csv"), rows)
    write_rows(os.path.join(a.out, "h200_micro_sustained_dtypes_cases.csv"), cases)
    s.write(os.path.join(a.out, "h200_micro_sustained_dtypes_smi.csv"), t0, ["t_s", "sm_mhz", "power_w", "reasons"])
    env["smi_end"] = smi("clocks.sm,power.draw,temperature.gpu")
    with open(os.path.join(a.out, "h200_micro_sustained_dtypes_env.json"), "w") as f:
        json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
