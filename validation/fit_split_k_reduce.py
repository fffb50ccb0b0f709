#!/usr/bin/env python3
"""Derive the eager profile's floor for cuBLAS's split-K reduction kernel (splitKreduce_kernel)
from validation/measurements/h200_micro_splitk_reduce_kernels.csv
(validation/gpu/micro_splitk_reduce_kernels.py: per bf16 F.linear call, CUPTI's duration of the
GEMM kernel, of the splitKreduce_kernel that follows it where cuBLAS splits k, and the gap
between the two):

    python validation/fit_split_k_reduce.py [--gpu h100]

(``--gpu h100`` reads validation/measurements/h100_micro_splitk_reduce_kernels.csv, the same
microbenchmark on the H100, and leaves out the H100 sets' shapes; the two parts share the
stack profile and the 1,257 ns ``op_launch_overhead_ns``.)

The reduction adds ``gap + kernel`` to a call.  The model prices a kernel as the chip's launch
overhead (``runtime.op_launch_overhead_ns``) plus its body, so the body's floor is
``median(gap + kernel) - op_launch_overhead_ns`` over the calls cuBLAS split whose output is
small enough that the kernel cannot be streaming (at most 1 MiB of fp32 partial sums read per
split: the floor is the kernel's dependent steps, not its bytes).  Shapes of the stored
validation sets are left out (none is in the grid by design; checked here).  A CALIBRATION
(the residual of this microbenchmark).
"""
from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.spec.registry import load_chip  # noqa: E402

MEASUREMENTS = ROOT / "validation" / "measurements"


def csv_of(gpu: str) -> Path:
    return MEASUREMENTS / f"{gpu}_micro_splitk_reduce_kernels.csv"


def stored_sets(gpu: str) -> list[Path]:
    return [MEASUREMENTS / f"{gpu}_{s}.csv" for s in ("dev", "holdout")]
#: partial sums per split at most this many bytes: the reduction is its fixed steps, not a stream
SMALL_OUTPUT_BYTES = 1 << 20


def stored_shapes(gpu: str = "h200") -> set[tuple[int, int, int]]:
    out = set()
    for path in stored_sets(gpu):
        with open(path, newline="") as f:
            for r in csv.DictReader(f):
                if r["kind"] == "gemm" and r["m"]:
                    out.add((int(r["m"]), int(r["k"]), int(r["n"])))
    return out


def reduced_calls(gpu: str = "h200") -> list[dict]:
    """The measured calls cuBLAS split (shape, reduce kernel and gap in us), stored shapes left out."""
    stored = stored_shapes(gpu)
    out = []
    with open(csv_of(gpu), newline="") as f:
        for r in csv.DictReader(f):
            if not r.get("reduced_calls") or int(r["reduced_calls"]) == 0:
                continue
            shape = (int(r["m"]), int(r["k"]), int(r["n"]))
            if shape in stored:
                continue
            out.append({"m": shape[0], "k": shape[1], "n": shape[2], "reduce_us": float(r["reduce_us_median"]),
                        "gap_us": float(r["gap_us_median"]), "gemm_kernel": r["gemm_kernel"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", choices=("h200", "h100"), default="h200")
    args = ap.parse_args(argv)
    chip = load_chip(f"{args.gpu}_sxm")
    launch_ns = chip.runtime.op_launch_overhead_ns
    calls = reduced_calls(args.gpu)
    small = [c for c in calls if c["m"] * c["n"] * 4 <= SMALL_OUTPUT_BYTES]
    per_kernel = np.array([c["reduce_us"] + c["gap_us"] for c in small])
    print(f"{len(calls)} split calls, {len(small)} with at most {SMALL_OUTPUT_BYTES} B of partials per split")
    print(f"gap + reduce kernel {per_kernel.min():.2f}-{per_kernel.max():.2f} us, median {np.median(per_kernel):.3f} us")
    print(f"floor_ns = {np.median(per_kernel) * 1e3 - launch_ns:.0f}  (median - op_launch_overhead_ns {launch_ns:.0f})")
    for c in calls:
        print(f"{c['m']:5d} {c['k']:6d} {c['n']:6d}  reduce {c['reduce_us']:6.2f}  gap {c['gap_us']:5.2f}  "
              f"{c['gemm_kernel'][:60]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
