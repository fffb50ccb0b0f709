"""Calibrate the split-KV decode kernel's latency rule (``attention.decode_split`` of
``stacks/graph_serving_loop.yaml``) on the serving loop's own kernels, kernel by kernel.

Measurements: ``validation/measurements/h200_micro_serving_kernels_ctx1500*.csv``
(``validation/gpu/micro_serving_kernels.py --max-len 2048 --context 1500 --slots 128``: run 6's
cache length and slots; FITTED) and ``h200_micro_serving_kernels*.csv`` (``--max-len 6144``,
40 slots, contexts 1,500-5,500: HELD OUT).  Each case replays one CUDA graph; the split kernel
``_decode_attn_split_kernel`` runs a grid of (graph rows x KV heads x splits) programs, splits
= ceil(cache length / 256): a program whose split holds tokens of its row's sequence walks
them in 64-key steps, the others exit (``skip``); the combine kernel runs (graph rows x query
heads) programs.  The rule (:func:`sim.model.varlen_attention.split_decode`)::

    split   = launch + kernel_ns + ceil(active / slots) x steps x step_ns + empty x empty_program_ns / slots
    combine = launch + combine.kernel_ns + ceil(rows x heads / slots) x combine.program_ns

with ``slots`` = SMs x programs_per_core and ``launch`` the chip's op_launch_overhead_ns.  The
target of each kernel is its CUPTI duration plus the case's mean gap between kernels (the
graph's replay time less the kernels' sum, over its kernels), which the chip's launch overhead
stands for.  Given programs_per_core the rule is linear in its constants: least squares on
relative error; programs_per_core is the best of 1-4.

    python validation/fit_decode_split.py
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.spec.registry import load_chip  # noqa: E402

MEAS = ROOT / "validation" / "measurements"
SETS = {"fit": ("h200_micro_serving_kernels_ctx1500", 128, 2048),
        "held_out": ("h200_micro_serving_kernels", 40, 6144)}
#: serving_loop.py's Llama-3-8B attention (KV and query heads) and its split kernel (SPLIT_CHUNK, BLOCK)
KV_HEADS, HEADS, SPLIT, BLOCK = 8, 32, 256, 64
_H200 = load_chip("h200_sxm")
SMS = _H200.cores.count
LAUNCH_US = _H200.runtime.op_launch_overhead_ns / 1e3   # what the chip charges every kernel


def cases() -> pd.DataFrame:
    rows = []
    for which, (stem, slots, max_len) in SETS.items():
        k = pd.read_csv(MEAS / f"{stem}.csv")
        for c in pd.read_csv(MEAS / f"{stem}_cases.csv").itertuples():
            s = k[k.case == c.case]
            gap = (c.median_ms - c.kernel_sum_ms) * 1e3 / c.kernels_per_replay
            mixed = c.case.startswith("mixed")
            full, rem = divmod(int(c.context), SPLIT)
            rows.append(dict(set=which, case=c.case, rows=min(int(c.rows), slots) if mixed else int(c.decode_seqs),
                             seqs=int(c.decode_seqs), context=int(c.context), splits=-(-max_len // SPLIT),
                             active=int(c.decode_seqs) * KV_HEADS * (full + (rem > 0)),
                             steps=min(SPLIT, int(c.context)) // BLOCK + (min(SPLIT, int(c.context)) % BLOCK > 0),
                             split_us=s[s.kernel.str.contains("_decode_attn_split")].us.median() + gap,
                             combine_us=s[s.kernel.str.contains("_decode_attn_combine")].us.median() + gap))
    df = pd.DataFrame(rows)
    df["programs"] = df.rows * KV_HEADS * df.splits
    df["idle"] = df.programs - df.active
    return df


def fit(df: pd.DataFrame) -> dict:
    f = df[df.set == "fit"]
    best = None
    for pp in (1, 2, 3, 4):
        slots = SMS * pp
        X = np.column_stack([np.ones(len(f)), np.ceil(f.active / slots) * f.steps, f.idle / slots])
        y = f.split_us.values - LAUNCH_US
        w = 1.0 / f.split_us.values
        coef, *_ = np.linalg.lstsq(X * w[:, None], y * w, rcond=None)
        if (coef < 0).any():
            continue
        sse = float(np.sum(((X @ coef - y) * w) ** 2))
        if best is None or sse < best[0]:
            best = (sse, pp, coef)
    _, pp, (kernel, step, empty) = best
    Xc = np.column_stack([np.ones(len(f)), np.ceil(f.rows * HEADS / (SMS * pp))])
    wc = 1.0 / f.combine_us.values
    (ck, cp), *_ = np.linalg.lstsq(Xc * wc[:, None], (f.combine_us.values - LAUNCH_US) * wc, rcond=None)
    return {"programs_per_core": pp, "kernel_ns": kernel * 1e3, "step_ns": step * 1e3,
            "empty_program_ns": empty * 1e3, "combine_kernel_ns": ck * 1e3, "combine_program_ns": cp * 1e3}


def predict(df: pd.DataFrame, p: dict) -> pd.DataFrame:
    slots = SMS * p["programs_per_core"]
    out = df.copy()
    out["split_model_us"] = LAUNCH_US + (p["kernel_ns"] + np.ceil(df.active / slots) * df.steps * p["step_ns"]
                                         + df.idle * p["empty_program_ns"] / slots) / 1e3
    out["combine_model_us"] = LAUNCH_US + (p["combine_kernel_ns"] + np.ceil(df.rows * HEADS / slots)
                                           * p["combine_program_ns"]) / 1e3
    out["split_err"] = out.split_model_us / out.split_us - 1
    out["combine_err"] = out.combine_model_us / out.combine_us - 1
    return out


def main() -> int:
    df = cases()
    p = fit(df)
    print({k: (round(v) if isinstance(v, float) else v) for k, v in p.items()})
    r = predict(df, p)
    with pd.option_context("display.width", 200):
        print(r[["set", "case", "rows", "active", "idle", "split_us", "split_model_us", "split_err",
                 "combine_us", "combine_model_us", "combine_err"]].round(3).to_string(index=False))
    for s in ("fit", "held_out"):
        g = r[r.set == s]
        print(f"{s}: split {g.split_err.min():+.1%} .. {g.split_err.max():+.1%}, "
              f"combine {g.combine_err.min():+.1%} .. {g.combine_err.max():+.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
