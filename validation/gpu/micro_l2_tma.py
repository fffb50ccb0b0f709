"""L2 -> SM bandwidth with bulk tile loads (standalone: torch + triton, no `sim`).

micro_l2.py measures the L2 with per-thread 16-byte loads (``__ldcg``), a lower bound
for what GEMM kernels see: cuBLAS's Hopper kernels fill shared memory with TMA bulk tile
copies.  This script reads an L2-resident buffer as 2-D tiles, the way a GEMM reads its
operand panels, with three load paths written in Triton:

* ``tma_pipelined`` - the same, software-pipelined by Triton (4 stages in flight);
* ``tma``    - a tensor descriptor (TMA bulk copies into shared memory), one load at a time;
* ``block``  - plain 2-D block loads (vectorised LDG, the pre-Hopper path);

Each program walks tiles ``pid, pid + G, ...`` for several passes and XOR-accumulates
them (one integer op per 4 bytes, so the arithmetic stays far below the load rate);
bandwidth = bytes read / kernel time (CUDA events, median of repeats).  Grids of one
program measure what one SM can pull; grids of a few programs per SM measure the whole
L2.  A 4 GiB buffer (far larger than the 60 MiB L2) gives the HBM rate for comparison.

    python3 validation/gpu/micro_l2_tma.py --out DIR    # writes DIR/h200_micro_l2_tma.csv
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import traceback
from pathlib import Path

import torch
import triton
import triton.language as tl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from micro_csv import write_micro_csv  # noqa: E402


@triton.jit
def _read_block(x_ptr, out_ptr, rows, cols, passes, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.num_programs(0)
    tiles_n = cols // BN
    n_tiles = (rows // BM) * tiles_n
    acc = tl.zeros([BM, BN], dtype=tl.int32)
    offs_m = tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    for _ in range(passes):
        for t in range(pid, n_tiles, g):
            tm = t // tiles_n
            tn = t % tiles_n
            ptrs = x_ptr + (tm * BM + offs_m)[:, None] * cols + (tn * BN + offs_n)[None, :]
            acc ^= tl.load(ptrs, cache_modifier=".cg")
    tl.store(out_ptr + pid, tl.sum(acc, axis=None))


@triton.jit
def _read_tma_pipelined(desc, out_ptr, rows, cols, passes, BM: tl.constexpr, BN: tl.constexpr,
                        STAGES: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.num_programs(0)
    tiles_n = cols // BN
    n_tiles = (rows // BM) * tiles_n
    acc = tl.zeros([BM, BN], dtype=tl.int32)
    for i in tl.range(0, passes * ((n_tiles - pid + g - 1) // g), num_stages=STAGES):
        t = (pid + (i % ((n_tiles - pid + g - 1) // g)) * g)
        tm = t // tiles_n
        tn = t % tiles_n
        acc ^= desc.load([tm * BM, tn * BN])
    tl.store(out_ptr + pid, tl.sum(acc, axis=None))


@triton.jit
def _read_tma(desc, out_ptr, rows, cols, passes, BM: tl.constexpr, BN: tl.constexpr):
    pid = tl.program_id(0)
    g = tl.num_programs(0)
    tiles_n = cols // BN
    n_tiles = (rows // BM) * tiles_n
    acc = tl.zeros([BM, BN], dtype=tl.int32)
    for _ in range(passes):
        for t in range(pid, n_tiles, g):
            tm = t // tiles_n
            tn = t % tiles_n
            acc ^= desc.load([tm * BM, tn * BN])
    tl.store(out_ptr + pid, tl.sum(acc, axis=None))


def _time(fn, repeats: int) -> float:
    fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b) * 1e-3)
    return statistics.median(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=20)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = torch.cuda.get_device_properties(0)
    sms = dev.multi_processor_count
    rows_out = []

    def record(name, params, value, unit, notes=""):
        rows_out.append({"name": name, "params": params, "value": value, "unit": unit, "notes": notes})
        print(name, params, value, unit, notes, flush=True)

    try:
        from triton.tools.tensor_descriptor import TensorDescriptor
    except Exception:  # noqa: BLE001
        TensorDescriptor = None
        record("tma_api", "", "", "", "triton.tools.tensor_descriptor unavailable: " + traceback.format_exc()[-300:])

    configs = []
    for nbytes, passes in ((32 << 20, 20), (48 << 20, 12), (4 << 30, 1)):
        for (bm, bn) in ((128, 64), (64, 128), (128, 128)):
            for per_sm in (1, 2):
                configs.append((nbytes, passes, bm, bn, sms * per_sm, 4))
    for nbytes in (32 << 20,):
        for (bm, bn) in ((128, 64), (128, 128)):
            for grid in (1, 2):
                configs.append((nbytes, 4, bm, bn, grid, 4))
    for variant in ("tma_pipelined", "tma", "block"):
        if variant.startswith("tma") and TensorDescriptor is None:
            continue
        for nbytes, passes, bm, bn, grid, warps in configs:
            cols = 2048  # int32 elements per row: 8 KiB rows
            rows = nbytes // 4 // cols
            x = torch.randint(-2**31, 2**31 - 1, (rows, cols), dtype=torch.int32, device="cuda")
            res = torch.empty(grid, dtype=torch.int32, device="cuda")
            params = f"bytes={nbytes} passes={passes} tile={bm}x{bn}x4B grid={grid} warps={warps}"
            try:
                if variant == "tma_pipelined":
                    desc = TensorDescriptor.from_tensor(x, [bm, bn])
                    fn = lambda: _read_tma_pipelined[(grid,)](desc, res, rows, cols, passes, BM=bm, BN=bn,  # noqa: E731
                                                              STAGES=4, num_warps=warps)
                elif variant == "tma":
                    desc = TensorDescriptor.from_tensor(x, [bm, bn])
                    fn = lambda: _read_tma[(grid,)](desc, res, rows, cols, passes, BM=bm, BN=bn,  # noqa: E731
                                                    num_warps=warps)
                else:
                    fn = lambda: _read_block[(grid,)](x, res, rows, cols, passes, BM=bm, BN=bn,  # noqa: E731
                                                      num_warps=warps)
                # a 256 MiB write between repeats would flush; here the buffer stays in L2
                # on purpose (passes > 1); the 4 GiB case streams from HBM
                secs = _time(fn, args.repeats)
                record(f"l2_{variant}" if nbytes < (1 << 30) else f"hbm_{variant}", params,
                       round(nbytes * passes / secs / 1e9, 2), "GB/s", f"median kernel time {secs * 1e3:.4f} ms")
            except Exception as exc:  # noqa: BLE001
                record(f"l2_{variant}", params, "", "", f"ERROR {type(exc).__name__}: {str(exc)[:300]}")
            del x
            torch.cuda.empty_cache()
    record("env", "", "", "", json.dumps({"device": dev.name, "sms": sms, "torch": torch.__version__,
                                          "triton": triton.__version__}))
    write_micro_csv(out / "h200_micro_l2_tma.csv", rows_out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
