#!/usr/bin/env python3
"""Where a sweep's time goes: a sample of sweeps/llama3-8b-decode.yaml run in one process under cProfile.

    python benchmarks/profile_sweep.py [--sample 4] [--spec sweeps/llama3-8b-decode.yaml] [--top 25]

Keeps ``--sample`` evenly spaced values of every axis (4: 64 points, as bench_sweep.py's
``--sample``), runs them with ``jobs=1`` (in this process, so cProfile sees everything) after a
warm-up that loads the compiled kernels, with the on-disk run cache off, and charges every
function's own time to the parts of benchmarks/profile_time.py (engine, mapper, lowering,
assembly, trace, python), with ``sweep`` (sim/apps/sweep, the store) split out of ``python``.
The compiled DRAM stream estimate (sim/model/kernels/dram_stream.py, which the mapper asks for)
is listed apart from the engine's runs.  Then prints the top functions by own and by cumulative
time.
"""
from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# cProfile sees only the thread that calls it: the ops run one at a time here (SIM_THREADS=1),
# so every function's time is charged; the README's timed benchmarks run on every CPU
os.environ.setdefault("SIM_THREADS", "1")
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _part(filename: str, funcname: str) -> str:
    from profile_time import _part as base

    f = filename.replace(os.sep, "/")
    if f.endswith("/sim/model/kernels/dram_stream.py"):
        return "dram stream estimate"
    p = base(filename, funcname)
    if p == "python" and ("/sim/apps/sweep/" in f or "/sim/apps/store" in f):
        return "sweep"
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "sweeps" / "llama3-8b-decode.yaml"))
    ap.add_argument("--sample", type=int, default=4, help="values kept per axis")
    ap.add_argument("--top", type=int, default=25, help="functions listed by own and by cumulative time")
    args = ap.parse_args(argv)
    os.environ["SIM_NO_CACHE"] = "1"  # the profile is of the simulation, not of the disk cache
    from bench_sweep import sampled_spec
    from profile_time import _run_case

    from sim.apps.sweep import run_sweep

    _run_case("llm", "npu_128x128", dict(model="tiny", phase="prefill", batch=1, prompt_len=64))  # compile
    tmp = Path(tempfile.mkdtemp(prefix="profile-sweep-"))
    try:
        spec = sampled_spec(Path(args.spec), args.sample, tmp / "sample.yaml")
        prof = cProfile.Profile()
        t0 = time.perf_counter()
        prof.enable()
        df, _stats = run_sweep(spec, out=tmp / "out", jobs=1, progress=False)
        prof.disable()
        wall = time.perf_counter() - t0
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    st = pstats.Stats(prof)
    parts: dict[str, float] = {}
    for (filename, _line, funcname), (_cc, _nc, tottime, _ct, _callers) in st.stats.items():
        p = _part(filename, funcname)
        parts[p] = parts.get(p, 0.0) + tottime
    print(f"{len(df)} points in {wall:.1f} s in one process, profiled ({wall / len(df):.3f} s per point)")
    for name, secs in sorted(parts.items(), key=lambda kv: -kv[1]):
        print(f"  {name:22s} {secs:7.2f} s {100 * secs / wall:5.1f} %")
    st.sort_stats("tottime").print_stats(args.top)
    st.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
