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
import os
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel_timeline import Flush, gpu_tag, measure_all, pct, smi, timed_calls, write_env  # noqa: E402


def one_case(c: dict, flush: Flush, calls: int) -> dict:
    b, h, kvh, d, kvl = (int(c[k]) for k in ("batch", "heads", "kv_heads", "head_dim", "kv_len"))
    dev = "cuda"
    q = torch.randn(b, h, 1, d, dtype=torch.bfloat16, device=dev)
    k = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
    v = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
    kw = {"enable_gqa": True} if kvh < h else {}

    def fn():
        return F.scaled_dot_product_attention(q, k, v, **kw)

    # (measure.py's way: flush, event, call, event; then the same calls under CUPTI)
    events_us, kern = timed_calls(fn, flush, calls)

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
    flush = Flush()
    with open(args.cases, newline="") as f:
        cases = [r for r in csv.DictReader(f) if r["kind"] == "attention"]
    path = os.path.join(args.out, f"{tag}_micro_cudnn_decode_kernels.csv")
    keys = ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len")
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        measure_all(cases, lambda c: one_case(c, flush, args.calls), lambda c: {k: c[k] for k in keys}, path,
                    args.deadline, ("batch", "heads", "kv_heads", "kv_len", "attention_us_median", "combine_us_median",
                                    "gap_us_median", "events_us_median"))
    write_env(env, os.path.join(args.out, f"{tag}_micro_cudnn_decode_kernels_env.json"))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
