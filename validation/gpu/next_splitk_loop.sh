#!/bin/bash
# Session 32's device call (about 5-6 minutes; 8-9 with WITH_LOOP=1):
#  (1) cuBLAS's split-K reduction kernel by kernel (micro_splitk_reduce_kernels.py, issue 11);
#  (2) the serving loop's 384/512-row GEMMs under Nsight Compute and timed (issue 13; see
#      next_loop_gemms_sparse_rest.sh for why);
#  (3) the in-kernel SM clock (Nsight Compute, the GPU's own clocks) of cuDNN prefill attention,
#      int8 (torch._int_mm) and fp32 GEMMs as the case harness runs them: what the clock-from-power
#      model needs before its per-kernel limiter can ship (README, Known limitations).  None of
#      these shapes is a stored case.
set -x
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) g=h200;; *H100*) g=h100;; *) g=gpu;; esac
mkdir -p "$OUT/splitk" "$OUT/loop" "$OUT/clocks"
timeout 170 python3 validation/gpu/micro_splitk_reduce_kernels.py --out "$OUT/splitk" || echo "splitk exited $?"
METRICS="launch__grid_size,launch__block_size,launch__cluster_dim_x,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed"
# (3) first: (2) has an H100 counterpart already (h100_micro_loop_gemms*.csv)
CLK="launch__grid_size,launch__block_size,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__bytes_read.sum"
MICRO_L2_GEMMS="int8:4096:4096:4096,int8:8192:8192:8192,int8:2048:14336:4096,fp32:2048:2048:2048,fp32:4096:4096:4096,fp32:1024:8192:3072" \
  MICRO_L2_ATTN="4:32:8:128:2048:2048:1,1:64:8:128:4096:4096:1,2:32:32:128:1024:1024:0,1:40:8:128:8192:8192:1" \
  MICRO_L2_METRICS="$CLK" MICRO_L2_STEM="${g}_micro_kernel_clocks" \
  timeout 150 python3 validation/gpu/micro_l2_counters.py --out "$OUT/clocks" --no-timed || echo "clocks exited $?"
[ "${WITH_LOOP:-0}" = 1 ] && MICRO_L2_GEMMS="bf16:512:4096:6144,bf16:512:4096:28672,bf16:512:14336:4096,bf16:384:4096:28672" \
  MICRO_L2_METRICS="$METRICS" MICRO_L2_STEM="${g}_micro_loop_gemms" \
  timeout 150 python3 validation/gpu/micro_l2_counters.py --out "$OUT/loop" --seconds 1.0 || echo "loop exited $?"
ls -la "$OUT"/*
