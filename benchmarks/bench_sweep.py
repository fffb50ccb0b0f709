"""Benchmark of a design-space sweep: the shipped 1,000-point Llama-3-8B decode sweep.

Runs ``sim sweep sweeps/llama3-8b-decode.yaml --out DIR -j JOBS`` as a user would (a
fresh results store, so every point is simulated), after a warm-up that makes sure the
compiled kernels are in Numba's on-disk cache ("warm").  Prints points, wall time,
points per second and seconds per point, and one JSON line.  ``--sample K`` keeps K evenly
spaced values of every axis (K**3 points) for a quick estimate.  From the repository root:

    python benchmarks/bench_sweep.py [--jobs 2] [--sample 4] [--spec sweeps/llama3-8b-decode.yaml]

Issue 15's target: 1,000 points in under 20 s on 2 cores, warm (it was 60 s before).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TARGET_S = 20.0  # issue 15 (60 s before)


def _pick(values: list, k: int) -> list:
    if k >= len(values):
        return values
    idx = sorted({round(i * (len(values) - 1) / (k - 1)) for i in range(k)}) if k > 1 else [0]
    return [values[i] for i in idx]


def sampled_spec(spec_path: Path, k: int, dest: Path) -> Path:
    """The spec with every axis cut to ``k`` evenly spaced values (ranges expanded first)."""
    sys.path.insert(0, str(ROOT))
    from sim.apps.sweep.spec import _axis_values

    data = yaml.safe_load(spec_path.read_text())
    params = {}
    for key, val in data.get("parameters", {}).items():
        if key == "zip":
            group = {p: _axis_values(v, p) for p, v in val.items()}
            n = len(next(iter(group.values())))
            idx = _pick(list(range(n)), k)
            params["zip"] = {p: [vals[i] for i in idx] for p, vals in group.items()}
        else:
            params[key] = _pick(_axis_values(val, key), k)
    data["parameters"] = params
    data["name"] = f"{data.get('name', 'sweep')}-sample{k}"
    dest.write_text(yaml.safe_dump(data, sort_keys=False))
    return dest


def run(spec: Path, out: Path, jobs: int) -> float:
    # the disk cache of engine runs off: a second run would otherwise read the first one's runs
    # (session 32 timed 32.9 s that way, against 65-71 s simulated)
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""), "SIM_NO_CACHE": "1"}
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "sim.cli", "sweep", str(spec), "--out", str(out), "-j", str(jobs)],
                   check=True, cwd=ROOT, env=env)
    return time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spec", default=str(ROOT / "sweeps" / "llama3-8b-decode.yaml"))
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--sample", type=int, default=0, help="keep K values per axis (0: the whole sweep)")
    args = ap.parse_args(argv)
    spec = Path(args.spec)
    tmp = Path(tempfile.mkdtemp(prefix="bench-sweep-"))
    try:
        warm = sampled_spec(spec, 1, tmp / "warm.yaml")  # one point: compiles or loads the kernels
        run(warm, tmp / "warm", 1)
        if args.sample:
            spec = sampled_spec(spec, args.sample, tmp / "sample.yaml")
        sys.path.insert(0, str(ROOT))
        from sim.apps.sweep import plan

        n = len(plan(spec))
        secs = run(spec, tmp / "out", args.jobs)
        import pandas as pd

        df = pd.read_csv(tmp / "out" / "results.csv")
        failed = int(df["error"].notna().sum())
        res = {"spec": str(spec if not args.sample else args.spec), "sample": args.sample, "points": n,
               "jobs": args.jobs, "cpus": os.cpu_count(), "seconds": round(secs, 2),
               "points_per_s": round(n / secs, 3), "seconds_per_point_per_job": round(secs * args.jobs / n, 4),
               "failed": failed,
               "projected_1000_points_s": round(secs / n * 1000, 1),
               "target_1000_points_s": TARGET_S}
        print(f"\n{n} points on {args.jobs} process(es): {secs:.1f} s, {n / secs:.2f} points/s, "
              f"{secs * args.jobs / n:.3f} s per point per process; 1,000 points -> "
              f"{secs / n * 1000:.0f} s (target {TARGET_S:.0f} s)")
        print(json.dumps(res))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
