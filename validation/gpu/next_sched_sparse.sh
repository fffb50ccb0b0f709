#!/bin/bash
# Session 30's device call: (1) torch._weight_int8pack_mm's block scheduling in grids larger than
# one wave (micro_int8mm.py --sched, issue 11's small-row gap); (2) the launch grid, clock and
# traffic of cuSPARSELt's 2:4 kernel for every stored H200 2:4 case shape (whether its
# "segment_k_on" variant, run after a Memset, splits k, and into how many CTAs; issue 11).
set -x
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
case "$gpu" in *H200*) g=h200;; *H100*) g=h100;; *) g=gpu;; esac
mkdir -p "$OUT/int8" "$OUT/sparse"
OUT="$OUT/int8" timeout 200 python3 validation/gpu/micro_int8mm.py --sched
SHAPES="bf16_2:4:2:896:1152,bf16_2:4:5:1600:1088,bf16_2:4:5:4096:4096,bf16_2:4:12:256:368,bf16_2:4:12:3072:16384,bf16_2:4:16:1152:384,bf16_2:4:24:8192:57344,bf16_2:4:32:1536:4224,bf16_2:4:32:1920:896,bf16_2:4:32:2048:2048,bf16_2:4:32:2048:16384,bf16_2:4:32:4096:6144,bf16_2:4:48:3008:128,bf16_2:4:64:8192:57344,bf16_2:4:96:128:4096,bf16_2:4:200:4544:4672,bf16_2:4:200:8960:1536,bf16_2:4:256:896:4864,bf16_2:4:512:4096:6144,bf16_2:4:512:5120:5120,bf16_2:4:512:5120:7168,bf16_2:4:705:4096:22016,bf16_2:4:896:4544:4672,bf16_2:4:1024:5120:13824,bf16_2:4:1546:4096:22016,bf16_2:4:2258:80:864,bf16_2:4:2304:5120:15360,bf16_2:4:2393:4096:28672,bf16_2:4:3191:11696:2896,bf16_2:4:3584:14336:4096,bf16_2:4:3584:14624:1328,bf16_2:4:3684:13824:5120,bf16_2:4:4096:4096:14336,bf16_2:4:7871:6144:49152,bf16_2:4:8139:1536:17920,bf16_2:4:8704:1536:2048,bf16_2:4:11408:8192:8192,bf16_2:4:11520:4864:896,bf16_2:4:13056:8192:57344,bf16_2:4:14336:8192:2048"
METRICS="launch__grid_size,launch__block_size,launch__cluster_dim_x,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,lts__cycles_elapsed.avg.per_second,lts__t_bytes.sum,l1tex__m_xbar2l1tex_read_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed"
MICRO_L2_GEMMS="$SHAPES" MICRO_L2_METRICS="$METRICS" MICRO_L2_STEM="${g}_micro_sparse_grid" \
  timeout 360 python3 validation/gpu/micro_l2_counters.py --out "$OUT/sparse" --no-timed
ls -la "$OUT"/*
