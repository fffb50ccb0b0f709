#!/usr/bin/env python3
"""In-graph per-kernel time, at prefill sizes, of the memory-bound kernels eager PyTorch runs
around attention in validation/gpu/measure_models.py (Step.forward / Step.attention), laid out
exactly as there: q, k, v are views of one fused QKV output [T, (H + 2 KV) d]; RoPE's
rotate_half is torch.cat((-x[..., h:], x[..., :h]), -1); the KV-cache write is
cache[:, :, p:p + n].copy_(x.view(1, T, KV, d).transpose(1, 2)); the fp8 W8A8 activation cast is
x.to(torch.float8_e4m3fn) of a contiguous [T, cols] bf16 activation.

    python3 validation/gpu/micro_rope_kernels.py      (on the GPU box; OUT=... for the folder)

Writes $OUT/h200_micro_rope_kernels.csv (op,rows,cols,bytes,graph1_us,per_kernel_us; rows = T
tokens, cols = the elements per token the kernel touches, bytes = bytes read + written) and
$OUT/h200_micro_rope_kernels_env.json.  Method as micro_graph_kernels.py (graph_timing.py):
each kernel captured into a CUDA graph once and 21 times, each replayed 25 times after a 100 us
GPU sleep, median; one more kernel costs (t21 - t1) / 20.  Inputs are the same buffers every
kernel (L2-resident below ~60 MiB, streamed from HBM above), as in a model step."""
import json
import os

import torch
from graph_timing import per_call_us, smi

T_ = torch.cuda
d = "cuda"
b = torch.bfloat16
OUT = os.environ.get("OUT", ".")
HD = 128

env = {"gpu": T_.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
       "driver": smi("driver_version"), "clocks_before": smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit"),
       "method": __doc__}
rows_out = []


def add(name, fn, rows, cols, nbytes):
    t1, one = per_call_us(fn, 21)
    rows_out.append((name, rows, cols, nbytes, t1, one))


for H, KV in ((32, 8), (64, 8)):
    for T in (8, 512, 2048, 4096, 8192):
        qkv = torch.randn(T, (H + 2 * KV) * HD, device=d, dtype=b)
        q, k, v = qkv.split([H * HD, KV * HD, KV * HD], dim=-1)
        q, k, v = q.view(T, H, HD), k.view(T, KV, HD), v.view(T, KV, HD)
        h = HD // 2
        for nm, x, heads in (("q", q, H), ("k", k, KV)):
            n = T * heads * HD
            nx = -x[..., h:]
            add(f"neg_{nm}", lambda x=x: torch.neg(x[..., h:]), T, heads * HD // 2, 2 * n)  # n/2 read, n/2 written
            add(f"cat_{nm}", lambda x=x, nx=nx: torch.cat((nx, x[..., :h]), dim=-1), T, heads * HD, 2 * n * 2)
        kc = torch.randn(1, KV, T, HD, device=d, dtype=b)
        kr = k.contiguous()  # k after RoPE is the add's contiguous output
        n = T * KV * HD
        add("kv_copy_k", lambda: kc[:, :, 0:T].copy_(kr.view(1, T, KV, HD).transpose(1, 2)), T, KV * HD, 2 * n * 2)
        add("kv_copy_v", lambda: kc[:, :, 0:T].copy_(v.view(1, T, KV, HD).transpose(1, 2)), T, KV * HD, 2 * n * 2)
        print(H, KV, T, flush=True)
        del qkv, q, k, v, kc, kr
for cols in (4096, 8192, 14336, 28672):
    for T in (8, 512, 2048, 4096, 8192):
        x = torch.randn(T, cols, device=d, dtype=b)
        add("fp8_cast", lambda x=x: x.to(torch.float8_e4m3fn), T, cols, T * cols * 3)  # read 2 B, write 1 B
        del x
    print("fp8", cols, flush=True)
z = torch.zeros(1, device=d, dtype=b)
t1, one = per_call_us(lambda: z.add_(1), 41)
rows_out.append(("tiny_add", 1, 1, 4, t1, one))
env["clocks_after"] = smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit")
with open(os.path.join(OUT, "h200_micro_rope_kernels.csv"), "w") as f:
    f.write("op,rows,cols,bytes,graph1_us,per_kernel_us\n")
    for r in rows_out:
        f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]:.4f},{r[5]:.4f}\n")
with open(os.path.join(OUT, "h200_micro_rope_kernels_env.json"), "w") as f:
    json.dump(env, f, indent=1)
print("wrote", len(rows_out), "rows")
