#!/bin/bash
# Session 32's device call (about 8-9 minutes; 9-10 with WITH_LOOP=1), steps in this order:
#  (1) cuBLAS's split-K reduction kernel by kernel (micro_splitk_reduce_kernels.py, issue 11),
#      m 1-256 rows;
#  (1b) the same for m 256-2048 rows (--m 256,...,2048 --stem-suffix _mlarge): the rows where
#      cuBLAS's split-K choice and our model disagree on the H200;
#  (3) the in-kernel SM clock (Nsight Compute, the GPU's own clocks) of cuDNN prefill attention,
#      int8 (torch._int_mm) and fp32 GEMMs as the case harness runs them: what the clock-from-power
#      model needs before its per-kernel limiter can ship (README, Known limitations);
#  (2) with WITH_LOOP=1, the serving loop's 384/512-row GEMMs under Nsight Compute and timed
#      (issue 13; see next_loop_gemms_sparse_rest.sh for why).
#  None of these shapes is a stored case.  Every step's timeout is cut to what is left of
#  BUDGET_S (570 s by default, inside the device call's 600 s); a step with under 30 s left is
#  skipped.  Everything is packed into one $OUT/results.tgz at the end, because a device call
#  returns at most 8 files (the steps write 11 with the Nsight Compute logs).
set -x
BUDGET=${BUDGET_S:-570}
step() {  # step NAME WANT_S CMD...: CMD under timeout min(WANT_S, time left of BUDGET)
  local name=$1 want=$2 t; shift 2
  t=$((BUDGET - SECONDS)); [ "$t" -gt "$want" ] && t=$want
  if [ "$t" -lt 30 ]; then echo "$name skipped: ${t} s left of ${BUDGET} s"; return 0; fi
  timeout "$t" "$@" || echo "$name exited $? (timeout ${t} s)"
  echo "$name done at ${SECONDS} s"
}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) g=h200;; *H100*) g=h100;; *) g=gpu;; esac
mkdir -p "$OUT/splitk" "$OUT/loop" "$OUT/clocks"
step splitk 170 python3 validation/gpu/micro_splitk_reduce_kernels.py --out "$OUT/splitk" --deadline 150
step splitk_mlarge 200 python3 validation/gpu/micro_splitk_reduce_kernels.py --out "$OUT/splitk" \
  --m 256,384,512,768,1024,1536,2048 --stem-suffix _mlarge --deadline 180
METRICS="launch__grid_size,launch__block_size,launch__cluster_dim_x,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed"
# (3) before (2): (2) has an H100 counterpart already (h100_micro_loop_gemms*.csv)
CLK="launch__grid_size,launch__block_size,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum"
step clocks 150 env MICRO_L2_GEMMS="int8:4096:4096:4096,int8:8192:8192:8192,int8:2048:14336:4096,fp32:2048:2048:2048,fp32:4096:4096:4096,fp32:1024:8192:3072" \
  MICRO_L2_ATTN="4:32:8:128:2048:2048:1,1:64:8:128:4096:4096:1,2:32:32:128:1024:1024:0,1:40:8:128:8192:8192:1" \
  MICRO_L2_METRICS="$CLK" MICRO_L2_STEM="${g}_micro_kernel_clocks" \
  python3 validation/gpu/micro_l2_counters.py --out "$OUT/clocks" --no-timed
[ "${WITH_LOOP:-0}" = 1 ] && step loop 150 env MICRO_L2_GEMMS="bf16:512:4096:6144,bf16:512:4096:28672,bf16:512:14336:4096,bf16:384:4096:28672" \
  MICRO_L2_METRICS="$METRICS" MICRO_L2_STEM="${g}_micro_loop_gemms" \
  python3 validation/gpu/micro_l2_counters.py --out "$OUT/loop" --seconds 1.0
ls -la "$OUT"/*
(cd "$OUT" && tar czf results.tgz splitk clocks loop && rm -rf splitk clocks loop) || echo "tar failed: files left as written"
ls -la "$OUT"
echo "all steps done at ${SECONDS} s"
