"""The SM clock between kernels of a sustained load, read by a probe kernel's own counters.

Why: under the 700 W cap the 8192^3 bf16 GEMM runs ~12 % slower back to back than its single
run scaled by nvidia-smi's clock (h200_micro_l2_counters_timed.csv), and in the serving
loop's mixed iterations nvidia-smi reads 1,980 MHz while the GEMMs' durations imply ~1.5 GHz
(h200_micro_serving_kernels.csv).  Nsight Compute cannot read a kernel's clock inside a
sustained loop without idling the GPU first (h200_micro_capped_clock.csv).  Here a probe
kernel - one block per SM spinning ``--spin-us`` on %globaltimer and counting clock64 -
runs on the same stream after every ``--every``-th GEMM, so it reads the SM clock the GPU
holds at that moment (the controller acts over milliseconds; the probe lasts tens of
microseconds), while nvidia-smi samples its own view.

    python3 validation/gpu/micro_probe_clock.py --out DIR
    # DIR/h200_micro_probe_clock.csv      load, probe index, host time, SM MHz (median and
    #                                     range over the blocks), GEMM ms around it
    # DIR/h200_micro_probe_clock_smi.csv  nvidia-smi samples (host time, MHz, W, reasons)
    # DIR/h200_micro_probe_clock_env.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from micro_csv import write_rows  # noqa: E402
from smi_sampler import Smi  # noqa: E402

PROBE_SRC = r"""
extern "C" __global__ void probe(long long* out, long long spin_ns) {
    if (threadIdx.x != 0) return;
    unsigned long long t0, t1;
    long long c0 = clock64();
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
    do { asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t1)); } while ((long long)(t1 - t0) < spin_ns);
    long long c1 = clock64();
    unsigned int smid;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));
    out[blockIdx.x * 3 + 0] = c1 - c0;
    out[blockIdx.x * 3 + 1] = (long long)(t1 - t0);
    out[blockIdx.x * 3 + 2] = smid;
}
"""

#: (name, m, k, n, seconds): the loads probed; the last is light (memory-bound) for contrast
LOADS = [("bf16_8192x8192x8192", 8192, 8192, 8192, 8.0), ("bf16_512x4096x28672", 512, 4096, 28672, 5.0),
         ("bf16_8x4096x28672", 8, 4096, 28672, 4.0)]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--spin-us", type=float, default=50.0)
    a = ap.parse_args()
    import cupy as cp
    import torch
    import torch.nn.functional as F
    os.makedirs(a.out, exist_ok=True)
    mod = cp.RawModule(code=PROBE_SRC)
    probe = mod.get_function("probe")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cupy": cp.__version__,
           "smi_start": subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,power.draw,"
                                        "power.limit,temperature.gpu", "--format=csv,noheader"],
                                       capture_output=True, text=True).stdout.strip(),
           "sms": sms, "args": vars(a), "loads": LOADS}
    smi = Smi(period_ms=20)
    t0 = time.perf_counter()
    rows = []
    for name, m, k, n, seconds in LOADS:
        x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        time.sleep(3.0)
        bufs, marks = [], []
        start = time.perf_counter()
        i = 0
        while time.perf_counter() - start < seconds:
            e0 = torch.cuda.Event(enable_timing=True)
            e1 = torch.cuda.Event(enable_timing=True)
            e0.record()
            for _ in range(a.every):
                F.linear(x, w)
            e1.record()
            buf = cp.zeros(sms * 3, dtype=cp.int64)
            with stream:
                probe((sms,), (32,), (buf, cp.int64(int(a.spin_us * 1000))))
            bufs.append(buf)
            marks.append((time.perf_counter(), e0, e1))
            i += 1
            if i % 4 == 0:
                e1.synchronize()
        torch.cuda.synchronize()
        for j, (buf, (t, e0, e1)) in enumerate(zip(bufs, marks)):
            v = buf.get().reshape(-1, 3)
            mhz = [c / ns * 1e3 for c, ns, _ in v if ns > 0]
            rows.append({"load": name, "probe": j, "t_s": round(t - t0, 4),
                         "sm_mhz_median": round(statistics.median(mhz), 1), "sm_mhz_min": round(min(mhz), 1),
                         "sm_mhz_max": round(max(mhz), 1), "distinct_sms": len({int(s) for s in v[:, 2]}),
                         "gemm_ms": round(e0.elapsed_time(e1) / a.every, 5)})
        half = rows[-len(bufs) // 2:]
        lo, hi = half[0]["t_s"] + t0, half[-1]["t_s"] + t0
        samp = [r for r in smi.rows if lo <= r[0] <= hi]
        print(name, "probes", len(bufs), "second half: probe MHz median",
              statistics.median(r["sm_mhz_median"] for r in half), "GEMM ms median",
              statistics.median(r["gemm_ms"] for r in half), "smi MHz median",
              statistics.median(float(r[1]) for r in samp) if samp else None, "W",
              statistics.median(float(r[2]) for r in samp) if samp else None, flush=True)
        del x, w
        torch.cuda.empty_cache()
    smi.stop()
    write_rows(os.path.join(a.out, "h200_micro_probe_clock.csv"), rows)
    smi.write(os.path.join(a.out, "h200_micro_probe_clock_smi.csv"), t0, ["t_s", "sm_mhz", "power_w", "reasons"])
    with open(os.path.join(a.out, "h200_micro_probe_clock_env.json"), "w") as f:
        json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
