"""Speed and memory of the simulator (issue targets), written to benchmarks/results/.

    python benchmarks/bench_engine.py [--quick]

* a 2048x4096x4096 bf16 GEMM on npu_128x128 (128x128 arrays) with modelled HBM, warm;
* a full Llama-3-8B forward (32 layers, 2,048-token prefill) on the same chip, warm;
* Llama-3-70B: a 4,096-token prefill plus 256 decode steps at batch 32 (4 chips, TP), warm;
* peak memory against the problem size (M = 10^3 .. 10^9) - flat;
* optionally SCALE-Sim on the same layer, timed side by side (if a `scalesim` venv is given
  with --scalesim-python; it is never a dependency).

Timings are wall-clock medians of several warm runs (the machines are noisy); the first
(cold) run, which compiles the Numba kernels once per machine, is reported separately.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the benchmark times the simulation: with the disk cache of engine runs on, clearing the
# in-memory memo (below) would not make a repeat simulate again
os.environ["SIM_NO_CACHE"] = "1"


def _timed(fn, repeats: int = 3) -> dict:
    from sim.model.engine.run import clear_cache

    clear_cache()
    t0 = time.perf_counter()
    fn()
    cold = time.perf_counter() - t0
    warm = []
    for _ in range(repeats):
        clear_cache()  # no memoised results: every run simulates
        t0 = time.perf_counter()
        fn()
        warm.append(time.perf_counter() - t0)
    return {"cold_s": cold, "warm_median_s": statistics.median(warm), "warm_runs_s": warm}


def bench_gemm(chip) -> dict:
    from sim.apps.single_op import simulate_gemm

    r = simulate_gemm(chip, 2048, 4096, 4096, dtype="bf16")
    out = _timed(lambda: simulate_gemm(chip, 2048, 4096, 4096, dtype="bf16"))
    out.update({"what": "2048x4096x4096 bf16 GEMM, modelled HBM", "chip": chip.name, "cycles": r.cycles,
                "utilization": r.utilization, "target_s": 0.2})
    return out


def bench_llama8b_prefill(chip) -> dict:
    from sim.apps.inference import run_llm

    def go():
        return run_llm(chip, "llama3-8b", phase="prefill", batch=1, prompt_len=2048, weight_dtype="fp8")

    res = go()
    out = _timed(go)
    out.update({"what": "Llama-3-8B forward, 32 layers, 2,048-token prefill (fp8 weights to fit 16 GiB)",
                "chip": chip.name, "ttft_s": res["ttft_s"], "target_s": 2.0})
    return out


def bench_llama70b_generate(chip) -> dict:
    from sim.apps.inference import run_llm

    def go():
        return run_llm(chip, "llama3-70b", phase="generate", batch=32, prompt_len=4096, new_tokens=256,
                       tensor_parallel=8, weight_dtype="fp8")

    res = go()
    out = _timed(go, repeats=2)
    out.update({"what": "Llama-3-70B: 4,096-token prefill + 256 decode steps, batch 32, 8-way TP, fp8 weights",
                "chip": chip.name, "ttft_s": res["ttft_s"], "tpot_s": res["tpot_s"], "target_s": 10.0})
    return out


def bench_memory(chip) -> dict:
    """Peak memory of one simulation against M: each M runs in a fresh process and reports
    its peak resident set (ru_maxrss: includes Numba's own allocations, which Python's
    tracemalloc cannot see) next to that of the same process before simulating."""
    rows = []
    script = ("import resource,sys,time;sys.path.insert(0,{root!r})\n"
              "from sim.spec.registry import load_chip\nfrom sim.apps.single_op import simulate_gemm\n"
              "chip=load_chip({chip!r});simulate_gemm(chip,64,256,256,dtype='bf16')\n"
              "base=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "t=time.perf_counter();r=simulate_gemm(chip,{m},4096,4096,dtype='bf16');dt=time.perf_counter()-t\n"
              "peak=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
              "print(base,peak,dt,r.cycles,bool(r.details.get('extrapolated')))")
    for m in (10 ** 3, 10 ** 5, 10 ** 7, 10 ** 9):
        out = subprocess.run([sys.executable, "-c", script.format(root=str(ROOT), chip=chip.name, m=m)],
                             capture_output=True, text=True, check=True).stdout.split()
        base, peak = int(out[0]) / 1024, int(out[1]) / 1024
        rows.append({"m": m, "rss_before_mib": base, "peak_rss_mib": peak, "growth_mib": peak - base,
                     "seconds": float(out[2]), "cycles": float(out[3]), "extrapolated": out[4] == "True"})
    return {"what": "peak resident memory vs M (M x 4096 x 4096 GEMM), fresh process per M", "rows": rows}


def bench_scalesim(python: str, rows: int = 128, cols: int = 128) -> dict:
    """Time SCALE-Sim (an external install) and us on one GEMM layer, same array."""
    from sim.apps.single_op import simulate_gemm
    from sim.spec.registry import load_chip

    layer = (1024, 512, 1024)  # M, K, N: small enough for SCALE-Sim to finish in minutes
    tmp = Path(tempfile.mkdtemp())
    cfg = tmp / "scale.cfg"
    cfg.write_text(f"""[general]
