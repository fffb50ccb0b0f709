#!/usr/bin/env python3
"""GPU measurement harness for the `sim` validation suite (NVIDIA H200, PyTorch).

Standalone: imports only torch, numpy, the standard library, cases.py beside it,
and optionally cupy/triton (pointer chase).  It never imports the `sim` package.

    python3 validation/gpu/measure.py --out DIR [--only KINDS] [--quick]
                                      [--cases FILE.csv] [--dry-run] [--probe]

What it writes into DIR (every file is written incrementally, so a run stopped
early still leaves what it measured):
    h200_dev.csv, h200_holdout.csv   measured cases (case-file format, see cases.py)
    h200_case_stats.csv              per case: id, backend, kernels, median/p10/p90/min, reps, errors
    h200_micro.csv                   microbenchmarks: name, params, value, unit, notes
    h200_env.json                    GPU, driver, CUDA, torch, clocks (idle / under load)
    h200_clock_samples.csv           nvidia-smi samples (0.2 s) for the whole run, with phase
    log.txt                          the console log
With --cases FILE.csv the measured cases go to DIR/<stem>.csv and the stats to
DIR/<stem>_stats.csv instead.

Timing method (see validation/measurements/README.md): warm-up, then per repeat:
flush L2 by writing a 256 MiB scratch buffer, CUDA event, op (or CUDA-graph
replay), CUDA event; one synchronize at the end; median of per-repeat times.
"""

from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import platform
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import cases as C  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

FLUSH_BYTES = 256 << 20
STATS_COLUMNS = [
    "split", "case_id", "status", "kind", "dtype", "m", "k", "n", "batch", "heads", "kv_heads",
    "head_dim", "q_len", "kv_len", "causal", "hidden", "ffn", "bytes", "describe", "backend",
    "kernels", "median_ms", "p10_ms", "p90_ms", "min_ms", "max_ms", "mean_ms", "reps", "host_ms",
    "est_ms", "achieved_tflops", "achieved_gbps", "wall_s", "error",
]
MICRO_COLUMNS = ["name", "params", "value", "unit", "notes"]


# ======================================================================================
# context, logging, output files
# ======================================================================================

class Ctx:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        self.dry = bool(args.dry_run)
        self.quick = bool(args.quick)
        self.cuda = torch.cuda.is_available() and not self.dry
        self.device = torch.device("cuda") if self.cuda else torch.device("cpu")
        self.t0 = time.time()
        self.deadline = self.t0 + args.deadline
        self.logf = open(os.path.join(self.out, "log.txt"), "a", buffering=1)
        self.flush_buf = None
        self.flush_out = None
        self.flush_mode = args.flush
        self.target_s = args.target_s if args.target_s else (0.08 if self.quick else 0.3)
        self.max_reps = 50 if self.quick else 200
        self.profile_kernels = not args.no_kernels
        self.sampler = None
        self.env = {}

    def log(self, *a):
        s = " ".join(str(x) for x in a)
        line = f"[{time.time() - self.t0:7.1f}s] {s}"
        print(line, flush=True)
        self.logf.write(line + "\n")

    def left(self) -> float:
        return self.deadline - time.time()

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def phase(self, name: str):
        if self.sampler is not None:
            self.sampler.phase = name


class CsvAppender:
    def __init__(self, path, columns):
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self.f = open(path, "a", newline="", buffering=1)
        self.w = csv.writer(self.f, lineterminator="\n")
        self.columns = columns
        if new:
            self.w.writerow(columns)
            self.f.flush()

    def row(self, d: dict):
        self.w.writerow([C.fmt_cell(d.get(c)) for c in self.columns])
        self.f.flush()


def sig6(x):
    return float(f"{x:.6g}")


# ======================================================================================
# nvidia-smi
# ======================================================================================

def smi_query(fields, timeout=10.0):
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            return None, (r.stdout + r.stderr).strip()[:300]
        vals = [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")]
        return dict(zip(fields, vals)), None
    except Exception as e:  # noqa: BLE001
        return None, repr(e)[:300]


ENV_SMI_FIELDS = [
    "name", "driver_version", "vbios_version", "memory.total", "pstate", "temperature.gpu",
    "clocks.sm", "clocks.mem", "clocks.gr", "clocks.max.sm", "clocks.max.mem", "clocks.max.gr",
    "clocks.applications.graphics", "clocks.applications.memory",
    "clocks.default_applications.graphics", "clocks.default_applications.memory",
    "power.draw", "power.limit", "power.default_limit", "power.max_limit", "enforced.power.limit",
    "persistence_mode", "compute_mode", "ecc.mode.current", "mig.mode.current",
    "pcie.link.gen.current", "pcie.link.width.current", "clocks_event_reasons.active",
    "clocks_throttle_reasons.active", "utilization.gpu",
]


def smi_env():
    d, _ = smi_query(ENV_SMI_FIELDS)
    if d is not None:
        return d
    out = {}
    for f in ENV_SMI_FIELDS:  # one unsupported field fails the whole query: ask one by one
        d, err = smi_query([f])
        out[f] = d[f] if d else f"ERROR: {err}"
    return out


class Sampler(threading.Thread):
    """Samples SM/memory clock, power and temperature with nvidia-smi: every `period` s during the
    idle and sustained-load phases, every `slow_period` s otherwise."""

    BASE = ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "utilization.gpu"]

    def __init__(self, path, period=0.2, slow_period=1.0):
        super().__init__(daemon=True)
        self.period = period
        self.slow_period = slow_period  # outside the idle/load phases, to disturb the timed work less
        self.phase = "start"
        self.stop_flag = False
        self.samples = []  # (t, phase, dict)
        self.fields = list(self.BASE)
        d, _ = smi_query(self.fields + ["clocks_event_reasons.active"])
        if d is not None:
            self.fields.append("clocks_event_reasons.active")
        self.ok = smi_query(self.BASE)[0] is not None
        self.t0 = time.time()
        self.csv = CsvAppender(path, ["t_s", "phase"] + self.fields)

    def run(self):
        while not self.stop_flag and self.ok:
            t = time.time()
            d, err = smi_query(self.fields, timeout=5)
            if d is not None:
                self.samples.append((t - self.t0, self.phase, d))
                row = {"t_s": f"{t - self.t0:.2f}", "phase": self.phase}
                row.update(d)
                self.csv.row(row)
            dt = time.time() - t
            period = self.period if self.phase.startswith(("idle", "load")) else self.slow_period
            time.sleep(max(0.0, period - dt))

    def summary(self, phase_prefix):
        rows = [d for (_, p, d) in self.samples if p.startswith(phase_prefix)]
        out = {"n": len(rows)}
        for f in ("clocks.sm", "clocks.mem", "power.draw", "temperature.gpu", "utilization.gpu"):
            vals = []
            for d in rows:
                try:
                    vals.append(float(d[f]))
                except (KeyError, ValueError):
                    pass
            if vals:
                out[f] = dict(median=float(np.median(vals)), min=float(np.min(vals)),
                              max=float(np.max(vals)), mean=float(np.mean(vals)))
        reasons = {}
        for d in rows:
            r = d.get("clocks_event_reasons.active")
            if r:
                reasons[r] = reasons.get(r, 0) + 1
        if reasons:
            out["clocks_event_reasons.active"] = reasons
        return out


# ======================================================================================
# timing
# ======================================================================================

def flush_l2(ctx):
    """The L2 flush before each timed repeat (--flush):
    read        torch.sum over a 256 MiB scratch buffer: L2 is left full of clean,
                unrelated lines (default; no dirty write-backs charged to the op)
    write       scratch.zero_(): L2 is left full of dirty lines of the scratch buffer,
                whose write-back to HBM then overlaps the timed op
    write+read  zero_() of the scratch buffer, then the read pass
    none        no flush (warm L2)"""
    if ctx.flush_buf is None:
        return
    mode = ctx.flush_mode
    if mode in ("write", "write+read"):
        ctx.flush_buf.zero_()
    if mode in ("read", "write+read"):
        torch.sum(ctx.flush_buf, 0, out=ctx.flush_out)


def _flush_fn(ctx, flush):
    if flush is True:
        return lambda: flush_l2(ctx)
    if callable(flush):
        return flush
    return None


SLEEP_HZ = 1.98e9   # torch.cuda._sleep counts SM cycles; max SM clock of the H200
CHUNK = 25          # repeats enqueued behind one sleep kernel


def gpu_sleep(seconds):
    """Keep the GPU busy (a spin kernel, no memory traffic) while the host enqueues work."""
    torch.cuda._sleep(max(1, int(seconds * SLEEP_HZ)))


