"""Regenerate the README's sweep figures: a Pareto front and a heat map.

By default runs sweeps/llama3-8b-quick.yaml into reports/sweeps/llama3-8b-quick (a
resumable store: a second run reuses every point) and writes

* plots/sweep_pareto.png - throughput against chip area, Pareto front highlighted;
* plots/sweep_pareto_energy.png - throughput against energy per token;
* plots/sweep_heatmap.png - tokens/s over array size x HBM data rate.

``--results DIR`` plots an existing sweep folder instead (e.g. the 1,000-point
sweeps/llama3-8b-decode.yaml results).  From the repository root:

    python plots/sweep_figures.py [--results reports/sweeps/llama3-8b-decode]
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import sim.apps.plotting as plotting  # noqa: E402
from sim.apps.store import read_results  # noqa: E402
from sim.apps.sweep import run_sweep  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", default=None, help="an existing sweep folder, results.parquet or CSV")
    ap.add_argument("--spec", default=str(ROOT / "sweeps" / "llama3-8b-quick.yaml"))
    ap.add_argument("--jobs", type=int, default=None)
    ap.add_argument("--out", default=str(ROOT / "plots"))
    args = ap.parse_args(argv)
    out = Path(args.out)
    if args.results:
        df = read_results(args.results)
    else:
        store = ROOT / "reports" / "sweeps" / Path(args.spec).stem
        df, stats = run_sweep(args.spec, out=store, jobs=args.jobs)
        print(f"{stats.points} points: {stats.new} simulated, {stats.reused} reused ({store})")
    written = [
        plotting.pareto(df, out / "sweep_pareto.png", x="area_mm2", y="tokens_per_s"),
        plotting.pareto(df, out / "sweep_pareto_energy.png", x="energy_per_token_j", y="tokens_per_s"),
        plotting.heatmap(df, out / "sweep_heatmap.png", x="cores.arrays.0.rows",
                         y="memory.levels.hbm.data_rate_gbps_per_pin", z="tokens_per_s"),
    ]
    for p in written:
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
