#!/usr/bin/env python3
"""cuDNN's decode SDPA split into its kernels: the attention kernel, the split-KV combine
(``lean_reduction_kernel``) and the gap between them, per call (issue 11).

    python3 validation/gpu/micro_cudnn_decode_kernels.py --out DIR [--cases FILE.csv] [--calls 40]

Session 30 timed these calls whole (``h100_micro_cudnn_decode.csv``: every call where cuDNN
splits the keys came out 1.1-6.1 us slower than the model); this records each kernel's own
duration from CUPTI (torch.profiler), so the missing time can be placed: in the attention
kernel, in the combine kernel, or between them.  Each call is preceded by the harness's L2
flush (a 256 MiB read, measure.py's default) and timed with CUDA events too, as measure.py
times it.  Standalone: torch, numpy and the standard library only.

Writes DIR/<gpu>_micro_cudnn_decode_kernels.csv (one row per case: the case's shape, the
kernels' names, median / p10 / p90 of each kernel's duration and of the gap, the events'
median) and DIR/<gpu>_micro_cudnn_decode_kernels_env.json (GPU, driver, clocks, torch).
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

HERE = os.path.dirname(os.path.abspath(__file__))
FLUSH_BYTES = 256 << 20


def smi(fields: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({type(e).__name__})"


def gpu_tag() -> str:
    name = torch.cuda.get_device_name(0).lower()
    return "h200" if "h200" in name else "h100" if "h100" in name else "gpu"


def pct(xs, q):
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else float("nan")


def one_case(c: dict, flush_buf, flush_out, calls: int) -> dict:
    b, h, kvh, d, kvl = (int(c[k]) for k in ("batch", "heads", "kv_heads", "head_dim", "kv_len"))
    dev = "cuda"
    q = torch.randn(b, h, 1, d, dtype=torch.bfloat16, device=dev)
    k = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
    v = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
    kw = {"enable_gqa": True} if kvh < h else {}

    def fn():
        return F.scaled_dot_product_attention(q, k, v, **kw)

    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    # CUDA events, measure.py's way: flush, event, call, event
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for e0, e1 in ev:
        torch.sum(flush_buf, 0, out=flush_out)
        e0.record()
        fn()
        e1.record()
    torch.cuda.synchronize()
    events_us = [e0.elapsed_time(e1) * 1e3 for e0, e1 in ev]
    # the same calls under the profiler: each kernel's own duration and the gap
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            torch.sum(flush_buf, 0, out=flush_out)
            fn()
        torch.cuda.synchronize()
    kern = []
    for e in prof.events():
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        start = float(e.time_range.start)
        kern.append((start, float(e.time_range.end), e.name))
    kern.sort()

    def kind(name: str) -> str:
        low = name.lower()
        if "reduction" in low:      # cuDNN's lean_reduction_kernel (torch.sum's is reduce_kernel)
            return "combine"
        if "sdpa" in low or "fprop" in low or "flash" in low or "fmha" in low:
            return "attention"
        return "other"              # the flush's sum, anything else

    attn, red, gap, names_a, names_r, others = [], [], [], set(), set(), set()
    for i, (s, t, nm) in enumerate(kern):
        kd = kind(nm)
        if kd == "attention":
            attn.append(t - s)
            names_a.add(nm)
            if i + 1 < len(kern) and kind(kern[i + 1][2]) == "combine":
                s2, t2, nm2 = kern[i + 1]
                red.append(t2 - s2)
                gap.append(s2 - t)
                names_r.add(nm2)
        elif kd == "other" and "reduce_kernel" not in nm:
            others.add(nm[:120])
    row = {k: c[k] for k in ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len")}
    row.update(calls=calls, attention_kernel=" | ".join(sorted(names_a)), combine_kernel=" | ".join(sorted(names_r)),
               other_kernels=" | ".join(sorted(others)),
               attention_us_median=pct(attn, 50), attention_us_p10=pct(attn, 10), attention_us_p90=pct(attn, 90),
               combine_us_median=pct(red, 50), combine_us_p10=pct(red, 10), combine_us_p90=pct(red, 90),
               gap_us_median=pct(gap, 50), gap_us_p10=pct(gap, 10), gap_us_p90=pct(gap, 90),
               combined_calls=len(red), events_us_median=pct(events_us, 50), events_us_p10=pct(events_us, 10),
               events_us_p90=pct(events_us, 90))
    del q, k, v
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--cases", default=os.path.join(HERE, "micro_cudnn_decode_cases.csv"))
    ap.add_argument("--calls", type=int, default=40)
    ap.add_argument("--deadline", type=float, default=300.0, help="stop starting new cases after this many seconds")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    from torch.nn.attention import SDPBackend, sdpa_kernel
    tag = gpu_tag()
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(),
           "smi_idle": smi("name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,power.limit,temperature.gpu"),
           "date_utc": time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()), "calls_per_case": args.calls,
           "flush": "torch.sum over a 256 MiB buffer before each call (measure.py's default)"}
    flush_buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda").uniform_()
    flush_out = torch.empty((), dtype=torch.float32, device="cuda")
    with open(args.cases, newline="") as f:
        cases = [r for r in csv.DictReader(f) if r["kind"] == "attention"]
    path = os.path.join(args.out, f"{tag}_micro_cudnn_decode_kernels.csv")
    t0 = time.time()
    rows = []
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for i, c in enumerate(cases):
            if time.time() - t0 > args.deadline:
                print(f"deadline: {len(cases) - i} cases left", flush=True)
                break
            try:
                row = one_case(c, flush_buf, flush_out, args.calls)
            except Exception as e:  # noqa: BLE001
                row = {k: c[k] for k in ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len")}
                row["error"] = f"{type(e).__name__}: {str(e)[:200]}"
            rows.append(row)
            cols = sorted({k for r in rows for k in r}, key=lambda k: list(rows[0]).index(k) if k in rows[0] else 99)
            with open(path, "w", newline="") as f:  # rewritten after every case: a cut run keeps what it measured
                w = csv.DictWriter(f, fieldnames=cols)
                w.writeheader()
                w.writerows(rows)
            print(i, {k: row.get(k) for k in ("batch", "heads", "kv_heads", "kv_len", "attention_us_median",
                                              "combine_us_median", "gap_us_median", "events_us_median")}, flush=True)
    env["smi_after"] = smi("clocks.sm,clocks.mem,power.draw,temperature.gpu")
    with open(os.path.join(args.out, f"{tag}_micro_cudnn_decode_kernels_env.json"), "w") as f:
        json.dump(env, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
