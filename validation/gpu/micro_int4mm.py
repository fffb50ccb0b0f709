#!/usr/bin/env python3
"""Per-call time of torch._weight_int4pack_mm (PyTorch's "tinygemm" W4A16 kernel, the int4
weight-only path of measure_models.py: group size 128, inner k-tiles 8) and of the bf16
F.linear of the same shape, on the H200, each call inside a CUDA graph (as in a model step).

Writes $OUT/h200_micro_int4mm.csv (m,k,n,int4_us,bf16_us) and $OUT/h200_micro_int4mm_env.json.
Method: a graph of R calls and a graph of 1 call, each replayed 15 times after a 100 us
GPU sleep (so the replay starts from an idle queue), median; per call = (t_R - t_1)/(R-1),
which removes the graph launch and event overhead.  Weights are random (timing does not
depend on values); they are distinct per shape and (for K*N >= 64M) larger than the 60 MB
L2, as a model's weights are."""
import json
import os

import torch
from graph_timing import per_call_us, smi

T = torch.cuda
F = torch.nn.functional
dev = torch.device("cuda")
bf = torch.bfloat16
OUT = os.environ.get("OUT", ".")


def per_call(fn, reps):
    return per_call_us(fn, reps, n=15)[1]


env = {"gpu": T.get_device_name(), "torch": torch.__version__, "cuda": torch.version.cuda,
       "driver": smi("driver_version"), "clocks_before": smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit"),
       "method": __doc__}
SHAPES = [(4096, 6144), (4096, 4096), (4096, 14336), (14336, 4096), (8192, 10240), (8192, 8192), (8192, 28672),
          (28672, 8192)]
MS = [1, 2, 4, 8, 16, 17, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 1024, 2048]
gs, inner = 128, 8
rows = []
for k, n in SHAPES:
    w8 = torch.randint(0, 256, (n, k // 2), dtype=torch.uint8, device=dev)
    w4 = torch.ops.aten._convert_weight_to_int4pack(w8, inner)
    del w8
    sz = torch.empty(k // gs, n, 2, device=dev, dtype=bf)
    sz[..., 0] = 0.001
    sz[..., 1] = 0.0
    wb = torch.randn(n, k, device=dev, dtype=bf)
    for m in MS:
        if m * k * n > 2048 * 8192 * 28672 // 4 and m > 512:
            continue
        x = torch.randn(m, k, device=dev, dtype=bf)
        reps = 10 if m * k * n <= 512 * 8192 * 8192 else 4
        t4 = per_call(lambda: torch._weight_int4pack_mm(x, w4, gs, sz), reps)
        tb = per_call(lambda: F.linear(x, wb), reps)
        rows.append((m, k, n, t4, tb))
        print(m, k, n, f"{t4:.1f}", f"{tb:.1f}", flush=True)
    del w4, wb, sz
    T.empty_cache()
env["clocks_after"] = smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit")
with open(os.path.join(OUT, "h200_micro_int4mm.csv"), "w") as f:
    f.write("m,k,n,int4_us,bf16_us\n")
    for m, k, n, t4, tb in rows:
        f.write(f"{m},{k},{n},{t4:.3f},{tb:.3f}\n")
with open(os.path.join(OUT, "h200_micro_int4mm_env.json"), "w") as f:
    json.dump(env, f, indent=2)
