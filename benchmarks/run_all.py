"""Run every benchmark (``make bench``) and keep their results under benchmarks/results/.

    python benchmarks/run_all.py [--quick] [--scalesim-python PATH]

* bench_engine.py -> results/engine.json (GEMM, Llama-3-8B prefill, memory vs M,
  Llama-3-70B generation, optionally SCALE-Sim side by side);
* bench_sweep.py  -> results/sweep.json (the 1,000-point sweep, or a sample with --quick);
* bench_dram.py   -> plots/dram_bandwidth.png (HBM efficiency vs size and concurrency);
* bench_compile.py -> results/compile.json (the kernels' cold compile, our inliner and Numba's
  side by side; skipped with --quick).

The README's "Speed and memory" table is written from these files by hand; the machine they
ran on is recorded in them.  Timings are wall-clock on whatever machine runs this, so they
are benchmarks, never tests.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"


def _run(args: list[str]) -> str:
    # the benchmarks time simulations, so the on-disk run cache is off (profile_time.py
    # measures what a cached repeat costs)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "SIM_NO_CACHE": "1"}
    print("$", " ".join(args), flush=True)
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, env=env, text=True, stdout=subprocess.PIPE)
    print(proc.stdout, flush=True)
    if proc.returncode != 0:
        raise SystemExit(f"{args[0]} failed with exit status {proc.returncode}")
    return proc.stdout


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip the 70B run, sample the sweep, short DRAM run")
    ap.add_argument("--scalesim-python", default=os.environ.get("SCALESIM_PYTHON"),
                    help="python of a separate venv with `scalesim` installed (optional)")
    args = ap.parse_args(argv)
    RESULTS.mkdir(parents=True, exist_ok=True)
    eng = ["benchmarks/bench_engine.py"] + (["--quick"] if args.quick else [])
    if args.scalesim_python:
        eng += ["--scalesim-python", args.scalesim_python]
    _run(eng)
    out = _run(["benchmarks/bench_sweep.py"] + (["--sample", "4"] if args.quick else []))
    (RESULTS / ("sweep_sample.json" if args.quick else "sweep.json")).write_text(
        json.dumps(json.loads(out.strip().splitlines()[-1]), indent=2) + "\n")
    _run(["benchmarks/bench_dram.py"] + (["--quick"] if args.quick else []))
    if not args.quick:
        _run(["benchmarks/bench_compile.py"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
