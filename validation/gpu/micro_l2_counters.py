"""L2 traffic and clocks of GEMM kernels and an L2 read loop, from the hardware counters.

Why: the model's L2 -> SM bandwidth (``h200_sxm.yaml`` ``l2.bytes_per_cycle``) came from
``micro_l2.py``'s load loop over a 48 MiB buffer.  cuSPARSELt's 2:4 kernel (tile 128x256x64,
cluster 1x1x1: no TMA multicast) runs large GEMMs ~1.3x faster than the model allows, and
the model is bound there by exactly that L2 rate.  This reads, for each kernel, the bytes
the L2 served, its peak bytes per L2 cycle, the L2 and SM clocks and the kernel time
(Nsight Compute, ``--clock-control none`` so the clocks are the GPU's own), and times the
GEMMs back to back with ``nvidia-smi`` sampling the SM clock, to place the bandwidth the
kernels drew against the clock they ran at.

    python3 validation/gpu/micro_l2_counters.py --out DIR
    # DIR/h200_micro_l2_counters.csv: one row per (workload, metric) from ncu
    # DIR/h200_micro_l2_counters_timed.csv: back-to-back timing with the sampled SM clock
    # DIR/h200_micro_l2_counters_env.json, DIR/ncu_*.log
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

#: (name, kind, m, k, n) GEMMs; F.linear(x[m,k], W[n,k]) as validation/gpu/measure.py builds them
GEMMS = [
    ("sparse_11408x8192x8192", "bf16_2:4", 11408, 8192, 8192),
    ("sparse_4096x4096x14336", "bf16_2:4", 4096, 4096, 14336),
    ("sparse_64x8192x57344", "bf16_2:4", 64, 8192, 57344),
    ("sparse_12x3072x16384", "bf16_2:4", 12, 3072, 16384),
    ("dense_8192x8192x8192", "bf16", 8192, 8192, 8192),
    ("dense_11408x8192x8192", "bf16", 11408, 8192, 8192),
    ("dense_1536x18944x3584", "bf16", 1536, 18944, 3584),
    ("dense_4096x4096x14336", "bf16", 4096, 4096, 14336),
]
#: (name, buffer MiB, passes): micro_l2.py's 4-loads-in-flight loop, all SMs (grid 16 x SMs x 256)
L2_LOOPS = [("l2_ilp4_4MiB", 4, 400), ("l2_ilp4_16MiB", 16, 100), ("l2_ilp4_40MiB", 40, 40)]
#: MICRO_L2_GEMMS="bf16:9728:8192:2048,fp8:3584:11392:11904" replaces the lists above with those
#: GEMMs alone (an environment variable, so that the ncu target process sees it too)
if os.environ.get("MICRO_L2_GEMMS"):
    GEMMS = [(f"{d}_{m}x{k}x{n}", d, int(m), int(k), int(n))
             for d, m, k, n in (item.rsplit(":", 3) for item in os.environ["MICRO_L2_GEMMS"].split(","))]
    L2_LOOPS = []
#: MICRO_L2_ATTN="4:32:8:128:2048:4608:0,..." adds F.scaled_dot_product_attention calls (batch,
#: heads, kv_heads, head_dim, q_len, kv_len, causal 0/1) - prefill shapes, which run one cuDNN
#: kernel per call (decode runs two, which the per-workload grouping below does not split):
#: their in-kernel SM clocks are what the H200's clock-from-power model needs next (README,
#: Known limitations; branch physics)
ATTN = [(f"sdpa_b{b}_h{h}_kv{kvh}_d{d}_q{q}_k{kv}_c{c}", dict(batch=int(b), heads=int(h), kv_heads=int(kvh),
                                                             head_dim=int(d), q_len=int(q), kv_len=int(kv),
                                                             causal=int(c)))
        for b, h, kvh, d, q, kv, c in (item.split(":") for item in os.environ.get("MICRO_L2_ATTN", "").split(",")
                                        if item)]
if ATTN and not os.environ.get("MICRO_L2_GEMMS"):
    GEMMS, L2_LOOPS = [], []
#: the output files' stem (MICRO_L2_STEM overrides it, e.g. for a MICRO_L2_GEMMS run)
STEM = os.environ.get("MICRO_L2_STEM", "h200_micro_l2_counters")
CALLS_UNDER_NCU = 3   # the last is the one kept (the first two warm the library's caches)

METRIC_GROUPS = [
    ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second", "lts__cycles_elapsed.avg.per_second",
     "lts__cycles_elapsed.avg", "lts__t_bytes.sum", "lts__t_bytes.sum.peak_sustained",
     "lts__t_bytes.sum.pct_of_peak_sustained_elapsed", "dram__bytes_read.sum", "dram__bytes_write.sum"],
    ["l1tex__m_xbar2l1tex_read_bytes.sum", "l1tex__m_xbar2l1tex_read_bytes.sum.peak_sustained",
     "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sector_hit_rate.pct",
     "sm__throughput.avg.pct_of_peak_sustained_elapsed", "launch__grid_size", "launch__cluster_dim_x",
     "launch__cluster_dim_y"],
]
#: MICRO_L2_METRICS="m1,m2;m3,..." replaces the metric groups above (";" separates the groups,
#: each one ncu pass per workload): validation/gpu/micro_tensor_pipe.py asks for the tensor pipes' activity
KERNEL_REGEX = "regex:sparse_gemm|nvjet|l2_read|gemm|gemv|sdpa|Kernel2"
if os.environ.get("MICRO_L2_METRICS"):
    METRIC_GROUPS = [[m for m in g.split(",") if m] for g in os.environ["MICRO_L2_METRICS"].split(";") if g]


def _kept(metric: str) -> bool:
    """The columns of ncu's raw page that are written (it adds ~290 device attributes)."""
    if metric.startswith(("profiler__", "device__")):
        return False
    return (metric.endswith(".sum") or (metric.endswith(".per_second") and ".avg." in metric)
            or (metric.endswith("peak_sustained") and ".sum." in metric)
            or metric.startswith(("launch__grid_size", "launch__cluster_dim"))
            or metric in ("lts__t_sector_hit_rate.pct", "lts__cycles_elapsed.avg")
            or metric.endswith((".avg.pct_of_peak_sustained_elapsed", ".avg.pct_of_peak_sustained_active"))
            or metric.endswith((".avg", ".max")) and metric.startswith(("sm__", "smsp__"))
            or metric.endswith(".ratio") or metric.startswith(("launch__block_size", "launch__registers",
                                                                 "launch__shared_mem", "launch__occupancy"))
            or metric == "sm__maximum_warps_per_active_cycle_pct")


