#!/usr/bin/env python3
"""Per-call time of torch._weight_int8pack_mm (the int8 weight-only path of measure_models.py:
int8 weights [n, k], one bf16 scale per output channel) over the rows m of A, on the GPU box,
each call inside a CUDA graph (as in a model step), and the kernel's own counters.

Why: the eager stack prices this path as an fp32 GEMM (`stacks/eager_pytorch.yaml`,
weight_only.int8), but PyTorch's kernel (aten/src/ATen/native/cuda/int8mm.cu in torch 2.11) is
one thread per output element in 16x16 blocks, each walking its weight row byte by byte: the
whole-model int8 steps (`h200_models_int8wo.csv`) took 13-280x the model's time.  This measures
the kernel alone so a stack rule can price it from what it does.

    python3 validation/gpu/micro_int8mm.py            # writes $OUT/<gpu>_micro_int8mm*.{csv,json}
    python3 validation/gpu/micro_int8mm.py --strides  # $OUT/<gpu>_micro_int8mm_strides*: see STRIDE_SHAPES
    python3 validation/gpu/micro_int8mm.py --falcon   # $OUT/<gpu>_micro_int8mm_falcon*: FALCON_SHAPES, timed only
    python3 validation/gpu/micro_int8mm.py --smsp     # $OUT/<gpu>_micro_int8mm_smsp*: SMSP_SHAPES, per-SMSP counters

Timing: a graph of R calls and of 1 call, each replayed 15 times after a 100 us GPU sleep,
median; per call = (t_R - t_1)/(R-1) (validation/gpu/graph_timing.py).  The call includes
PyTorch's casts of A and the scales to fp32 and of C back to bf16 (the stack lists them as
their own kernels); `int8mm_kernel_us` is the kernel alone, from Nsight Compute (second part:
`--clock-control none`, the GPU's own clock) for the shapes in NCU_CASES.  Weights are random and
distinct per shape; timing does not depend on the values."""
import csv
import json
import os
import subprocess
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from graph_timing import per_call_us, smi  # noqa: E402

T = torch.cuda
dev = torch.device("cuda")
bf = torch.bfloat16
OUT = os.environ.get("OUT", ".")
#: (k, n) of the Llama-3-8B projections (qkv, o, gate_up, down) plus a narrow and a 70B-class one
SHAPES = [(4096, 6144), (4096, 4096), (4096, 28672), (14336, 4096), (4096, 1024), (8192, 8192)]
MS = [1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 64, 128, 256]
#: the kernel under Nsight Compute: (m, k, n)
NCU_CASES = [(m, 4096, 4096) for m in (1, 2, 4, 8, 16, 32, 64, 128)] + [(1, 14336, 4096), (16, 14336, 4096),
                                                                         (1, 4096, 28672), (16, 4096, 28672)]
NCU_METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg.per_second", "sm__cycles_elapsed.avg",
               "sm__warps_active.avg.pct_of_peak_sustained_active", "sm__warps_active.avg.per_cycle_active",
               "smsp__inst_executed.sum", "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
               "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum", "l1tex__t_sector_pipe_lsu_mem_global_op_ld_hit_rate.pct",
               "l1tex__data_pipe_lsu_wavefronts_mem_lg.sum", "l1tex__lsu_writeback_active.avg.pct_of_peak_sustained_elapsed",
               "l1tex__throughput.avg.pct_of_peak_sustained_elapsed", "lts__t_bytes.sum", "dram__bytes_read.sum",
               "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
               "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio",
               "smsp__issue_active.avg.pct_of_peak_sustained_elapsed", "launch__grid_size", "launch__block_size",
               "launch__occupancy_limit_blocks", "launch__registers_per_thread"]


def call(m: int, k: int, n: int):
    x = torch.randn(m, k, device=dev, dtype=bf)
    w = torch.randint(-128, 128, (n, k), dtype=torch.int8, device=dev)
    s = torch.rand(n, device=dev, dtype=bf) * 0.01 + 0.001
    return lambda: torch._weight_int8pack_mm(x, w, s)


def ncu_child(m: int, k: int, n: int) -> None:
    fn = call(m, k, n)
    fn()
    T.synchronize()


