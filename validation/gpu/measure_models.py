#!/usr/bin/env python3
"""Whole-model step measurements on one GPU (NVIDIA H200) for `sim validate` model cases.

Standalone: torch, numpy and the standard library only; it never imports `sim`.

    python3 validation/gpu/measure_models.py --out DIR [--deadline S] [--only PARTS]
                                             [--list] [--dry-run]

Parts (--only, comma separated; default all, in this order):
    membw      memory-bound kernels (elementwise add/mul/SiLU, RMSNorm, LayerNorm, softmax,
               copies) and bmm, bytes from 64 KiB to 1 GiB, L2 flushed before each repeat
    sustained  bf16 8192^3 matmuls back to back for --sustained-s seconds (default 20), with
               nvidia-smi sampling SM clock and board power every 0.1 s
    models     Llama-style decoder steps (prefill, decode, mixed chunked-prefill batches),
               each step ONE CUDA-graph replay, L2 flushed before each repeat

Models (random weights, random inputs; shapes from the published configs, the same as
workloads/*.yaml in this repository):
    llama3-8b     all 32 layers; bf16, fp8 W8A8 (torch._scaled_mm), int8 and int4 weight-only
                  (torch._weight_int8pack_mm / torch._weight_int4pack_mm, skipped with the
                  recorded reason where this torch has no CUDA kernel)
    llama3-70b    70B shapes, NUM_LAYERS_70B layers (the case records num_layers)
    falcon-7b     multi-query attention (1 KV head, 71 heads of 64), parallel attention+MLP,
                  LayerNorm, GELU MLP, tied embeddings
    mixtral-8x7b  8 experts, top-2, NUM_LAYERS_MOE layers; the router's real top-2 choices on the
                  step's data (router GEMM, softmax, top-k and the gather / expert GEMMs /
                  weighted index_add of the dispatch all inside the graph)

One step = embedding lookup; per layer: norm, fused QKV projection, RoPE (HF-style rotate_half),
KV-cache writes, SDPA per group of sequences with the same (new, past), output projection,
residual, norm, MLP (gate+up fused, SiLU, multiply, down) or MoE, residual; final norm over
all new tokens; LM head on the last position of every sequence only.  fp8 W8A8: weights e4m3
per-tensor scaled, activations cast to e4m3 before each weight GEMM with a static per-tensor
scale (one cast kernel; the scale goes to _scaled_mm), bf16 out; LM head stays bf16.

Outputs in DIR (each written incrementally; a run stopped early keeps what it measured):
    h200_models_dev.csv, h200_models_holdout.csv   model cases, case-file format + model columns
    h200_models_stats.csv     per case: status, median/p10/p90/min, reps, host time, number of
                              kernels per replay, summed kernel time, kernel breakdown (JSON),
                              expert token counts (MoE), error text
    h200_micro_membw.csv      memory-bound kernels and bmm in the case-file format (kinds
                              elementwise, norm, softmax, copy, bmm) + achieved GB/s, kernels
    h200_sustained_matmul.csv sustained matmul: one row per chunk of matmuls (rate) and one per
                              nvidia-smi sample (SM clock, power) in that phase
    h200_models_clock_samples.csv  nvidia-smi samples of the whole run (0.1 s), with the phase
    h200_models_env.json      GPU, driver, clocks idle / under load, power, torch, cuDNN
    log.txt
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import math
import os
import platform
import subprocess
import sys
import threading
import time
import traceback

import numpy as np
import torch
import torch.nn.functional as F

FLUSH_BYTES = 256 << 20
NUM_LAYERS_70B = 12
NUM_LAYERS_MOE = 8

CASE_COLUMNS = ["kind", "dtype", "m", "k", "n", "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len",
                "causal", "hidden", "ffn", "bytes", "measured_ms"]
MODEL_COLUMNS = ["model", "num_layers", "phase", "weight_dtype", "prompt_len", "context_len", "decode_seqs",
                 "decode_ctx"]
MICRO_EXTRA = ["op", "split", "achieved_gbps", "p10_ms", "p90_ms", "reps", "kernels"]
STATS_COLUMNS = ["split", "case_id", "status", "shape_key", "describe", "tokens", "median_ms", "p10_ms", "p90_ms",
                 "min_ms", "max_ms", "mean_ms", "reps", "host_ms", "n_kernels", "kernel_sum_ms", "kernel_breakdown",
                 "expert_counts", "weight_gb", "kv_gb", "build_s", "wall_s", "error"] + MODEL_COLUMNS + ["batch"]
SMI_FIELDS = ["clocks.sm", "clocks.mem", "power.draw", "power.draw.instant", "temperature.gpu", "utilization.gpu",
              "clocks_event_reasons.active"]


def fmt(v):
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


class Appender:
    def __init__(self, path, columns):
        new = not os.path.exists(path) or os.path.getsize(path) == 0
        self.f = open(path, "a", newline="", buffering=1)
        self.w = csv.writer(self.f, lineterminator="\n")
        self.columns = columns
        if new:
            self.w.writerow(columns)

    def row(self, d):
        self.w.writerow([fmt(d.get(c)) for c in self.columns])
        self.f.flush()


# ======================================================================================
# context, nvidia-smi
# ======================================================================================

class Ctx:
    def __init__(self, args):
        self.args = args
        self.out = args.out
        os.makedirs(self.out, exist_ok=True)
        self.dry = bool(args.dry_run)
        self.cuda = torch.cuda.is_available() and not self.dry
        self.dev = torch.device("cuda" if self.cuda else "cpu")
        self.t0 = time.time()
        self.deadline = self.t0 + args.deadline
        self.logf = open(os.path.join(self.out, "log.txt"), "a", buffering=1)
        self.phase = "start"
        self.flush_buf = self.flush_out = None
        self.env = {}

    def log(self, *a):
        line = f"[{time.time() - self.t0:7.1f}s] " + " ".join(str(x) for x in a)
        print(line, flush=True)
        self.logf.write(line + "\n")

    def left(self):
        return self.deadline - time.time()

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


def smi_query(fields, timeout=10.0):
    try:
        r = subprocess.run(["nvidia-smi", f"--query-gpu={','.join(fields)}", "--format=csv,noheader,nounits"],
                           capture_output=True, text=True, timeout=timeout)
        if r.returncode != 0:
            return None, (r.stdout + r.stderr).strip()[:300]
        return dict(zip(fields, [v.strip() for v in r.stdout.strip().splitlines()[0].split(",")])), None
    except Exception as e:  # noqa: BLE001
        return None, repr(e)[:300]


ENV_FIELDS = ["name", "driver_version", "vbios_version", "memory.total", "pstate", "temperature.gpu", "clocks.sm",
              "clocks.mem", "clocks.max.sm", "clocks.max.mem", "clocks.applications.graphics",
              "clocks.applications.memory", "power.draw", "power.limit", "power.default_limit",
              "power.max_limit", "enforced.power.limit", "persistence_mode", "compute_mode", "ecc.mode.current",
              "mig.mode.current", "clocks_event_reasons.active", "utilization.gpu"]


def smi_env():
    d, _ = smi_query(ENV_FIELDS)
    if d is not None:
        return d
    out = {}
    for f in ENV_FIELDS:
        d, err = smi_query([f])
        out[f] = d[f] if d else f"ERROR: {err}"
    return out


class Sampler(threading.Thread):
    """One streaming `nvidia-smi --query-gpu=... -lms PERIOD` process; each line is tagged with
    the host time and the harness's current phase and appended to the samples CSV."""

    def __init__(self, ctx, path, period_ms=100):
        super().__init__(daemon=True)
        self.ctx = ctx
        self.samples = []  # (t, phase, dict)
        self.proc = None
        self.fields = None
        for fields in (SMI_FIELDS, [f for f in SMI_FIELDS if f != "power.draw.instant"],
                       ["clocks.sm", "clocks.mem", "power.draw", "temperature.gpu"]):
            if smi_query(fields)[0] is not None:
                self.fields = fields
                break
        self.ok = self.fields is not None
        self.period_ms = period_ms
        self.csv = Appender(path, ["t_s", "phase"] + (self.fields or []))
        self.lock = threading.Lock()

    def run(self):
        if not self.ok:
            return
        try:
            self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={','.join(self.fields)}",
                                          "--format=csv,noheader,nounits", f"-lms={self.period_ms}"],
                                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, bufsize=1)
            for line in self.proc.stdout:
                vals = [v.strip() for v in line.strip().split(",")]
                if len(vals) != len(self.fields):
                    continue
                t = time.time() - self.ctx.t0
                d = dict(zip(self.fields, vals))
                with self.lock:
                    self.samples.append((t, self.ctx.phase, d))
                row = {"t_s": f"{t:.3f}", "phase": self.ctx.phase}
                row.update(d)
                self.csv.row(row)
        except Exception as e:  # noqa: BLE001
            self.ctx.log(f"sampler stopped: {e!r}")

    def stop(self):
        if self.proc is not None:
            try:
                self.proc.terminate()
                self.proc.wait(timeout=5)
            except Exception:  # noqa: BLE001
                pass

    def window(self, t0, t1):
        with self.lock:
            return [d for (t, _, d) in self.samples if t0 <= t <= t1]

    def summary(self, phase_prefix=None, t0=None, t1=None):
        with self.lock:
            rows = [d for (t, p, d) in self.samples
                    if (phase_prefix is None or p.startswith(phase_prefix)) and (t0 is None or t >= t0)
                    and (t1 is None or t <= t1)]
        out = {"n": len(rows)}
        for f in ("clocks.sm", "clocks.mem", "power.draw", "power.draw.instant", "temperature.gpu",
                  "utilization.gpu"):
            vals = []
            for d in rows:
                try:
                    vals.append(float(d[f]))
                except (KeyError, ValueError):
                    pass
            if vals:
                out[f] = dict(median=float(np.median(vals)), mean=float(np.mean(vals)), min=float(np.min(vals)),
                              max=float(np.max(vals)), p10=float(np.percentile(vals, 10)),
                              p90=float(np.percentile(vals, 90)))
        reasons = {}
        for d in rows:
            r = d.get("clocks_event_reasons.active")
            if r:
                reasons[r] = reasons.get(r, 0) + 1
        if reasons:
            out["clocks_event_reasons.active"] = reasons
        return out


