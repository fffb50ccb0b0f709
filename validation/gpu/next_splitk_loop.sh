#!/bin/bash
# Session 32's device call: (1) cuBLAS's split-K reduction kernel by kernel
# (micro_splitk_reduce_kernels.py, issue 11); (2) the serving loop's 384/512-row GEMMs under
# Nsight Compute and timed (issue 13; see next_loop_gemms_sparse_rest.sh for why).
set -x
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) g=h200;; *H100*) g=h100;; *) g=gpu;; esac
mkdir -p "$OUT/splitk" "$OUT/loop"
timeout 300 python3 validation/gpu/micro_splitk_reduce_kernels.py --out "$OUT/splitk" || echo "splitk exited $?"
METRICS="launch__grid_size,launch__block_size,launch__cluster_dim_x,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed"
MICRO_L2_GEMMS="bf16:512:4096:6144,bf16:512:4096:4096,bf16:512:4096:28672,bf16:512:14336:4096,bf16:384:4096:28672,bf16:384:14336:4096" \
  MICRO_L2_METRICS="$METRICS" MICRO_L2_STEM="${g}_micro_loop_gemms" \
  timeout 220 python3 validation/gpu/micro_l2_counters.py --out "$OUT/loop" --seconds 1.0 || echo "loop exited $?"
ls -la "$OUT"/*
