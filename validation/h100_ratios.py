#!/usr/bin/env python3
"""The H200 -> H100 what-if as per-shape time ratios (README, "The H100").

    python validation/h100_ratios.py [RESULTS_DIR]

For the dev and holdout kernel sets, joins the stored H200 and H100 predictions row by row (the
same shapes in the same order, measured on both GPUs with one harness) and prints, for the
shapes the two GPUs ran equally fast (measured H100/H200 <= 1.05, compute-bound) and those the
H100 ran over 1.2x slower (memory-bound): the medians of the measured and predicted ratios and
of the per-shape ratio error (predicted / measured - 1), and the median, p90 and maximum of its
magnitude.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]


def ratios(results: Path, split: str) -> pd.DataFrame:
    a = pd.read_csv(results / f"h200_{split}_predictions.csv")
    b = pd.read_csv(results / f"h100_{split}_predictions.csv")
    assert len(a) == len(b) and (a.kind.values == b.kind.values).all(), split
    out = pd.DataFrame({"kind": a.kind, "dtype": a.dtype, "m": a.get("m"), "k": a.get("k"), "n": a.get("n"),
                        "measured": b.measured_ms / a.measured_ms, "predicted": b.predicted_ms / a.predicted_ms})
    out["error_pct"] = (out.predicted / out.measured - 1) * 100
    return out


def main(argv: list[str]) -> int:
    results = Path(argv[0]) if argv else ROOT / "validation" / "results"
    for split in ("dev", "holdout"):
        r = ratios(results, split)
        for name, sel in (("compute-bound (measured <= 1.05)", r.measured <= 1.05),
                          ("memory-bound (measured > 1.2)", r.measured > 1.2)):
            s = r[sel]
            print(f"{split:8s} {name:34s} n={len(s):3d}  measured {s.measured.median():.3f}  "
                  f"predicted {s.predicted.median():.3f}  ratio error median {s.error_pct.median():+.1f} %  "
                  f"median |.| {s.error_pct.abs().median():.1f} %  p90 |.| {s.error_pct.abs().quantile(0.9):.1f} %  max |.| {s.error_pct.abs().max():.0f} %")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