# ======================================================================================
# timing (as validation/gpu/measure.py: L2 read-flush, events, host kept ahead of the GPU)
# ======================================================================================

def flush_l2(ctx):
    if ctx.flush_buf is not None:
        torch.sum(ctx.flush_buf, 0, out=ctx.flush_out)


def gpu_sleep(seconds):
    torch.cuda._sleep(max(1, int(seconds * 1.98e9)))


def timed_reps(ctx, fn, n, flush=True, host_s=100e-6, chunk=10):
    if not ctx.cuda:
        out = []
        for _ in range(n):
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
        return out
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(n)]
    for c0 in range(0, n, chunk):
        c1 = min(n, c0 + chunk)
        gpu_sleep(min(1.0, 1.5 * (c1 - c0) * host_s + 2e-4))
        for i in range(c0, c1):
            if flush:
                flush_l2(ctx)
            starts[i].record()
            fn()
            ends[i].record()
    torch.cuda.synchronize()
    return [s.elapsed_time(e) for s, e in zip(starts, ends)]


def host_seconds(ctx, fn, n=3):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2 * n)]
    gpu_sleep(0.010)
    t = time.perf_counter()
    for i in range(n):
        flush_l2(ctx)
        ev[2 * i].record()
        fn()
        ev[2 * i + 1].record()
    dt = (time.perf_counter() - t) / n
    torch.cuda.synchronize()
    return dt


def time_fn(ctx, fn, target_s=0.3, min_reps=5, max_reps=40, flush=True, info=None):
    """Per-repeat times (ms): warm-up, host enqueue time, a rough timing, then the repeats."""
    fn()
    ctx.sync()
    if not ctx.cuda:
        return timed_reps(ctx, fn, 2)
    hs = host_seconds(ctx, fn)
    if info is not None:
        info["host_ms"] = round(hs * 1e3, 4)
    rough = float(np.median(timed_reps(ctx, fn, 2, flush, hs)))
    reps = int(max(min_reps, min(max_reps, math.ceil(target_s * 1e3 / max(rough, 1e-3)))))
    return timed_reps(ctx, fn, reps, flush, hs)


def stats_of(times):
    a = np.asarray(times, dtype=np.float64)
    s6 = lambda x: float(f"{x:.6g}")  # noqa: E731
    return dict(median_ms=s6(np.median(a)), p10_ms=s6(np.percentile(a, 10)), p90_ms=s6(np.percentile(a, 90)),
                min_ms=s6(a.min()), max_ms=s6(a.max()), mean_ms=s6(a.mean()), reps=len(a))