#: ``--strides``: why 1-8 rows run ~2x slower than the L1 allows when the weights stream from
#: DRAM with many warps.  The same kernels with the weight rows 64 or 32 bytes longer than a
#: power-of-two stride (k = 4160 / 4128 for 4096, 14400 for 14336) - if address-map conflicts
#: (L2 slices or DRAM banks) set the pace, the odd strides run faster - and the memory-side
#: counters of each (L1 misses, L2 and DRAM sectors and throughput, L1 set conflicts)
STRIDE_SHAPES = [(4096, 28672), (4160, 28672), (4128, 28672), (14336, 4096), (14400, 4096)]
STRIDE_MS = [1, 2, 4, 8, 16]
STRIDE_NCU = [(m, k, n) for m in (1, 4) for k, n in STRIDE_SHAPES] + [(8, 4096, 28672), (8, 4160, 28672)]
STRIDE_METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
                  "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                  "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum",
                  "l1tex__t_set_conflicts_pipe_lsu_mem_global_op_ld.sum",
                  "l1tex__m_xbar2l1tex_read_sectors.sum", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                  "lts__t_sectors_srcunit_tex_op_read.sum", "lts__t_sectors_srcunit_tex_op_read_lookup_miss.sum",
                  "lts__t_requests_srcunit_tex_op_read.sum", "lts__throughput.avg.pct_of_peak_sustained_elapsed",
                  "lts__t_bytes.sum", "dram__sectors_read.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                  "sm__warps_active.avg.per_cycle_active",
                  "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                  "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"]


#: ``--falcon``: Falcon-7B's weight shapes (hidden 4544: a row pitch of 8-way bank conflicts for
#: qkv, o_proj and the up projection; 18176 for down), out of sample for the bank-conflict rule
FALCON_SHAPES = [(4544, 4672), (4544, 4544), (4544, 18176), (18176, 4544)]
FALCON_MS = [1, 4, 16, 64, 128]


#: ``--smsp``: is the 1-8-row slowdown the live warps crowding one SM sub-partition?  At one row
#: only warp 0 of each 16 x 16 block lives (warps 0-1 at 4 rows, 0-3 at 8).  k = 4096, n = 16 x 132
#: x b gives b blocks per SM (b = 1, 2, 4, 6, 8, all resident at once); the per-SMSP spread of
#: issued instructions and warps (.max against .avg over the SMSPs) says where they run
SMSP_SHAPES = [(4096, 16 * 132 * b) for b in (1, 2, 4, 6, 8)]
SMSP_MS = [1, 4, 8, 16]
SMSP_NCU = ([(1, 4096, 16 * 132 * b) for b in (1, 2, 4, 6, 8)] + [(m, 4096, 16 * 132 * 8) for m in (2, 4, 8, 16)]
            + [(m, 4096, 16 * 132 * 2) for m in (4, 8)])
SMSP_METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_elapsed.avg.per_second",
                "smsp__inst_executed.max", "smsp__inst_executed.avg", "smsp__inst_executed.min",
                "smsp__warps_active.max.per_cycle_active", "smsp__warps_active.avg.per_cycle_active",
                "smsp__issue_active.max.pct_of_peak_sustained_elapsed",
                "smsp__inst_executed_pipe_lsu.max", "smsp__inst_executed_pipe_lsu.avg",
                "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                "l1tex__data_pipe_lsu_wavefronts_mem_lg.sum", "l1tex__data_pipe_lsu_wavefronts.sum",
                "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
                "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
                "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                "launch__grid_size", "launch__occupancy_limit_blocks"]


#: ``--span``: the same question by grid and by address span: one wave (1,056 blocks) over 69 or
#: 138 MB of weights, two waves (1,792 or 2,112 blocks) over 59, 69 or 117 MB
SPAN_SHAPES = [(4096, 16896), (8192, 16896), (2048, 28672), (4096, 28672), (2048, 33792), (1024, 33792)]
SPAN_MS = [1, 4]


#: ``--sched``: how many blocks run at once in a grid larger than one wave whose blocks have exited
#: warps (1,792 and 2,112 blocks) against one wave (1,056): CTAs and warps resident, launched
SCHED_NCU = [(1, 4096, 16896), (1, 2048, 33792), (1, 4096, 28672), (4, 4096, 28672), (16, 4096, 28672)]
SCHED_METRICS = ["gpu__time_duration.sum", "sm__cycles_elapsed.avg", "sm__cycles_active.avg",
                 "sm__ctas_launched.sum", "sm__ctas_launched.max", "sm__ctas_active.avg.per_cycle_active",
                 "sm__ctas_active.max.per_cycle_active", "sm__warps_launched.sum",
                 "sm__warps_active.avg.per_cycle_active", "sm__warps_active.max.per_cycle_active",
                 "l1tex__data_pipe_lsu_wavefronts.sum", "l1tex__throughput.avg.pct_of_peak_sustained_elapsed",
                 "l1tex__t_sectors_pipe_lsu_mem_global_op_ld_lookup_miss.sum", "lts__t_sectors_srcunit_tex_op_read.sum",
                 "dram__sectors_read.sum", "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio",
                 "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
                 "launch__occupancy_limit_blocks", "launch__occupancy_limit_warps",
                 "launch__occupancy_limit_registers", "launch__waves_per_multiprocessor",
                 "sm__maximum_warps_per_active_cycle_pct"]


