"""L2 and per-SM load bandwidth microbenchmarks (standalone: cupy + numpy, no `sim`).

Every SM's threads stream 16-byte loads (``__ldcg``: cached in L2, not L1) over a
buffer of a given size, several passes inside one kernel; bandwidth = bytes read /
kernel time (CUDA events, median of repeats).  Buffers well inside the L2 measure the
L2 -> SM bandwidth, a buffer far larger than the L2 measures HBM read bandwidth.  One
block measures what a single SM can pull.

    python3 validation/gpu/micro_l2.py --out DIR     # writes DIR/h200_micro_l2.csv
    python3 validation/gpu/micro_l2.py --out DIR --only-ilp --csv-name h200_micro_l2_ilp.csv
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from micro_csv import write_micro_csv  # noqa: E402

SRC = r"""
extern "C" __global__ void l2_read_ilp4(const int4* __restrict__ buf, long long n_vec, int reps, int4* out) {
    // four independent 16-byte loads in flight per thread (more bytes in flight per SM)
    int4 acc = make_int4(0, 0, 0, 0);
    long long stride = (long long)gridDim.x * blockDim.x;
    long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < reps; ++r) {
        long long i = start;
        for (; i + 3 * stride < n_vec; i += 4 * stride) {
            int4 v0 = __ldcg(buf + i);
            int4 v1 = __ldcg(buf + i + stride);
            int4 v2 = __ldcg(buf + i + 2 * stride);
            int4 v3 = __ldcg(buf + i + 3 * stride);
            acc.x ^= v0.x ^ v1.x ^ v2.x ^ v3.x; acc.y ^= v0.y ^ v1.y ^ v2.y ^ v3.y;
            acc.z ^= v0.z ^ v1.z ^ v2.z ^ v3.z; acc.w ^= v0.w ^ v1.w ^ v2.w ^ v3.w;
        }
        for (; i < n_vec; i += stride) {
            int4 v = __ldcg(buf + i);
            acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
        }
    }
    if (acc.x == 0x12345678 && acc.y == 0x9abcdef0) out[0] = acc;
}
extern "C" __global__ void l2_read(const int4* __restrict__ buf, long long n_vec, int reps, int4* out) {
    int4 acc = make_int4(0, 0, 0, 0);
    long long stride = (long long)gridDim.x * blockDim.x;
    long long start = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    for (int r = 0; r < reps; ++r) {
        for (long long i = start; i < n_vec; i += stride) {
            int4 v = __ldcg(buf + i);
            acc.x ^= v.x; acc.y ^= v.y; acc.z ^= v.z; acc.w ^= v.w;
        }
    }
    if (acc.x == 0x12345678 && acc.y == 0x9abcdef0) out[0] = acc;
}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only-ilp", action="store_true", help="only the 4-loads-in-flight variants")
    ap.add_argument("--csv-name", default="h200_micro_l2.csv")
    args = ap.parse_args()
    import cupy as cp
    import numpy as np

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    dev = cp.cuda.Device(0)
    props = cp.cuda.runtime.getDeviceProperties(0)
    sms = props["multiProcessorCount"]
    module = cp.RawModule(code=SRC)
    kerns = {"plain": module.get_function("l2_read"), "ilp4": module.get_function("l2_read_ilp4")}
    sink = cp.zeros(4, dtype=cp.int32)
    rows = []

    def bench(nbytes: int, reps: int, grid: int, block: int, repeats: int = 30, variant: str = "plain") -> tuple[float, float]:
        kern = kerns[variant]
        n_vec = nbytes // 16
        buf = cp.random.randint(0, 1 << 30, size=nbytes // 4, dtype=cp.int32)
        args_ = (buf, np.int64(n_vec), np.int32(reps), sink)
        for _ in range(3):
            kern((grid,), (block,), args_)
        dev.synchronize()
        times = []
        for _ in range(repeats):
            s, e = cp.cuda.Event(), cp.cuda.Event()
            s.record()
            kern((grid,), (block,), args_)
            e.record()
            e.synchronize()
            times.append(cp.cuda.get_elapsed_time(s, e) * 1e-3)
        del buf
        t = float(np.median(times))
        return n_vec * 16 * reps / t, t

    configs = []
    if args.only_ilp:
        for mib in (16, 32, 48):
            configs.append(("l2_read_all_sms_ilp4", mib << 20, 40, sms * 16, 256, "ilp4"))
            configs.append(("l2_read_all_sms_ilp4_x2048", mib << 20, 40, sms * 2, 1024, "ilp4"))
        configs.append(("hbm_read_all_sms_ilp4", 4 << 30, 1, sms * 16, 256, "ilp4"))
        for mib in (8, 16):
            configs.append(("l2_read_one_sm_ilp4", mib << 20, 8, 1, 1024, "ilp4"))
            configs.append(("l2_read_one_sm_ilp4_2blocks", mib << 20, 8, 2, 1024, "ilp4"))
    else:
        for mib in (2, 4, 8, 16, 24, 32, 40, 48):
            configs.append(("l2_read_all_sms", mib << 20, 20, sms * 8, 256, "plain"))
        configs.append(("hbm_read_all_sms", 4 << 30, 1, sms * 8, 256, "plain"))
        for mib in (4, 16):
            configs.append(("l2_read_one_sm", mib << 20, 4, 1, 1024, "plain"))
        configs.append(("hbm_read_one_sm", 256 << 20, 1, 1, 1024, "plain"))
        for blocks in (sms // 4, sms // 2, sms, 2 * sms):
            configs.append((f"l2_read_{blocks}_blocks_x1024", 16 << 20, 20, blocks, 1024, "plain"))
    for name, nbytes, reps, grid, block, variant in configs:
        bw, t = bench(nbytes, reps, grid, block, variant=variant)
        rows.append({"name": name, "params": f"bytes={nbytes} passes={reps} grid={grid} block={block}",
                     "value": round(bw / 1e9, 2), "unit": "GB/s",
                     "notes": f"median kernel time {t * 1e3:.4f} ms over 30 repeats; 16-byte __ldcg loads"})
        print(f"{name:32s} {nbytes / 2**20:8.0f} MiB grid {grid:5d}x{block:<5d} {bw / 1e9:9.1f} GB/s", flush=True)
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.sm,clocks.mem",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=10).stdout.strip()
    except Exception as exc:  # noqa: BLE001 - best effort metadata
        smi = f"unavailable: {exc}"
    rows.append({"name": "env", "params": "", "value": "", "unit": "",
                 "notes": json.dumps({"nvidia_smi": smi, "cupy": cp.__version__, "sms": sms})})
    write_micro_csv(out / args.csv_name, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