def kernel_profile(ctx, fn):
    """Device activities of one call: (count, summed device time in ms, {name: [count, us]})."""
    if not ctx.cuda:
        return 0, 0.0, {}
    from torch.profiler import ProfilerActivity, profile
    ctx.sync()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    agg = {}
    n = 0
    tot = 0.0
    for e in prof.events():
        if getattr(e, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue
        try:
            us = float(e.time_range.elapsed_us())
        except Exception:  # noqa: BLE001
            us = float(getattr(e, "device_time", 0.0) or 0.0)
        nm = e.name if len(e.name) <= 120 else e.name[:117] + "..."
        c = agg.setdefault(nm, [0, 0.0])
        c[0] += 1
        c[1] += us
        n += 1
        tot += us
    agg = {k: [v[0], round(v[1], 2)] for k, v in sorted(agg.items(), key=lambda kv: -kv[1][1])}
    return n, tot / 1e3, agg


def capture_graph(fn, warm=2):
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


# ======================================================================================
# models
# ======================================================================================

MODELS = {
    # name: shapes (= workloads/<name>.yaml), layers measured
    "llama3-8b": dict(arch="llama", hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, ffn=14336,
                      vocab=128256, max_ctx=8192, tied=False),
    "llama3-70b": dict(arch="llama", hidden=8192, layers=NUM_LAYERS_70B, heads=64, kv_heads=8, head_dim=128,
                       ffn=28672, vocab=128256, max_ctx=8192, tied=False),
    "falcon-7b": dict(arch="falcon", hidden=4544, layers=32, heads=71, kv_heads=1, head_dim=64, ffn=18176,
                      vocab=65024, max_ctx=2048, tied=True),
    "mixtral-8x7b": dict(arch="llama", hidden=4096, layers=NUM_LAYERS_MOE, heads=32, kv_heads=8, head_dim=128,
                         ffn=14336, vocab=32000, max_ctx=32768, tied=False, experts=8, top_k=2),
}
DRY_SHAPES = dict(hidden=128, heads=4, head_dim=32, ffn=256, vocab=512)


class Linear:
    """A weight GEMM in one storage format; __call__(x[T, k] bf16) -> [T, n] bf16."""

    def __init__(self, fmt, n, k, dev):
        self.fmt, self.n, self.k = fmt, n, k
        bf = torch.bfloat16
        if fmt == "bf16":
            self.w = (torch.randn(n, k, device=dev, dtype=bf) * (k ** -0.5)).to(bf)
        elif fmt == "fp8":
            self.w8 = torch.randn(n, k, device=dev, dtype=bf).to(torch.float8_e4m3fn)
            self.b = self.w8.t()
            self.sw = torch.tensor(k ** -0.5, device=dev, dtype=torch.float32)
            self.sa = torch.tensor(1.0, device=dev, dtype=torch.float32)
        elif fmt == "int8":
            self.w = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=dev)
            self.s = (torch.rand(n, device=dev) * 0.01 + 0.001).to(bf)
        elif fmt == "int4":
            gs = 128
            self.gs = gs
            w = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
            if dev.type == "cuda":
                self.w = torch.ops.aten._convert_weight_to_int4pack(w, 8)
            else:
                self.w = torch.ops.aten._convert_weight_to_int4pack_for_cpu(
                    torch.randint(0, 16, (n, k), dtype=torch.int32, device=dev), 8)
            del w
            sz = torch.empty(k // gs, n, 2, device=dev, dtype=bf)
            sz[..., 0] = (torch.rand(k // gs, n, device=dev) * 0.01 + 0.001).to(bf)
            sz[..., 1] = (torch.randn(k // gs, n, device=dev) * 0.01).to(bf)
            self.sz = sz
        else:
            raise ValueError(fmt)

    def __call__(self, x):
        if self.fmt == "bf16":
            return F.linear(x, self.w)
        if self.fmt == "fp8":
            return torch._scaled_mm(x.to(torch.float8_e4m3fn), self.b, scale_a=self.sa, scale_b=self.sw,
                                    out_dtype=torch.bfloat16)
        if self.fmt == "int8":
            return torch._weight_int8pack_mm(x, self.w, self.s)
        return torch._weight_int4pack_mm(x, self.w, self.gs, self.sz)

    def nbytes(self):
        return sum(t.numel() * t.element_size() for t in (getattr(self, a, None) for a in ("w", "w8", "s", "sz"))
                   if t is not None)


def probe_formats(ctx):
    """Which weight formats this torch runs on this device: {fmt: None or reason}."""
    out = {}
    for fmt in ("bf16", "fp8", "int8", "int4"):
        try:
            lin = Linear(fmt, 256, 512, ctx.dev)
            x = torch.randn(5, 512, device=ctx.dev, dtype=torch.bfloat16)
            y = lin(x)
            ctx.sync()
            assert y.shape == (5, 256) and y.dtype == torch.bfloat16, (y.shape, y.dtype)
            assert torch.isfinite(y.float()).all().item(), "non-finite output"
            out[fmt] = None
        except Exception as e:  # noqa: BLE001
            out[fmt] = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:200] if str(e).strip() else ''}"
    return out


def rms(x, w):
    return F.rms_norm(x, (x.shape[-1],), w, 1e-5)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


class Model:
    """Weights of one model in one weight format (kept across the cases of that format)."""

    def __init__(self, name, fmt, ctx):
        cfg = dict(MODELS[name])
        if ctx.dry:
            cfg.update(DRY_SHAPES)
            cfg["kv_heads"] = 1 if name == "falcon-7b" else 2
            cfg["layers"] = 2
        self.name, self.fmt, self.cfg = name, fmt, cfg
        dev = ctx.dev
        bf = torch.bfloat16
        h, H, KV, d, f = cfg["hidden"], cfg["heads"], cfg["kv_heads"], cfg["head_dim"], cfg["ffn"]
        self.h, self.H, self.KV, self.d, self.f = h, H, KV, d, f
        self.arch = cfg["arch"]
        self.E = cfg.get("experts", 0)
        self.topk = cfg.get("top_k", 0)
        self.emb = torch.randn(cfg["vocab"], h, device=dev, dtype=bf)
        self.lm_head = self.emb if cfg["tied"] else (torch.randn(cfg["vocab"], h, device=dev, dtype=bf) * h ** -0.5).to(bf)
        self.final_w = (1 + 0.1 * torch.randn(h, device=dev)).to(bf)
        self.final_b = (0.1 * torch.randn(h, device=dev)).to(bf) if self.arch == "falcon" else None
        self.layers = []
        for _ in range(cfg["layers"]):
            L = {"ln1": (1 + 0.1 * torch.randn(h, device=dev)).to(bf),
                 "qkv": Linear(fmt, (H + 2 * KV) * d, h, dev), "o": Linear(fmt, h, H * d, dev)}
            if self.arch == "falcon":
                L["ln1b"] = (0.1 * torch.randn(h, device=dev)).to(bf)
                L["up"] = Linear(fmt, f, h, dev)
                L["down"] = Linear(fmt, h, f, dev)
            else:
                L["ln2"] = (1 + 0.1 * torch.randn(h, device=dev)).to(bf)
                if self.E:
                    L["router"] = (torch.randn(self.E, h, device=dev, dtype=bf) * h ** -0.5).to(bf)
                    L["experts"] = [(Linear(fmt, 2 * f, h, dev), Linear(fmt, h, f, dev)) for _ in range(self.E)]
                else:
                    L["gu"] = Linear(fmt, 2 * f, h, dev)
                    L["down"] = Linear(fmt, h, f, dev)
            self.layers.append(L)
        inv = 1.0 / (500000.0 ** (torch.arange(0, d, 2, device=dev, dtype=torch.float32) / d))
        pos = torch.arange(cfg["max_ctx"] + 2, device=dev, dtype=torch.float32)
        fr = torch.outer(pos, inv)
        emb = torch.cat((fr, fr), dim=-1)
        self.cos_table, self.sin_table = emb.cos().to(bf), emb.sin().to(bf)
        ctx.sync()

    def weight_bytes(self):
        tot = self.emb.numel() * 2 + (0 if self.lm_head is self.emb else self.lm_head.numel() * 2)
        for L in self.layers:
            for v in L.values():
                if isinstance(v, Linear):
                    tot += v.nbytes()
                elif isinstance(v, list):
                    tot += sum(a.nbytes() + b.nbytes() for a, b in v)
                elif torch.is_tensor(v):
                    tot += v.numel() * v.element_size()
        return tot


class Step:
    """One iteration: groups of sequences (count, new, past); inputs, KV caches, the forward."""

    def __init__(self, model, groups, ctx):
        self.m, self.groups, self.ctx = model, groups, ctx
        m = model
        dev = ctx.dev
        bf = torch.bfloat16
        self.T = sum(c * n for c, n, _ in groups)
        self.ids = torch.randint(0, m.cfg["vocab"], (self.T,), device=dev)
        posl, last, s = [], [], 0
        for c, n, p in groups:
            for _ in range(c):
                posl.append(torch.arange(p, p + n, device=dev))
                s += n
                last.append(s - 1)
        pos = torch.cat(posl)
        self.cos = m.cos_table.index_select(0, pos).unsqueeze(1)
        self.sin = m.sin_table.index_select(0, pos).unsqueeze(1)
        self.last = torch.tensor(last, device=dev, dtype=torch.long)
        # per layer, per group: K and V caches [count, KV, past+new, d] (random contents)
        self.caches = []
        for _ in m.layers:
            self.caches.append([(torch.randn(c, m.KV, p + n, m.d, device=dev, dtype=bf),
                                 torch.randn(c, m.KV, p + n, m.d, device=dev, dtype=bf)) for c, n, p in groups])
        self.masks = []
        for c, n, p in groups:
            if n > 1 and p > 0:  # a later prefill chunk: causal, aligned to the bottom right
                from torch.nn.attention.bias import causal_lower_right
                self.masks.append(causal_lower_right(n, p + n))
            else:
                self.masks.append(None)
        self.routes = None  # MoE: per layer, per expert (token index tensor, slot tensor)
        self.expert_counts = None

    def kv_bytes(self):
        return sum(k.numel() * 2 * 2 for lay in self.caches for k, _ in lay)

    def attention(self, li, q, k, v):
        m = self.m
        outs, s = [], 0
        for gi, (c, n, p) in enumerate(self.groups):
            e = s + c * n
            qg = q[s:e].view(c, n, m.H, m.d).transpose(1, 2)
            kg = k[s:e].view(c, n, m.KV, m.d).transpose(1, 2)
            vg = v[s:e].view(c, n, m.KV, m.d).transpose(1, 2)
            kc, vc = self.caches[li][gi]
            kc[:, :, p:p + n].copy_(kg)
            vc[:, :, p:p + n].copy_(vg)
            kw = {"enable_gqa": True} if m.KV < m.H else {}
            mask = self.masks[gi]
            if mask is not None:
                o = F.scaled_dot_product_attention(qg, kc, vc, attn_mask=mask, **kw)
            else:
                o = F.scaled_dot_product_attention(qg, kc, vc, is_causal=n > 1, **kw)
            outs.append(o.transpose(1, 2).reshape(c * n, m.H * m.d))
            s = e
        return outs[0] if len(outs) == 1 else torch.cat(outs, dim=0)

    def moe(self, li, L, hn):
        m = self.m
        rl = F.linear(hn, L["router"])
        p = torch.softmax(rl, dim=-1, dtype=torch.float32)
        w, sel = torch.topk(p, m.topk, dim=-1)
        w = (w / w.sum(dim=-1, keepdim=True)).to(hn.dtype)
        if self.routes is not None and self.routes[li] is None:  # eager routing pass: record the choice
            sel_c = sel.cpu()
            per = []
            for e in range(m.E):
                tok, slot = (sel_c == e).nonzero(as_tuple=True)
                per.append((tok.to(hn.device), slot.to(hn.device)) if tok.numel() else None)
            self.routes[li] = per
        out = torch.zeros_like(hn)
        for e, r in enumerate(self.routes[li]):
            if r is None:
                continue
            tok, slot = r
            gu_l, d_l = L["experts"][e]
            xe = hn.index_select(0, tok)
            g, u = gu_l(xe).chunk(2, dim=-1)
            y = d_l(F.silu(g) * u)
            y = y * w[tok, slot].unsqueeze(-1)
            out.index_add_(0, tok, y)
        return out

    def forward(self):
        m = self.m
        x = F.embedding(self.ids, m.emb)
        qs, ks = m.H * m.d, m.KV * m.d
        for li, L in enumerate(m.layers):
            if m.arch == "falcon":
                hn = F.layer_norm(x, (m.h,), L["ln1"], L["ln1b"], 1e-5)
            else:
                hn = rms(x, L["ln1"])
            qkv = L["qkv"](hn)
            q, k, v = qkv.split([qs, ks, ks], dim=-1)
            q = q.view(self.T, m.H, m.d)
            k = k.view(self.T, m.KV, m.d)
            v = v.view(self.T, m.KV, m.d)
            q = q * self.cos + rotate_half(q) * self.sin
            k = k * self.cos + rotate_half(k) * self.sin
            a = L["o"](self.attention(li, q, k, v))
            if m.arch == "falcon":
                mlp = L["down"](F.gelu(L["up"](hn)))
                mlp += a
                x = mlp + x
                continue
            x = x + a
            hn = rms(x, L["ln2"])
            if m.E:
                x = x + self.moe(li, L, hn)
            else:
                g, u = L["gu"](hn).chunk(2, dim=-1)
                x = x + L["down"](F.silu(g) * u)
        if m.arch == "falcon":
            xn = F.layer_norm(x, (m.h,), m.final_w, m.final_b, 1e-5)
        else:
            xn = rms(x, m.final_w)
        return F.linear(xn.index_select(0, self.last), m.lm_head)

    def prepare(self):
        """MoE: one eager pass records the router's top-k choice for this step's data, which
        fixes the per-expert token index tensors the graph uses (the graph still runs the
        router, softmax and top-k)."""
        if self.m.E:
            self.routes = [None] * len(self.m.layers)
            self.forward()
            self.ctx.sync()
            self.expert_counts = [[0 if r is None else int(r[0].numel()) for r in per] for per in self.routes]


# ======================================================================================
# case list
# ======================================================================================

def shapes_for(name):
    """(phase, batch, prompt_len, context_len, decode_seqs, decode_ctx) per model."""
    P, D, X = "prefill", "decode", "mixed"
    if name == "llama3-8b":
        pre = [(1, 128), (1, 512), (1, 1024), (1, 2048), (1, 4096), (1, 8192), (2, 1024), (4, 512), (4, 2048),
               (8, 256), (16, 128), (2, 3000), (1, 777)]
        dec = [(1, 128), (1, 1024), (1, 4096), (1, 8000), (4, 2048), (8, 512), (8, 4096), (16, 1024), (32, 2048),
               (64, 1024), (128, 512), (256, 1024), (24, 1500)]
        mix = [(1, 512, 0, 8, 1024), (1, 256, 0, 32, 2048), (1, 1024, 0, 16, 512), (2, 512, 0, 64, 1024),
               (1, 2048, 0, 4, 4096), (1, 512, 1024, 16, 2048), (1, 256, 512, 64, 512), (1, 128, 0, 128, 1024),
               (1, 384, 0, 48, 700)]
    elif name == "llama3-70b":
        pre = [(1, 128), (1, 512), (1, 2048), (2, 1024), (1, 4096), (4, 256), (1, 1500)]
        dec = [(1, 512), (1, 4096), (8, 1024), (16, 2048), (32, 512), (64, 1024), (128, 256), (12, 3000)]
        mix = [(1, 512, 0, 16, 1024), (1, 256, 0, 64, 512), (1, 1024, 0, 8, 2048), (1, 512, 512, 32, 1024)]
    elif name == "falcon-7b":
        pre = [(1, 128), (1, 512), (1, 2048), (4, 512), (8, 256), (2, 1000)]
        dec = [(1, 512), (1, 2000), (8, 1024), (32, 512), (64, 1024), (16, 1500)]
        mix = [(1, 512, 0, 16, 1024), (1, 256, 0, 64, 512), (1, 768, 0, 24, 900)]
    else:  # mixtral-8x7b
        pre = [(1, 128), (1, 512), (1, 2048), (4, 1024), (1, 4096), (2, 700)]
        dec = [(1, 512), (1, 4096), (4, 1024), (8, 2048), (32, 1024), (64, 512), (128, 1024), (20, 3000)]
        mix = [(1, 512, 0, 16, 1024), (1, 256, 0, 64, 2048), (1, 1024, 0, 8, 512), (1, 512, 2048, 32, 1024)]
    out = [(P, b, L, 0, None, None) for b, L in pre]
    out += [(D, b, None, c, None, None) for b, c in dec]
    out += [(X, p, c, past, dd, dl) for p, c, past, dd, dl in mix]
    return out


# which shapes each weight format gets (index filters over the model's shape list)
def formats_for(name, phase, i):
    fm = ["bf16"]
    if name == "llama3-8b":
        fm += ["fp8"] if i % 2 == 0 else []
        if phase != "prefill" or i in (0, 2, 7):
            fm += ["int8"] if i % 3 != 1 else []
            fm += ["int4"] if i % 3 != 2 else []
    elif name == "llama3-70b":
        fm += ["fp8"] if i % 2 == 1 or phase == "prefill" else []
        if phase != "prefill" and i % 2 == 0:
            fm += ["int4"]
    elif name == "mixtral-8x7b":
        fm += ["fp8"] if i % 2 == 0 else []
    return fm


def make_cases():
    """All model cases: dicts with the case columns; every third distinct shape is holdout."""
    cases = []
    shape_no = 0
    for name in ("llama3-8b", "llama3-70b", "falcon-7b", "mixtral-8x7b"):
        cfg = MODELS[name]
        for i, (phase, b, pl, cl, dd, dl) in enumerate(shapes_for(name)):
            split = "holdout" if shape_no % 3 == 2 else "dev"
            key = f"{name}/{cfg['layers']}L/{phase}/b{b}/p{pl}/c{cl}/d{dd}x{dl}"
            shape_no += 1
            for fm in formats_for(name, phase, i):
                c = {"kind": "model", "dtype": "fp8" if fm == "fp8" else "bf16", "weight_dtype": fm,
                     "model": name, "num_layers": cfg["layers"], "phase": phase, "batch": b, "prompt_len": pl,
                     "context_len": cl, "decode_seqs": dd, "decode_ctx": dl, "hidden": cfg["hidden"],
                     "heads": cfg["heads"], "kv_heads": cfg["kv_heads"], "head_dim": cfg["head_dim"],
                     "ffn": cfg["ffn"], "split": split, "shape_key": key}
                cases.append(c)
    # ids; order of measurement: grouped by (model, format) so weights are built once
    for j, c in enumerate(cases):
        c["case_id"] = f"m{j:03d}"
    return cases


def groups_of(c):
    if c["phase"] == "prefill":
        return [(c["batch"], c["prompt_len"], c["context_len"] or 0)]
    if c["phase"] == "decode":
        return [(c["batch"], 1, c["context_len"])]
    return [(c["batch"], c["prompt_len"], c["context_len"] or 0), (c["decode_seqs"], 1, c["decode_ctx"])]


def describe(c):
    g = " + ".join(f"{n}x(new={a}, past={p})" for n, a, p in groups_of(c))
    return f"{c['model']}[{c['num_layers']}L] {c['dtype']}/{c['weight_dtype']} {c['phase']}: {g}"


def est_ms(c):
    """Rough step time for ordering and the deadline (not used for anything measured)."""
    cfg = MODELS[c["model"]]
    h, f, L = cfg["hidden"], cfg["ffn"], cfg["layers"]
    per_layer = h * (cfg["heads"] + 2 * cfg["kv_heads"]) * cfg["head_dim"] + h * cfg["heads"] * cfg["head_dim"]
    mlp = 3 * h * f
    T = sum(n * a for n, a, _ in groups_of(c))
    act = per_layer + mlp * (cfg.get("top_k", 1))
    wbytes = L * (per_layer + mlp * cfg.get("experts", 1)) * (2 if c["weight_dtype"] == "bf16" else 1)
    rate = {"bf16": 600e12, "fp8": 1000e12, "int8": 150e12, "int4": 80e12}[c["weight_dtype"]]
    flops = 2.0 * T * L * act
    kv = sum(n * (p + a) for n, a, p in groups_of(c)) * L * 2 * cfg["kv_heads"] * cfg["head_dim"] * 2
    return 1e3 * (max(flops / rate, (wbytes + kv) / 3.5e12) + L * 40 * 1.5e-6)


# ======================================================================================
# model runs
# ======================================================================================

def run_models(ctx, cases):
    out = ctx.out
    dev_csv = Appender(os.path.join(out, "h200_models_dev.csv"), CASE_COLUMNS + MODEL_COLUMNS)
    hold_csv = Appender(os.path.join(out, "h200_models_holdout.csv"), CASE_COLUMNS + MODEL_COLUMNS)
    st_csv = Appender(os.path.join(out, "h200_models_stats.csv"), STATS_COLUMNS)
    fmt_ok = probe_formats(ctx)
    ctx.env["weight_formats"] = fmt_ok
    ctx.log("weight formats:", json.dumps(fmt_ok))
    order = {}
    for c in cases:
        order.setdefault((c["model"], c["weight_dtype"]), []).append(c)
    # cheap groups first, so a run stopped at its deadline has covered every model
    keys = sorted(order, key=lambda k: (["bf16", "fp8", "int8", "int4"].index(k[1]),
                                       ["llama3-8b", "falcon-7b", "llama3-70b", "mixtral-8x7b"].index(k[0])))
    ctx.phase = "models"
    for key in keys:
        name, fm = key
        cs = order[key]
        if fmt_ok.get(fm):
            for c in cs:
                st_csv.row({**c, "status": "skipped", "describe": describe(c),
                            "error": f"weight format {fm} unavailable on this torch/device: {fmt_ok[fm]}"})
            continue
        if ctx.left() < 20:
            for c in cs:
                st_csv.row({**c, "status": "skipped", "describe": describe(c), "error": "run deadline reached"})
            continue
        t0 = time.time()
        try:
            model = Model(name, fm, ctx)
        except Exception as e:  # noqa: BLE001
            msg = f"{type(e).__name__}: {str(e)[:300]}"
            ctx.log(f"model build failed {key}: {msg}")
            for c in cs:
                st_csv.row({**c, "status": "error", "describe": describe(c), "error": "model build: " + msg})
            continue
        build_s = time.time() - t0
        wgb = model.weight_bytes() / 1e9
        ctx.log(f"== {name} {fm}: {len(cs)} cases, weights {wgb:.1f} GB, built in {build_s:.1f} s")
        for c in sorted(cs, key=est_ms):
            run_model_case(ctx, model, c, dev_csv, hold_csv, st_csv, wgb)
        model = None
        if ctx.cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()


def run_model_case(ctx, model, c, dev_csv, hold_csv, st_csv, wgb):
    row = {**c, "describe": describe(c), "weight_gb": round(wgb, 3)}
    tw = time.time()
    step = g = out = None
    try:
        if ctx.left() < 3 * est_ms(c) / 1e3 + 5:
            raise TimeoutError("run deadline reached")
        groups = groups_of(c)
        if ctx.dry:
            groups = [(min(n, 2), min(a, 16), min(p, 24)) for n, a, p in groups]
        row["tokens"] = sum(n * a for n, a, _ in groups)
        t0 = time.time()
        step = Step(model, groups, ctx)
        row["kv_gb"] = round(step.kv_bytes() / 1e9, 3)
        step.prepare()
        if ctx.cuda and ctx.args.max_step_s > 0:  # one eager step first: skip kernels far too slow to time
            t1 = time.perf_counter()
            step.forward()
            torch.cuda.synchronize()
            eager_s = time.perf_counter() - t1
            if eager_s > ctx.args.max_step_s:
                raise TimeoutError(f"one eager step took {eager_s * 1e3:.0f} ms > --max-step-s "
                                   f"{ctx.args.max_step_s}: not timed")
        if step.expert_counts is not None:
            row["expert_counts"] = json.dumps(step.expert_counts)
        if ctx.cuda:
            g, out = capture_graph(step.forward)
            fn = g.replay
        else:
            fn = step.forward
        row["build_s"] = round(time.time() - t0, 2)
        info = {}
        times = time_fn(ctx, fn, target_s=0.25 if not ctx.dry else 0.01, info=info)
        st = stats_of(times)
        row.update(info)
        row.update(st)
        try:
            n, tot, agg = kernel_profile(ctx, fn)
            row["n_kernels"], row["kernel_sum_ms"] = n, round(tot, 5)
            row["kernel_breakdown"] = json.dumps(agg)
        except Exception as e:  # noqa: BLE001
            row["kernel_breakdown"] = f"(profiler failed: {type(e).__name__}: {str(e)[:100]})"
        if out is not None and not torch.isfinite(out.float()).all().item():
            row["error"] = "warning: non-finite logits (timing kept)"
        row["status"] = "ok"
        case = {k: c.get(k) for k in CASE_COLUMNS + MODEL_COLUMNS}
        case["measured_ms"] = st["median_ms"]
        (hold_csv if c["split"] == "holdout" else dev_csv).row(case)
        ctx.log(f"  {c['case_id']} {row['describe']}: {st['median_ms']:.4g} ms (est {est_ms(c):.3g}; "
                f"{st['reps']} reps, kernels {row.get('n_kernels')} sum {row.get('kernel_sum_ms')} ms)")
    except Exception as e:  # noqa: BLE001
        msg = f"{type(e).__name__}: {str(e).strip().splitlines()[0][:300] if str(e).strip() else ''}"
        row["status"] = "skipped" if isinstance(e, TimeoutError) else "error"
        row["error"] = msg
        if not isinstance(e, TimeoutError):
            ctx.log(f"  ERROR {c['case_id']} {row['describe']}: {msg}")
            if ctx.dry:
                traceback.print_exc()
    finally:
        step = g = out = None  # noqa: F841
        if ctx.cuda:
            try:
                torch.cuda.synchronize()
            except Exception as e:  # noqa: BLE001
                ctx.log(f"  sync failed: {e!r}")
            torch.cuda.empty_cache()
    row["wall_s"] = round(time.time() - tw, 2)
    st_csv.row(row)


# ======================================================================================
# memory-bound kernels and bmm
# ======================================================================================

def membw_cases(dry):
    """(kind, op, dtype, shape dict, bytes moved, builder) for sizes 64 KiB .. 1 GiB of the
    main operand (bf16)."""
    cases = []
    top = 20 if dry else 30
    for p in range(16, top + 1):
        nbytes = 1 << p
        el = nbytes // 2
        for op in ("add", "mul", "silu", "copy"):
            mv = 3 * nbytes if op in ("add", "mul") else 2 * nbytes
            cases.append(("elementwise" if op != "copy" else "copy", op, dict(n=el, bytes=nbytes), mv))
        rows = max(1, el // 4096)
        cases.append(("norm", "rmsnorm", dict(m=rows, n=4096), 2 * rows * 4096 * 2 + 4096 * 2))
        cases.append(("norm", "layernorm", dict(m=rows, n=4096), 2 * rows * 4096 * 2 + 2 * 4096 * 2))
        cases.append(("softmax", "softmax", dict(m=rows, n=4096), 2 * rows * 4096 * 2))
        r2 = max(1, el // 1024)
        cases.append(("softmax", "softmax", dict(m=r2, n=1024), 2 * r2 * 1024 * 2))
    # odd sizes (holdout-style shapes between the powers of two)
    for el in (3 * 2 ** 15, 5 * 2 ** 18, 7 * 2 ** 21, 3 * 2 ** 25) if not dry else (3 * 2 ** 10,):
        cases.append(("elementwise", "add", dict(n=el, bytes=2 * el), 6 * el))
        cases.append(("norm", "rmsnorm", dict(m=el // 5120, n=5120), 4 * el + 2 * 5120))
        cases.append(("softmax", "softmax", dict(m=el // 2048, n=2048), 4 * el))
    # bmm (unfused attention products, grouped GEMMs): batch x (m x k) @ (k x n), bf16
    bm = [(32, 128, 128, 128), (32, 512, 128, 512), (32, 2048, 128, 2048), (64, 1, 128, 4096), (256, 1, 128, 1024),
          (64, 1024, 1024, 128), (8, 4096, 128, 4096), (32, 1, 4096, 128), (96, 256, 64, 256), (16, 2048, 2048, 128),
          (128, 64, 128, 64), (40, 1000, 128, 1000)]
    if dry:
        bm = [(4, 16, 32, 16), (2, 1, 32, 64)]
    for b, m, k, n in bm:
        cases.append(("bmm", "bmm", dict(batch=b, m=m, k=k, n=n), 2 * b * (m * k + k * n + m * n)))
    return cases


def build_membw(ctx, kind, op, sh):
    dev, bf = ctx.dev, torch.bfloat16
    if kind in ("elementwise", "copy"):
        a = torch.randn(sh["n"], device=dev, dtype=bf)
        b = torch.randn(sh["n"], device=dev, dtype=bf)
        o = torch.empty_like(a)
        if op == "add":
            return lambda: torch.add(a, b, out=o), [a, b, o]
        if op == "mul":
            return lambda: torch.mul(a, b, out=o), [a, b, o]
        if op == "silu":
            return lambda: F.silu(a), [a]
        return lambda: o.copy_(a), [a, o]
    if kind == "norm":
        x = torch.randn(sh["m"], sh["n"], device=dev, dtype=bf)
        w = torch.randn(sh["n"], device=dev, dtype=bf)
        bb = torch.randn(sh["n"], device=dev, dtype=bf)
        if op == "rmsnorm":
            return lambda: F.rms_norm(x, (sh["n"],), w, 1e-5), [x, w]
        return lambda: F.layer_norm(x, (sh["n"],), w, bb, 1e-5), [x, w, bb]
    if kind == "softmax":
        x = torch.randn(sh["m"], sh["n"], device=dev, dtype=bf)
        return lambda: torch.softmax(x, dim=-1), [x]
    a = torch.randn(sh["batch"], sh["m"], sh["k"], device=dev, dtype=bf)
    b = torch.randn(sh["batch"], sh["k"], sh["n"], device=dev, dtype=bf) * sh["k"] ** -0.5
    return lambda: torch.bmm(a, b), [a, b]


def run_membw(ctx):
    ctx.phase = "membw"
    mc = Appender(os.path.join(ctx.out, "h200_micro_membw.csv"), CASE_COLUMNS + MICRO_EXTRA)
    cs = membw_cases(ctx.dry)
    ctx.log(f"== membw: {len(cs)} measurements")
    for i, (kind, op, sh, mv) in enumerate(cs):
        if ctx.left() < 10:
            ctx.log("membw: deadline")
            break
        objs = None
        try:
            fn, objs = build_membw(ctx, kind, op, sh)
            st = stats_of(time_fn(ctx, fn, target_s=0.04, min_reps=10, max_reps=200))
            kn = ""
            if ctx.cuda:
                _, _, agg = kernel_profile(ctx, fn)
                kn = " | ".join(agg)
            row = {"kind": kind, "op": op, "dtype": "bf16", **sh, "measured_ms": st["median_ms"],
                   "split": "holdout" if i % 3 == 2 else "dev", "p10_ms": st["p10_ms"], "p90_ms": st["p90_ms"],
                   "reps": st["reps"], "kernels": kn,
                   "achieved_gbps": round(mv / (st["median_ms"] / 1e3) / 1e9, 2)}
            mc.row(row)
        except Exception as e:  # noqa: BLE001
            ctx.log(f"  membw {kind} {op} {sh}: ERROR {type(e).__name__}: {str(e)[:200]}")
        finally:
            objs = None  # noqa: F841
    if ctx.cuda:
        torch.cuda.empty_cache()


# ======================================================================================
# sustained matmul
# ======================================================================================

def run_sustained(ctx, sampler, seconds):
    path = os.path.join(ctx.out, "h200_sustained_matmul.csv")
    cols = ["row_type", "t_start_s", "t_end_s", "matmuls", "ms_per_matmul", "tflops", "sm_clock_mhz",
            "mem_clock_mhz", "power_w", "power_instant_w", "temperature_c", "clock_event_reasons"]
    sc = Appender(path, cols)
    if not ctx.cuda:
        ctx.log("sustained: skipped (no CUDA)")
        return {}
    s = 8192
    a = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(s, s, dtype=torch.bfloat16, device="cuda")
    for _ in range(3):
        F.linear(a, w)
    torch.cuda.synchronize()
    ctx.phase = "idle-before-sustained"
    time.sleep(3.0)
    ctx.phase = "load-sustained-matmul"
    t_begin = time.time() - ctx.t0
    per = 40
    total_n, total_ms = 0, 0.0
    while time.time() - ctx.t0 - t_begin < seconds:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        ts = time.time() - ctx.t0
        e0.record()
        for _ in range(per):
            F.linear(a, w)
        e1.record()
        e1.synchronize()
        te = time.time() - ctx.t0
        ms = e0.elapsed_time(e1)
        total_n += per
        total_ms += ms
        sc.row({"row_type": "chunk", "t_start_s": round(ts, 4), "t_end_s": round(te, 4), "matmuls": per,
                "ms_per_matmul": round(ms / per, 5), "tflops": round(2.0 * s ** 3 * per / (ms / 1e3) / 1e12, 2)})
    t_end = time.time() - ctx.t0
    ctx.phase = "after-sustained"
    time.sleep(0.5)
    for (t, p, d) in list(sampler.samples):
        if t_begin - 3.0 <= t <= t_end + 0.5:
            sc.row({"row_type": "smi" if p.startswith("load") else "smi_" + p, "t_start_s": round(t, 4),
                    "sm_clock_mhz": d.get("clocks.sm"), "mem_clock_mhz": d.get("clocks.mem"),
                    "power_w": d.get("power.draw"), "power_instant_w": d.get("power.draw.instant"),
                    "temperature_c": d.get("temperature.gpu"),
                    "clock_event_reasons": d.get("clocks_event_reasons.active")})
    rate = 2.0 * s ** 3 * total_n / (total_ms / 1e3) / 1e12
    summ = {"seconds": round(t_end - t_begin, 2), "matmuls": total_n, "mean_tflops": round(rate, 1),
            "smi": sampler.summary("load-sustained"),
            "smi_last_10s": sampler.summary("load-sustained", t0=t_end - 10.0, t1=t_end)}
    ctx.log(f"sustained: {total_n} matmuls, {rate:.1f} TFLOP/s; "
            f"SM clock {summ['smi'].get('clocks.sm', {}).get('mean')} MHz, "
            f"power {summ['smi'].get('power.draw', {}).get('mean')} W")
    del a, w
    torch.cuda.empty_cache()
    return summ


# ======================================================================================
# environment, main
# ======================================================================================

def collect_env(ctx):
    env = {"date_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
           "python": platform.python_version(), "torch": torch.__version__, "torch_cuda": torch.version.cuda,
           "numpy": np.__version__, "kernel": platform.release(), "harness": {
               "flush_bytes": FLUSH_BYTES, "flush": "torch.sum over a 256 MiB fp32 buffer before each repeat",
               "timing": "CUDA events around one CUDA-graph replay per repeat; host kept ahead by a sleep kernel",
               "layers_70b": NUM_LAYERS_70B, "layers_moe": NUM_LAYERS_MOE}}
    try:
        env["cudnn"] = torch.backends.cudnn.version()
    except Exception:  # noqa: BLE001
        pass
    if ctx.cuda:
        p = torch.cuda.get_device_properties(0)
        env["device"] = {"name": p.name, "capability": f"{p.major}.{p.minor}", "sm_count": p.multi_processor_count,
                         "total_memory_bytes": p.total_memory, "l2_cache_bytes": getattr(p, "L2_cache_size", None)}
        env["nvidia_smi_start"] = smi_env()
    return env


def write_env(ctx):
    with open(os.path.join(ctx.out, "h200_models_env.json"), "w") as f:
        json.dump(ctx.env, f, indent=1, sort_keys=True, default=str)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "out_models"))
    ap.add_argument("--deadline", type=float, default=500.0, help="seconds; the run stops starting work after it")
    ap.add_argument("--only", default="membw,sustained,models")
    ap.add_argument("--sustained-s", type=float, default=20.0)
    ap.add_argument("--models", default="", help="comma-separated model names (default all)")
    ap.add_argument("--formats", default="", help="comma-separated weight formats (default all)")
    ap.add_argument("--max-step-s", type=float, default=0.0,
                    help="skip a case whose first eager step takes longer (0: no limit)")
    ap.add_argument("--list", action="store_true", help="print the model cases and exit")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes: exercise every code path")
    args = ap.parse_args(argv)
    cases = make_cases()
    if args.models:
        cases = [c for c in cases if c["model"] in args.models.split(",")]
    if args.formats:
        cases = [c for c in cases if c["weight_dtype"] in args.formats.split(",")]
    if args.list:
        n = {}
        for c in cases:
            n[c["split"]] = n.get(c["split"], 0) + 1
            print(f"{c['case_id']} {c['split']:7s} est {est_ms(c):8.2f} ms  {describe(c)}")
        shapes = {c["shape_key"]: c["split"] for c in cases}
        print(f"{len(cases)} cases ({n}); {len(shapes)} distinct shapes "
              f"({sum(v == 'holdout' for v in shapes.values())} holdout); est total "
              f"{sum(est_ms(c) for c in cases) / 1e3:.1f} s of step time")
        return 0
    ctx = Ctx(args)
    parts = args.only.split(",")
    sampler = None
    if ctx.cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        ctx.flush_buf = torch.zeros(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda")
        ctx.flush_out = torch.zeros((), dtype=torch.float32, device="cuda")
        sampler = Sampler(ctx, os.path.join(ctx.out, "h200_models_clock_samples.csv"), period_ms=100)
        sampler.start()
    ctx.env = collect_env(ctx)
    write_env(ctx)
    if sampler is not None:
        ctx.phase = "idle"
        time.sleep(3.0)
        ctx.env["idle"] = sampler.summary("idle")
        write_env(ctx)
    try:
        if "membw" in parts:
            run_membw(ctx)
            write_env(ctx)
        if "sustained" in parts and sampler is not None:
            ctx.env["sustained_matmul"] = run_sustained(ctx, sampler, args.sustained_s)
            write_env(ctx)
            ctx.phase = "cooldown"
            time.sleep(3.0)
        if "models" in parts:
            run_models(ctx, cases)
            if sampler is not None:
                ctx.env["under_model_load"] = sampler.summary("models")
    except Exception as e:  # noqa: BLE001
        ctx.log(f"FATAL {type(e).__name__}: {e}")
        traceback.print_exc()
    finally:
        if sampler is not None:
            ctx.env["nvidia_smi_end"] = smi_env()
            sampler.stop()
        ctx.env["wall_s"] = round(time.time() - ctx.t0, 1)
        write_env(ctx)
        ctx.log("done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
