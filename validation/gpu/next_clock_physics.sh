#!/usr/bin/env bash
# The H200 measurements the clock-from-power model needs next, in one device call (about 6-9
# minutes): README "Known limitations" (2:4 bullet) and git branch `physics` say why.
#
#   bash validation/gpu/next_clock_physics.sh "$OUT"
#
# 1. in-kernel SM clocks (Nsight Compute, --clock-control none) of the kernel families whose
#    clock the model cannot derive yet: cuDNN's prefill attention, torch._int_mm's int8 kernels,
#    the fp32 SIMT kernels and the misaligned bf16 fallbacks
#    -> $OUT/h200_micro_clock_kinds*.csv (validation/gpu/micro_l2_counters.py's format);
# 2. bf16 and fp8 8192^3 back to back under the 700 W cap with nvidia-smi beside them
#    -> $OUT/h200_micro_sustained_dtypes*.csv (validation/gpu/micro_sustained_dtypes.py).
# Commit the files under validation/measurements/ with validation/measurements/README.md rows.
set -u
OUT="${1:?usage: next_clock_physics.sh OUT_DIR}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT"
MICRO_L2_STEM=h200_micro_clock_kinds \
MICRO_L2_ATTN="4:32:8:128:2048:2048:1,1:32:8:128:4096:4096:0,8:32:32:128:2048:2048:1,2:32:8:128:4608:4608:1" \
MICRO_L2_GEMMS="int8:8192:8192:8192,int8:2741:4824:1328,int8:13824:896:896,int8:1024:896:9728,fp32:8192:8192:8192,fp32:200:8192:10240,fp32:3615:192:7568,bf16:2048:16386:2048,bf16:2048:16383:2048" \
    timeout 420 python3 "$HERE/micro_l2_counters.py" --out "$OUT" --seconds 0.5 || echo "micro_l2_counters exited $?"
timeout 150 python3 "$HERE/micro_sustained_dtypes.py" --out "$OUT" || echo "micro_sustained_dtypes exited $?"
ls -l "$OUT"
