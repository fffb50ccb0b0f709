#!/usr/bin/env bash
# One device call (about 4-6 minutes): cuDNN's one-row (decode) SDPA kernel, as eager PyTorch
# runs it (measure.py's harness: L2 flushed, CUDA events, kernel names), over KV lengths
# 128-16,384 and nine head layouts (validation/gpu/micro_cudnn_decode_cases.csv; no shape of
# the stored dev/holdout sets).  Why: the stored decode-attention cases under 30 us come out
# 0.3-3.9 us fast, more so at longer KV (README, issue 11): the data for a per-step rule of
# that kernel, fitted here and checked on the stored cases.
#   bash validation/gpu/next_cudnn_decode.sh "$OUT"
set -u
OUT="${1:?usage: next_cudnn_decode.sh OUT_DIR}"
HERE="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$OUT/decode"
timeout 420 python3 "$HERE/measure.py" --cases "$HERE/micro_cudnn_decode_cases.csv" --only cases --out "$OUT/decode" --deadline 390 \
  || echo "decode exited $?"
ls -lR "$OUT"