run_name = bench
[architecture_presets]
ArrayHeight: {rows}
ArrayWidth: {cols}
IfmapSramSzkB: 4096
FilterSramSzkB: 4096
OfmapSramSzkB: 4096
IfmapOffset: 0
FilterOffset: 10000000
OfmapOffset: 20000000
Bandwidth: 10
Dataflow: ws
ReadRequestBuffer: 32
WriteRequestBuffer: 32
[layout]
IfmapCustomLayout: False
IfmapSRAMBankBandwidth: 10
IfmapSRAMBankNum: 10
IfmapSRAMBankPort: 2
FilterCustomLayout: False
FilterSRAMBankBandwidth: 10
FilterSRAMBankNum: 10
FilterSRAMBankPort: 2
[sparsity]
SparsitySupport: false
SparseRep: ellpack_block
OptimizedMapping: false
BlockSize: 8
RandomNumberGeneratorSeed: 40
[run_presets]
InterfaceBandwidth: CALC
UseRamulatorTrace: False
""")
    topo = tmp / "layer.csv"
    topo.write_text(f"Layer, M, N, K,\nbench, {layer[0]}, {layer[2]}, {layer[1]},\n")
    lay = tmp / "layout.csv"
    lay.write_text("h\n")
    script = (f"import time,io,contextlib;from scalesim.scale_sim import scalesim\n"
              f"with contextlib.redirect_stdout(io.StringIO()):\n"
              f"    s=scalesim(save_disk_space=True,verbose=False,config='{cfg}',topology='{topo}',layout='{lay}',input_type_gemm=True)\n"
              f"    t=time.perf_counter();s.run_scale(top_path='{tmp}');dt=time.perf_counter()-t\n"
              f"print(dt)")
    try:
        proc = subprocess.run([python, "-c", script], capture_output=True, text=True, timeout=3600)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"what": "SCALE-Sim side by side", "error": str(exc)}
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"what": "SCALE-Sim side by side", "error": f"exit {proc.returncode}: {proc.stderr[-800:]}"}
    ss_s = float(lines[-1])
    chip = load_chip("scalesim_32x32", overrides=[f"cores.arrays.0.rows={rows}", f"cores.arrays.0.cols={cols}"])
    ours = _timed(lambda: simulate_gemm(chip, layer[0], layer[1], layer[2], dtype="int8", dataflow="ws",
                                        memory="ideal"))
    ours_mod = _timed(lambda: simulate_gemm(chip, layer[0], layer[1], layer[2], dtype="int8", dataflow="ws"))
    return {"what": f"GEMM M={layer[0]} K={layer[1]} N={layer[2]} on a {rows}x{cols} WS array (SCALE-Sim CALC mode)",
            "scalesim_s": ss_s, "ours_ideal_warm_s": ours["warm_median_s"],
            "ours_modeled_warm_s": ours_mod["warm_median_s"], "ratio_ideal": ss_s / ours["warm_median_s"],
            "ratio_modeled": ss_s / ours_mod["warm_median_s"]}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="skip the 70B generation benchmark")
    ap.add_argument("--scalesim-python", default=None, help="python of a venv with `scalesim` installed")
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "engine.json"))
    args = ap.parse_args()
    from sim.spec.registry import load_chip

    npu = load_chip("npu_128x128")
    results = {"machine": {"python": platform.python_version(), "processor": platform.processor() or platform.machine(),
                           "cpus": __import__("os").cpu_count()}}
    for name, fn in (("gemm", bench_gemm), ("llama3_8b_prefill", bench_llama8b_prefill), ("memory", bench_memory)):
        results[name] = fn(npu)
        print(name, json.dumps(results[name], indent=1), flush=True)
    if not args.quick:
        results["llama3_70b_generate"] = bench_llama70b_generate(npu)
        print("llama3_70b_generate", json.dumps(results["llama3_70b_generate"], indent=1), flush=True)
    if args.scalesim_python:
        results["scalesim"] = bench_scalesim(args.scalesim_python)
        print("scalesim", json.dumps(results["scalesim"], indent=1), flush=True)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=2))
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
