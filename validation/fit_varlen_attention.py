#!/usr/bin/env python3
"""Derive the varlen prefill kernel's latency (stacks/graph_serving_loop.yaml
``attention.prefill_latency``) from validation/measurements/serving/run6/chunk_attn.csv, and show
every row's error before (one engine attention kernel per chunk, as the profile priced it before
``prefill_varlen``) and after (one launch, :mod:`sim.model.varlen_attention`).

    python validation/fit_varlen_attention.py

The microbenchmark (``serving_loop.py --micro-chunk-attn``) times the loop's Triton kernel alone,
20 launches captured in a CUDA graph, per launch (one layer), for nine compositions of chunks.
What the engine gives one such kernel is its tensor work at the core's rate: a 64x64 tile step
of 0.55 us on an SM, so 10 us for a fresh 512-token chunk against 23 us measured.  The kernel's
programs are latency-bound: one 4-warp program per (query block, head) walks its key blocks in a
dependent chain (load K, QK^T, mask + exp, load V, PV), and two fit on an SM at once.  So:

* ``programs_per_core`` (physics, not fitted): shared memory per program at num_stages=2, the
  query block plus two stages of K and V blocks, (64 + 2 x 2 x 64) x 128 x 2 B = 80 KiB, and
  233,472 B of shared memory per SM (arch_configs/h200_sxm.yaml [PROP]): 2;
* ``step_ns`` and ``program_ns`` (CALIBRATION): measured - the engine's launch = program_ns +
  (key steps of the longest program) x step_ns, least squares over the FIT rows only: one
  chunk and at most one program per SM (<= 132 programs: 1 x 64, 4 x 256, 4 x 256 behind
  1,024 and 2 x 128 behind 1,792), so every program runs alone and the longest sets the time.
  The other five rows (two programs per SM, several chunks in one launch, 1,024 programs in
  four waves) are held out: they test the occupancy and the union of the chunks' programs.
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.ir.ops import Attention  # noqa: E402
from sim.model.engine.lower import Options  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.model.stacks import kernels, load_stack  # noqa: E402
from sim.model.varlen_attention import engine_step, program_steps, varlen_prefill  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402
from sim.spec.stack_spec import VarlenLatency  # noqa: E402

CSV = ROOT / "validation" / "measurements" / "serving" / "run6" / "chunk_attn.csv"
#: Llama-3-8B's attention, as the loop runs it (32 query heads, 8 KV heads, head dim 128, bf16)
HEADS, KV_HEADS, D = 32, 8, 128
#: rows the two constants are fitted on (one chunk, <= 132 programs); the rest are held out
FIT = ("64@0", "256@0", "256@1024", "128@1792")
SMEM_PER_SM = 233_472       # arch_configs/h200_sxm.yaml [PROP]


def chunks_of(text: str) -> list[tuple[int, int]]:
    return [tuple(int(x) for x in c.split("@")) for c in text.split(";")]


def per_chunk_kernels(chip, stack, chunks) -> float:
    """Seconds of one engine attention kernel per chunk (the pricing before prefill_varlen)."""
    s = 0.0
    for n, p in chunks:
        op = Attention("attn.core", 1, HEADS, KV_HEADS, D, n, n + p, causal=True)
        for k, lib in kernels(op, stack):
            s += simulate_op(chip, k, Options(**lib)).seconds
    return s


def rows():
    with open(CSV) as f:
        return list(csv.DictReader(f))


def fit(chip, stack) -> dict:
    bq, bk = stack.attention.prefill_tiles
    eng, launch = engine_step(chip, D, "bf16", None, bq, bk)
    per_core = SMEM_PER_SM // ((bq + 2 * 2 * bk) * D * 2)
    xs, ys = [], []
    for r in rows():
        if r["chunks"] in FIT:
            xs.append(max(program_steps(chunks_of(r["chunks"]), HEADS, bq, bk)))
            ys.append(float(r["median_us"]) * 1e-6 - launch)
    A = np.vstack([np.ones(len(xs)), xs]).T
    (program_s, step_s), *_ = np.linalg.lstsq(A, np.array(ys), rcond=None)
    return {"program_ns": round(float(program_s) * 1e9), "step_ns": round(float(step_s) * 1e9),
            "programs_per_core": int(per_core), "engine_step_ns": eng * 1e9, "launch_ns": launch * 1e9}


def table(chip, stack) -> list[dict]:
    out = []
    for r in rows():
        ch = chunks_of(r["chunks"])
        meas = float(r["median_us"])
        before = per_chunk_kernels(chip, stack, ch) * 1e6
        k = varlen_prefill(chip, stack, ch, HEADS, D)
        out.append({"chunks": r["chunks"] if len(ch) < 5 else f"{len(ch)} x {ch[0][0]}@{ch[0][1]}",
                    "held_out": r["chunks"] not in FIT, "measured_us": meas, "before_us": before,
                    "after_us": k.seconds * 1e6, "before_err": before / meas - 1, "after_err": k.seconds * 1e6 / meas - 1,
                    "programs": k.programs, "waves": k.waves, "max_steps": k.max_steps})
    return out


def main() -> int:
    chip = load_chip("h200_sxm")
    stack = load_stack("graph_serving_loop")
    f = fit(chip, stack)
    print(f"engine: one 64x64 tile step {f['engine_step_ns']:.0f} ns on one SM, launch {f['launch_ns']:.0f} ns")
    print(f"fit on {', '.join(FIT)}: program_ns {f['program_ns']}, step_ns {f['step_ns']}, "
          f"programs_per_core {f['programs_per_core']} (shared memory)")
    fitted = stack.model_copy(update={"attention": stack.attention.model_copy(update={"prefill_latency": VarlenLatency(
        program_ns=f["program_ns"], step_ns=f["step_ns"], programs_per_core=f["programs_per_core"], source="fit")})})
    cur = stack.attention.prefill_latency
    if cur is not None:
        print(f"profile:  program_ns {cur.program_ns:g}, step_ns {cur.step_ns:g}, programs_per_core "
              f"{cur.programs_per_core}")
    print(f"{'chunks':<24}{'meas us':>9}{'before':>9}{'err':>8}{'after':>9}{'err':>8}  programs waves steps")
    for t in table(chip, fitted):
        print(f"{t['chunks']:<24}{t['measured_us']:9.1f}{t['before_us']:9.1f}{t['before_err']:+8.0%}"
              f"{t['after_us']:9.1f}{t['after_err']:+8.1%}  {t['programs']:>8} {t['waves']:>5} {t['max_steps']:>5}"
              f"{'  (held out)' if t['held_out'] else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
