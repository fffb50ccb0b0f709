#!/bin/bash
# Session 30's second device call: (1) the serving loop's four GEMM shapes at 384 / 512 rows
# (Llama-3-8B: qkv, o_proj, gate_up, down) alone, under Nsight Compute (kernel, grid, in-kernel
# SM clock) and back to back with nvidia-smi (time, clock, power): whether the in-kernel clock
# ncu reads for them matches the rate they reach timed (the loop's own graphs ran its 512-row
# down_proj at 876 TFLOP/s, h200_micro_serving_kernels.csv); (2) the 12 stored 2:4 shapes the
# first call's timeout left out (h100_micro_sparse_grid.csv).
set -x
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) g=h200;; *H100*) g=h100;; *) g=gpu;; esac
mkdir -p "$OUT/loop" "$OUT/sparse"
METRICS="launch__grid_size,launch__block_size,launch__cluster_dim_x,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,lts__t_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed"
MICRO_L2_GEMMS="bf16:512:4096:6144,bf16:512:4096:4096,bf16:512:4096:28672,bf16:512:14336:4096,bf16:384:4096:28672,bf16:384:14336:4096" \
  MICRO_L2_METRICS="$METRICS" MICRO_L2_STEM="${g}_micro_loop_gemms" \
  timeout 240 python3 validation/gpu/micro_l2_counters.py --out "$OUT/loop" --seconds 1.0
SHAPES="bf16_2:4:3191:11696:2896,bf16_2:4:3584:14336:4096,bf16_2:4:3584:14624:1328,bf16_2:4:3684:13824:5120,bf16_2:4:4096:4096:14336,bf16_2:4:7871:6144:49152,bf16_2:4:8139:1536:17920,bf16_2:4:8704:1536:2048,bf16_2:4:11408:8192:8192,bf16_2:4:11520:4864:896,bf16_2:4:13056:8192:57344,bf16_2:4:14336:8192:2048"
MICRO_L2_GEMMS="$SHAPES" MICRO_L2_METRICS="$METRICS" MICRO_L2_STEM="${g}_micro_sparse_grid_rest" \
  timeout 300 python3 validation/gpu/micro_l2_counters.py --out "$OUT/sparse" --no-timed
ls -la "$OUT"/*
