"""Kernel by kernel: the serving loop's CUDA-graph iterations (serving_loop.py ``--graphs all``).

Why: ``validation/compare_serving.py`` predicts the loop's mixed iterations of 480-512 tokens
8-14 % too slow and its decode-only iterations ~5 % too fast, and an iteration's wall time
alone cannot say which kernels the model misprices.  This builds serving_loop.py's own model
(random Llama-3-8B-shaped weights), its static inputs and graphs, and for each case - a
mixed iteration of one prompt chunk from position 0 plus ``D`` decoding sequences at a
context ``C``, padded to each token bucket around the 512-token budget, and decode-only
iterations at a few batch sizes - replays the graph back to back for ``--seconds`` (the
steady state of the serving loop: power capped or not, as it was), then records every
kernel of ``--profiled`` replays with the PyTorch profiler (CUPTI sees graph kernels), with
``nvidia-smi`` samples of the SM clock and power over the steady replays.

    python3 validation/gpu/micro_serving_kernels.py --out DIR
    # DIR/h200_micro_serving_kernels.csv      case, replay, kernel index, name, duration (us)
    # DIR/h200_micro_serving_kernels_cases.csv case, rows, chunk, decode seqs, context,
    #                                          replay median ms, SM MHz, W
    # DIR/h200_micro_serving_kernels_env.json
    python3 validation/gpu/micro_serving_kernels.py --out DIR --max-len 2048 --context 1500
    # the same with run 6's 2048-token cache (the split-KV decode kernel's grid follows it)
    python3 validation/gpu/micro_serving_kernels.py --out DIR --stem h200_micro_prefill_kernels \
        --mixed 2048:0:0,4096:0:0 --decode ''
    # prompt-only iterations (one chunk from position 0 filling the bucket, no decodes): the
    # GEMMs of a power-capped prefill step in its own graph, kernel by kernel
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import torch  # noqa: E402

import serving_loop as SL  # noqa: E402
from micro_csv import write_rows  # noqa: E402
from smi_sampler import Smi  # noqa: E402

#: mixed cases: (token bucket, decoding sequences, their context each); the chunk fills the
#: bucket (its tokens start at position 0)
MIXED = [(384, 13, 5500), (416, 13, 5500), (448, 13, 5500), (480, 13, 5500), (512, 13, 5500), (512, 27, 4000)]
#: decode-only cases: (batch, context each)
DECODE = [(1, 1500), (4, 1500), (8, 1500), (16, 1500), (32, 1500)]


def steady(fn, seconds):
    """Run ``fn`` (one iteration) back to back for ``seconds``; per-iteration ms of the second half."""
    evs = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        evs.append((a, b))
        if len(evs) % 8 == 0:
            evs[-8][1].synchronize()
    torch.cuda.synchronize()
    ms = [a.elapsed_time(b) for a, b in evs]
    return ms[len(ms) // 2:], t0 + (time.perf_counter() - t0) / 2, time.perf_counter()


def profiled(fn, n):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(n):
            fn()
            torch.cuda.synchronize()
    ev = [e for e in prof.events() if e.device_type.name == "CUDA"]
    ev.sort(key=lambda e: e.time_range.start)
    return [(e.name, e.time_range.start, e.time_range.end - e.time_range.start) for e in ev]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seconds", type=float, default=1.5)
    ap.add_argument("--profiled", type=int, default=3)
    ap.add_argument("--slots", type=int, default=40)
    ap.add_argument("--max-len", type=int, default=6144)
    ap.add_argument("--stem", default="h200_micro_serving_kernels", help="output file stem")
    ap.add_argument("--mixed", default=None, help="cases T:D:C,... (token bucket, decoding sequences, their "
                    "context); default: the serving loop's 384-512-token buckets")
    ap.add_argument("--decode", default=None, help="decode-only cases B:C,... ('' for none)")
    ap.add_argument("--context", type=int, default=0,
                    help="every case's context per decoding sequence (0: each case's own); run 6's cache is 2048 long")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    mixed_spec = MIXED if a.mixed is None else [tuple(int(v) for v in c.split(":")) for c in a.mixed.split(",") if c]
    decode_spec = DECODE if a.decode is None else [tuple(int(v) for v in c.split(":")) for c in a.decode.split(",") if c]
    torch.backends.cuda.matmul.allow_tf32 = False
    env = {"gpu": torch.cuda.get_device_name(0), "torch": torch.__version__, "cuda": torch.version.cuda,
           "triton": getattr(SL.triton, "__version__", None) if SL.HAVE_TRITON else None,
           "smi_start": SL.smi("name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,power.draw,power.limit,"
                               "temperature.gpu"), "args": vars(a), "mixed": mixed_spec, "decode": decode_spec}
    model = SL.Model(a.slots + 1, a.max_len, "cuda")
    model.attn = SL.decode_attn_triton_split_skip
    scratch = a.slots
    buckets = sorted({t for t, _, _ in mixed_spec})
    S = SL.StaticInputs(max(buckets), a.slots, SL.CMAX, scratch, "cuda")
    mixed = SL.MixedGraphs(model, S, buckets, [16, 32], capture=True)
    dec = SL.DecodeGraphs(model, [b for b, _ in decode_spec], scratch) if decode_spec else None
    smi = Smi()
    krows, crows = [], []
    cases = []
    mixed_cases = [(T, D, a.context or C) for T, D, C in mixed_spec]
    decode_cases = [(B, a.context or C) for B, C in decode_spec]
    for T, D, C in mixed_cases:
        chunk = T - D - (T // 64)      # the chunk's tokens: the bucket less a few padding rows
        slots = list(range(D))
        cases.append((f"mixed_T{T}_D{D}_C{C}", T, chunk, D, C,
                      lambda slots=slots, D=D, C=C, chunk=chunk: mixed.run(slots, [C] * D, [(D, 0, chunk)])))
    for B, C in decode_cases:
        slots = list(range(B))
        cases.append((f"decode_B{B}_C{C}", B, 0, B, C, lambda slots=slots, B=B, C=C: dec.run(slots, [C] * B)))
    for name, T, chunk, D, C, fn in cases:
        time.sleep(0.5)
        ms, lo, hi = steady(fn, a.seconds)
        ks = profiled(fn, a.profiled)
        per = len(ks) // a.profiled
        for i, (kn, start, dur) in enumerate(ks):
            krows.append({"case": name, "replay": i // max(1, per), "index": i % max(1, per), "kernel": kn[:160],
                          "us": round(dur, 3)})
        crows.append({"case": name, "rows": T, "chunk": chunk, "decode_seqs": D, "context": C,
                      "replays": len(ms) * 2, "median_ms": round(statistics.median(ms), 5),
                      "kernels_per_replay": per, "kernel_sum_ms": round(sum(d for _, _, d in ks) / a.profiled / 1e3, 5),
                      "sm_mhz": smi.between(lo, hi, 1), "power_w": smi.between(lo, hi, 2)})
        print(crows[-1], flush=True)
    smi.stop()
    write_rows(os.path.join(a.out, f"{a.stem}.csv"), krows)
    write_rows(os.path.join(a.out, f"{a.stem}_cases.csv"), crows)
    env["smi_end"] = SL.smi("clocks.sm,power.draw,temperature.gpu")
    with open(os.path.join(a.out, f"{a.stem}_env.json"), "w") as f:
        json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
