#!/usr/bin/env python3
"""Host and device time of the serving loop's iterations, taken apart (issue 13).
Standalone: it never imports `sim`; it imports validation/gpu/serving_loop.py and runs its
model, its CUDA graphs and an exact copy of its iteration code.

For a set of iteration compositions (decoding sequences with their context, prompt chunks
with the tokens already cached before them) it measures, on one H200:

* ``host_s``: from the iteration's start to the host having launched its last kernel, the
  way serving_loop.py records ``launched_s - start_s`` (input tensors built, the forward
  called; eager iterations: every kernel launched one by one from Python);
* ``wall_s``: start to the end of a synchronise (serving_loop.py's ``end_s - start_s``);
* ``device_busy_s``: the summed durations of the device activities of one iteration
  (kernels, memcpys, memsets; torch.profiler's CUPTI records), i.e. its time on the GPU if
  the host were infinitely fast, and ``kernels`` / ``memcpys`` / ``memsets``: how many;
* ``cpu_ops``: the aten operators the host dispatched (top level and nested), and
  ``launch_calls``: cudaLaunchKernel-class runtime calls;
* ``tiny_add_host_us``: host time per eager launch of a 1-element ``add_`` (the existing
  ``eager_launch_host_time`` microbenchmark, re-measured in the same process, before and
  after the timings).

Every composition is timed first; the profiler runs only after all timings (a profiler
session slows later launches).

Each composition is first run 3 times (cuBLAS heuristics, Triton and SDPA set-up), then
``--reps`` times; medians are reported with p10/p90.  Writes ``micro_serving_host.csv``
(one row per composition), ``micro_serving_host_kernels.json`` (kernel name -> [count,
microseconds] per composition, from one profiled iteration) and
``micro_serving_host_env.json``.

    python3 validation/gpu/micro_serving_host.py --out $OUT
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for cand in (HERE, Path.cwd() / "validation" / "gpu"):
    if (cand / "serving_loop.py").is_file():
        sys.path.insert(0, str(cand))
        break

import torch  # noqa: E402

import serving_loop as sl  # noqa: E402

#: (label, decode contexts, prompt chunks as (new tokens, cached tokens before them))
COMPOSITIONS = [
    ("graph_b1_c256", [256], []),
    ("graph_b8_c256", [256] * 8, []),
    ("graph_b16_c512", [512] * 16, []),
    ("graph_b32_c1024", [1024] * 32, []),
    ("eager_b1_c256", [256], []),
    ("eager_b16_c256", [256] * 16, []),
    ("prefill_64", [], [(64, 0)]),
    ("prefill_512", [], [(512, 0)]),
    ("b1_fresh511", [256], [(511, 0)]),
    ("b16_fresh256", [256] * 16, [(256, 0)]),
    ("b16_fresh64", [256] * 16, [(64, 0)]),
    ("b32_fresh480", [512] * 32, [(480, 0)]),
    ("b16_fresh128x2", [256] * 16, [(128, 0), (128, 0)]),
    ("b16_cont256at256", [256] * 16, [(256, 256)]),
    ("b16_cont256at1024", [256] * 16, [(256, 1024)]),
    ("b16_cont16at512", [256] * 16, [(16, 512)]),
    ("b16_cont128at256_fresh128", [256] * 16, [(128, 256), (128, 0)]),
    # several attention calls per layer (the host cost of a call beyond its kernels)
    ("prefill_128x2", [], [(128, 0)] * 2),
    ("prefill_128x4", [], [(128, 0)] * 4),
    ("cont256at256", [], [(256, 256)]),
    ("cont128at256x3", [], [(128, 256)] * 3),
    ("b16_cont128at256x3", [256] * 16, [(128, 256)] * 3),
    ("b32_fresh64x4", [512] * 32, [(64, 0)] * 4),
]


def pct(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, int(round(p / 100 * (len(xs) - 1)))))]


def eager_iteration(model, decodes, chunks):
    """serving_loop.serve's eager branch, verbatim in what it launches: ``decodes`` are
    (slot, ctx); ``chunks`` are (slot, ctx, n)."""
    dev = model.kc.device
    toks = [0] * (len(decodes) + sum(n for _, _, n in chunks))
    pos = [c for _, c in decodes]
    for _, c, n in chunks:
        pos += list(range(c, c + n))
    tok_t = torch.tensor(toks, device=dev)
    pos_t = torch.tensor(pos, device=dev)
    ds = torch.tensor([s for s, _ in decodes] or [0], dtype=torch.int32, device=dev)
    dl = torch.tensor([c + 1 for _, c in decodes] or [1], dtype=torch.int32, device=dev)
    with sl.sdpa_kernel(sl.SDPA_BACKENDS):
        model.forward(tok_t, pos_t, ds, dl, len(decodes), [(s, c, n) for s, c, n in chunks])


def make_runner(model, graphs, ctxs, chunks, use_graph):
    decodes = [(i, c) for i, c in enumerate(ctxs)]
    base = len(decodes)
    ch = [(base + j, past, n) for j, (n, past) in enumerate(chunks)]
    if use_graph:
        slots = [s for s, _ in decodes]
        cx = [c for _, c in decodes]
        return lambda: graphs.run(slots, cx)
    return lambda: eager_iteration(model, decodes, ch)


def timed(run, reps):
    host, wall = [], []
    for _ in range(reps):
        sl.sync()
        t0 = time.perf_counter()
        run()
        t1 = time.perf_counter()
        sl.sync()
        t2 = time.perf_counter()
        host.append(t1 - t0)
        wall.append(t2 - t0)
    return host, wall


def profiled(run):
    """Device activities and host calls of one iteration, read from a Chrome trace."""
    from torch.profiler import ProfilerActivity, profile

    sl.sync()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        run()
        sl.sync()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    prof.export_chrome_trace(path)
    with open(path) as f:
        ev = json.load(f)
    os.unlink(path)
    ev = ev["traceEvents"] if isinstance(ev, dict) else ev
    out = {"kernels": 0, "memcpys": 0, "memsets": 0, "device_busy_s": 0.0, "cpu_ops": 0, "launch_calls": 0}
    names: dict[str, list] = {}
    for e in ev:
        cat = str(e.get("cat", "")).lower()
        name = str(e.get("name", ""))
        dur = float(e.get("dur", 0.0) or 0.0) * 1e-6
        if cat == "kernel":
            out["kernels"] += 1
        elif cat == "gpu_memcpy":
            out["memcpys"] += 1
        elif cat == "gpu_memset":
            out["memsets"] += 1
        elif cat == "cpu_op":
            out["cpu_ops"] += 1
            continue
        elif cat == "cuda_runtime" or cat == "cuda_driver":
            if "Launch" in name or "GraphLaunch" in name:
                out["launch_calls"] += 1
            continue
        else:
            continue
        out["device_busy_s"] += dur
        a = names.setdefault(name[:160], [0, 0.0])
        a[0] += 1
        a[1] += dur * 1e6
    return out, names


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--slots", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--bool-mask", action="store_true", help="as serving_loop.py --bool-mask (runs 1 and 2)")
    ap.add_argument("--decode-nosplit", action="store_true", help="as serving_loop.py --decode-nosplit (runs 1 and 2)")
    args = ap.parse_args(argv)
    sl.BOOL_MASK = args.bool_mask
    os.makedirs(args.out, exist_ok=True)
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.time()
    model = sl.Model(args.slots + 1, args.max_len, "cuda")
    if not sl.HAVE_TRITON:
        print("no triton: the loop would run its reference attention; stopping", flush=True)
        return 1
    model.attn = sl.decode_attn_triton if args.decode_nosplit else sl.decode_attn_triton_split
    buckets = [b for b in (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128)
               if b <= args.slots]
    graphs = sl.DecodeGraphs(model, buckets, args.slots)
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "triton": getattr(sl.triton, "__version__", None), "cpu_count": os.cpu_count(),
           "smi_start": sl.smi("name,driver_version,clocks.sm,clocks.mem,power.draw,temperature.gpu"),
           "args": vars(args), "sdpa_backends": [str(b) for b in sl.SDPA_BACKENDS]}
    try:
        with open("/proc/cpuinfo") as f:
            env["cpu_model"] = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), None)
    except OSError:
        pass
    # the existing launch microbenchmark, same process: 2,000 eager 1-element add_
    x = torch.zeros(1, device="cuda")
    for _ in range(200):
        x.add_(1)
    sl.sync()
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    t1 = time.perf_counter()
    sl.sync()
    env["tiny_add_host_us"] = (t1 - t0) / 2000 * 1e6
    # every composition is timed before any is profiled: a profiler session leaves CUPTI
    # callbacks behind that slow later launches (a first run of this script, profiling between
    # timings, saw a CUDA-graph iteration's host time go from 0.33 to 0.96 ms after one)
    runs, rows, kernels = {}, [], {}
    for label, ctxs, chunks in COMPOSITIONS:
        use_graph = label.startswith("graph_")
        run = runs[label] = make_runner(model, graphs, ctxs, chunks, use_graph)
        for _ in range(3):
            run()
        sl.sync()
        host, wall = timed(run, args.reps)
        row = {"label": label, "graph": int(use_graph), "decode_seqs": len(ctxs),
               "decode_context_tokens": sum(ctxs), "chunks": ";".join(f"{n}@{p}" for n, p in chunks),
               "prefill_tokens": sum(n for n, _ in chunks), "reps": args.reps,
               "host_s": statistics.median(host), "host_p10_s": pct(host, 10), "host_p90_s": pct(host, 90),
               "wall_s": statistics.median(wall), "wall_p10_s": pct(wall, 10), "wall_p90_s": pct(wall, 90)}
        rows.append(row)
        print(f"{label}: host {row['host_s'] * 1e3:.2f} ms, wall {row['wall_s'] * 1e3:.2f} ms", flush=True)
    t0 = time.perf_counter()
    for _ in range(2000):
        x.add_(1)
    t1 = time.perf_counter()
    sl.sync()
    env["tiny_add_host_us_after_timing"] = (t1 - t0) / 2000 * 1e6
    for row in rows:
        prof, names = profiled(runs[row["label"]])
        kernels[row["label"]] = names
        row.update(prof)
        print(f"{row['label']}: device busy {row['device_busy_s'] * 1e3:.2f} ms, {row['kernels']} kernels + "
              f"{row['memcpys']} memcpy + {row['memsets']} memset, {row['cpu_ops']} cpu ops, "
              f"{row['launch_calls']} launch calls", flush=True)
    with open(os.path.join(args.out, "micro_serving_host.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)
    with open(os.path.join(args.out, "micro_serving_host_kernels.json"), "w") as f:
        json.dump(kernels, f, indent=1)
    env["smi_end"] = sl.smi("clocks.sm,clocks.mem,power.draw,temperature.gpu")
    env["total_s"] = time.time() - t_start
    with open(os.path.join(args.out, "micro_serving_host_env.json"), "w") as f:
        json.dump(env, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
