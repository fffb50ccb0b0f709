#!/usr/bin/env python3
"""In-graph per-kernel time of the MoE dispatch/combine kernels of validation/gpu/measure_models.py
(Step.moe), laid out as there: per expert, xe = hn.index_select(0, tok) (indexSelectSmallIndex /
LargeIndex), w[tok, slot] (index_elementwise_kernel) and out.index_add_(0, tok, y)
(indexFuncSmallIndex / LargeIndex), for n routed tokens out of T = 4 n (top-2 of 8 experts),
hidden 4096 (Mixtral-8x7B) and 8192.

    python3 validation/gpu/micro_moe_kernels.py      (on the GPU box; OUT=... for the folder)

Writes $OUT/h200_micro_moe_kernels.csv (op,rows,cols,bytes,graph1_us,per_kernel_us; rows = n
routed tokens, cols = hidden, bytes = bytes read + written: index_select n x hidden read and
written plus 8 B per index; index_add y and the n rows of out read, out written, plus the
indices) and $OUT/h200_micro_moe_kernels_env.json.  Method as micro_graph_kernels.py
(graph_timing.py): one kernel captured into a CUDA graph once and 21 times, each replayed 25
times after a 100 us GPU sleep, median; one more kernel costs (t21 - t1) / 20."""
import json
import os

import torch
from graph_timing import per_call_us, smi

T_ = torch.cuda
d = "cuda"
b = torch.bfloat16
OUT = os.environ.get("OUT", ".")
env = {"gpu": T_.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
       "driver": smi("driver_version"), "clocks_before": smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit"),
       "method": __doc__}
rows_out = []
g = torch.Generator(device="cpu").manual_seed(0)
for hidden in (4096, 8192):
    for n in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096):
        T = 4 * n
        hn = torch.randn(T, hidden, device=d, dtype=b)
        tok = torch.randperm(T, generator=g)[:n].sort().values.to(d)
        slot = torch.randint(0, 2, (n,), generator=g).to(d)
        w = torch.rand(T, 2, device=d, dtype=b)
        y = torch.randn(n, hidden, device=d, dtype=b)
        out = torch.zeros_like(hn)
        for name, fn, nbytes in (
                ("index_select", lambda: hn.index_select(0, tok), 2 * n * hidden * 2 + 8 * n),
                ("index_add", lambda: out.index_add_(0, tok, y), 3 * n * hidden * 2 + 8 * n),
                ("index_w", lambda: w[tok, slot], 16 * n + 2 * 2 * n)):
            t1, one = per_call_us(fn, 21)
            rows_out.append((name, n, hidden, nbytes, t1, one))
        print(hidden, n, flush=True)
        del hn, tok, slot, w, y, out
z = torch.zeros(1, device=d, dtype=b)
t1, one = per_call_us(lambda: z.add_(1), 41)
rows_out.append(("tiny_add", 1, 1, 4, t1, one))
env["clocks_after"] = smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit")
with open(os.path.join(OUT, "h200_micro_moe_kernels.csv"), "w") as f:
    f.write("op,rows,cols,bytes,graph1_us,per_kernel_us\n")
    for r in rows_out:
        f.write(f"{r[0]},{r[1]},{r[2]},{r[3]},{r[4]:.4f},{r[5]:.4f}\n")
with open(os.path.join(OUT, "h200_micro_moe_kernels_env.json"), "w") as f:
    json.dump(env, f, indent=1)
print("wrote", len(rows_out), "rows")
