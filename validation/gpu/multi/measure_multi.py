#!/usr/bin/env python3
"""Multi-GPU measurements for issue 16: NCCL collectives, tensor-parallel decoder layers,
pipeline sends and a prefill->decode KV-cache transfer, one process per GPU.

Standalone (torch, numpy, the standard library; never imports `sim`).  Run with torchrun:

    torchrun --standalone --nproc-per-node N validation/gpu/multi/measure_multi.py --out DIR \\
        [--only collectives,tp_layer,pp_send,kv_transfer] [--quick] [--deadline SECONDS]

On a CPU (gloo backend, for checking the harness without GPUs):

    torchrun --standalone --nproc-per-node 2 validation/gpu/multi/measure_multi.py --out /tmp/x --cpu --quick

Method (as validation/gpu/measure.py for one GPU): warm-up, then repeats timed with CUDA
events around the op; the op is captured into a CUDA graph where capture works (NCCL
collectives are capturable since NCCL 2.9; a failed capture is recorded and eager timing
used); the per-repeat time is the slowest rank's (an all-reduce of the times, MAX); the
median over repeats is kept.  NVLink SHARP / multicast is left off (``NCCL_NVLS_ENABLE=0``,
the device notes say why); the NCCL version, algorithm and protocol environment are
recorded.  Rank 0 writes, incrementally (a run stopped early keeps what it measured):

    multi_collectives.csv  op, world, bytes, median_us, p10_us, p90_us, algbw_gbps, busbw_gbps, graph
    multi_tp_layer.csv     model shape, tp, phase, tokens, median_us (Megatron column/row split,
                           one all-reduce after attention and one after the MLP)
    multi_pp_send.csv      bytes, median_us (rank 0 -> rank 1 send/recv of an activation)
    multi_kv_transfer.csv  tokens, bytes, median_us (a request's KV cache, rank 0 -> rank 1)
    multi_env.json         GPUs, driver, CUDA, NCCL, torch, topology (nvidia-smi topo -m)

The cases' bus bandwidth uses NCCL-tests' convention (all-reduce 2(n-1)/n, all-gather and
reduce-scatter (n-1)/n, all-to-all (n-1)/n of the algorithm bandwidth).
"""
from __future__ import annotations

import argparse
import csv
import datetime as _dt
import json
import os
import platform
import statistics
import subprocess
import time

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")  # no NVLink SHARP / multicast (see the device notes)

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

SIZES_FULL = [4 << 10 << i for i in range(0, 19)]  # 4 KiB .. 1 GiB, powers of two
SIZES_QUICK = [4 << 10, 256 << 10, 16 << 20]
COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")
BUS_FACTOR = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "reduce_scatter": lambda n: (n - 1) / n, "all_to_all": lambda n: (n - 1) / n}
# Llama-3-70B-class decoder layer (hidden 8192, 64 heads, 8 KV heads, head dim 128, FFN 28672)
TP_MODEL = dict(hidden=8192, heads=64, kv_heads=8, head_dim=128, ffn=28672)


