"""The main job (``make demo``): a default chip, a GEMM and an LLM, a summary table and a
report folder with CSVs, a JSON summary and a roofline plot.

What the job says as it goes (the chip, the two tables, where the report is) goes to the
``echo`` it is given: ``sim demo`` (:mod:`sim.cli.demo`) passes ``print``, since the command
line owns all printing."""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Callable

from sim.apps.inference import run_llm
from sim.apps.plotting import roofline
from sim.apps.single_op import simulate_gemm
from sim.ir.results import _json_default
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op
from sim.model.workload.llm import Precision, decode, prefill
from sim.model.workload.models import load_model_spec
from sim.spec.registry import load_chip


def run_demo(out: Path, chip: str = "npu_128x128", model: str = "llama3-8b", weight_dtype: str = "fp8",
             echo: Callable[[str], None] | None = None) -> dict:
    """Run the job, write the report folder ``out`` and return its summary; ``echo`` (default:
    silent) receives the chip line, the GEMM and LLM tables and the closing line as text."""
    import pandas as pd

    def say(text: str) -> None:
        if echo is not None:
            echo(text)

    out.mkdir(parents=True, exist_ok=True)
    spec = load_chip(chip)
    t0 = time.perf_counter()
    say(f"chip {spec.name}: {spec.cores.count} core(s), "
        + ", ".join(f"{a.count}x {a.rows}x{a.cols} array" for a in spec.cores.arrays)
        + f", {spec.clock_hz / 1e6:,.0f} MHz, DRAM {spec.memory.dram.peak_bytes_per_s / 1e9:,.0f} GB/s")

    gemms = []
    for df in [d for d in spec.cores.arrays[0].dataflows]:
        for mem in ("ideal", "modeled"):
            r = simulate_gemm(spec, m=2048, k=4096, n=4096, dtype="bf16", dataflow=df, memory=mem)
            gemms.append({"gemm": "2048x4096x4096 bf16", "dataflow": df, "memory": mem, "cycles": r.cycles,
                          "stall_cycles": r.stall_cycles, "utilization": r.utilization,
                          "dram_MB": r.dram_bytes / 1e6, "energy_mJ": r.energy_pj / 1e9,
                          "tiles": f"{r.mapping['tile_m']}x{r.mapping['tile_n']}x{r.mapping['tile_k']}"})
    gdf = pd.DataFrame(gemms)
    gdf.to_csv(out / "gemm.csv", index=False)
    say("\nGEMM 2048x4096x4096 (bf16), each dataflow, ideal vs modelled memory:")
    with pd.option_context("display.width", 160, "display.float_format", lambda v: f"{v:,.4g}"):
        say(gdf.to_string(index=False))

    runs = {}
    for phase, kw in (("prefill", dict(prompt_len=2048, batch=1)),
                      ("decode", dict(prompt_len=2048, batch=16))):
        runs[phase] = run_llm(spec, model, phase=phase, weight_dtype=weight_dtype, **kw)
    rows = []
    for phase, res in runs.items():
        rows.append({"model": model, "phase": phase, "batch": res.batch, "seconds": res.seconds,
                     "tokens_per_s": res.tokens_per_s, "mfu": res.mfu, "mbu": res.mbu,
                     "energy_per_token_mJ": res.energy_per_token_j * 1e3,
                     "kv_cache_MB": res.kv_cache_bytes / 1e6})
        res.dataframe().to_csv(out / f"{model}_{phase}_ops.csv", index=False)
    sdf = pd.DataFrame(rows)
    sdf.to_csv(out / "summary.csv", index=False)
    say(f"\n{model} ({weight_dtype} weights): prefill of 2048 tokens (TTFT) and one decode step at batch 16 (TPOT), context 2048:")
    with pd.option_context("display.width", 160, "display.float_format", lambda v: f"{v:,.4g}"):
        say(sdf.to_string(index=False))

    # roofline with the ops of both phases

    mspec = load_model_spec(model)
    results = []

    prec = Precision(dtype="bf16", weight_dtype=weight_dtype)
    for trace in (prefill(mspec, 1, 2048, precision=prec), decode(mspec, 16, 2048, precision=prec)):
        for t in trace:
            if t.op.kind in ("collective",):
                continue
            results.append(simulate_op(spec, t.op, Options()))
    png = roofline(results, spec, out / "roofline.png",
                   title=f"{model} prefill (2048 tokens) and decode (batch 16) on {spec.name}")
    summary = {"chip": spec.name, "model": model, "gemm": gemms, "llm": rows, "seconds_to_run": time.perf_counter() - t0,
               "files": sorted(p.name for p in out.iterdir())}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=_json_default))
    say(f"\nreport written to {out}/ (gemm.csv, summary.csv, per-op CSVs, roofline.png, summary.json) "
        f"in {time.perf_counter() - t0:.1f} s")
    return summary
