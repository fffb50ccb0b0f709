"""Serving benchmark: 10,000 Llama-3-8B requests, continuous batching, per chip.

    python benchmarks/bench_serving.py [--requests 10000] [--chips h200_sxm npu_128x128] [--out FILE]

Each chip runs twice in this process: cold (an empty grid-point cache in a temporary
directory, every needed iteration piece simulated by the engine) and warm (the grid points
on disk from the cold run, the in-process memos cleared: what a second `sim serve` of the
same deployment costs).  Target (issue 13): warm < 10 s on 2 cores.  Writes
benchmarks/results/serving.json.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: per chip: arrival rate (requests/s) below the chip's saturation, and the weight format
#: that fits it (npu_128x128 has 16 GiB of HBM: bf16 Llama-3-8B weights alone are 16.1 GB)
CASES = {"h200_sxm": {"rate_per_s": 20.0, "weight_dtype": None},
         "npu_128x128": {"rate_per_s": 1.5, "weight_dtype": "fp8"}}


def workload(n: int, rate: float, seed: int = 0):
    from sim.apps.serving.workload import LengthDist, generate

    # lengths: lognormal around 512 prompt / 128 output tokens (median), the shape of chat
    # traces such as ShareGPT (heavy right tail); clipped to the model's context
    prompt = LengthDist("lognormal", mean_log=math.log(512), sigma_log=0.8, low=8, high=4096)
    output = LengthDist("lognormal", mean_log=math.log(128), sigma_log=0.8, low=1, high=1024)
    return generate(rate_per_s=rate, num_requests=n, prompt=prompt, output=output, seed=seed)


def run(chip: str, n: int) -> dict:
    from sim.apps.serving import serve
    from sim.apps.serving.latency import clear_memory_cache
    from sim.model.engine.run import clear_cache

    case = CASES[chip]
    reqs = workload(n, case["rate_per_s"])
    out = {"chip": chip, "model": "llama3-8b", "scheduler": "continuous", "requests": n, **case}
    with tempfile.TemporaryDirectory() as d:
        for phase in ("cold", "warm"):
            clear_cache()
            clear_memory_cache()
            t = time.perf_counter()
            r = serve(chip, "llama3-8b", reqs, scheduler="continuous", weight_dtype=case["weight_dtype"],
                      cache_dir=d)
            out[f"{phase}_s"] = time.perf_counter() - t
            out[f"{phase}_grid_points_simulated"] = r.summary["grid_points_simulated"]
        s = r.summary
        out["iterations"] = s["iterations"]
        out["simulated_s"] = s["makespan_s"]
        out["summary"] = {k: s[k] for k in ("finished", "unfinished", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s",
                                            "tpot_p99_s", "e2e_p50_s", "e2e_p99_s", "output_tokens_per_s",
                                            "kv_utilisation_mean", "batch_mean", "preemptions", "queue_growth_per_s",
                                            "energy_per_output_token_j", "stable")}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--chips", nargs="+", default=list(CASES))
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "serving.json"))
    args = ap.parse_args(argv)
    res = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
           "target": "10,000 Llama-3-8B requests, continuous batching, < 10 s warm on 2 cores",
           "runs": [run(c, args.requests) for c in args.chips]}
    text = json.dumps(res, indent=2)
    if args.out != "-":
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