def host_seconds_per_rep(ctx, fn, flush=True, n=3):
    """Host time to enqueue one repeat (flush + events + fn), measured while the GPU is
    busy with a 10 ms sleep kernel.  About 10 ms / n or more means fn waits for the GPU."""
    fl = _flush_fn(ctx, flush)
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * n)]
    gpu_sleep(0.010)
    t = time.perf_counter()
    for i in range(n):
        if fl is not None:
            fl()
        ev[2 * i].record()
        fn()
        ev[2 * i + 1].record()
    dt = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    return dt


def timed_reps(ctx, fn, n, flush=True, host_s=None):
    """Per-repeat times in ms.
    GPU: for each chunk of CHUNK repeats, a sleep kernel long enough for the host to enqueue
    the chunk, then per repeat: flush, event, fn, event; one synchronize at the end.  So
    every repeat runs from a full queue: event times are device time, free of host launch
    overhead.  flush: True (L2 flush, see flush_l2), False (none) or a callable."""
    fl = _flush_fn(ctx, flush)
    if ctx.cuda:
        if host_s is None:
            host_s = 100e-6
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
        for c0 in range(0, n, CHUNK):
            c1 = min(n, c0 + CHUNK)
            gpu_sleep(min(1.0, 1.5 * (c1 - c0) * host_s + 2e-4))
            for i in range(c0, c1):
                if fl is not None:
                    fl()
                starts[i].record()
                fn()
                ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]
    out = []
    for _ in range(n):
        if fl is not None:
            fl()
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1e3)
    return out


def time_fn(ctx, fn, flush=True, target_s=None, max_reps=None, min_reps=20, info=None):
    """Warm up, measure the host enqueue time, pick the repeat count from a rough timing,
    then time.  Returns the per-repeat times (ms); fills info['host_ms'] if a dict is given."""
    target_s = ctx.target_s if target_s is None else target_s
    max_reps = ctx.max_reps if max_reps is None else max_reps
    fn()
    ctx.sync()
    t = time.perf_counter()
    n = 0
    while n < 2 or (time.perf_counter() - t < 0.02 and n < 30):
        fn()
        n += 1
    ctx.sync()
    host_s = host_seconds_per_rep(ctx, fn, flush) if ctx.cuda else None
    if info is not None and host_s is not None:
        info["host_ms"] = sig6(host_s * 1e3)
    rough = float(np.median(timed_reps(ctx, fn, 3, flush, host_s)))
    reps = C.repeats_for(rough, target_s=target_s, max_reps=max_reps, min_reps=min_reps)
    if ctx.dry:
        reps = min(reps, 5)
    return timed_reps(ctx, fn, reps, flush, host_s)


def stats_of(times):
    a = np.asarray(times, dtype=np.float64)
    return dict(median_ms=sig6(float(np.median(a))), p10_ms=sig6(float(np.percentile(a, 10))),
                p90_ms=sig6(float(np.percentile(a, 90))), min_ms=sig6(float(a.min())),
                max_ms=sig6(float(a.max())), mean_ms=sig6(float(a.mean())), reps=len(a))


def kernel_names(ctx, fn):
    """Names of the device activities (kernels, memcpy/memset) of one call of fn."""
    if not (ctx.cuda and ctx.profile_kernels):
        return ""
    from torch.profiler import ProfilerActivity, profile
    ctx.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    names = []
    for e in prof.events():
        if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA:
            nm = e.name
            if nm not in names:
                names.append(nm)
    short = [(n[:160] + "...") if len(n) > 160 else n for n in names]
    return " | ".join(short)


# ======================================================================================
# case builders: each returns (fn, backend_label, cleanup_objects)
# ======================================================================================

TORCH_DT = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}


