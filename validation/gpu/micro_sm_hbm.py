"""HBM read bandwidth of a few SMs at a time, against the depth of their tile pipeline
(standalone: torch + triton, no `sim`).

How many bytes one SM keeps in flight towards HBM sets what a kernel running on a few SMs
(a split-K GEMV, a one-tile GEMM) can pull.  Each of G programs (one per SM) streams its
share of a 2 GiB int32 buffer once, as 128x64 tiles (32 KiB) loaded through TMA tensor
descriptors and software-pipelined ``STAGES`` deep by Triton (the same kernel as
micro_l2_tma.py's ``tma_pipelined``); bandwidth = bytes / kernel time (CUDA events,
median of repeats).  Per SM: bandwidth / G.  Bytes in flight per SM ~ STAGES x 32 KiB.

    python3 validation/gpu/micro_sm_hbm.py --out DIR    # writes DIR/h200_micro_sm_hbm.csv
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from micro_csv import write_micro_csv  # noqa: E402
from micro_l2_tma import _read_tma_pipelined, _time  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, cols = 128, 64, 2048
    nbytes = 2 << 30
    rows = nbytes // 4 // cols
    x = torch.randint(-2**31, 2**31 - 1, (rows, cols), dtype=torch.int32, device="cuda")
    desc = TensorDescriptor.from_tensor(x, [bm, bn])
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rows_out = []
    for stages in (2, 4, 6):
        for grid in (1, 2, 4, 8, 16, 33, 66, sms):
            res = torch.empty(grid, dtype=torch.int32, device="cuda")
            fn = lambda: _read_tma_pipelined[(grid,)](desc, res, rows, cols, 1, BM=bm, BN=bn,  # noqa: E731
                                                      STAGES=stages, num_warps=4)
            sec = _time(fn, args.repeats)
            gbs = nbytes / sec / 1e9
            row = {"name": "hbm_read_tma_pipelined", "params": f"bytes={nbytes} tile={bm}x{bn}x4B stages={stages} grid={grid}",
                   "value": round(gbs, 2), "unit": "GB/s",
                   "notes": f"per SM {gbs / grid:.1f} GB/s; ~{stages * bm * bn * 4 // 1024} KiB in flight per SM; "
                            f"median kernel time {sec * 1e3:.3f} ms"}
            rows_out.append(row)
            print(row, flush=True)
    write_micro_csv(out / "h200_micro_sm_hbm.csv", rows_out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