class Run:
    def __init__(self, args):
        self.args = args
        self.cpu = args.cpu or not torch.cuda.is_available()
        dist.init_process_group("gloo" if self.cpu else "nccl")
        self.rank, self.world = dist.get_rank(), dist.get_world_size()
        self.local = int(os.environ.get("LOCAL_RANK", "0"))
        if not self.cpu:
            torch.cuda.set_device(self.local)
        self.device = torch.device("cpu") if self.cpu else torch.device("cuda", self.local)
        self.deadline = time.time() + args.deadline
        self.reps = 5 if args.quick else 30
        if self.rank == 0:
            os.makedirs(args.out, exist_ok=True)

    def left(self) -> float:
        # every rank must agree whether to go on: the slowest clock decides
        t = torch.tensor([self.deadline - time.time()], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MIN)
        return float(t.item())

    def sync(self):
        if not self.cpu:
            torch.cuda.synchronize()

    def time_us(self, fn) -> tuple[list[float], bool]:
        """Per-repeat times (slowest rank's), captured into a CUDA graph where possible."""
        for _ in range(3):
            fn()
        self.sync()
        graph = None
        if not self.cpu and not self.args.no_graphs:
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    fn()
                torch.cuda.current_stream().wait_stream(s)
                graph = torch.cuda.CUDAGraph()
                with torch.cuda.graph(graph):
                    fn()
                graph.replay()
                self.sync()
            except Exception:  # noqa: BLE001 - record that capture failed, time eagerly
                graph = None
                self.sync()
        run = graph.replay if graph is not None else fn
        times = []
        for _ in range(self.reps):
            dist.barrier()
            if self.cpu:
                t0 = time.perf_counter()
                run()
                us = (time.perf_counter() - t0) * 1e6
            else:
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                run()
                b.record()
                b.synchronize()
                us = a.elapsed_time(b) * 1e3
            t = torch.tensor([us], dtype=torch.float64, device=self.device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            times.append(float(t.item()))
        return times, graph is not None


class Writer:
    def __init__(self, path, columns, active):
        self.active = active
        if active:
            new = not os.path.exists(path)
            self.f = open(path, "a", newline="", buffering=1)
            self.w = csv.DictWriter(self.f, fieldnames=columns)
            if new:
                self.w.writeheader()

    def row(self, d):
        if self.active:
            self.w.writerow(d)
            self.f.flush()


def _stats(times):
    s = sorted(times)
    q = lambda f: s[min(len(s) - 1, int(f * (len(s) - 1) + 0.5))]  # noqa: E731
    return statistics.median(s), q(0.1), q(0.9)


def collectives(r: Run):
    cols = ["op", "world", "bytes", "median_us", "p10_us", "p90_us", "algbw_gbps", "busbw_gbps", "graph", "dtype"]
    w = Writer(os.path.join(r.args.out, "multi_collectives.csv"), cols, r.rank == 0)
    n = r.world
    dtype = torch.float32 if r.cpu else torch.bfloat16
    esize = torch.tensor([], dtype=dtype).element_size()
    for nbytes in (SIZES_QUICK if r.args.quick else SIZES_FULL):
        for op in COLLECTIVES:
            if r.left() < 5:
                return
            elems = max(n, nbytes // esize // n * n)
            x = torch.ones(elems, dtype=dtype, device=r.device)
            if op == "all_reduce":
                fn = lambda: dist.all_reduce(x)  # noqa: E731
            elif op == "all_gather":
                shard = x[: elems // n]
                fn = lambda: dist.all_gather_into_tensor(x, shard)  # noqa: E731
            elif op == "reduce_scatter":
                out = torch.empty(elems // n, dtype=dtype, device=r.device)
                fn = lambda: dist.reduce_scatter_tensor(out, x)  # noqa: E731
            else:
                y = torch.empty_like(x)
                fn = lambda: dist.all_to_all_single(y, x)  # noqa: E731
            times, graphed = r.time_us(fn)
            med, p10, p90 = _stats(times)
            moved = elems * esize
            alg = moved / (med * 1e-6) / 1e9
            w.row({"op": op, "world": n, "bytes": moved, "median_us": f"{med:.3f}", "p10_us": f"{p10:.3f}",
                   "p90_us": f"{p90:.3f}", "algbw_gbps": f"{alg:.3f}", "busbw_gbps": f"{alg * BUS_FACTOR[op](n):.3f}",
                   "graph": int(graphed), "dtype": str(dtype).replace("torch.", "")})
            del x


def tp_layer(r: Run):
    """A Megatron-style decoder layer split over the ranks: QKV and gate/up column-parallel,
    o_proj and down row-parallel, one all-reduce after each; attention over a KV cache."""
    cols = ["hidden", "heads", "kv_heads", "ffn", "tp", "phase", "batch", "tokens", "context", "median_us", "graph"]
    w = Writer(os.path.join(r.args.out, "multi_tp_layer.csv"), cols, r.rank == 0)
    m, n = TP_MODEL, r.world
    if m["heads"] % n or m["ffn"] % n:
        return
    dtype = torch.float32 if r.cpu else torch.bfloat16
    h, d = m["hidden"], m["head_dim"]
    hq, hkv = m["heads"] // n, max(1, m["kv_heads"] // n)
    f = m["ffn"] // n
    dev = r.device
    if r.cpu:  # a small copy of the shapes keeps a CPU check quick
        h, d, f = 512, 64, 1024
    wqkv = torch.randn(h, (hq + 2 * hkv) * d, dtype=dtype, device=dev) * 0.02
    wo = torch.randn(hq * d, h, dtype=dtype, device=dev) * 0.02
    wgu = torch.randn(h, 2 * f, dtype=dtype, device=dev) * 0.02
    wd = torch.randn(f, h, dtype=dtype, device=dev) * 0.02
    cases = [("prefill", 1, 512, 0), ("decode", 8, 1, 2048)] if r.args.quick else \
        [("prefill", 1, 2048, 0), ("prefill", 4, 1024, 0), ("decode", 1, 1, 4096), ("decode", 16, 1, 4096),
         ("decode", 64, 1, 2048)]
    for phase, b, q, ctx in cases:
        if r.left() < 10:
            return
        T = b * q
        x = torch.randn(T, h, dtype=dtype, device=dev)
        kc = torch.randn(b, hkv, ctx + q, d, dtype=dtype, device=dev)
        vc = torch.randn_like(kc)

        def layer():
            y = torch.nn.functional.rms_norm(x, (h,)) if hasattr(torch.nn.functional, "rms_norm") else x
            qkv = y @ wqkv
            qh = qkv[:, : hq * d].view(b, q, hq, d).transpose(1, 2)
            att = torch.nn.functional.scaled_dot_product_attention(
                qh, kc.repeat_interleave(hq // hkv, 1), vc.repeat_interleave(hq // hkv, 1), is_causal=False)
            o = att.transpose(1, 2).reshape(T, hq * d) @ wo
            dist.all_reduce(o)
            z = x + o
            gu = torch.nn.functional.rms_norm(z, (h,)) @ wgu if hasattr(torch.nn.functional, "rms_norm") else z @ wgu
            a = torch.nn.functional.silu(gu[:, :f]) * gu[:, f:]
            dn = a @ wd
            dist.all_reduce(dn)
            return z + dn

        times, graphed = r.time_us(layer)
        med, _, _ = _stats(times)
        w.row({"hidden": h, "heads": m["heads"], "kv_heads": m["kv_heads"], "ffn": m["ffn"], "tp": n, "phase": phase,
               "batch": b, "tokens": q, "context": ctx, "median_us": f"{med:.3f}", "graph": int(graphed)})


def _p2p(r: Run, name: str, cols: list[str], sizes: list[tuple[dict, int]]):
    w = Writer(os.path.join(r.args.out, name), cols, r.rank == 0)
    if r.world < 2:
        return
    dtype = torch.float32 if r.cpu else torch.bfloat16
    esize = torch.tensor([], dtype=dtype).element_size()
    for extra, nbytes in sizes:
        if r.left() < 5:
            return
        buf = torch.ones(max(1, nbytes // esize), dtype=dtype, device=r.device)

        def send():
            if r.rank == 0:
                dist.send(buf, 1)
            elif r.rank == 1:
                dist.recv(buf, 0)

        # point-to-point calls are not captured (NCCL p2p capture depends on the version)
        saved, r.args.no_graphs = r.args.no_graphs, True
        times, _ = r.time_us(send)
        r.args.no_graphs = saved
        med, p10, p90 = _stats(times)
        w.row({**extra, "bytes": buf.numel() * esize, "median_us": f"{med:.3f}", "p10_us": f"{p10:.3f}",
               "p90_us": f"{p90:.3f}"})


def pp_send(r: Run):
    h = TP_MODEL["hidden"]
    tokens = [1, 8, 64, 512, 4096] if not r.args.quick else [1, 512]
    _p2p(r, "multi_pp_send.csv", ["tokens", "bytes", "median_us", "p10_us", "p90_us"],
         [({"tokens": t}, t * h * 2) for t in tokens])


def kv_transfer(r: Run):
    m = TP_MODEL
    per_token = 2 * 80 * m["kv_heads"] * m["head_dim"] * 2  # K and V, 80 layers, bf16 (Llama-3-70B)
    tokens = [128, 1024, 4096, 16384] if not r.args.quick else [128]
    _p2p(r, "multi_kv_transfer.csv", ["tokens", "bytes", "median_us", "p10_us", "p90_us"],
         [({"tokens": t}, t * per_token) for t in tokens])


def environment(r: Run) -> dict:
    env = {"date": _dt.datetime.now(_dt.timezone.utc).isoformat(), "world": r.world, "host": platform.node(),
           "torch": torch.__version__, "cuda": torch.version.cuda, "backend": dist.get_backend(),
           "nccl": ".".join(map(str, torch.cuda.nccl.version())) if not r.cpu else None,
           "nccl_env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}
    if not r.cpu:
        env["gpus"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        for cmd, key in ((["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem,"
                           "power.limit", "--format=csv"], "nvidia_smi"), (["nvidia-smi", "topo", "-m"], "topology")):
            try:
                env[key] = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout
            except Exception as e:  # noqa: BLE001
                env[key] = repr(e)
    return env


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", default="collectives,tp_layer,pp_send,kv_transfer")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--cpu", action="store_true", help="gloo on the CPU: check the harness without GPUs")
    ap.add_argument("--no-graphs", action="store_true", help="time eagerly, no CUDA-graph capture")
    ap.add_argument("--deadline", type=float, default=480.0, help="seconds; every part stops cleanly after it")
    args = ap.parse_args()
    r = Run(args)
    if r.rank == 0:
        with open(os.path.join(args.out, "multi_env.json"), "w") as f:
            json.dump(environment(r), f, indent=1)
    parts = {"collectives": collectives, "tp_layer": tp_layer, "pp_send": pp_send, "kv_transfer": kv_transfer}
    for name in args.only.split(","):
        parts[name](r)
        if r.rank == 0:
            print(f"{name}: done, {r.deadline - time.time():.0f} s left", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