def _workloads():
    """name -> zero-argument callable (CUDA tensors built once)."""
    import types

    sys.path.insert(0, HERE)
    import measure as M  # noqa: PLC0415
    import torch  # noqa: PLC0415

    M.set_fp32_strict()   # fp32 GEMMs as the case harness runs them: no TF32
    ctx = types.SimpleNamespace(device=torch.device("cuda"))
    torch.manual_seed(1234)
    out = {}
    for name, dt, m, k, n in GEMMS:
        if dt.endswith("_nn"):
            # x @ W with W stored [k, n] row-major, as a serving loop that keeps its weights
            # transposed multiplies (cuBLAS's NN kernels; F.linear's W[n, k] runs TN ones)
            tdt = M.TORCH_DT[dt[:-3]]
            x = torch.randn(m, k, dtype=tdt, device=ctx.device)
            w = torch.randn(k, n, dtype=tdt, device=ctx.device) * k ** -0.5
            out[name] = (lambda x=x, w=w: x @ w)
            continue
        fn, _backend, _objs = M.build_gemm(ctx, {"m": m, "k": k, "n": n, "dtype": dt})
        out[name] = fn
    for name, c in ATTN:
        fn, _backend, _objs = M.build_attention(ctx, c)
        out[name] = fn
    try:
        import cupy as cp  # noqa: PLC0415
        import numpy as np  # noqa: PLC0415
        from micro_l2 import SRC  # noqa: PLC0415

        kern = cp.RawModule(code=SRC).get_function("l2_read_ilp4")
        sms = cp.cuda.runtime.getDeviceProperties(0)["multiProcessorCount"]
        sink = cp.zeros(4, dtype=cp.int32)
        for name, mib, passes in L2_LOOPS:
            buf = cp.random.randint(0, 1 << 30, size=(mib << 20) // 4, dtype=cp.int32)
            args = (buf, np.int64((mib << 20) // 16), np.int32(passes), sink)
            out[name] = (lambda a=args: kern((sms * 16,), (256,), a))
    except Exception as exc:  # noqa: BLE001 - the GEMMs still run
        print(f"L2 loops skipped: {exc}", flush=True)
    return out


def target(names: list[str]) -> int:
    """Run each named workload CALLS_UNDER_NCU times (what ncu profiles)."""
    import torch  # noqa: PLC0415

    w = _workloads()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()   # ncu runs with --profile-from-start off: set-up kernels are not profiled
    for name in names:
        if name not in w:
            continue
        for _ in range(CALLS_UNDER_NCU):
            w[name]()
        torch.cuda.synchronize()
        print(f"ran {name}", flush=True)
    torch.cuda.profiler.stop()
    return 0


def timed(out_dir: str, seconds: float) -> None:
    """Each GEMM back to back for ``seconds`` with nvidia-smi sampling the SM clock."""
    import statistics  # noqa: PLC0415

    import torch  # noqa: PLC0415

    w = _workloads()
    path = os.path.join(out_dir, f"{STEM}_timed.csv")
    with open(path, "w", newline="") as f:
        wr = csv.writer(f, lineterminator="\n")
        wr.writerow(["workload", "calls", "ms_per_call_first", "ms_per_call_median_second_half",
                     "sm_clock_mhz_median_second_half", "power_w_median_second_half", "samples"])
        for name, fn in w.items():
            fn()
            torch.cuda.synchronize()
            time.sleep(1.0)
            proc = subprocess.Popen(["nvidia-smi", "--query-gpu=clocks.sm,power.draw.instant", "--format=csv,noheader,nounits",
                                     "-lms", "20"], stdout=subprocess.PIPE, text=True)
            time.sleep(0.3)
            t0 = time.time()
            evs = []
            while time.time() - t0 < seconds:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(5):
                    fn()
                b.record()
                evs.append((a, b))
                if len(evs) > 3:
                    evs[-4][1].synchronize()
            torch.cuda.synchronize()
            proc.terminate()
            smi, _ = proc.communicate(timeout=10)
            vals = []
            for line in smi.strip().splitlines():
                try:
                    vals.append(tuple(float(v) for v in line.split(",")))
                except ValueError:
                    continue
            half = vals[len(vals) // 2:] or vals
            ms = [a.elapsed_time(b) / 5 for a, b in evs]
            wr.writerow([name, 5 * len(evs), f"{ms[0]:.5f}", f"{statistics.median(ms[len(ms) // 2:]):.5f}",
                         f"{statistics.median(v[0] for v in half):.0f}" if half else "",
                         f"{statistics.median(v[1] for v in half):.1f}" if half else "", len(vals)])
            print(f"timed {name}: {statistics.median(ms[len(ms) // 2:]):.4f} ms/call", flush=True)


def profile(out_dir: str) -> None:
    """Each workload under ncu in a process of its own, so that every kernel ncu reports
    belongs to it: grouping one process's kernels by name mislabelled workloads whose call
    runs two kernels (fp32 GEMMs with k >= 1024 run a Memset first; an H100 run of 2026-12-05
    put an fp32 kernel under an int8 label).  The logs go into one file (a device call returns
    a limited number of files)."""
    names = [g[0] for g in GEMMS] + [a[0] for a in ATTN] + [n[0] for n in L2_LOOPS]
    rows = []
    with open(os.path.join(out_dir, "ncu.log"), "w") as log:
        for gi, metrics in enumerate(METRIC_GROUPS):
            for name in names:
                cmd = ["ncu", "--clock-control", "none", "--csv", "--page", "raw", "--kernel-name", KERNEL_REGEX,
                       "--profile-from-start", "off",
                       "--metrics", ",".join(metrics), sys.executable, os.path.abspath(__file__), "--target", name]
                res = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
                log.write(f"=== group {gi} {name}\n{res.stdout}\n--- stderr ---\n{res.stderr}\n")
                log.flush()
                rows += _parse(res.stdout, name)
                # rewritten after every workload: a run stopped by a timeout keeps what it measured
                # (session 30 lost 12 of 40 shapes' rows to one and had to parse them from the log)
                with open(os.path.join(out_dir, f"{STEM}.csv"), "w", newline="") as f:
                    wr = csv.writer(f, lineterminator="\n")
                    wr.writerow(["workload", "kernel", "metric", "unit", "value"])
                    wr.writerows(rows)


def _parse(text: str, name: str) -> list[list[str]]:
    """ncu's raw CSV for one workload's process: a header row ("ID", ..., "Kernel Name",
    metrics...), a units row, one row per profiled kernel in launch order; the last one (the
    last call's, after CALLS_UNDER_NCU - 1 calls warmed the library's caches) is kept."""
    lines = text.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith('"ID"')), None)
    if start is None:
        return []
    reader = list(csv.reader(lines[start:]))
    header, units, body = reader[0], reader[1], reader[2:]
    if not body:
        return []
    kcol = header.index("Kernel Name")
    last = body[-1]
    return [[name, last[kcol][:120], h, units[j] if j < len(units) else "", last[j]]
            for j, h in enumerate(header) if j > kcol and _kept(h)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--target", nargs="*")
    ap.add_argument("--seconds", type=float, default=1.0)
    ap.add_argument("--no-timed", action="store_true", help="skip the back-to-back timing with nvidia-smi")
    args = ap.parse_args(argv)
    if args.target is not None:
        return target(args.target)
    os.makedirs(args.out, exist_ok=True)
    t0 = time.time()
    profile(args.out)
    print(f"ncu done in {time.time() - t0:.0f} s", flush=True)
    if not args.no_timed:
        timed(args.out, args.seconds)
    import torch  # noqa: PLC0415

    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.mem,power.limit",
                          "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    ncu_v = subprocess.run(["ncu", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1:]
    with open(os.path.join(args.out, f"{STEM}_env.json"), "w") as f:
        json.dump({"nvidia_smi": smi, "torch": torch.__version__, "cuda": torch.version.cuda, "ncu": ncu_v,
                   "date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())}, f, indent=1)
    print(f"all done in {time.time() - t0:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
