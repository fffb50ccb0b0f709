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

import torch
from graph_timing import per_call_us, smi

T = torch.cuda
F = torch.nn.functional
d = "cuda"
b = torch.bfloat16
OUT = os.environ.get("OUT", ".")


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
            t1, one = per_call_us(fn, 21)
            rows_out.append((name, rows, ffn, nbytes, t1, one))
        print(ffn, rows, flush=True)
        del x, g, u, gc, uc, y
for heads in (32, 64):
    for rows in (512, 2048, 4096, 8192):
        x = torch.randn(rows, heads, 128, device=d, dtype=b)
        c = torch.randn(rows, 1, 128, device=d, dtype=b)
        y = torch.empty_like(x)
        n = x.numel() * 2
        t1, one = per_call_us(lambda: torch.mul(x, c, out=y), 21)
        rows_out.append(("bcast_mul", rows, heads * 128, 2 * n + c.numel() * 2, t1, one))
        del x, c, y
z = torch.zeros(1, device=d, dtype=b)
t1, one = per_call_us(lambda: z.add_(1), 41)
rows_out.append(("tiny_add", 1, 1, 4, t1, one))
env["clocks_after"] = smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit")
with open(os.path.join(OUT, "h200_micro_strided_elementwise.csv"), "w") as f:
    f.write("op,rows,cols,bytes,graph1_us,per_kernel_us\n")
    for r in rows_out:
        f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]:.3f},{r[5]:.4f}\n")
with open(os.path.join(OUT, "h200_micro_strided_elementwise_env.json"), "w") as f:
    json.dump(env, f, indent=2)
