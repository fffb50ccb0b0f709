#!/usr/bin/env python3
"""Where the time of each benchmark goes: trace building, lowering, mapper, engine, Python.

    python benchmarks/profile_time.py [--quick | --case NAME ...] [--out benchmarks/results/profile.json]

Each case runs once warm (kernels compiled, nothing memoised, the on-disk run cache off)
under cProfile; every function's own time (cProfile's tottime) is charged to the part
of the simulator its file belongs to:

* ``trace``    - sim/model/workload (the model's op list)
* ``lowering`` - sim/model/engine/lower.py, arrays.py, sim/ir/lowered.py (tile problem and the kernel's arrays)
* ``mapper``   - sim/model/mapper and sim/model/dataflow (candidate search, fold reports)
* ``engine``   - the compiled event loop ``run_tiled``, DRAM model included (it is
  compiled into the loop, so a profiler cannot tell the two apart)
* ``assembly`` - sim/model/engine/{run,assemble,extrapolate,kernel_run}.py, sim/ir/results.py, sim/model/cost/energy.py (extrapolation,
  results, energy)
* ``python``   - everything else (numpy, pydantic, the interpreter)

It also times the same case in a fresh process whose on-disk run cache an earlier
process filled (``disk_warm_s``: what a repeated question costs from the command line,
including loading the compiled kernels, and ``fresh_overhead_s``: a fresh process's
cost for a trivial case, the floor under it).
"""
from __future__ import annotations

import argparse
import cProfile
import json
import os
import platform
import pstats
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# cProfile sees only the thread that calls it: the ops run one at a time here (SIM_THREADS=1),
# so every function's time is charged; the README's timed benchmarks run on every CPU
os.environ.setdefault("SIM_THREADS", "1")
sys.path.insert(0, str(ROOT))

CASES = {
    "gemm_2048x4096x4096_npu": ("gemm", "npu_128x128", dict(m=2048, k=4096, n=4096)),
    "llama3-8b_prefill_2k_npu": ("llm", "npu_128x128", dict(model="llama3-8b", phase="prefill", batch=1,
                                                            prompt_len=2048)),
    "llama3-8b_prefill_2k_h200": ("llm", "h200_sxm", dict(model="llama3-8b", phase="prefill", batch=1,
                                                          prompt_len=2048)),
    "llama3-8b_decode_b8_4k_h200": ("llm", "h200_sxm", dict(model="llama3-8b", phase="decode", batch=8,
                                                            context_len=4096)),
    "llama3-70b_generate_h200": ("llm", "h200_sxm", dict(model="llama3-70b", phase="generate", batch=32,
                                                         prompt_len=4096, new_tokens=256, tensor_parallel=8,
                                                         weight_dtype="fp8")),
}
CASES_ALL = dict(CASES, tiny_decode=("llm", "npu_128x128", dict(model="tiny", phase="decode", batch=1,
                                                                 context_len=64)),
                 # one point of sweeps/llama3-8b-decode.yaml (the chip's defaults; --case to run it)
                 **{"llama3-8b_decode_b16_2k_npu_sweep_fast": (
                     "llm", "npu_128x128", dict(model="llama3-8b", phase="decode", batch=16, context_len=2048,
                                                dtype="fp8", kv_dtype="bf16", fidelity="fast"))})
QUICK = ("gemm_2048x4096x4096_npu", "llama3-8b_prefill_2k_npu", "llama3-8b_decode_b8_4k_h200")


def _part(filename: str, funcname: str) -> str:
    f = filename.replace(os.sep, "/")
    if funcname == "run_tiled" or "/sim/model/kernels/" in f:
        return "engine"
    if "/sim/model/workload/" in f or f.endswith("/sim/model/stacks.py"):
        return "trace"
    if f.endswith(("/sim/model/engine/lower.py", "/sim/model/engine/arrays.py", "/sim/ir/lowered.py")):
        return "lowering"
    if "/sim/model/mapper/" in f or "/sim/model/dataflow/" in f:
        return "mapper"
    if f.endswith(("/sim/model/engine/run.py", "/sim/model/engine/assemble.py", "/sim/model/engine/extrapolate.py",
                   "/sim/model/engine/kernel_run.py", "/sim/ir/results.py", "/sim/model/cost/energy.py",
                   "/sim/apps/inference.py", "/sim/apps/results.py")):
        return "assembly"
    return "python"


