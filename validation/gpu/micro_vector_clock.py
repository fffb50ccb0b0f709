#!/usr/bin/env python3
"""How a step's memory-bound kernels slow down with the SM clock the power limit leaves them.

Why (issue 11; validation/step_clocks.py): priced at the clock measured inside power-limited
Llama-3-8B steps, the model's GEMMs match the measured kernel sums but its vector and copy
kernels come out 6-14 % fast, more the lower the step's clock; they were priced from kernels
timed on their own, at the ~1,980 MHz an idle GPU holds.  Here each such kernel of an 8B
prefill layer (PyTorch's, as ``measure_models.py`` runs them) is timed (a) after an L2 flush (a memory-bound
sum that leaves the clock near its maximum), and (b) right after a heavy bf16 GEMM in a loop that holds the board at its
power limit, and (c) after that GEMM and then a flush (the low clock, a clean L2), with a probe kernel (``micro_probe_clock.py``'s) after it reading the SM clock the
kernel ran near.  CUDA events around the kernel alone.

Standalone: torch, cupy, numpy.

    python3 validation/gpu/micro_vector_clock.py --out DIR [--seconds 2.5]
    # DIR/<gpu>_micro_vector_clock.csv      kernel, condition, rep, us, probe MHz
    # DIR/<gpu>_micro_vector_clock_smi.csv  nvidia-smi samples
    # DIR/<gpu>_micro_vector_clock_env.json GPU, driver, torch, summary per kernel
    python3 validation/gpu/micro_vector_clock.py --dry-run --out DIR   # CPU, tiny shapes
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
import measure_models as MM  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from micro_csv import write_rows  # noqa: E402


def kernels(T: int, h: int, f: int, H: int, KV: int, d: int, dev):
    """(name, bytes moved, fn) of the memory-bound kernels of one Llama prefill layer over T tokens."""
    bf = torch.bfloat16
    x = torch.randn(T, h, device=dev, dtype=bf)
    r = torch.randn(T, h, device=dev, dtype=bf)
    w = torch.randn(h, device=dev, dtype=bf)
    gu = torch.randn(T, 2 * f, device=dev, dtype=bf)
    g, u = gu.chunk(2, dim=-1)
    q = torch.randn(T, H, d, device=dev, dtype=bf)
    cos = torch.randn(T, 1, d, device=dev, dtype=bf)
    sin = torch.randn(T, 1, d, device=dev, dtype=bf)
    kc = torch.zeros(1, KV, T, d, device=dev, dtype=bf)
    kn = torch.randn(T, KV, d, device=dev, dtype=bf)
    e = 2  # bytes per element
    return [
        ("rmsnorm", 2 * T * h * e, lambda: MM.rms(x, w)),
        ("residual_add", 3 * T * h * e, lambda: x + r),
        ("silu_mul", 3 * T * f * e, lambda: F.silu(g) * u),
        ("rope_q", 2 * T * H * d * e, lambda: q * cos + MM.rotate_half(q) * sin),
        ("kv_copy", 2 * T * KV * d * e, lambda: kc[:, :, :T].copy_(kn.view(T, KV, d).transpose(0, 1).unsqueeze(0))),
    ]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seconds", type=float, default=2.5, help="loaded loop per kernel, host seconds")
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--dry-run", action="store_true")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    dry = a.dry_run or not torch.cuda.is_available()
    dev = torch.device("cpu" if dry else "cuda")
    if dry:
        ks = kernels(16, 64, 128, 4, 2, 16, dev)
        for name, nbytes, fn in ks:
            fn()
            print(name, "dry run:", nbytes, "bytes")
        return 0
    from micro_step_clocks import Probes
    from smi_sampler import Smi
    gpu = torch.cuda.get_device_name(0)
    tag = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    smi_q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,power.limit",
                            "--format=csv,noheader"], capture_output=True, text=True)
    env = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "smi": smi_q.stdout.strip(),
           "args": vars(a), "kernels": {}}
    ks = kernels(a.tokens, 4096, 14336, 32, 8, 128, dev)
    # the load: a bf16 GEMM heavy enough to hold the board at its limit (~1 ms)
    A = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    B = torch.randn(28672, 4096, device="cuda", dtype=torch.bfloat16)
    probes = Probes(sms, 1, 20.0)
    probes.on = True
    smi = Smi(period_ms=20)
    t_start = time.perf_counter()
    rows = []
    flush_buf = torch.zeros(MM.FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
    flush_out = torch.zeros((), dtype=torch.float32, device="cuda")
    probe_t = torch.as_tensor(probes.buf, device="cuda")

    def loop(name, nbytes, fn, before, condition, seconds):
        """``before`` then the kernel (timed alone by events) then a probe, over and over."""
        hist = []
        t_end = time.perf_counter() + seconds
        i = 0
        while time.perf_counter() < t_end:
            before()
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            fn()
            e1.record()
            probes.labels.clear()
            probes(condition)
            hist.append((e0, e1, probe_t.clone()))
            i += 1
            if i % 8 == 0:
                hist[-4][1].synchronize()
        torch.cuda.synchronize()
        out = []
        for j, (e0, e1, buf) in enumerate(hist):
            out.append({"kernel": name, "condition": condition, "rep": j, "us": round(e0.elapsed_time(e1) * 1e3, 3),
                        "probe_mhz": round(probes.mhz(buf.cpu().numpy())[0][0], 1), "bytes": nbytes})
        return out

    try:
        for name, nbytes, fn in ks:
            for _ in range(3):
                fn()
            torch.cuda.synchronize()
            # (a) after an L2 flush (a memory-bound sum over a buffer larger than the L2, which
            # leaves the clock near its maximum), after 1 s idle; (b) after a heavy GEMM, in a loop
            # that holds the board at its power limit.  Both read the kernel's inputs from DRAM.
            time.sleep(1.0)
            alone = loop(name, nbytes, fn, lambda: torch.sum(flush_buf, 0, out=flush_out), "after_flush", 1.0)
            loaded = loop(name, nbytes, fn, lambda: F.linear(A, B), "after_gemm", a.seconds)
            # (c) the GEMM, then the flush: the clock the GEMM leaves (the controller acts over
            # milliseconds; the flush lasts ~0.1 ms) with a clean L2 (no GEMM output to write back)
            flushed = loop(name, nbytes, fn, lambda: (F.linear(A, B), torch.sum(flush_buf, 0, out=flush_out)),
                           "after_gemm_then_flush", a.seconds)
            rows += alone + loaded + flushed
            alone = alone[len(alone) // 4:]
            summ = {"bytes": nbytes, "alone_us": statistics.median(r["us"] for r in alone),
                    "alone_mhz": statistics.median(r["probe_mhz"] for r in alone), "reps_alone": len(alone)}
            for label, got in (("after_gemm", loaded), ("after_gemm_then_flush", flushed)):
                late = got[len(got) // 2:]
                us = statistics.median(r["us"] for r in late)
                mhz = statistics.median(r["probe_mhz"] for r in late)
                summ[label] = {"us": us, "mhz": mhz, "reps": len(late), "slowdown": round(us / summ["alone_us"], 4),
                               "clock_ratio": round(summ["alone_mhz"] / mhz, 4)}
            env["kernels"][name] = summ
            print(name, json.dumps(summ), flush=True)
            write_rows(os.path.join(a.out, f"{tag}_micro_vector_clock.csv"), rows)
    finally:
        smi.stop()
        smi.write(os.path.join(a.out, f"{tag}_micro_vector_clock_smi.csv"), t_start,
                  ["t_s", "sm_mhz", "power_w", "reasons"])
        with open(os.path.join(a.out, f"{tag}_micro_vector_clock_env.json"), "w") as f:
            json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