def main() -> int:
    global SHAPES, MS, NCU_CASES, NCU_METRICS
    gpu = T.get_device_name()
    stem = ("h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu") + "_micro_int8mm"
    if "--strides" in sys.argv:
        SHAPES, MS, NCU_CASES, NCU_METRICS = STRIDE_SHAPES, STRIDE_MS, STRIDE_NCU, STRIDE_METRICS
        stem += "_strides"
    if "--smsp" in sys.argv:
        SHAPES, MS, NCU_CASES, NCU_METRICS = SMSP_SHAPES, SMSP_MS, SMSP_NCU, SMSP_METRICS
        stem += "_smsp"
    if "--span" in sys.argv:
        SHAPES, MS, NCU_CASES = SPAN_SHAPES, SPAN_MS, []
        stem += "_span"
    if "--sched" in sys.argv:
        SHAPES, MS, NCU_CASES, NCU_METRICS = [], [], SCHED_NCU, SCHED_METRICS
        stem += "_sched"
    if "--falcon" in sys.argv:
        SHAPES, MS, NCU_CASES = FALCON_SHAPES, FALCON_MS, []
        stem += "_falcon"
    env = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "driver": smi("driver_version"),
           "clocks_before": smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit"), "method": __doc__}
    rows = []
    for k, n in SHAPES:
        for m in MS:
            fn = call(m, k, n)
            reps = 6 if m * k * n <= 16 * 4096 * 28672 else 3
            t1, tc = per_call_us(fn, reps, n=15)
            rows.append((m, k, n, tc))
            print("timed", m, k, n, f"{tc:.1f} us", flush=True)
        T.empty_cache()
    env["clocks_after"] = smi("clocks.sm,clocks.mem,clocks.max.sm,power.limit,power.draw")
    with open(os.path.join(OUT, f"{stem}.csv"), "w") as f:
        f.write("m,k,n,call_us\n")
        for m, k, n, tc in rows:
            f.write(f"{m},{k},{n},{tc:.3f}\n")
    # the kernel alone, under Nsight Compute, each case in a process of its own
    ncu_rows = []
    try:
        env["ncu"] = subprocess.run(["ncu", "--version"], capture_output=True, text=True, timeout=60).stdout.strip()
    except Exception as exc:  # recorded; the timed part stands alone
        env["ncu"] = f"unavailable: {exc}"
    log = open(os.path.join(OUT, f"ncu_{stem}.log"), "w")
    for m, k, n in NCU_CASES:
        cmd = ["ncu", "--clock-control", "none", "--kernel-name", "regex:weight_int8pack", "--csv", "--page", "raw",
               "--metrics", ",".join(NCU_METRICS), sys.executable, os.path.abspath(__file__), "--child",
               str(m), str(k), str(n)]
        try:
            p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
        except Exception as exc:
            log.write(f"{m},{k},{n}: {exc}\n")
            continue
        log.write(f"=== {m} {k} {n} rc={p.returncode}\n{p.stdout}\n{p.stderr[-3000:]}\n")
        lines = [ln for ln in p.stdout.splitlines() if ln.startswith('"')]
        if len(lines) >= 3:
            head = next(csv.reader([lines[0]]))
            vals = next(csv.reader([lines[2]]))
            for name, v in zip(head, vals):
                if name in NCU_METRICS:
                    ncu_rows.append((m, k, n, name, v))
        print("ncu", m, k, n, "rc", p.returncode, flush=True)
    log.close()
    with open(os.path.join(OUT, f"{stem}_ncu.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["m", "k", "n", "metric", "value"])
        w.writerows(ncu_rows)
    with open(os.path.join(OUT, f"{stem}_env.json"), "w") as f:
        json.dump(env, f, indent=2)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "--child":
        ncu_child(*(int(a) for a in sys.argv[2:]))
        sys.exit(0)
    sys.exit(main())
