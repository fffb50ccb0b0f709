"""Cold compile of the engine's kernels: what a fresh machine (`make demo`, CI's clean clone,
every test worker there) pays once before its first simulation.

    python benchmarks/bench_compile.py [--repeats N] [--out benchmarks/results/compile.json]

Each run is a fresh process with an empty Numba cache folder (``SIM_NUMBA_CACHE_DIR``) and the
run cache off, timing the first simulations that compile every kernel the engine uses: a
256³ bf16 GEMM on ``h200_sxm`` (the event loop, the DRAM model, the mapper's DRAM-pattern
probes) and an 8×4096×128256 GEMV (the probed and resumed engine runs of extrapolation).  The
two inliners run alternately, side by side: ours (``sim/model/kernels/jit.py``,
``SharedScopeBlockCopy``) and Numba's as shipped (``SIM_NUMBA_PLAIN_INLINER=1``).  Both give
the same kernels (``tests/test_jit_inliner.py``); the answers are printed to show it.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_PROGRAM = r"""
import json, time
t0 = time.perf_counter()
import sim
chip = sim.load_chip("h200_sxm")
t1 = time.perf_counter()
a = sim.simulate_gemm(chip, m=256, k=256, n=256, dtype="bf16")
t2 = time.perf_counter()
b = sim.simulate_gemm(chip, m=8, k=4096, n=128256, dtype="bf16")
t3 = time.perf_counter()
print(json.dumps({"import_s": t1 - t0, "gemm_256_s": t2 - t1, "gemv_lm_head_s": t3 - t2,
                  "cycles": [a.cycles, b.cycles]}))
"""


def one_run(plain: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="sim-bench-compile-") as cache:
        env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
               "SIM_NO_CACHE": "1", "SIM_THREADS": "1", "SIM_NUMBA_CACHE_DIR": cache,
               "SIM_NUMBA_PLAIN_INLINER": "1" if plain else "0"}
        t = time.perf_counter()
        proc = subprocess.run([sys.executable, "-c", _PROGRAM], cwd=ROOT, env=env, text=True,
                              stdout=subprocess.PIPE, check=True)
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        out["process_s"] = time.perf_counter() - t
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "compile.json"))
    args = ap.parse_args(argv)
    runs: dict[str, list] = {"ours": [], "numba_as_shipped": []}
    for i in range(args.repeats):
        for name, plain in (("ours", False), ("numba_as_shipped", True)):
            r = one_run(plain)
            runs[name].append(r)
            print(f"[{i + 1}/{args.repeats}] {name:17s} process {r['process_s']:6.1f} s (first GEMM "
                  f"{r['gemm_256_s']:5.1f} s, first GEMV {r['gemv_lm_head_s']:5.1f} s), cycles {r['cycles']}",
                  flush=True)
    same = all(r["cycles"] == runs["ours"][0]["cycles"] for rs in runs.values() for r in rs)
    result = {
        "what": "cold compile: fresh process, empty Numba cache, first 256^3 GEMM + 8x4096x128256 GEMV on h200_sxm",
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()},
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "same_answers": same,
        "median_process_s": {k: sorted(r["process_s"] for r in v)[len(v) // 2] for k, v in runs.items()},
        "runs": runs,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps({k: result[k] for k in ("same_answers", "median_process_s")}))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
