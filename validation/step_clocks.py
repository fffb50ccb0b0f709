#!/usr/bin/env python3
"""Whole-model steps at the clock they really ran at: the model's per-op DVFS clocks against the
SM clock measured inside CUDA-graph replays, and the model's kernel time by kind against the
measured kernel sums.

    python validation/step_clocks.py [--gpu h100] [--out validation/results/h100_step_clocks.json]

Reads ``validation/measurements/<gpu>_micro_step_clocks*.csv`` (the first run and any ``_r2``...) (``validation/gpu/micro_step_clocks.py``:
a probe kernel after the GEMMs of every 4th or 8th layer of a Llama-3-8B step replayed back to
back, reading ``clock64`` against ``%globaltimer`` on every SM) and, for the same steps, the
stored whole-model cases' per-kernel breakdown (``<gpu>_models_stats.csv``, the torch profiler's
kernels of one replay, summed into GEMM, attention and other kernels).  For each step it prices
the step with ``sim.run_llm`` on the matching chip file three ways - as shipped (each op at its
own DVFS clock), with DVFS off (every op at ``clock_mhz``), and with every op at the measured
in-step clock - and reports the model's GEMM / attention / vector-op milliseconds, its average
power and its per-op GEMM clocks beside the measurement; and, with the vector kernels' measured clock
sensitivity (``<gpu>_micro_vector_clock_env.json``), a what-if of both: every op at the probed
clock and the vector and copy time scaled by it (:func:`what_if`; not the shipped model).  It also
finds the clock the model's own power gives each step when one clock holds for the whole step
(:func:`model_step_clock`: the highest grid clock at which the step averages at most ``tdp_w``),
to set beside the probed one, and the three parts of the refit together
(:func:`what_if_refit`: the measured-quantities candidate of ``validation/refit_candidate.py`` at
the probed clock, with the vector kernels' clock share).  The decode step's probe readings sit
above the part's 1,980 MHz maximum (2,000-2,100 MHz): at a light load the 20 us probe over-reads,
so only the power-limited steps are compared.
"""
from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MEAS = ROOT / "validation" / "measurements"

#: step of micro_step_clocks.py -> (run_llm keywords, the stored case's (batch, prompt_len, weights))
STEPS = {
    "prefill_1x2048_bf16": (dict(phase="prefill", batch=1, prompt_len=2048), (1, 2048, "bf16")),
    "prefill_1x512_bf16": (dict(phase="prefill", batch=1, prompt_len=512), (1, 512, "bf16")),
    "prefill_4x2048_bf16": (dict(phase="prefill", batch=4, prompt_len=2048), (4, 2048, "bf16")),
    "prefill_1x2048_fp8": (dict(phase="prefill", batch=1, prompt_len=2048, dtype="fp8", weight_dtype="fp8"), None),
    "prefill_1x128_bf16": (dict(phase="prefill", batch=1, prompt_len=128), (1, 128, "bf16")),
    "prefill_1x256_bf16": (dict(phase="prefill", batch=1, prompt_len=256), None),
    "prefill_1x1024_bf16": (dict(phase="prefill", batch=1, prompt_len=1024), (1, 1024, "bf16")),
    "prefill_1x4096_bf16": (dict(phase="prefill", batch=1, prompt_len=4096), (1, 4096, "bf16")),
    "prefill_1x512_fp8": (dict(phase="prefill", batch=1, prompt_len=512, dtype="fp8", weight_dtype="fp8"), None),
}
CHIP = {"h100": "h100_sxm", "h200": "h200_sxm"}


