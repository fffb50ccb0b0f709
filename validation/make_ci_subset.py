"""Build the CI validation subset and its thresholds from full `sim validate` runs.

    sim validate h200_sxm validation/measurements/h200_dev.csv --out reports/val/dev
    sim validate h200_sxm validation/measurements/h200_holdout.csv --out reports/val/holdout
    python validation/make_ci_subset.py reports/val/dev reports/val/holdout

Writes validation/ci_cases.csv (a stratified, evenly spaced subset of both case files:
every kind and GEMM dtype, only cases that simulate in under a second so `make test` stays
fast) and validation/thresholds.json (the subset's error statistics when this was run, plus
a margin of MARGIN_PCT percentage points, so a change that makes predictions worse fails
CI).  The full-set statistics are recorded next to them for the README.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
COLUMNS = ["kind", "dtype", "m", "k", "n", "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "causal",
           "hidden", "ffn", "bytes", "measured_ms"]
TARGET_CASES = 90
MAX_WALL_S = 1.0
MARGIN_PCT = 2.0


def main(run_dirs: list[str]) -> int:
    sys.path.insert(0, str(ROOT))
    from sim.apps.validation import summarize

    frames = []
    for d in run_dirs:
        src = Path(d)
        pred = pd.read_csv(src / "predictions.csv")
        summary = json.loads((src / "summary.json").read_text())
        cases = pd.read_csv(ROOT / summary["cases_file"], dtype=str, keep_default_na=False)
        cases["line"] = range(2, len(cases) + 2)
        merged = cases.merge(pred[["line", "wall_s", "error_pct", "predicted_ms"]], on="line")
        merged["source"] = Path(summary["cases_file"]).name
        frames.append(merged)
    allc = pd.concat(frames, ignore_index=True)
    fast = allc[allc["wall_s"] < MAX_WALL_S]
    picked = []
    for _, g in fast.groupby(["kind", "dtype"]):
        n = max(3, round(len(g) / len(fast) * TARGET_CASES))
        g = g.sort_values(["source", "line"])
        step = max(1, len(g) // n)
        picked.append(g.iloc[::step].head(n))
    sub = pd.concat(picked).sort_values(["kind", "dtype", "source", "line"])
    sub[COLUMNS].to_csv(ROOT / "validation" / "ci_cases.csv", index=False)
    stats = summarize(sub.assign(error=""))
    limits = {"all": {k: round(stats[k] + MARGIN_PCT, 2) for k in ("median_abs_error_pct", "p90_abs_error_pct")},
              "by_kind": {k: {m: round(v[m] + MARGIN_PCT, 2) for m in ("median_abs_error_pct", "p90_abs_error_pct")}
                          for k, v in stats["by_kind"].items()},
              "recorded": {"subset": {k: stats[k] for k in ("cases", "median_abs_error_pct", "p90_abs_error_pct")},
                           "full_runs": {Path(d).name: {k: json.loads((Path(d) / "summary.json").read_text())[k]
                                                        for k in ("cases", "median_abs_error_pct", "p90_abs_error_pct",
                                                                  "max_abs_error_pct")} for d in run_dirs}},
              "margin_pct_points": MARGIN_PCT}
    (ROOT / "validation" / "thresholds.json").write_text(json.dumps(limits, indent=2) + "\n")
    print(f"{len(sub)} cases, simulated in {sub['wall_s'].sum():.1f} s; median {stats['median_abs_error_pct']:.1f}% "
          f"p90 {stats['p90_abs_error_pct']:.1f}%")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
