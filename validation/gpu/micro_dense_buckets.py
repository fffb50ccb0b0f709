"""The dense GEMMs of a Llama-3-8B serving iteration, back to back, at each token bucket.

Why: the serving comparison (validation/compare_serving.py) predicts mixed iterations of
449-512 tokens ~14 % too slow while those of 384-448 tokens are within 2 %, and the stored
kernel cases of 256-1,024 rows (bf16, large n) are predicted 10-28 % too slow.  This times
what those iterations spend most of their time in - the four projections of every layer
(qkv 4096->6144, o 4096->4096, gate_up 4096->28672, down 14336->4096; 32 layers, distinct
weights, as the model holds them) - at each row count a chunked-prefill scheduler pads to,
as CUDA graphs replayed back to back for ``--seconds`` (the steady state of a serving loop,
power capped or not), each after ``--idle`` seconds of idle, with ``nvidia-smi`` sampling the
SM clock, power and throttle reasons meanwhile.  The kernel each GEMM runs (its tile) comes
from one profiled eager call.  With ``--ncu`` it also runs itself under Nsight Compute
(``--clock-control none``) to read each GEMM's duration, SM clock, L2 bytes and grid at the
clock the GPU chose.

    python3 validation/gpu/micro_dense_buckets.py --out DIR [--ncu]
    # DIR/h200_micro_dense_buckets.csv        one row per replay (graph, rows, t, ms)
    # DIR/h200_micro_dense_buckets_smi.csv    nvidia-smi samples (t, sm MHz, mem MHz, W, reasons)
    # DIR/h200_micro_dense_buckets_stats.csv  per (graph, rows): first replay, steady median, clock, power
    # DIR/h200_micro_dense_buckets_kernels.csv  kernel names per (shape, rows)
    # DIR/h200_micro_dense_buckets_ncu.csv    (--ncu) ncu raw metrics per (shape, rows)
    # DIR/h200_micro_dense_buckets_env.json
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from micro_csv import write_rows  # noqa: E402
from smi_sampler import Smi  # noqa: E402

HIDDEN, FFN, QKV, LAYERS = 4096, 14336, 6144, 32
#: (name, k, n): F.linear(x[m, k], W[n, k]) as the eager model runs them
SHAPES = [("qkv", HIDDEN, QKV), ("o", HIDDEN, HIDDEN), ("gate_up", HIDDEN, 2 * FFN), ("down", FFN, HIDDEN)]
#: the row counts the serving loop's graphs pad to around the 512-token budget
#: (serving_loop.py TOKEN_BUCKETS), and two below for the trend
ROWS = [192, 256, 320, 384, 416, 448, 480, 512]
NCU_METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second", "lts__cycles_elapsed.avg.per_second",
               "lts__t_bytes.sum", "dram__bytes_read.sum", "launch__grid_size", "launch__cluster_dim_x",
               "launch__cluster_dim_y", "sm__throughput.avg.pct_of_peak_sustained_elapsed"]


def build(torch, F, dev):
    torch.manual_seed(0)
    w = {name: [torch.randn(n, k, device=dev, dtype=torch.bfloat16) * 0.02 for _ in range(LAYERS)]
         for name, k, n in SHAPES}
    return w


def graph_of(torch, F, fn):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(2):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        fn()
    return g


def timed(torch, g, seconds: float):
    """Replay ``g`` back to back for ``seconds``; (host start, ms) per replay."""
    starts, evs = [], []
    t_end = time.perf_counter() + seconds
    while time.perf_counter() < t_end:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        g.replay()
        b.record()
        starts.append(time.perf_counter())
        evs.append((a, b))
        if len(evs) % 16 == 0:
            evs[-16][1].synchronize()   # keep the queue short: host stamps stay near the GPU's time
    torch.cuda.synchronize()
    return [(t, a.elapsed_time(b)) for t, (a, b) in zip(starts, evs)]


def kernel_names(torch, F, w, dev) -> list[dict]:
    from torch.profiler import ProfilerActivity, profile
    out = []
    for name, k, n in SHAPES:
        for m in ROWS:
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            F.linear(x, w[name][0])
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                F.linear(x, w[name][0])
                torch.cuda.synchronize()
            ks = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
            out.append({"shape": name, "m": m, "k": k, "n": n, "kernels": " | ".join(ks)})
    return out


def ncu_target() -> int:
    import torch
    import torch.nn.functional as F
    dev = "cuda"
    w = build(torch, F, dev)
    xs = {(k, m): torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _, k, _ in SHAPES for m in ROWS}
    for name, k, n in SHAPES:
        for m in ROWS:
            F.linear(xs[(k, m)], w[name][0])
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for name, k, n in SHAPES:
        for m in ROWS:
            F.linear(xs[(k, m)], w[name][1])
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def run_ncu(out: str) -> None:
    log = os.path.join(out, "ncu.log")
    cmd = ["ncu", "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
           "--metrics", ",".join(NCU_METRICS), sys.executable, os.path.abspath(__file__), "--ncu-target"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=400)
    with open(log, "w") as f:
        f.write(p.stdout[-20000:] + "\n--- stderr ---\n" + p.stderr[-20000:])
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith('"')]
    if len(lines) < 3:
        print("ncu gave no table; see", log)
        return
    rows = list(csv.reader(lines))
    head, data = rows[0], rows[2:]
    order = [(name, m) for name, _, _ in SHAPES for m in ROWS]
    with open(os.path.join(out, "h200_micro_dense_buckets_ncu.csv"), "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["shape", "m", "kernel", "metric", "value"])
        kn = head.index("Kernel Name")
        i = 0
        for r in data:
            kname = r[kn]
            if not any(s in kname for s in ("nvjet", "gemm", "cutlass", "xmma")):
                continue
            shape, m = order[min(i, len(order) - 1)]
            i += 1
            for met in NCU_METRICS:
                if met in head:
                    wr.writerow([shape, m, kname[:120], met, r[head.index(met)]])
    print(f"ncu: {i} GEMM kernels profiled")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seconds", type=float, default=1.2)
    ap.add_argument("--idle", type=float, default=1.0)
    ap.add_argument("--ncu", action="store_true")
    ap.add_argument("--ncu-target", action="store_true")
    a = ap.parse_args()
    if a.ncu_target:
        return ncu_target()
    import torch
    import torch.nn.functional as F
    os.makedirs(a.out, exist_ok=True)
    dev = "cuda"
    smi0 = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,"
                           "power.limit,temperature.gpu", "--format=csv,noheader"], capture_output=True, text=True).stdout
    env = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
           "smi_start": smi0.strip(), "args": vars(a), "rows": ROWS, "shapes": SHAPES, "layers": LAYERS}
    w = build(torch, F, dev)
    kern = kernel_names(torch, F, w, dev)
    write_rows(os.path.join(a.out, "h200_micro_dense_buckets_kernels.csv"), kern)
    smi = Smi("clocks.sm,clocks.mem,power.draw,clocks_event_reasons.active")
    t0 = time.perf_counter()
    rows, stats = [], []
    for m in ROWS:
        xs = {k: torch.randn(m, k, device=dev, dtype=torch.bfloat16) for _, k, _ in SHAPES}
        graphs = {}
        for name, k, n in SHAPES:
            graphs[name] = graph_of(torch, F, lambda name=name, k=k: [F.linear(xs[k], w[name][l]) for l in range(LAYERS)])
        graphs["layer"] = graph_of(torch, F, lambda: [F.linear(xs[k], w[name][l]) for l in range(LAYERS)
                                                      for name, k, _ in SHAPES])
        for gname, g in graphs.items():
            time.sleep(a.idle)
            res = timed(torch, g, a.seconds)
            for i, (t, ms) in enumerate(res):
                rows.append({"graph": gname, "m": m, "replay": i, "t_s": round(t - t0, 6), "ms": round(ms, 5)})
            half = res[len(res) // 2:]
            lo, hi = half[0][0], half[-1][0]
            stats.append({"graph": gname, "m": m, "replays": len(res), "first_ms": round(res[0][1], 5),
                          "steady_median_ms": round(statistics.median(ms for _, ms in half), 5),
                          "sm_mhz_median": smi.between(lo, hi, 1), "mem_mhz_median": smi.between(lo, hi, 2),
                          "power_w_median": smi.between(lo, hi, 3),
                          "reasons": ";".join(sorted({r[4] for r in smi.rows if lo <= r[0] <= hi}))})
            print(stats[-1], flush=True)
        del graphs
        torch.cuda.empty_cache()
    smi.stop()
    write_rows(os.path.join(a.out, "h200_micro_dense_buckets.csv"), rows)
    write_rows(os.path.join(a.out, "h200_micro_dense_buckets_stats.csv"), stats)
    smi.write(os.path.join(a.out, "h200_micro_dense_buckets_smi.csv"), t0,
              ["t_s", "sm_mhz", "mem_mhz", "power_w", "reasons"])
    env["smi_end"] = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                                     "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
    with open(os.path.join(a.out, "h200_micro_dense_buckets_env.json"), "w") as f:
        json.dump(env, f, indent=1)
    if a.ncu:
        del w
        torch.cuda.empty_cache()
        run_ncu(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