def measured_clocks(gpu: str) -> dict[str, dict]:
    """Per step: the median probe clock over the second half of the replays (MHz), by GEMM and
    overall, and the median step time without probes (ms)."""
    import pandas as pd

    runs = [""] + [p.name.removeprefix(f"{gpu}_micro_step_clocks").removesuffix(".csv")
                   for p in sorted(MEAS.glob(f"{gpu}_micro_step_clocks_r*.csv")) if "_steps" not in p.name
                   and "_smi" not in p.name]
    probes = pd.concat([pd.read_csv(MEAS / f"{gpu}_micro_step_clocks{r}.csv") for r in runs])
    steps = pd.concat([pd.read_csv(MEAS / f"{gpu}_micro_step_clocks{r}_steps.csv") for r in runs])
    out = {}
    for name, g in probes.groupby("step", sort=False):
        late = g[g["replay"] >= g["replay"].max() // 2]
        plain = steps[(steps["step"] == name) & (steps["variant"] == "plain")]["ms"]
        out[name] = {"sm_mhz": round(float(late["sm_mhz_median"].median()), 1),
                     "sm_mhz_by_gemm": {k: round(float(v), 1) for k, v in
                                        late.groupby("after")["sm_mhz_median"].median().items()},
                     "sm_mhz_spread_across_probes": round(float(late.groupby("probe")["sm_mhz_median"].median().max()
                                                                - late.groupby("probe")["sm_mhz_median"].median().min()), 1),
                     "step_ms": round(float(plain[len(plain) // 2:].median()), 3)}
    return out


def kernel_kind(name: str) -> str:
    n = name.lower()
    if any(s in n for s in ("nvjet", "gemm", "splitk", "cutlass", "xmma")):
        return "gemm"
    if any(s in n for s in ("flash", "fmha", "cudnn", "attention", "sdpa")):
        return "attention"
    return "other"


def measured_breakdown(gpu: str, batch: int, prompt_len: int, weights: str) -> dict | None:
    """The stored whole-model case's kernel milliseconds by kind (one profiled replay)."""
    import pandas as pd

    st = pd.read_csv(MEAS / f"{gpu}_models_stats.csv")
    row = st[(st["model"] == "llama3-8b") & (st["phase"] == "prefill") & (st["batch"] == batch)
             & (st["prompt_len"] == prompt_len) & (st["weight_dtype"] == weights) & (st["status"] == "ok")]
    if row.empty:
        return None
    r = row.iloc[0]
    kinds: dict[str, float] = defaultdict(float)
    for kernel, (_n, us) in json.loads(r["kernel_breakdown"]).items():
        kinds[kernel_kind(kernel)] += us / 1e3
    return {"case_id": r["case_id"], "median_ms": float(r["median_ms"]),
            **{f"{k}_ms": round(v, 3) for k, v in sorted(kinds.items())}}


def model_step(chip_name: str, kw: dict, overrides: list[str] | None) -> dict:
    """``sim.run_llm`` of the step: ms by op kind, average W, the GEMMs' per-op clocks."""
    sys.path.insert(0, str(ROOT))
    import sim
    from sim.ir.ops import Gemm
    from sim.model.engine.simulate import simulate_op

    chip = sim.load_chip(chip_name, overrides)
    r = sim.run_llm(chip, "llama3-8b", **kw)
    kinds: dict[str, float] = defaultdict(float)
    for o in r.ops:
        kinds["vector" if o["kind"] in ("vector", "copy") else o["kind"]] += o["total_seconds"] * 1e3
    # the clock each weight GEMM of a layer ran at (the op as the step lowered it)
    T = kw["batch"] * kw["prompt_len"]
    dt = kw.get("dtype", "bf16")
    clocks = {}
    for name, k, n in (("qkv", 4096, 6144), ("o", 4096, 4096), ("gu", 4096, 28672), ("down", 14336, 4096)):
        res = simulate_op(chip, Gemm(name=name, m=T, k=k, n=n, dtype=dt, weight_dtype=kw.get("weight_dtype", dt)))
        clocks[name] = res.details.get("clock_mhz", chip.clock_mhz)
    return {"step_ms": round(r.ttft_s * 1e3, 3), "avg_w": round(r.energy_j / r.ttft_s, 1),
            **{f"{k}_ms": round(v, 3) for k, v in sorted(kinds.items())}, "gemm_clock_mhz": clocks}


def vector_clock_sensitivity(gpu: str) -> float | None:
    """The share of the memory-bound layer kernels' time that scales with the SM clock, weighted
    by their time at the idle clock (``<gpu>_micro_vector_clock_env.json``: each kernel after
    a GEMM and an L2 flush against after the flush alone); None without that file."""
    path = MEAS / f"{gpu}_micro_vector_clock_env.json"
    if not path.exists():
        return None
    num = den = 0.0
    for k in json.loads(path.read_text())["kernels"].values():
        low = k["after_gemm_then_flush"]
        num += (low["slowdown"] - 1) / (low["clock_ratio"] - 1) * k["alone_us"]
        den += k["alone_us"]
    return num / den


def vector_clock_scale(s: float, f: float, idle_mhz: float = 1980.0) -> float:
    """What a memory-bound kernel's time at the idle clock becomes at clock ``f`` when a share
    ``s`` of it scales with the SM clock (session 38's measurement, :func:`vector_clock_sensitivity`):
    1 - s + s * idle_mhz / f."""
    return 1 - s + s * idle_mhz / f


def what_if(row: dict, s: float, idle_mhz: float = 1980.0) -> dict:
    """The step with every op at the probed clock f and the model's vector and copy time scaled
    by 1 - s + s * idle_mhz / f (the stream rules were measured at the idle clock): a what-if
    of the refit, not the shipped model."""
    a, f = row["at_measured_clock"], row["measured"]["sm_mhz"]
    vector = a["vector_ms"] * vector_clock_scale(s, f, idle_mhz)
    total = a["gemm_ms"] + vector + a["attention_ms"]
    out = {"s": round(s, 3), "vector_ms": round(vector, 3), "kernels_ms": round(total, 3),
           "error_vs_step": round(total / row["measured"]["step_ms"] - 1, 4)}
    k = row["measured"]["kernels"]
    if k:
        out["error_vector_vs_measured_other"] = round(vector / k["other_ms"] - 1, 4)
        out["error_vs_kernel_sum"] = round(total / (k["gemm_ms"] + k["other_ms"] + k["attention_ms"]) - 1, 4)
    return out


def what_if_refit(chip_name: str, kw: dict, measured: dict, s: float, idle_mhz: float = 1980.0) -> dict:
    """The step at its probed clock on the measured-quantities candidate
    (``validation/refit_candidate.py``: the L2 as measured, tensor-core arrays at the pipe's busy
    share x the in-kernel / held clock ratio; its ``clock_mhz`` replaced by the probed clock, DVFS
    off), with the vector and copy time scaled by :func:`vector_clock_scale` as in :func:`what_if`:
    the refit's three parts together, not the shipped model."""
    sys.path.insert(0, str(ROOT / "validation"))
    from refit_candidate import CUDA_FRACTION, overrides

    f = measured["sm_mhz"]
    ov = [o for o in overrides(CUDA_FRACTION, chip_name) if not o.startswith("clock_mhz=")]
    r = model_step(chip_name, kw, ov + ["power.dvfs=false", f"clock_mhz={f}"])
    vector = r["vector_ms"] * vector_clock_scale(s, f, idle_mhz)
    total = r["gemm_ms"] + r["attention_ms"] + vector
    return {"gemm_ms": r["gemm_ms"], "attention_ms": r["attention_ms"], "vector_ms": round(vector, 3),
            "kernels_ms": round(total, 3), "avg_w": r["avg_w"],
            "error_vs_step": round(total / measured["step_ms"] - 1, 4)}


def highest_fitting_clock(pw, watts_at) -> float:
    """The highest clock of ``pw``'s DVFS grid (``boost_clock_mhz`` down to ``min_clock_mhz`` in
    ``clock_step_mhz`` steps) at which ``watts_at(clock)`` is at most ``pw.tdp_w``; bisected on
    the grid (the power rises with the clock), the minimum clock when none fits."""
    grid = [pw.boost_clock_mhz - i * pw.clock_step_mhz
            for i in range(int((pw.boost_clock_mhz - pw.min_clock_mhz) // pw.clock_step_mhz) + 1)]
    lo, hi = 0, len(grid) - 1          # grid descends: index 0 is the boost clock
    if watts_at(grid[0]) <= pw.tdp_w:
        return grid[0]
    while hi - lo > 1:                 # grid[lo] over the limit, grid[hi] taken as under it
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if watts_at(grid[mid]) <= pw.tdp_w else (mid, hi)
    return grid[hi]


def model_step_clock(chip_name: str, kw: dict) -> dict:
    """The clock the model's power puts a whole step at when one clock holds for the step (as
    the probes found): the highest clock of the chip's DVFS grid, up to the boost clock, at
    which the step with every op at that clock (DVFS off) averages at most ``tdp_w``; bisected
    on the grid (the step's power rises with its clock).  Above ``clock_mhz`` the chip file's
    per-cycle costs are used as they are (they were calibrated at ``clock_mhz``)."""
    sys.path.insert(0, str(ROOT))
    import sim

    seen: dict[float, dict] = {}

    def at(f: float) -> dict:
        if f not in seen:
            seen[f] = model_step(chip_name, kw, ["power.dvfs=false", f"clock_mhz={f}"])
        return seen[f]

    f = highest_fitting_clock(sim.load_chip(chip_name).power, lambda c: at(c)["avg_w"])
    return {"clock_mhz": f, "avg_w": at(f)["avg_w"], "step_ms": at(f)["step_ms"],
            "clocks_tried_mhz": sorted(seen, reverse=True)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="h100", choices=sorted(CHIP))
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    chip = CHIP[a.gpu]
    meas = measured_clocks(a.gpu)
    out = {"gpu": a.gpu, "chip": chip, "steps": {}}
    for name, (kw, case) in STEPS.items():
        if name not in meas:
            continue
        m = meas[name]
        row = {"measured": dict(m, kernels=measured_breakdown(a.gpu, *case) if case else None)}
        for label, ov in (("shipped_per_op_dvfs", None), ("dvfs_off", ["power.dvfs=false"]),
                          ("at_measured_clock", ["power.dvfs=false", f"clock_mhz={m['sm_mhz']}"])):
            row[label] = model_step(chip, kw, ov)
            row[label]["error_vs_step"] = round(row[label]["step_ms"] / m["step_ms"] - 1, 4)
        row["model_step_clock"] = msc = model_step_clock(chip, kw)
        msc["error_vs_measured_clock"] = round(msc["clock_mhz"] / m["sm_mhz"] - 1, 4)
        msc["error_vs_step"] = round(msc["step_ms"] / m["step_ms"] - 1, 4)
        s_vec = vector_clock_sensitivity(a.gpu)
        if s_vec is not None:
            row["what_if_step_clock_and_vector_clock"] = what_if(row, s_vec)
            row["what_if_refit_candidate"] = what_if_refit(chip, kw, m, s_vec)
        out["steps"][name] = row
        print(name, json.dumps(row), flush=True)
    path = Path(a.out) if a.out else ROOT / "validation" / "results" / f"{a.gpu}_step_clocks.json"
    path.write_text(json.dumps(out, indent=1) + "\n")
    print("wrote", path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
