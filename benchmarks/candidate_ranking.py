#!/usr/bin/env python3
"""Would ranking an op's candidate mappings on partial engine runs pick the same winner?
(Issue 15: a first-time H200 answer is mostly large prefill GEMMs simulating three or four
near-identical candidate tiles in full.)

    python benchmarks/candidate_ranking.py [--fractions 0.25 0.4] [--out benchmarks/results/candidate_ranking.json]

For each GEMM below, on ``h200_sxm`` at its 1,650 MHz ``clock_mhz`` with DVFS off, one thread
and the disk cache off: the op is simulated as ``sim`` does (which runs its candidates in
full), every candidate it ran in full is run again for its first whole waves of output tiles
(each fraction of its tiles, rounded to whole waves), and that partial run is projected to
the whole problem by whole waves (makespan x ceil(tiles / cores) / waves run; projecting
linearly in tiles misses the last partial wave and picked candidates up to 16 % slower).
Prints, per fraction, the candidate the projections pick and how much slower its full run is
than the best full run, and writes one JSON file.  A measurement for planning, not a test:
nothing in ``sim`` uses it.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ["SIM_NO_CACHE"] = "1"   # every run simulates
os.environ.setdefault("SIM_THREADS", "1")

#: (m, k, n) bf16: the Llama-3-8B 8k prefill's four GEMMs, then large shapes of the kinds the
#: stored H200 sets hold
GEMMS = [(8192, 4096, 28672), (8192, 14336, 4096), (8192, 4096, 6144), (8192, 4096, 4096), (9728, 8192, 2048),
         (10240, 3584, 3584), (4096, 4096, 14336), (6144, 8192, 8192), (3328, 8192, 28672)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fractions", type=float, nargs="+", default=[0.25, 0.4])
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "candidate_ranking.json"))
    args = ap.parse_args(argv)

    import sim.model.engine.kernel_run as kr
    import sim.model.engine.run as R
    from sim.ir.ops import Gemm
    from sim.model.engine.lower import Options
    from sim.spec.registry import load_chip

    chip = load_chip("h200_sxm", overrides=["power.dvfs=false"])
    run_kernel = kr.run_kernel
    full_runs: list[tuple] = []

    def recording(chip_, prob, mapping, ideal, *a, **k):
        if not a and not k:  # a candidate's full run
            full_runs.append((chip_, prob, mapping, ideal))
        return run_kernel(chip_, prob, mapping, ideal, *a, **k)

    R.run_kernel = recording  # (the engine's own module: only the runs it starts are seen)
    out = []
    try:
        for m, k, n in GEMMS:
            full_runs.clear()
            R.clear_cache()
            t0 = time.perf_counter()
            R.simulate_op_at_clock(chip, Gemm("gemm", m, k, n), Options())
            op_s = time.perf_counter() - t0
            cands = []
            for chip_, prob, mapping, ideal in full_runs:
                if mapping.distribution != "cyclic" or prob.m != m:
                    continue  # a split-K pass's reduction, or another kind of run
                P = max(1, mapping.cores_used)
                tiles = prob.count * math.ceil(prob.m / mapping.tile_m) * math.ceil(prob.n / mapping.tile_n)
                full = run_kernel(chip_, prob, mapping, ideal).makespan
                projected, partial_s = [], []
                for f in args.fractions:
                    waves = max(1, round(f * tiles / P))
                    kr.clear()
                    t1 = time.perf_counter()
                    part = run_kernel(chip_, prob, mapping, ideal, tile_limit=waves * P).makespan
                    partial_s.append(time.perf_counter() - t1)
                    projected.append(part * math.ceil(tiles / P) / waves)
                cands.append({"tile": f"{mapping.tile_m}x{mapping.tile_n}x{mapping.tile_k}", "tiles": tiles,
                              "full_cycles": full, "projected_cycles": projected, "partial_run_s": partial_s})
            if len(cands) < 2:
                continue
            best = min(c["full_cycles"] for c in cands)
            row = {"gemm": f"{m}x{k}x{n}", "op_s": op_s, "candidates": cands, "picks": {}}
            line = f"{m}x{k}x{n} ({len(cands)} candidates in full, spread {max(c['full_cycles'] for c in cands) / best - 1:.1%}):"
            for i, f in enumerate(args.fractions):
                pick = min(cands, key=lambda c: c["projected_cycles"][i])
                loss = pick["full_cycles"] / best - 1
                row["picks"][str(f)] = {"tile": pick["tile"], "loss": loss}
                line += f"  at {f:.0%}: {pick['tile']} ({loss:+.2%})"
            print(line, flush=True)
            out.append(row)
    finally:
        R.run_kernel = run_kernel
    summary = {str(f): {"same_winner": sum(r["picks"][str(f)]["loss"] == 0 for r in out), "gemms": len(out),
                        "worst_loss": max(r["picks"][str(f)]["loss"] for r in out)} for f in args.fractions}
    print(json.dumps(summary))
    Path(args.out).write_text(json.dumps({"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                                          "machine": f"{os.cpu_count()} CPUs, {platform.python_version()}",
                                          "chip": "h200_sxm, power.dvfs=false (1,650 MHz)", "summary": summary,
                                          "gemms": out}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
