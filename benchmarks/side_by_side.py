"""One benchmark on two revisions, one after the other on the same machine (the machines are
noisy: figures from different days do not compare).

    python benchmarks/side_by_side.py [--base HEAD] [--chip h200_sxm] [--bench llama70b_generate]

The base revision is checked out in a temporary git worktree; each side runs in its own
process with the on-disk run cache off (``SIM_NO_CACHE=1``), and reports what the benchmark
function of ``bench_engine.py`` reports (a cold run, then warm runs with the in-memory memo
cleared).  The results go to ``benchmarks/results/side_by_side_<bench>_<chip>.json``; the
answers (``ttft_s``, ``tpot_s``) are printed too, so a speed change that moved a result is
seen at once.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import json, sys
sys.path.insert(0, {root!r})
sys.path.insert(0, {root!r} + "/benchmarks")
import bench_engine
from sim.spec.registry import load_chip
print("RESULT " + json.dumps(getattr(bench_engine, "bench_" + {bench!r})(load_chip({chip!r}))))
"""


def _run(root: Path, bench: str, chip: str) -> dict:
    env = dict(os.environ, SIM_NO_CACHE="1", PYTHONPATH=str(root))
    out = subprocess.run([sys.executable, "-c", _CHILD.format(root=str(root), bench=bench, chip=chip)],
                         capture_output=True, text=True, env=env, cwd=root, check=True).stdout
    return json.loads(next(line for line in out.splitlines() if line.startswith("RESULT "))[7:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--base", default="HEAD", help="the revision to compare the working tree with")
    ap.add_argument("--chip", default="h200_sxm")
    ap.add_argument("--bench", default="llama70b_generate", help="a bench_* function of bench_engine.py")
    args = ap.parse_args()
    rev = subprocess.run(["git", "rev-parse", "--short", args.base], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout.strip()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        subprocess.run(["git", "worktree", "add", "--detach", str(base), rev], cwd=ROOT, check=True,
                       capture_output=True)
        try:
            results = {"bench": args.bench, "chip": args.chip,
                       "base": {"revision": rev, **_run(base, args.bench, args.chip)},
                       "working_tree": _run(ROOT, args.bench, args.chip)}
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base)], cwd=ROOT, capture_output=True)
    for side in ("base", "working_tree"):
        r = results[side]
        print(f"{side:13s} cold {r['cold_s']:6.1f} s  warm median {r['warm_median_s']:6.1f} s  "
              f"runs {', '.join(f'{t:.1f}' for t in r['warm_runs_s'])}  "
              + "  ".join(f"{k} {r[k]:.6g}" for k in ("ttft_s", "tpot_s") if k in r))
    out = ROOT / "benchmarks" / "results" / f"side_by_side_{args.bench}_{args.chip}.json"
    out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
