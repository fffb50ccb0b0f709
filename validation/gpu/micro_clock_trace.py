"""The SM clock and board power while one GEMM runs back to back from idle, per format.

For each (format, shape): 2 s idle, then 1.5 s of the GEMM back to back (no flush), with
``nvidia-smi -lms 20`` streaming SM clock, instantaneous power and the clock-event reasons,
and CUDA events timing every chunk of 10 calls.  It answers whether a format's GEMM starts
below the boost clock at once (an instantaneous limit) or only after the power average
crosses the limit (what ``sim.apps.kernel_harness`` models).

    python3 validation/gpu/micro_clock_trace.py --out DIR
    # writes DIR/h200_micro_clock_trace.csv (smi samples), DIR/h200_micro_clock_trace_chunks.csv
"""
from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import time
import types

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure as M  # noqa: E402
import torch  # noqa: E402

CASES = [("bf16", 3584, 11392, 11904), ("fp8", 3584, 11392, 11904), ("bf16", 8192, 8192, 8192),
         ("fp8", 8192, 8192, 8192), ("fp16", 5120, 18176, 4544)]
FIELDS = ["timestamp", "clocks.sm", "power.draw.instant", "clocks_event_reasons.active", "temperature.gpu"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--seconds", type=float, default=1.5)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    ctx = M.Ctx(types.SimpleNamespace(out=args.out, dry_run=False, quick=False, deadline=3600.0, flush="none",
                                      target_s=0.0, no_kernels=True))
    M.set_fp32_strict()
    torch.manual_seed(1234)
    smi_path = os.path.join(args.out, "h200_micro_clock_trace.csv")
    chunks_path = os.path.join(args.out, "h200_micro_clock_trace_chunks.csv")
    with open(smi_path, "w", newline="") as sf, open(chunks_path, "w", newline="") as cf:
        sw, cw = csv.writer(sf, lineterminator="\n"), csv.writer(cf, lineterminator="\n")
        sw.writerow(["case", "t_s"] + FIELDS[1:])
        cw.writerow(["case", "dtype", "m", "k", "n", "chunk", "t_start_s", "calls", "ms_per_call"])
        for dt, m, k, n in CASES:
            name = f"{dt}_{m}x{k}x{n}"
            fn, _, objs = M.build_gemm(ctx, {"m": m, "k": k, "n": n, "dtype": dt})
            fn()
            torch.cuda.synchronize()
            proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(FIELDS)}", "--format=csv,noheader,nounits",
                                     "-lms", "20"], stdout=subprocess.PIPE, text=True)
            time.sleep(2.0)
            t0 = time.time()
            evs = []
            while time.time() - t0 < args.seconds:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                for _ in range(10):
                    fn()
                b.record()
                evs.append((time.time() - t0, a, b))
                if len(evs) > 4:
                    evs[-5][2].synchronize()   # keep the queue a few chunks deep
            torch.cuda.synchronize()
            time.sleep(0.3)
            proc.terminate()
            out, _ = proc.communicate(timeout=10)
            for line in out.strip().splitlines():
                vals = [v.strip() for v in line.split(",")]
                if len(vals) != len(FIELDS):
                    continue
                ts = vals[0]
                try:
                    hms = ts.split(" ")[1]
                    h, mi, se = hms.split(":")
                    tsec = int(h) * 3600 + int(mi) * 60 + float(se)
                except Exception:  # noqa: BLE001
                    continue
                lt = time.localtime(t0)
                t0sec = lt.tm_hour * 3600 + lt.tm_min * 60 + lt.tm_sec + (t0 % 1)
                sw.writerow([name, f"{tsec - t0sec:.3f}"] + vals[1:])
            first_ev = evs[0][1]
            for i, (th, a, b) in enumerate(evs):
                cw.writerow([name, dt, m, k, n, i, f"{first_ev.elapsed_time(a) / 1e3:.4f}", 10,
                             f"{a.elapsed_time(b) / 10:.5f}"])
            ctx.log(f"{name}: {len(evs)} chunks, first {evs[0][1].elapsed_time(evs[0][2]) / 10:.4f} ms/call, "
                    f"last {evs[-1][1].elapsed_time(evs[-1][2]) / 10:.4f}")
            del fn, objs
            torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    sys.exit(main())