def _run_case(kind: str, chip_name: str, kw: dict, memory: str = "modeled") -> None:
    import sim
    from sim.model.engine.lower import Options

    chip = sim.load_chip(chip_name)
    if kind == "gemm":
        sim.simulate_gemm(chip, memory=memory, **kw)
    else:
        kw = dict(kw)
        model = kw.pop("model")
        fidelity = kw.pop("fidelity", "high")
        sim.run_llm(chip, model, options=Options(memory=memory, fidelity=fidelity), **kw)


def _profile(kind: str, chip: str, kw: dict, memory: str = "modeled") -> tuple[float, dict[str, float]]:
    from sim.model.engine.run import clear_cache

    clear_cache()
    prof = cProfile.Profile()
    t0 = time.perf_counter()
    prof.enable()
    _run_case(kind, chip, kw, memory)
    prof.disable()
    wall = time.perf_counter() - t0
    parts: dict[str, float] = {}
    for (filename, _line, funcname), (_cc, _nc, tottime, _ct, _callers) in pstats.Stats(prof).stats.items():
        p = _part(filename, funcname)
        parts[p] = parts.get(p, 0.0) + tottime
    return wall, parts


_CHILD = """
import json, sys, time
sys.path.insert(0, {root!r})
sys.argv = ["x"]
from benchmarks.profile_time import CASES_ALL, _run_case
kind, chip, kw = CASES_ALL[{name!r}]
t = time.perf_counter(); _run_case(kind, chip, kw); print(json.dumps(time.perf_counter() - t))
"""


def _disk_warm(name: str) -> float:
    """Seconds for the case in a fresh process whose on-disk cache an earlier process filled."""
    with tempfile.TemporaryDirectory() as d:
        env = {**os.environ, "SIM_CACHE_DIR": d, "PYTHONPATH": str(ROOT)}
        env.pop("SIM_NO_CACHE", None)
        out = None
        for _ in range(2):  # the first fills the cache, the second reads it
            proc = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(ROOT), name=name)], env=env,
                                  capture_output=True, text=True, check=True)
            out = json.loads(proc.stdout.strip().splitlines()[-1])
        return float(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    ap.add_argument("--case", action="append", choices=sorted(CASES_ALL), default=None,
                    help="profile only this case (repeatable; e.g. llama3-8b_decode_b16_2k_npu_sweep_fast, one "
                         "point of the 1,000-point sweep)")
    ap.add_argument("--out", type=Path, default=ROOT / "benchmarks" / "results" / "profile.json")
    args = ap.parse_args(argv)
    os.environ["SIM_NO_CACHE"] = "1"  # the profile is of the simulation, not of the disk cache
    names = tuple(args.case) if args.case else QUICK if args.quick else tuple(CASES)
    _run_case("llm", "npu_128x128", dict(model="tiny", phase="prefill", batch=1, prompt_len=64))  # compile
    floor = round(_disk_warm("tiny_decode"), 3)
    rows = []
    for name in names:
        kind, chip, kw = CASES_ALL[name]
        wall, parts = _profile(kind, chip, kw)
        row = {"case": name, "wall_s": round(wall, 3),
               **{f"{p}_s": round(parts.get(p, 0.0), 3) for p in
                  ("trace", "lowering", "mapper", "engine", "assembly", "python")},
               "disk_warm_s": round(_disk_warm(name), 3), "fresh_overhead_s": floor}
        rows.append(row)
        share = {k[:-2]: v / wall for k, v in row.items() if k.endswith("_s") and k not in
                 ("wall_s", "disk_warm_s", "fresh_overhead_s") and wall > 0}
        print(f"{name}: {wall:.2f} s  " + "  ".join(f"{k} {100 * v:.0f}%" for k, v in share.items())
              + f"  | disk-warm repeat in a fresh process {row['disk_warm_s']:.2f} s (floor {floor:.2f} s)",
              flush=True)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                                "platform": platform.platform()},
                                    "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                    "cases": rows}, indent=1) + "\n")
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
