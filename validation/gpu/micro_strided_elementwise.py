#!/usr/bin/env python3
"""In-graph per-kernel time of PyTorch's non-vectorized elementwise kernels on the H200: the
gated activation of a fused gate_up output (g, u = x.chunk(2, -1); F.silu(g), g * u: strided
views, TensorIterator's elementwise_kernel<128, 4> path) and RoPE's broadcast multiply, next to
the contiguous (vectorized) kernels of the same sizes, from L2-resident to far beyond L2.

Writes $OUT/h200_micro_strided_elementwise.csv (op,rows,cols,bytes,graph1_us,per_kernel_us)
and $OUT/h200_micro_strided_elementwise_env.json.  Method as micro_graph_kernels.py: each
kernel captured into a CUDA graph once and 21 times, each replayed 25 times after a 100 us GPU
sleep, median; one more kernel costs (t21 - t1) / 20.  ``bytes`` = bytes read + written."""
import json
import os
import subprocess

import torch

T = torch.cuda
F = torch.nn.functional
d = "cuda"
b = torch.bfloat16
OUT = os.environ.get("OUT", ".")


def smi(q):
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip()
    except Exception as exc:  # pragma: no cover
        return f"unavailable: {exc}"


def graph(fn, reps):
    s = T.Stream()
    s.wait_stream(T.current_stream())
    with T.stream(s):
        for _ in range(3):
            fn()
    T.current_stream().wait_stream(s)
    g = T.CUDAGraph()
    with T.graph(g):
        for _ in range(reps):
            fn()
    return g


def timed(g, n=25):
    e0, e1 = T.Event(enable_timing=True), T.Event(enable_timing=True)
    g.replay()
    T.synchronize()
    xs = []
    for _ in range(n):
        T._sleep(100000)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        xs.append(e0.elapsed_time(e1) * 1e3)
    xs.sort()
    return xs[n // 2]


env = {"gpu": T.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
       "driver": smi("driver_version"), "clocks_before": smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit"),
       "method": __doc__}
rows_out = []
for ffn in (14336, 28672):
    for rows in (8, 128, 512, 2048, 4096, 8192):
        x = torch.randn(rows, 2 * ffn, device=d, dtype=b)
        g, u = x.chunk(2, dim=-1)
        gc, uc = g.contiguous(), u.contiguous()
        y = torch.empty(rows, ffn, device=d, dtype=b)
        n = rows * ffn * 2
        cases = {
            "strided_silu": (lambda: torch.nn.functional.silu(g), 2 * n),
            "strided_mul": (lambda: torch.mul(g, u, out=y), 3 * n),
            "silu": (lambda: F.silu(gc), 2 * n),
            "mul": (lambda: torch.mul(gc, uc, out=y), 3 * n),
        }
        for name, (fn, nbytes) in cases.items():
            t1 = timed(graph(fn, 1))
            t21 = timed(graph(fn, 21))
            rows_out.append((name, rows, ffn, nbytes, t1, (t21 - t1) / 20))
        print(ffn, rows, flush=True)
        del x, g, u, gc, uc, y
for heads in (32, 64):
    for rows in (512, 2048, 4096, 8192):
        x = torch.randn(rows, heads, 128, device=d, dtype=b)
        c = torch.randn(rows, 1, 128, device=d, dtype=b)
        y = torch.empty_like(x)
        n = x.numel() * 2
        t1 = timed(graph(lambda: torch.mul(x, c, out=y), 1))
        t21 = timed(graph(lambda: torch.mul(x, c, out=y), 21))
        rows_out.append(("bcast_mul", rows, heads * 128, 2 * n + c.numel() * 2, t1, (t21 - t1) / 20))
        del x, c, y
z = torch.zeros(1, device=d, dtype=b)
t1 = timed(graph(lambda: z.add_(1), 1))
t41 = timed(graph(lambda: z.add_(1), 41))
rows_out.append(("tiny_add", 1, 1, 4, t1, (t41 - t1) / 40))
env["clocks_after"] = smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit")
with open(os.path.join(OUT, "h200_micro_strided_elementwise.csv"), "w") as f:
    f.write("op,rows,cols,bytes,graph1_us,per_kernel_us\n")
    for r in rows_out:
        f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]:.3f},{r[5]:.4f}\n")
with open(os.path.join(OUT, "h200_micro_strided_elementwise_env.json"), "w") as f:
    json.dump(env, f, indent=2)