def set_fp32_strict():
    """True fp32 matmuls: no TF32 in cuBLAS or cuDNN."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    try:
        torch.set_float32_matmul_precision("highest")
    except Exception:  # noqa: BLE001
        pass


def set_tf32(on: bool):
    torch.backends.cuda.matmul.allow_tf32 = on
    torch.backends.cudnn.allow_tf32 = on
    try:
        torch.set_float32_matmul_precision("high" if on else "highest")
    except Exception:  # noqa: BLE001
        pass


def _randn(shape, dtype, device, scale=1.0):
    t = torch.randn(shape, dtype=torch.float32 if dtype in (torch.float8_e4m3fn,) else dtype, device=device)
    if scale != 1.0:
        t.mul_(scale)
    return t.to(dtype) if t.dtype != dtype else t


def mask_2to4(n, k, device):
    patterns = torch.tensor([[1, 1, 0, 0], [1, 0, 1, 0], [1, 0, 0, 1], [0, 1, 1, 0], [0, 1, 0, 1], [0, 0, 1, 1]],
                            dtype=torch.bool, device=device)
    sel = torch.randint(0, 6, (n, k // 4), device=device)
    return patterns[sel].reshape(n, k)


def build_gemm(ctx, c):
    m, k, n, dt = c["m"], c["k"], c["n"], c["dtype"]
    dev = ctx.device
    if dt in TORCH_DT:
        tdt = TORCH_DT[dt]
        x = torch.randn(m, k, dtype=tdt, device=dev)
        w = _randn((n, k), tdt, dev, k ** -0.5)
        return (lambda: F.linear(x, w)), f"F.linear {dt} (aten::mm, cuBLAS)", [x, w]
    if dt == "fp8":
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        b = w.t()  # [k, n] column-major, as _scaled_mm requires
        sa = torch.tensor(0.5, device=dev, dtype=torch.float32)
        sb = torch.tensor(k ** -0.5, device=dev, dtype=torch.float32)
        fn = lambda: torch._scaled_mm(a, b, scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16)  # noqa: E731
        return fn, "torch._scaled_mm e4m3 x e4m3 -> bf16, per-tensor scales (cuBLASLt)", [a, w, b, sa, sb]
    if dt == "int8":
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device=dev)
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=dev)
        b = w.t()  # [k, n] column-major view of W[n, k]
        return (lambda: torch._int_mm(a, b)), "torch._int_mm int8 x int8 -> int32 (cuBLASLt)", [a, w, b]
    if dt == "bf16_2:4":
        from torch.sparse import to_sparse_semi_structured
        x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        w = _randn((n, k), torch.bfloat16, dev, k ** -0.5)
        w = w * mask_2to4(n, k, dev)
        ws = to_sparse_semi_structured(w)
        del w
        backend = f"F.linear with to_sparse_semi_structured weight ({type(ws).__name__}, " \
                  f"backend={getattr(ws, 'BACKEND', '?')})"
        return (lambda: F.linear(x, ws)), backend, [x, ws]
    raise ValueError(f"unknown gemm dtype {dt}")


def sdpa_backend_name(q, k, v, causal, gqa):
    try:
        from torch.nn.attention import SDPBackend
        i = torch._fused_sdp_choice(q, k, v, is_causal=causal, enable_gqa=gqa)
        return SDPBackend(i).name
    except Exception as e:  # noqa: BLE001
        return f"unknown({type(e).__name__})"


def build_attention(ctx, c):
    b, h, kvh, d, ql, kvl = c["batch"], c["heads"], c["kv_heads"], c["head_dim"], c["q_len"], c["kv_len"]
    dev = ctx.device
    q = torch.randn(b, h, ql, d, dtype=torch.bfloat16, device=dev)
    k = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
    v = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
    causal = bool(c["causal"])
    gqa = kvh < h
    kw = {"is_causal": causal}
    if gqa:
        kw["enable_gqa"] = True
    fn = lambda: F.scaled_dot_product_attention(q, k, v, **kw)  # noqa: E731
    return fn, "SDPA " + sdpa_backend_name(q, k, v, causal, gqa), [q, k, v]


class DecoderLayer:
    """Llama-style decoder layer, bf16, no RoPE, KV cache of kv_len positions."""

    def __init__(self, c, device):
        self.hd, self.f = c["hidden"], c["ffn"]
        self.h, self.kvh, self.d = c["heads"], c["kv_heads"], c["head_dim"]
        self.b, self.ql, self.kvl = c["batch"], c["q_len"], c["kv_len"]
        bf = torch.bfloat16
        hd, f, h, kvh, d = self.hd, self.f, self.h, self.kvh, self.d
        self.ln1 = (1.0 + 0.1 * torch.randn(hd, device=device)).to(bf)
        self.ln2 = (1.0 + 0.1 * torch.randn(hd, device=device)).to(bf)
        self.wqkv = _randn(((h + 2 * kvh) * d, hd), bf, device, hd ** -0.5)
        self.wo = _randn((hd, h * d), bf, device, (h * d) ** -0.5)
        self.wgu = _randn((2 * f, hd), bf, device, hd ** -0.5)
        self.wd = _randn((hd, f), bf, device, f ** -0.5)
        self.k_cache = torch.randn(self.b, kvh, self.kvl, d, dtype=bf, device=device)
        self.v_cache = torch.randn(self.b, kvh, self.kvl, d, dtype=bf, device=device)
        self.x = torch.randn(self.b, self.ql, hd, dtype=bf, device=device)
        self.causal = self.ql > 1 and self.ql == self.kvl
        self.gqa = kvh < h

    def forward(self):
        b, ql, hd, h, kvh, d = self.b, self.ql, self.hd, self.h, self.kvh, self.d
        x = self.x
        hn = F.rms_norm(x, (hd,), self.ln1, 1e-5)
        qkv = F.linear(hn, self.wqkv)
        q, k, v = qkv.split([h * d, kvh * d, kvh * d], dim=-1)
        q = q.view(b, ql, h, d).transpose(1, 2)
        k = k.view(b, ql, kvh, d).transpose(1, 2)
        v = v.view(b, ql, kvh, d).transpose(1, 2)
        self.k_cache[:, :, self.kvl - ql:, :].copy_(k)
        self.v_cache[:, :, self.kvl - ql:, :].copy_(v)
        if self.gqa:
            a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, is_causal=self.causal,
                                               enable_gqa=True)
        else:
            a = F.scaled_dot_product_attention(q, self.k_cache, self.v_cache, is_causal=self.causal)
        a = a.transpose(1, 2).reshape(b, ql, h * d)
        x1 = x + F.linear(a, self.wo)
        hn2 = F.rms_norm(x1, (hd,), self.ln2, 1e-5)
        gu = F.linear(hn2, self.wgu)
        g, u = gu.chunk(2, dim=-1)
        y = F.silu(g) * u
        return x1 + F.linear(y, self.wd)

    def sdpa_backend(self):
        q = torch.empty(self.b, self.h, self.ql, self.d, dtype=torch.bfloat16, device=self.x.device)
        return sdpa_backend_name(q, self.k_cache, self.v_cache, self.causal, self.gqa)


def capture_graph(fn, warm=3):
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(warm):
            fn()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = fn()
    torch.cuda.synchronize()
    return g, out


def build_layer(ctx, c):
    L = DecoderLayer(c, ctx.device)
    backend = "CUDA graph of eager layer; SDPA " + L.sdpa_backend()
    if ctx.cuda:
        g, out = capture_graph(L.forward)
        return g.replay, backend, [L, g, out]
    return L.forward, "eager (dry-run); SDPA " + L.sdpa_backend(), [L]


def build_copy(ctx, c):
    nbytes, dt = c["bytes"], c["dtype"]
    dev = ctx.device
    if dt == "bf16":
        if nbytes % 2:
            raise ValueError("bf16 copy needs an even byte count")
        src = torch.randn(nbytes // 2, dtype=torch.bfloat16, device=dev)
    else:
        src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    return (lambda: dst.copy_(src)), f"Tensor.copy_ {dt} contiguous D2D", [src, dst]


BUILDERS = {"gemm": build_gemm, "attention": build_attention, "layer": build_layer, "copy": build_copy}


def case_work(c):
    """(flops, bytes) of a case, for achieved-rate columns (minimal traffic model)."""
    k = c["kind"]
    if k == "gemm":
        eb = C.ELEM_BYTES[c["dtype"]]
        ob = 4 if c["dtype"] in ("fp32", "int8") else 2
        wb = c["k"] * c["n"] * eb * (0.5625 if c["dtype"] == "bf16_2:4" else 1)
        return C.gemm_flops(c["m"], c["k"], c["n"]), c["m"] * c["k"] * eb + wb + c["m"] * c["n"] * ob
    if k == "attention":
        return C.attention_flops(c), C.attention_bytes(c)
    if k == "layer":
        tokens = c["batch"] * c["q_len"]
        w = C.layer_weights(c)
        a = dict(c)
        a["causal"] = 1 if c["q_len"] == c["kv_len"] and c["q_len"] > 1 else 0
        return 2.0 * tokens * w + C.attention_flops(a), 2.0 * w + C.attention_bytes(a)
    if k == "copy":
        return 0.0, 2.0 * c["bytes"]
    return 0.0, 0.0


# ======================================================================================
# running cases
# ======================================================================================

def shrink_for_dry_run(c):
    """Tiny version of a case for the CPU dry run (keeps the dtype constraints)."""
    c = dict(c)
    k = c["kind"]
    if k == "gemm":
        cons = C.CONSTRAINTS[c["dtype"]]
        c["m"] = max(cons["min_m"], C._ceil_to(min(c["m"], 40), cons["mult_m"]))
        c["k"] = C._ceil_to(min(c["k"], 96), max(cons["mult_k"], 1))
        c["n"] = C._ceil_to(min(c["n"], 80), max(cons["mult_n"], 1))
    elif k == "attention":
        c["batch"] = min(c["batch"], 2)
        if c["q_len"] == c["kv_len"]:
            c["q_len"] = c["kv_len"] = min(c["kv_len"], 48)
        else:
            c["kv_len"] = min(c["kv_len"], 64)
            c["q_len"] = min(c["q_len"], c["kv_len"] - 1)
    elif k == "layer":
        c["hidden"] = min(c["hidden"], 128)
        c["ffn"] = min(c["ffn"], 256)
        c["batch"] = min(c["batch"], 2)
        if c["q_len"] == c["kv_len"]:
            c["q_len"] = c["kv_len"] = min(c["kv_len"], 32)
        else:
            c["kv_len"] = min(c["kv_len"], 64)
    elif k == "copy":
        c["bytes"] = min(c["bytes"], 1 << 20)
    return c


def run_case(ctx, split, cid, c, case_csv, stats_csv):
    row = {"split": split, "case_id": cid, "describe": C.describe(c)}
    row.update({col: c.get(col) for col in C.CASE_COLUMNS if col != "measured_ms"})
    row["est_ms"] = sig6(C.est_ms(c))
    t_wall = time.time()
    objs = []
    fn = None
    try:
        if ctx.left() <= 0:
            raise TimeoutError("skipped: run deadline reached")
        est_mem = C.est_mem_bytes(c)
        if ctx.cuda:
            free, _ = torch.cuda.mem_get_info()
            if est_mem > free * 0.9:
                raise MemoryError(f"estimated {est_mem / 2**30:.1f} GiB > free {free / 2**30:.1f} GiB")
        fn, backend, objs = BUILDERS[c["kind"]](ctx, c)
        row["backend"] = backend
        info = {}
        times = time_fn(ctx, fn, info=info)
        st = stats_of(times)
        row.update(info)
        row.update(st)
        row["status"] = "ok"
        flops, byts = case_work(c)
        med_s = st["median_ms"] / 1e3
        if flops and med_s > 0:
            row["achieved_tflops"] = sig6(flops / med_s / 1e12)
        if byts and med_s > 0:
            row["achieved_gbps"] = sig6(byts / med_s / 1e9)
        try:
            row["kernels"] = kernel_names(ctx, fn)
        except Exception as e:  # noqa: BLE001
            row["kernels"] = f"(profiler failed: {type(e).__name__}: {str(e)[:100]})"
        out = dict(c)
        out["measured_ms"] = st["median_ms"]
        case_csv.row(out)
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        row["status"] = "skipped" if isinstance(e, TimeoutError) else "error"
        row["error"] = msg
        if not isinstance(e, TimeoutError):
            ctx.log(f"  ERROR {cid} {C.describe(c)}: {msg}")
    finally:
        objs = fn = None  # noqa: F841
        if ctx.cuda:
            try:
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                ctx.log(f"  sync after {cid} failed: {e!r}")
            if C.est_mem_bytes(c) > (1 << 30) or row.get("status") != "ok":
                torch.cuda.empty_cache()
    row["wall_s"] = round(time.time() - t_wall, 3)
    stats_csv.row(row)
    return row


def select_cases(ctx, cs):
    only = ctx.only_kinds
    cs = [(i, c) for i, c in enumerate(cs) if c["kind"] in only]
    if ctx.quick or ctx.dry:
        per = 1 if ctx.dry else 2
        seen = {}
        sel = []
        for i, c in cs:
            key = c["kind"] + "/" + c["dtype"]
            if seen.get(key, 0) < per:
                seen[key] = seen.get(key, 0) + 1
                sel.append((i, c))
        cs = sel
    if ctx.dry:
        cs = [(i, shrink_for_dry_run(c)) for i, c in cs]
    return cs


def run_split(ctx, split, cs, case_path, stats_csv):
    case_csv = CsvAppender(case_path, C.CASE_COLUMNS)
    sel = select_cases(ctx, cs)
    ctx.log(f"== {split}: {len(sel)} cases -> {case_path}")
    ctx.phase(f"cases-{split}")
    n_ok = n_err = n_skip = 0
    t = time.time()
    for j, (i, c) in enumerate(sel):
        cid = C.case_id(split, i)
        r = run_case(ctx, split, cid, c, case_csv, stats_csv)
        if r["status"] == "ok":
            n_ok += 1
        elif r["status"] == "skipped":
            n_skip += 1
        else:
            n_err += 1
        if r["status"] == "ok" and (j % 25 == 0 or r["wall_s"] > 2.0):
            ctx.log(f"  {cid} {C.describe(c)}: {r['median_ms']} ms ({r['reps']} reps, {r['wall_s']} s) "
                    f"[{r.get('backend', '')}]")
    ctx.log(f"== {split}: ok {n_ok}, errors {n_err}, skipped {n_skip}, {time.time() - t:.1f} s")


# ======================================================================================
# microbenchmarks
# ======================================================================================

def micro_row(ctx, micro_csv, name, params, value, unit, notes=""):
    d = {"name": name, "params": params, "value": sig6(value) if isinstance(value, float) else value,
         "unit": unit, "notes": notes}
    micro_csv.row(d)
    ctx.log(f"  micro {name} [{params}] = {d['value']} {unit} {notes}")


def _tnotes(st):
    return f"median_ms={st['median_ms']} p10_ms={st['p10_ms']} p90_ms={st['p90_ms']} min_ms={st['min_ms']} reps={st['reps']}"


def micro_peak(ctx, mc):
    ctx.phase("micro-peak")
    dev = ctx.device
    if ctx.dry:
        sizes = {"bf16": [64], "fp16": [64], "fp32": [64], "tf32": [64], "fp8": [64], "int8": [64],
                 "bf16_2:4": [64]}
    elif ctx.quick:
        sizes = {"bf16": [8192], "fp16": [8192], "fp32": [4096], "tf32": [8192], "fp8": [8192],
                 "int8": [8192], "bf16_2:4": [8192]}
    else:
        sizes = {"bf16": [4096, 8192, 16384], "fp16": [8192, 16384], "fp32": [8192], "tf32": [8192],
                 "fp8": [8192, 16384], "int8": [8192, 16384], "bf16_2:4": [8192, 16384]}
    for dt, ss in sizes.items():
        for s in ss:
            variants = [("", None)]
            if dt == "fp8":
                variants = [("", False), ("_fastaccum", True)]
            if dt == "bf16_2:4":
                variants = [("", "linear"), ("_cslt_direct", "cslt")]
            for suffix, var in variants:
                objs = []
                try:
                    flops = 2.0 * s ** 3
                    if dt in ("bf16", "fp16", "fp32", "tf32"):
                        tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32,
                               "tf32": torch.float32}[dt]
                        a = torch.randn(s, s, dtype=tdt, device=dev)
                        w = torch.randn(s, s, dtype=tdt, device=dev)
                        objs = [a, w]
                        fn = lambda: F.linear(a, w)  # noqa: E731
                        label = "F.linear"
                    elif dt == "fp8":
                        a = torch.randn(s, s, device=dev).to(torch.float8_e4m3fn)
                        w = torch.randn(s, s, device=dev).to(torch.float8_e4m3fn)
                        sa = torch.tensor(1.0, device=dev)
                        fa = var
                        objs = [a, w, sa]
                        fn = lambda: torch._scaled_mm(a, w.t(), scale_a=sa, scale_b=sa,  # noqa: E731
                                                      out_dtype=torch.bfloat16, use_fast_accum=fa)
                        label = f"torch._scaled_mm use_fast_accum={fa}"
                    elif dt == "int8":
                        a = torch.randint(-128, 128, (s, s), dtype=torch.int8, device=dev)
                        w = torch.randint(-128, 128, (s, s), dtype=torch.int8, device=dev)
                        objs = [a, w]
                        fn = lambda: torch._int_mm(a, w.t())  # noqa: E731
                        label = "torch._int_mm"
                    else:
                        from torch.sparse import to_sparse_semi_structured
                        a = torch.randn(s, s, dtype=torch.bfloat16, device=dev)
                        w = torch.randn(s, s, dtype=torch.bfloat16, device=dev) * mask_2to4(s, s, dev)
                        ws = to_sparse_semi_structured(w)
                        objs = [a, w, ws]
                        if var == "linear":
                            fn = lambda: F.linear(a, ws)  # noqa: E731
                            label = f"F.linear sparse weight {type(ws).__name__}"
                        else:
                            packed = ws.packed
                            fn = lambda: torch._cslt_sparse_mm(packed, a.t())  # noqa: E731
                            label = "torch._cslt_sparse_mm(W_packed, x.t()) (no transposes)"
                    if dt == "tf32":
                        set_tf32(True)
                    try:
                        if ctx.cuda:
                            torch.cuda.synchronize()
                            time.sleep(0.5)  # let clocks/power recover between entries
                        times = time_fn(ctx, fn, target_s=0.1 if ctx.quick else 0.4, max_reps=100)
                        kn = kernel_names(ctx, fn) if s == ss[-1] else ""
                    finally:
                        if dt == "tf32":
                            set_fp32_strict()
                    st = stats_of(times)
                    unit = "TOP/s" if dt == "int8" else "TFLOP/s"
                    v = flops / (st["median_ms"] / 1e3) / 1e12
                    best = flops / (st["min_ms"] / 1e3) / 1e12
                    first = flops / (float(np.median(times[:5])) / 1e3) / 1e12
                    last = flops / (float(np.median(times[-5:])) / 1e3) / 1e12
                    note = (f"{label}; {_tnotes(st)}; best={best:.1f}; first5={first:.1f}; last5={last:.1f}; "
                            f"random normal inputs")
                    if dt == "bf16_2:4":
                        note += "; dense-equivalent FLOPs (2*m*n*k)"
                    if kn:
                        note += f"; kernels: {kn}"
                    micro_row(ctx, mc, f"peak_matmul_{dt}{suffix}", f"m=n=k={s}", v, unit, note)
                except Exception as e:  # noqa: BLE001
                    micro_row(ctx, mc, f"peak_matmul_{dt}{suffix}", f"m=n=k={s}", "", "",
                              f"ERROR {type(e).__name__}: {str(e)[:200]}")
                finally:
                    objs = None  # noqa: F841
                    if ctx.cuda:
                        torch.cuda.synchronize()
                        torch.cuda.empty_cache()


def micro_copy(ctx, mc):
    ctx.phase("micro-copy")
    dev = ctx.device
    hi = 20 if ctx.dry else (30 if ctx.quick else 33)
    for p in range(10, hi + 1):
        nbytes = 1 << p
        objs = []
        try:
            src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev)
            dst = torch.empty_like(src)
            objs = [src, dst]
            fn = lambda: dst.copy_(src)  # noqa: E731
            st = stats_of(time_fn(ctx, fn, target_s=0.15 if not ctx.quick else 0.05))
            bw = 2 * nbytes / (st["median_ms"] / 1e3) / 1e9
            micro_row(ctx, mc, "copy_bw_cold", f"bytes={nbytes}", bw, "GB/s",
                      f"read+written bytes / median time, L2 flushed before each repeat; {_tnotes(st)}")
            if nbytes <= (64 << 20):
                st = stats_of(time_fn(ctx, fn, flush=False, target_s=0.1 if not ctx.quick else 0.03))
                bw = 2 * nbytes / (st["median_ms"] / 1e3) / 1e9
                micro_row(ctx, mc, "copy_bw_hot", f"bytes={nbytes}", bw, "GB/s",
                          f"read+written bytes / median time, back-to-back (no L2 flush); {_tnotes(st)}")
        except Exception as e:  # noqa: BLE001
            micro_row(ctx, mc, "copy_bw_cold", f"bytes={nbytes}", "", "", f"ERROR {type(e).__name__}: {str(e)[:200]}")
        finally:
            objs = None  # noqa: F841
            if ctx.cuda and nbytes >= (256 << 20):
                torch.cuda.empty_cache()
    # read-only and write-only bandwidth
    sizes = [1 << 20] if ctx.dry else ([1 << 30] if ctx.quick else [1 << 30, 4 << 30])
    for nbytes in sizes:
        try:
            x = torch.randn(nbytes // 4, dtype=torch.float32, device=dev)
            st = stats_of(time_fn(ctx, lambda: torch.sum(x), target_s=0.15))
            micro_row(ctx, mc, "read_bw_sum", f"bytes={nbytes} dtype=fp32", nbytes / (st["median_ms"] / 1e3) / 1e9,
                      "GB/s", f"torch.sum over the tensor, bytes read / median time; {_tnotes(st)}")
            st = stats_of(time_fn(ctx, lambda: x.fill_(1.5), target_s=0.15))
            micro_row(ctx, mc, "write_bw_fill", f"bytes={nbytes} dtype=fp32", nbytes / (st["median_ms"] / 1e3) / 1e9,
                      "GB/s", f"Tensor.fill_, bytes written / median time; {_tnotes(st)}")
            if nbytes == sizes[-1]:
                kn = kernel_names(ctx, lambda: torch.sum(x)) + " || " + kernel_names(ctx, lambda: x.fill_(1.5))
                micro_row(ctx, mc, "read_write_kernels", f"bytes={nbytes}", "", "", kn)
            x = None
        except Exception as e:  # noqa: BLE001
            micro_row(ctx, mc, "read_bw_sum", f"bytes={nbytes}", "", "", f"ERROR {type(e).__name__}: {str(e)[:200]}")
        if ctx.cuda:
            torch.cuda.empty_cache()
    micro_flush_effect(ctx, mc)
    if ctx.cuda:
        st = stats_of(time_fn(ctx, lambda: flush_l2(ctx), flush=False, target_s=0.1))
        micro_row(ctx, mc, "l2_flush_time", f"bytes={FLUSH_BYTES} mode={ctx.flush_mode}", st["median_ms"], "ms",
                  f"time of the L2 flush used before every timed repeat; "
                  f"{FLUSH_BYTES / (st['median_ms'] / 1e3) / 1e9:.0f} GB/s; {_tnotes(st)}")


def micro_flush_effect(ctx, mc):
    """How much the flush method matters: the same ops after a read-flush (sum over the scratch
    buffer, leaves clean lines in L2), a write-flush (scratch.zero_(), leaves dirty lines), both,
    and no flush (warm L2)."""
    if not ctx.cuda:
        return
    dev = ctx.device
    wr = lambda: ctx.flush_buf.zero_()  # noqa: E731
    rd = lambda: torch.sum(ctx.flush_buf, 0, out=ctx.flush_out)  # noqa: E731
    wrd = lambda: (wr(), rd())  # noqa: E731
    ops = []
    for nbytes in (1 << 20, 8 << 20, 32 << 20):
        src = torch.randint(0, 256, (nbytes,), dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        ops.append((f"copy bytes={nbytes}", (lambda s=src, d=dst: d.copy_(s)), [src, dst]))
    for (m, k, n) in ((1, 4096, 4096), (16, 4096, 14336), (1, 8192, 28672), (4096, 4096, 4096)):
        x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        w = torch.randn(n, k, dtype=torch.bfloat16, device=dev)
        ops.append((f"gemm bf16 m={m} k={k} n={n}", (lambda x=x, w=w: F.linear(x, w)), [x, w]))
    for label, fn, _objs in ops:
        res = {}
        for mode, fl in (("read", rd), ("write", wr), ("write+read", wrd), ("none", False)):
            res[mode] = stats_of(time_fn(ctx, fn, flush=fl, target_s=0.05))["median_ms"]
        micro_row(ctx, mc, "flush_method_effect", label, res[ctx.flush_mode if ctx.flush_mode in res else "read"]
                  * 1e3, "us", "median per flush mode: " + "; ".join(f"{k} {v * 1e3:.2f} us" for k, v in res.items())
                  + f" (value = the run's mode, {ctx.flush_mode})")
    ops = None


def micro_launch(ctx, mc):
    ctx.phase("micro-launch")
    if not ctx.cuda:
        micro_row(ctx, mc, "launch_overhead", "", "", "", "skipped: no CUDA (dry run)")
        return
    x = torch.ones(1, device="cuda")
    add = lambda: x.add_(1.0)  # noqa: E731
    for _ in range(50):
        add()
    torch.cuda.synchronize()
    # (1) single tiny kernel, queued behind the L2 flush (GPU-side time between events)
    st = stats_of(timed_reps(ctx, add, 200, flush=True))
    micro_row(ctx, mc, "tiny_kernel_event_time_queued", "1-element add_, behind flush", st["median_ms"] * 1e3, "us",
              "event pair around one tiny kernel while the GPU queue is busy: device-side kernel time + "
              f"scheduling; {_tnotes(st)}")
    # (2) single tiny kernel on an idle GPU (includes host submission latency)
    ts = []
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(200):
        torch.cuda.synchronize()
        s.record()
        add()
        e.record()
        torch.cuda.synchronize()
        ts.append(s.elapsed_time(e))
    st = stats_of(ts)
    micro_row(ctx, mc, "tiny_kernel_event_time_idle", "1-element add_, idle GPU", st["median_ms"] * 1e3, "us",
              f"event pair around one eager launch on an idle GPU (includes host launch path); {_tnotes(st)}")
    # (3) empty event pair
    st = stats_of(timed_reps(ctx, lambda: None, 200, flush=True))
    micro_row(ctx, mc, "empty_event_pair", "nothing between events, behind flush", st["median_ms"] * 1e3, "us",
              f"resolution/floor of the event timer; {_tnotes(st)}")
    # (4) eager back-to-back throughput
    N = 2000
    for rep in range(2):
        torch.cuda.synchronize()
        s.record()
        t = time.perf_counter()
        for _ in range(N):
            add()
        t_host = time.perf_counter() - t
        e.record()
        torch.cuda.synchronize()
    micro_row(ctx, mc, "eager_launch_throughput_gpu", f"{N} back-to-back 1-element add_",
              s.elapsed_time(e) * 1e3 / N, "us/kernel", "event time / N (bounded by host launch rate)")
    micro_row(ctx, mc, "eager_launch_host_time", f"{N} back-to-back 1-element add_", t_host * 1e6 / N, "us/launch",
              "host wall time per eager PyTorch launch (perf_counter)")
    # (5) graph of 100 tiny kernels; graph of 1 kernel
    for nk in (100, 1):
        def body(nk=nk):
            for _ in range(nk):
                x.add_(1.0)
        g, _ = capture_graph(body)
        st = stats_of(timed_reps(ctx, g.replay, 100, flush=True))
        micro_row(ctx, mc, f"graph_replay_{nk}_tiny_kernels", f"{nk} x 1-element add_ in one CUDA graph",
                  st["median_ms"] * 1e3, "us", f"event time of one replay, queued behind flush; per kernel "
                  f"{st['median_ms'] * 1e3 / nk:.3f} us; {_tnotes(st)}")
        ts = []
        for _ in range(100):
            torch.cuda.synchronize()
            s.record()
            g.replay()
            e.record()
            torch.cuda.synchronize()
            ts.append(s.elapsed_time(e))
        st = stats_of(ts)
        micro_row(ctx, mc, f"graph_replay_{nk}_tiny_kernels_idle", f"{nk} x 1-element add_, idle GPU",
                  st["median_ms"] * 1e3, "us", f"replay on an idle GPU (includes graph launch); {_tnotes(st)}")
        del g
    kn = kernel_names(ctx, add)
    micro_row(ctx, mc, "tiny_kernel_name", "", "", "", kn)


CHASE_SRC = r"""
extern "C" __global__ void chase_cg(const unsigned long long* __restrict__ buf, long long steps,
                                    unsigned long long start, unsigned long long* out, long long* cyc) {
    unsigned long long p = start;
    long long t0 = clock64();
    for (long long i = 0; i < steps; ++i) { p = __ldcg(buf + p); }
    long long t1 = clock64();
    out[0] = p; cyc[0] = t1 - t0;
}
extern "C" __global__ void chase_ca(const unsigned long long* buf, long long steps,
                                    unsigned long long start, unsigned long long* out, long long* cyc) {
    unsigned long long p = start;
    long long t0 = clock64();
    for (long long i = 0; i < steps; ++i) { p = __ldca(buf + p); }
    long long t1 = clock64();
    out[0] = p; cyc[0] = t1 - t0;
}
"""


def micro_chase(ctx, mc):
    ctx.phase("micro-chase")
    if not ctx.cuda:
        micro_row(ctx, mc, "pointer_chase", "", "", "", "skipped: no CUDA (dry run)")
        return
    try:
        import cupy as cp
    except Exception as e:  # noqa: BLE001
        micro_row(ctx, mc, "pointer_chase", "", "", "", f"ERROR cupy import: {e!r}")
        return
    mod = cp.RawModule(code=CHASE_SRC, options=("-std=c++17",))
    kern = {"cg": mod.get_function("chase_cg"), "ca": mod.get_function("chase_ca")}
    stride = 128  # bytes between consecutive slots: one L2 line each
    # (label, bytes, cache op, timed steps, warm steps or None = one full cycle)
    if ctx.quick:
        plan = [("L1", 16 << 10, "ca", 20000, None), ("L2", 8 << 20, "cg", 20000, None),
                ("HBM", 2 << 30, "cg", 20000, 5000)]
    else:
        plan = [("L1", 16 << 10, "ca", 100000, None), ("L1", 128 << 10, "ca", 100000, None),
                ("L2", 1 << 20, "cg", 100000, None), ("L2", 8 << 20, "cg", 100000, None),
                ("L2", 24 << 20, "cg", 100000, None), ("L2/HBM", 48 << 20, "cg", 100000, None),
                ("L2/HBM", 96 << 20, "cg", 100000, None), ("HBM", 256 << 20, "cg", 60000, 10000),
                ("HBM", 1 << 30, "cg", 60000, 10000), ("HBM", 2 << 30, "cg", 60000, 10000),
                ("HBM", 4 << 30, "cg", 60000, 10000)]
    for label, nbytes, op, steps, warm in plan:
        try:
            slots = nbytes // stride
            el = stride // 8
            buf = torch.zeros(nbytes // 8, dtype=torch.int64, device="cuda")
            perm = torch.randperm(slots, device="cuda", dtype=torch.int64)
            buf[perm * el] = torch.roll(perm, -1) * el
            start = int(perm[0].item()) * el
            del perm
            torch.cuda.synchronize()
            bcp = cp.asarray(buf)
            out = cp.zeros(1, dtype=cp.uint64)
            cyc = cp.zeros(1, dtype=cp.int64)
            wsteps = warm if warm is not None else slots
            kern[op]((1,), (1,), (bcp, np.int64(wsteps), np.uint64(start), out, cyc))
            cp.cuda.Device().synchronize()
            p = int(out.get()[0])  # continue where the warm pass stopped: new lines for HBM sizes
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            kern[op]((1,), (1,), (bcp, np.int64(steps), np.uint64(p), out, cyc))
            e1.record()
            e1.synchronize()
            ms = cp.cuda.get_elapsed_time(e0, e1)
            cycles = int(cyc.get()[0])
            ns = ms * 1e6 / steps
            cpl = cycles / steps
            micro_row(ctx, mc, f"latency_{label.replace('/', '_')}", f"footprint_bytes={nbytes} stride=128 "
                      f"load={'ld.global.cg' if op == 'cg' else 'ld.global.ca'} steps={steps}", ns, "ns/load",
                      f"dependent pointer chase, one thread, random cyclic permutation of {slots} slots; "
                      f"{cpl:.1f} SM cycles/load (clock64); implied SM clock {cpl / ns:.3f} GHz; "
                      f"warm pass {wsteps} steps first")
            del bcp, out, cyc, buf
        except Exception as e:  # noqa: BLE001
            micro_row(ctx, mc, f"latency_{label}", f"footprint_bytes={nbytes}", "", "",
                      f"ERROR {type(e).__name__}: {str(e)[:200]}")
        torch.cuda.empty_cache()


def micro_clocks(ctx, mc, seconds):
    """Sustained bf16 8192^3 matmul loop while the sampler records clocks/power."""
    if not ctx.cuda:
        micro_row(ctx, mc, "clocks_under_load", "", "", "", "skipped: no CUDA (dry run)")
        return {}
    s = 8192
    a = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        F.linear(a, w)
    torch.cuda.synchronize()
    ctx.phase("load-bf16-matmul")
    t = time.time()
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    n = 0
    e0.record()
    while time.time() - t < seconds:
        for _ in range(20):
            F.linear(a, w)
        n += 20
        torch.cuda.synchronize()
    e1.record()
    torch.cuda.synchronize()
    ctx.phase("after-load")
    ms = e0.elapsed_time(e1)
    rate = 2.0 * s ** 3 * n / (ms / 1e3) / 1e12
    micro_row(ctx, mc, "sustained_matmul_bf16", f"m=n=k={s} x {n} back-to-back, {seconds:.0f} s", rate, "TFLOP/s",
              "mean rate over the whole loop (no L2 flush); clocks sampled meanwhile")
    del a, w
    torch.cuda.empty_cache()
    return {}


def micro_clock_summary(ctx, mc):
    if ctx.sampler is None or not ctx.sampler.ok:
        micro_row(ctx, mc, "clocks", "", "", "", "nvidia-smi sampling unavailable")
        return {}
    out = {}
    for phase, label in (("idle", "idle"), ("load-bf16-matmul", "load")):
        sm = ctx.sampler.summary(phase)
        out[label] = sm
        for f, unit, nm in (("clocks.sm", "MHz", "sm_clock"), ("clocks.mem", "MHz", "mem_clock"),
                            ("power.draw", "W", "power"), ("temperature.gpu", "C", "temperature")):
            if f in sm:
                micro_row(ctx, mc, f"{nm}_{label}", f"nvidia-smi {f}, {sm['n']} samples @0.2 s", sm[f]["median"], unit,
                          f"median; min={sm[f]['min']} max={sm[f]['max']} mean={sm[f]['mean']:.1f}")
        if "clocks_event_reasons.active" in sm:
            micro_row(ctx, mc, f"clock_event_reasons_{label}", "nvidia-smi clocks_event_reasons.active", "", "",
                      json.dumps(sm["clocks_event_reasons.active"]))
    return out


# ======================================================================================
# environment
# ======================================================================================

def collect_env(ctx):
    env = {"date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "numpy": np.__version__, "machine": platform.machine(), "kernel": platform.release()}
    try:
        env["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    try:
        env["cusparselt_available"] = bool(torch.backends.cusparselt.is_available())
        env["cusparselt_version"] = torch.backends.cusparselt.version()
    except Exception as e:  # noqa: BLE001
        env["cusparselt"] = repr(e)
    for mod in ("cupy", "triton"):
        try:
            env[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            env[mod] = f"unavailable: {type(e).__name__}"
    if ctx.cuda:
        p = torch.cuda.get_device_properties(0)
        env["device"] = {
            "name": p.name, "capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
            "total_memory_bytes": p.total_memory,
            "l2_cache_bytes": getattr(p, "L2_cache_size", None),
            "max_threads_per_sm": getattr(p, "max_threads_per_multi_processor", None),
            "shared_memory_per_block_optin": getattr(p, "shared_memory_per_block_optin", None),
            "regs_per_sm": getattr(p, "regs_per_multiprocessor", None),
            "warp_size": getattr(p, "warp_size", None),
        }
        env["cuda_runtime_version"] = None
        try:
            import cupy as cp
            env["cuda_runtime_version"] = cp.cuda.runtime.runtimeGetVersion()
            env["cuda_driver_api_version"] = cp.cuda.runtime.driverGetVersion()
            a = cp.cuda.runtime.getDeviceProperties(0)
            env["device"]["clock_rate_khz_props"] = a.get("clockRate")
            env["device"]["memory_clock_rate_khz_props"] = a.get("memoryClockRate")
            env["device"]["memory_bus_width_bits"] = a.get("memoryBusWidth")
            env["device"]["l2_cache_bytes_cuda"] = a.get("l2CacheSize")
            env["device"]["persisting_l2_max_bytes"] = a.get("persistingL2CacheMaxSize")
            env["device"]["shared_mem_per_sm"] = a.get("sharedMemPerMultiprocessor")
        except Exception as e:  # noqa: BLE001
            env["cupy_props_error"] = repr(e)[:200]
        env["settings"] = {}
        try:
            env["settings"] = {
            "matmul.allow_tf32": torch.backends.cuda.matmul.allow_tf32,
            "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
            "matmul.allow_bf16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
            "matmul.allow_fp16_reduced_precision_reduction":
                torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
            "float32_matmul_precision": torch.get_float32_matmul_precision(),
            }
        except Exception as e:  # noqa: BLE001
            env["settings"]["error"] = repr(e)[:200]
    env["nvidia_smi"] = smi_env()
    return env


def write_env(ctx):
    with open(os.path.join(ctx.out, "h200_env.json"), "w") as f:
        json.dump(ctx.env, f, indent=1, sort_keys=True, default=str)


# ======================================================================================
# feasibility probe
# ======================================================================================

def probe(ctx):
    """Checks every API the harness relies on, with tiny shapes; prints and writes probe.json."""
    res = {}
    dev = ctx.device

    def chk(name, f):
        t = time.time()
        try:
            v = f()
            res[name] = {"ok": True, "value": v}
        except Exception as e:  # noqa: BLE001
            res[name] = {"ok": False, "error": f"{type(e).__name__}: {str(e).strip()[:300]}"}
        res[name]["s"] = round(time.time() - t, 3)
        ctx.log(f"PROBE {name}: {json.dumps(res[name], default=str)[:400]}")

    chk("versions", lambda: dict(torch=torch.__version__, cuda=torch.version.cuda,
                                 name=torch.cuda.get_device_name(0) if ctx.cuda else "cpu"))
    chk("fp32_precision_attr", lambda: str(getattr(torch.backends.cuda.matmul, "fp32_precision", "n/a")))

    # _scaled_mm
    def sm(m, k, n, colmajor=True, scale_shape=(), fa=False):
        a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
        w = torch.randn(n, k, device=dev).to(torch.float8_e4m3fn)
        b = w.t() if colmajor else w.t().contiguous()
        s = torch.ones(scale_shape, device=dev)
        y = torch._scaled_mm(a, b, scale_a=s, scale_b=s, out_dtype=torch.bfloat16, use_fast_accum=fa)
        ref = a.float() @ w.float().t()
        err = float((y.float() - ref).norm() / ref.norm())
        return [list(y.shape), str(y.dtype), round(err, 5)]
    for (m, k, n) in [(1, 64, 64), (7, 64, 64), (17, 64, 64), (64, 64, 64), (64, 40, 64), (64, 64, 40),
                      (64, 48, 48), (33, 4544, 4544)]:
        chk(f"scaled_mm m={m} k={k} n={n}", lambda m=m, k=k, n=n: sm(m, k, n))
    chk("scaled_mm b row-major", lambda: sm(64, 64, 64, colmajor=False))
    chk("scaled_mm scale shape (1,)", lambda: sm(64, 64, 64, scale_shape=(1,)))
    chk("scaled_mm fast_accum", lambda: sm(64, 64, 64, fa=True))

    # _int_mm
    def im(m, k, n, colmajor=True):
        a = torch.randint(-128, 128, (m, k), dtype=torch.int8, device=dev)
        w = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=dev)
        b = w.t() if colmajor else w.t().contiguous()
        y = torch._int_mm(a, b)
        ref = a.long() @ w.long().t()
        return [list(y.shape), str(y.dtype), bool((y.long() == ref).all())]
    for (m, k, n) in [(1, 64, 64), (8, 64, 64), (16, 64, 64), (17, 64, 64), (24, 64, 64), (25, 64, 64),
                      (32, 64, 64), (33, 64, 64), (32, 40, 64), (32, 64, 40), (32, 36, 64), (32, 64, 36),
                      (32, 8, 8), (48, 4544, 4544)]:
        chk(f"int_mm m={m} k={k} n={n}", lambda m=m, k=k, n=n: im(m, k, n))
    chk("int_mm b row-major", lambda: im(32, 64, 64, colmajor=False))

    # 2:4 sparse
    def cusparselt():
        return dict(avail=bool(torch.backends.cusparselt.is_available()),
                    version=torch.backends.cusparselt.version())
    chk("cusparselt", cusparselt)

    def sp(m, k, n):
        from torch.sparse import to_sparse_semi_structured
        x = torch.randn(m, k, dtype=torch.bfloat16, device=dev)
        w = torch.randn(n, k, dtype=torch.bfloat16, device=dev) * mask_2to4(n, k, dev)
        ws = to_sparse_semi_structured(w)
        y = F.linear(x, ws)
        ref = x.float() @ w.float().t()
        err = float((y.float() - ref).norm() / ref.norm())
        return [type(ws).__name__, getattr(ws, "BACKEND", "?"), list(y.shape), round(err, 5)]
    for (m, k, n) in [(1, 64, 64), (7, 64, 64), (17, 64, 64), (64, 64, 64), (64, 64, 16), (64, 16, 64),
                      (64, 32, 48), (64, 96, 64), (64, 64, 96), (5, 4544, 4544), (33, 4096, 14336)]:
        chk(f"sparse24 m={m} k={k} n={n}", lambda m=m, k=k, n=n: sp(m, k, n))

    def cslt_direct():
        from torch.sparse import to_sparse_semi_structured
        x = torch.randn(64, 128, dtype=torch.bfloat16, device=dev)
        w = torch.randn(96, 128, dtype=torch.bfloat16, device=dev) * mask_2to4(96, 128, dev)
        ws = to_sparse_semi_structured(w)
        y = torch._cslt_sparse_mm(ws.packed, x.t())
        ref = w.float() @ x.float().t()
        return [list(y.shape), round(float((y.float() - ref).norm() / ref.norm()), 5)]
    chk("cslt_sparse_mm direct", cslt_direct)

    # SDPA
    from torch.nn.attention import SDPBackend, sdpa_kernel

    def sdpa_check(b, h, kvh, d, ql, kvl, causal):
        q = torch.randn(b, h, ql, d, dtype=torch.bfloat16, device=dev)
        k = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
        v = torch.randn(b, kvh, kvl, d, dtype=torch.bfloat16, device=dev)
        gqa = kvh < h
        kw = dict(is_causal=causal, enable_gqa=gqa) if gqa else dict(is_causal=causal)
        out = {"choice": sdpa_backend_name(q, k, v, causal, gqa)}
        ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)
        for be in (SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.CUDNN_ATTENTION,
                   SDPBackend.MATH):
            try:
                with sdpa_kernel([be]):
                    y = F.scaled_dot_product_attention(q, k, v, **kw)
                out[be.name] = round(float((y.float() - ref).norm() / ref.norm()), 4)
            except Exception as e:  # noqa: BLE001
                out[be.name] = f"fail: {str(e).strip().splitlines()[0][:80]}"
        out["kernels"] = kernel_names(ctx, lambda: F.scaled_dot_product_attention(q, k, v, **kw))[:300]
        return out
    for cfg in [(2, 32, 8, 128, 1, 1000, False), (2, 32, 8, 128, 512, 512, True), (2, 32, 32, 128, 1, 1000, False),
                (2, 32, 32, 128, 512, 512, True), (2, 14, 2, 64, 1, 300, False), (2, 14, 2, 64, 300, 300, True),
                (2, 71, 1, 64, 1, 700, False), (2, 71, 1, 64, 256, 256, True), (2, 48, 1, 128, 1, 512, False),
                (2, 32, 8, 128, 128, 2048, False), (2, 32, 8, 128, 512, 512, False)]:
        chk(f"sdpa b,h,kvh,d,q,kv,causal={cfg}", lambda cfg=cfg: sdpa_check(*cfg))

    chk("rms_norm", lambda: float(F.rms_norm(torch.randn(4, 64, device=dev, dtype=torch.bfloat16), (64,),
                                             torch.ones(64, device=dev, dtype=torch.bfloat16), 1e-5).float().pow(2)
                                  .mean()))

    def layer_graph(ql, kvl):
        c = dict(hidden=896, ffn=4864, heads=14, kv_heads=2, head_dim=64, batch=2, q_len=ql, kv_len=kvl)
        L = DecoderLayer(c, dev)
        y_e = L.forward().float()
        g, out = capture_graph(L.forward)
        g.replay()
        torch.cuda.synchronize()
        err = float((out.float() - y_e).norm() / y_e.norm())
        times = timed_reps(ctx, g.replay, 20)
        kn = kernel_names(ctx, g.replay)
        return dict(err=err, median_ms=float(np.median(times)), sdpa=L.sdpa_backend(), kernels=kn[:600])
    chk("layer graph decode", lambda: layer_graph(1, 512))
    chk("layer graph prefill", lambda: layer_graph(256, 256))

    def cupy_chase():
        import cupy as cp
        mod = cp.RawModule(code=CHASE_SRC, options=("-std=c++17",))
        f = mod.get_function("chase_cg")
        n = 1024
        buf = torch.zeros(n * 16, dtype=torch.int64, device=dev)
        perm = torch.randperm(n, device=dev)
        buf[perm * 16] = torch.roll(perm, -1) * 16
        bcp = cp.asarray(buf)
        out = cp.zeros(1, dtype=cp.uint64)
        cyc = cp.zeros(1, dtype=cp.int64)
        f((1,), (1,), (bcp, np.int64(n), np.uint64(int(perm[0]) * 16), out, cyc))
        cp.cuda.Device().synchronize()
        return dict(cycle_closed=int(out.get()[0]) == int(perm[0]) * 16, cycles_per_load=int(cyc.get()[0]) / n,
                    cupy=cp.__version__)
    chk("cupy pointer chase", cupy_chase)

    def prof_cost():
        a = torch.randn(256, 256, device=dev, dtype=torch.bfloat16)
        t = time.time()
        for _ in range(5):
            kernel_names(ctx, lambda: a @ a)
        return dict(s_per_profile=(time.time() - t) / 5, names=kernel_names(ctx, lambda: a @ a))
    chk("profiler cost", prof_cost)
    chk("nvidia-smi env", smi_env)
    chk("mem_get_info", lambda: [x / 2**30 for x in torch.cuda.mem_get_info()])
    with open(os.path.join(ctx.out, "probe.json"), "w") as f:
        json.dump(res, f, indent=1, default=str)
    return res


# ======================================================================================
# main
# ======================================================================================

ALL_KINDS = ["gemm", "attention", "layer", "copy"]
MICRO_PARTS = ["peak", "copy", "launch", "chase", "clocks"]


def parse_only(s):
    kinds, micro = set(), set()
    if not s:
        return set(ALL_KINDS), set(MICRO_PARTS)
    for tok in s.split(","):
        tok = tok.strip()
        if not tok:
            continue
        if tok == "micro":
            micro |= set(MICRO_PARTS)
        elif tok.startswith("micro."):
            p = tok.split(".", 1)[1]
            if p not in MICRO_PARTS:
                raise SystemExit(f"unknown micro part {p!r}; choose from {MICRO_PARTS}")
            micro.add(p)
        elif tok == "cases":
            kinds |= set(ALL_KINDS)
        elif tok in ALL_KINDS:
            kinds.add(tok)
        else:
            raise SystemExit(f"unknown kind {tok!r}; choose from {ALL_KINDS + ['cases', 'micro']} "
                             f"or micro.{{{','.join(MICRO_PARTS)}}}")
    return kinds, micro


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder")
    ap.add_argument("--only", default="", help="comma list: gemm,attention,layer,copy,cases,micro,"
                                               "micro.{peak,copy,launch,chase,clocks} (default: all)")
    ap.add_argument("--quick", action="store_true", help="2 cases per kind/dtype, short micro, fewer repeats")
    ap.add_argument("--cases", default="", help="measure the cases of this CSV instead of the generated splits")
    ap.add_argument("--splits", default="dev,holdout", help="generated splits to measure")
    ap.add_argument("--dry-run", action="store_true", help="run the whole flow on the CPU with tiny shapes")
    ap.add_argument("--probe", action="store_true", help="feasibility checks only (tiny shapes)")
    ap.add_argument("--deadline", type=float, default=540.0, help="seconds; later cases are skipped")
    ap.add_argument("--target-s", type=float, default=0.0, help="measured seconds per case (default 0.3)")
    ap.add_argument("--load-seconds", type=float, default=8.0, help="sustained matmul loop for clocks")
    ap.add_argument("--no-kernels", action="store_true", help="do not profile kernel names per case")
    ap.add_argument("--flush", default="read", choices=["read", "write", "write+read", "none"],
                    help="L2 flush before each timed repeat (default: read 256 MiB)")
    args = ap.parse_args(argv)

    ctx = Ctx(args)
    ctx.only_kinds, ctx.only_micro = parse_only(args.only)
    ctx.log(f"measure.py start: torch {torch.__version__}, cuda={ctx.cuda}, dry={ctx.dry}, quick={ctx.quick}, "
            f"kinds={sorted(ctx.only_kinds)}, micro={sorted(ctx.only_micro)}")
    if not ctx.cuda and not ctx.dry:
        raise SystemExit("no CUDA device: use --dry-run to exercise the flow on the CPU")
    set_fp32_strict()
    torch.manual_seed(1234)
    if ctx.cuda:
        torch.cuda.init()
        ctx.flush_buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
        ctx.flush_buf.zero_()
        ctx.flush_out = torch.zeros((), dtype=torch.float32, device="cuda")
        torch.cuda.synchronize()
    else:
        ctx.flush_buf = torch.zeros((1 << 20) // 4, dtype=torch.float32)
        ctx.flush_out = torch.zeros((), dtype=torch.float32)

    if args.probe:
        probe(ctx)
        return 0

    ctx.env = collect_env(ctx)
    write_env(ctx)
    if ctx.cuda:
        ctx.sampler = Sampler(os.path.join(ctx.out, "h200_clock_samples.csv"))
        if ctx.sampler.ok:
            ctx.sampler.start()
        else:
            ctx.log("nvidia-smi sampling unavailable")
    mc = CsvAppender(os.path.join(ctx.out, "h200_micro.csv"), MICRO_COLUMNS)
    if ctx.sampler is not None and ctx.sampler.ok and "clocks" in ctx.only_micro:
        ctx.phase("idle")
        time.sleep(1.0 if ctx.quick else 3.0)
    ctx.phase("start")

    def guarded(name, f, *a):
        if ctx.left() <= 0:
            ctx.log(f"skip {name}: deadline")
            return
        t = time.time()
        try:
            f(*a)
        except Exception as e:  # noqa: BLE001
            ctx.log(f"{name} failed: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            micro_row(ctx, mc, name, "", "", "", f"ERROR {type(e).__name__}: {str(e)[:200]}")
        ctx.log(f"-- {name}: {time.time() - t:.1f} s")
        if ctx.cuda:
            torch.cuda.empty_cache()

    # microbenchmarks first (the launch-overhead ones must run before any profiler session)
    if "launch" in ctx.only_micro:
        guarded("micro_launch", micro_launch, ctx, mc)
    if "peak" in ctx.only_micro:
        guarded("micro_peak", micro_peak, ctx, mc)
    if "clocks" in ctx.only_micro:
        guarded("micro_clocks", micro_clocks, ctx, mc, 2.0 if ctx.quick else args.load_seconds)
    if "chase" in ctx.only_micro:
        guarded("micro_chase", micro_chase, ctx, mc)
    if "copy" in ctx.only_micro:
        guarded("micro_copy", micro_copy, ctx, mc)
    if "clocks" in ctx.only_micro:
        ctx.env["clocks_sampled"] = micro_clock_summary(ctx, mc)
        write_env(ctx)

    # cases
    if ctx.only_kinds:
        if args.cases:
            stem = os.path.splitext(os.path.basename(args.cases))[0]
            cs = C.read_cases_csv(args.cases)
            stats = CsvAppender(os.path.join(ctx.out, f"{stem}_stats.csv"), STATS_COLUMNS)
            run_split(ctx, stem, cs, os.path.join(ctx.out, f"{stem}.csv"), stats)
        else:
            stats = CsvAppender(os.path.join(ctx.out, "h200_case_stats.csv"), STATS_COLUMNS)
            for split in [s.strip() for s in args.splits.split(",") if s.strip()]:
                run_split(ctx, split, C.generate(split), os.path.join(ctx.out, f"h200_{split}.csv"), stats)

    ctx.phase("end")
    if ctx.sampler is not None:
        ctx.sampler.stop_flag = True
        ctx.sampler.join(timeout=3)
        ctx.env["clocks_sampled_whole_run"] = {
            p: ctx.sampler.summary(p) for p in sorted({ph for (_, ph, _) in ctx.sampler.samples})}
    ctx.env["nvidia_smi_end"] = smi_env() if ctx.cuda else None
    ctx.env["run_seconds"] = round(time.time() - ctx.t0, 1)
    ctx.env["harness"] = {"flush_bytes": FLUSH_BYTES, "flush_mode": ctx.flush_mode, "target_s": ctx.target_s,
                          "max_reps": ctx.max_reps, "chunk": CHUNK,
                          "quick": ctx.quick, "argv": sys.argv[1:]}
    write_env(ctx)
    ctx.log(f"done in {time.time() - ctx.t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
