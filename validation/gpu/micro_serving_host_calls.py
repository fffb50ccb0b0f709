#!/usr/bin/env python3
"""Host time of the serving loop's eager iterations by attention path, drift cancelled
(issue 13).  Standalone: it never imports `sim`; it reuses micro_serving_host.py's copy of
the loop's iteration code.

The serving loop's host speed drifts by up to 2x within a run (micro_serving_host.csv:
19-43 us per kernel), so compositions timed one after another cannot be compared.  Here a
set of compositions that differ in one thing - a prompt chunk with or without cached tokens
before it (SDPA with ``is_causal`` vs with a ``causal_lower_right`` bias), one to three
chunks, with or without 16 decodes - is timed round-robin, in a freshly shuffled order each
round (seeded), so every composition sees the same host.  One row per composition and
round: host time to the last launch and wall time to the end of a synchronise, and the
kernels one profiled iteration launched (after all timings).

    python3 validation/gpu/micro_serving_host_calls.py --out $OUT [--rounds 60]
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for cand in (HERE, Path.cwd() / "validation" / "gpu"):
    if (cand / "micro_serving_host.py").is_file():
        sys.path.insert(0, str(cand))
        break

import torch  # noqa: E402

import micro_serving_host as msh  # noqa: E402

sl = msh.sl

#: (label, decode contexts, prompt chunks as (new tokens, cached tokens before them))
COMPOSITIONS = [
    ("d16", [256] * 16, []),
    ("d16_fresh256", [256] * 16, [(256, 0)]),
    ("d16_cont256", [256] * 16, [(256, 256)]),
    ("d16_fresh128x2", [256] * 16, [(128, 0)] * 2),
    ("d16_cont128x2", [256] * 16, [(128, 256)] * 2),
    ("d16_cont128x3", [256] * 16, [(128, 256)] * 3),
    ("fresh256", [], [(256, 0)]),
    ("cont256", [], [(256, 256)]),
    ("fresh128x2", [], [(128, 0)] * 2),
    ("cont128x2", [], [(128, 256)] * 2),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--rounds", type=int, default=60)
    ap.add_argument("--slots", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    model = sl.Model(args.slots + 1, args.max_len, "cuda")
    if not sl.HAVE_TRITON:
        print("no triton: stopping", flush=True)
        return 1
    model.attn = sl.decode_attn_triton_split
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "triton": getattr(sl.triton, "__version__", None), "cpu_count": os.cpu_count(),
           "smi_start": sl.smi("name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu"),
           "args": vars(args), "sdpa_backends": [str(b) for b in sl.SDPA_BACKENDS]}
    runs = {label: msh.make_runner(model, None, ctxs, chunks, False) for label, ctxs, chunks in COMPOSITIONS}
    for run in runs.values():
        for _ in range(3):
            run()
    sl.sync()
    rng = random.Random(args.seed)
    rows = []
    order = [c[0] for c in COMPOSITIONS]
    for rnd in range(args.rounds):
        rng.shuffle(order)
        for pos, label in enumerate(order):
            host, wall = msh.timed(runs[label], 1)
            rows.append({"round": rnd, "position": pos, "label": label, "host_s": host[0], "wall_s": wall[0]})
    kernels = {}
    for label in runs:
        prof, _names = msh.profiled(runs[label])
        kernels[label] = prof
    meta = {label: {"decode_seqs": len(ctxs), "chunks": ";".join(f"{n}@{p}" for n, p in chunks),
                    **kernels[label]} for label, ctxs, chunks in COMPOSITIONS}
    with open(os.path.join(args.out, "micro_serving_host_calls.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    env["compositions"] = meta
    env["smi_end"] = sl.smi("clocks.sm,clocks.mem,power.draw,temperature.gpu")
    with open(os.path.join(args.out, "micro_serving_host_calls_env.json"), "w") as f:
        json.dump(env, f, indent=2)
    for label, m in meta.items():
        hs = sorted(r["host_s"] for r in rows if r["label"] == label)
        print(f"{label}: host median {hs[len(hs) // 2] * 1e3:.2f} ms, {m['kernels']} kernels", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
