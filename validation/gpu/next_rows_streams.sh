#!/usr/bin/env bash
# Two case lists with measure.py's harness in one device call (about 4-6 minutes):
#   1. validation/gpu/micro_rows_align_cases.csv (2:4 and dense bf16 over m, fp32 over k, int8
#      off 16-byte alignment; measured on an H100 in session 20, here for the H200);
#   2. validation/gpu/micro_sm80_streams_cases.csv: torch._int_mm with m = 64-256 rows and k =
#      14-28k over n = 1,024 ... 24,576 (8 ... 192 CTAs of CUTLASS's sm80 kernels, each
#      streaming its weight slice with cp.async): whether the per-CTA rate holds as more CTAs
#      share HBM (the model's sm80 path keeps 32 KiB in flight per SM; README, H100 what-if).
#   bash validation/gpu/next_rows_streams.sh "$OUT"
set -u
OUT="${1:?usage: next_rows_streams.sh OUT_DIR}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT/rows" "$OUT/streams"
timeout 330 python3 "$HERE/measure.py" --cases "$HERE/micro_rows_align_cases.csv" --only cases --out "$OUT/rows" --deadline 300 \
  || echo "rows exited $?"
timeout 200 python3 "$HERE/measure.py" --cases "$HERE/micro_sm80_streams_cases.csv" --only cases --out "$OUT/streams" --deadline 170 \
  || echo "streams exited $?"
ls -lR "$OUT"
