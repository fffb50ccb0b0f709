"""How busy the tensor pipes are in cuBLAS / cuSPARSELt GEMMs of every size, from the counters
(``--set simt``: the FMA pipe and the warp stall reasons of cuBLAS's fp32 SIMT kernels).

Why: ``h200_sxm.yaml``'s L2 bandwidth (``l2.bytes_per_cycle: 4251``) is a calibration below what
the counters say the L2 delivers (>= 11.2 TB/s at 1.705 GHz in cuSPARSELt's 2:4 kernel).  With
the measured L2 the model runs large dense GEMMs 7-9 % faster than Nsight Compute timed them at
their own SM clock, and with the calibrated one mid-size bf16 GEMMs (M = 256-1,024) and the 2:4
kernels run too slowly.  What a large dense GEMM loses inside the SM is read here directly: the
share of the kernel's cycles its tensor pipe (wgmma on Hopper, mma.sync for sm80-class kernels)
was active, next to the SM clock, the L2 traffic and the kernel time.  Hopper's SMs and L2 are
the same die on the H100 and the H200, so either GPU answers.

    python3 validation/gpu/micro_tensor_pipe.py --out DIR [--stem h100_micro_tensor_pipe] [--set simt|occupancy]

It lists the tensor metrics this ncu knows (DIR/ncu_tensor_metrics.txt), keeps those of
WANTED that exist, and runs validation/gpu/micro_l2_counters.py with them
(MICRO_L2_METRICS) over GEMMS (MICRO_L2_GEMMS): DIR/<stem>.csv (one row per workload and
metric), DIR/<stem>_timed.csv (back to back, nvidia-smi's SM clock), DIR/<stem>_env.json.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))

#: dtype:m:k:n, F.linear(x[m,k], W[n,k]) as validation/gpu/measure.py builds them: dense bf16
#: from decode-like to large, the 2:4 path at three sizes, fp8 (torch._scaled_mm) at two
GEMMS = ("bf16:256:4096:4096,bf16:512:4096:11008,bf16:1024:4544:4672,bf16:2048:4096:4096,"
         "bf16:4096:4096:4096,bf16:4096:4096:14336,bf16:8192:8192:8192,"
         "bf16_2:4:512:5120:7168,bf16_2:4:4096:4096:14336,bf16_2:4:11408:8192:8192,"
         "fp8:4096:4096:4096,fp8:8192:8192:8192")
#: ``--set simt``: fp32 GEMMs (TF32 off) that cuBLAS runs on its SIMT kernels, the small and
#: short-k ones the model prices 25-40 % fast (README, "FP32 GEMMs") and large ones it prices well
SIMT_GEMMS = ("fp32:200:256:896,fp32:640:357:692,fp32:4608:320:1216,fp32:4992:704:448,fp32:3615:192:7568,"
              "fp32:512:192:4800,fp32:48:1536:1536,fp32:384:4096:4096,fp32:2558:2048:8192,fp32:6768:2048:8192")
def _stalls(*reasons: str) -> list[tuple[str, str]]:
    """Nsight Compute's warp stall reasons as (metric, roll-up): warps stalled per issuing cycle."""
    return [(f"smsp__average_warps_issue_stalled_{r}_per_issue_active", ".ratio") for r in reasons]


#: what a barrier-synchronised k-step loop spends its cycles on: the FMA pipe's share, issue
#: activity, occupancy and the warp stall reasons (warps stalled per issuing cycle)
SIMT_WANTED = [
    ("gpu__time_duration", ".sum"),
    ("sm__cycles_elapsed", ".avg.per_second"),
    ("sm__cycles_elapsed", ".avg"),
    ("sm__cycles_active", ".avg"),
    ("sm__pipe_fma_cycles_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__inst_executed_pipe_fma", ".sum"),
    ("smsp__issue_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__warps_active", ".avg.pct_of_peak_sustained_active"),
    *_stalls("barrier", "long_scoreboard", "short_scoreboard", "mio_throttle", "math_pipe_throttle", "wait",
             "not_selected", "dispatch_stall"),
    ("launch__grid_size", ""),
    ("launch__block_size", ""),
]
#: ``--set occupancy``: every fp32 kernel family cuBLAS runs on the case sets' shapes (the SIMT
#: tiles 32x32 to 128x256, CUTLASS's simt_sgemm, gemv2T for m = 1, gemmSN for m = 2-8)
OCC_GEMMS = ("fp32:200:256:896,fp32:640:357:692,fp32:12:1360:552,fp32:48:1536:1536,fp32:768:1024:8192,"
             "fp32:384:4096:4096,fp32:256:4096:32768,fp32:1024:704:3200,fp32:4:96:472,fp32:32:1171:292,"
             "fp32:64:3584:3584,fp32:64:5120:27648,fp32:16:4096:4096,fp32:1:4096:4096,fp32:2:5120:5120,"
             "fp32:5:4864:896,fp32:3:2023:6794")
#: how many blocks of each kernel an SM holds at once and what limits it (registers, shared
#: memory, warps, blocks), the occupancy reached, and the L2 / DRAM traffic of their k-steps
#: of 8 (32-byte rows of a k-major operand per step)
OCC_WANTED = [
    ("gpu__time_duration", ".sum"),
    ("sm__cycles_elapsed", ".avg.per_second"),
    ("launch__registers_per_thread", ""),
    ("launch__shared_mem_per_block_static", ""),
    ("launch__shared_mem_per_block_dynamic", ""),
    ("launch__occupancy_limit_registers", ""),
    ("launch__occupancy_limit_shared_mem", ""),
    ("launch__occupancy_limit_warps", ""),
    ("launch__occupancy_limit_blocks", ""),
    ("sm__maximum_warps_per_active_cycle_pct", ""),
    ("sm__warps_active", ".avg.pct_of_peak_sustained_active"),
    ("lts__t_bytes", ".sum"),
    ("lts__t_sector_hit_rate", ".pct"),
    ("dram__bytes_read", ".sum"),
    ("launch__grid_size", ""),
    ("launch__block_size", ""),
]
#: ``--set sparse``: cuSPARSELt's one 2:4 kernel (128x256x64 tiles) over a few rows (m = 8, 128)
#: against a full tile's (256) and two (512) at k = 8192, n = 16384, and dense bf16 at 8 and 256
#: rows: m = 8 takes ~2x m = 256 on the same grid and traffic (h100_micro_sparse_counters.csv),
#: which the model prices as one full tile (README, Known limitations: 2:4 with few rows)
SPARSE_GEMMS = ("bf16_2:4:8:8192:16384,bf16_2:4:128:8192:16384,bf16_2:4:256:8192:16384,bf16_2:4:512:8192:16384,"
                "bf16:8:8192:16384,bf16:256:8192:16384")
#: where a warp-specialised TMA + wgmma kernel's cycles go: the tensor pipe, issue activity and
#: every warp stall reason (warps stalled per issuing cycle), the bytes the SMs took from L2
SPARSE_WANTED = [
    ("gpu__time_duration", ".sum"),
    ("sm__cycles_elapsed", ".avg.per_second"),
    ("sm__cycles_active", ".avg"),
    ("sm__pipe_tensor_op_gmma_cycles_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__pipe_tensor_cycles_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__inst_executed_pipe_tensor_op_gmma", ".sum"),
    ("smsp__inst_executed", ".sum"),
    ("smsp__issue_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("l1tex__m_xbar2l1tex_read_bytes", ".sum"),
    ("lts__t_bytes", ".sum"),
    ("dram__bytes_read", ".sum"),
    ("launch__grid_size", ""),
    ("launch__block_size", ""),
    *_stalls("barrier", "long_scoreboard", "short_scoreboard", "wait", "sleeping", "membar", "mio_throttle",
             "math_pipe_throttle", "lg_throttle", "tex_throttle", "no_instruction", "dispatch_stall",
             "branch_resolving", "misc", "drain", "imc_miss", "not_selected", "selected"),
]
#: metric base names (with the roll-up and ratio asked for each); a name this ncu does not list
#: is left out (its absence is in the log)
WANTED = [
    ("gpu__time_duration", ".sum"),
    ("sm__cycles_elapsed", ".avg.per_second"),
    ("sm__cycles_elapsed", ".avg"),
    ("sm__cycles_active", ".avg"),
    ("sm__pipe_tensor_op_gmma_cycles_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__pipe_tensor_op_gmma_cycles_active", ".avg.pct_of_peak_sustained_active"),
    ("sm__pipe_tensor_op_hmma_cycles_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__pipe_tensor_cycles_active", ".avg.pct_of_peak_sustained_elapsed"),
    ("sm__inst_executed_pipe_tensor_op_gmma", ".sum"),
    ("sm__warps_active", ".avg.pct_of_peak_sustained_active"),
    ("lts__t_bytes", ".sum"),
    ("lts__cycles_elapsed", ".avg.per_second"),
    ("dram__bytes_read", ".sum"),
    ("launch__grid_size", ""),
    ("launch__cluster_dim_x", ""),
]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--stem", default="h100_micro_tensor_pipe")
    ap.add_argument("--seconds", type=float, default=0.5)
    ap.add_argument("--set", choices=("tensor", "simt", "occupancy", "sparse"), default="tensor",
                    help="which GEMMs and counters")
    args = ap.parse_args(argv)
    wanted, gemms = {"simt": (SIMT_WANTED, SIMT_GEMMS), "occupancy": (OCC_WANTED, OCC_GEMMS),
                     "sparse": (SPARSE_WANTED, SPARSE_GEMMS)}.get(args.set, (WANTED, GEMMS))
    os.makedirs(args.out, exist_ok=True)
    listed = subprocess.run(["ncu", "--query-metrics"], capture_output=True, text=True, timeout=120).stdout
    names = {line.split()[0] for line in listed.splitlines() if line.strip() and "__" in line.split()[0]}
    with open(os.path.join(args.out, "ncu_tensor_metrics.txt"), "w") as f:
        f.write("\n".join(sorted(n for n in names if any(w in n for w in ("tensor", "gmma", "hmma", "fma", "stalled"))))
                + "\n")
    metrics = [b + s for b, s in wanted if b in names or b.startswith(("launch__", "sm__maximum"))]
    print("metrics asked:", metrics, "missing:", [b for b, _ in wanted if b not in names and not b.startswith("launch__")],
          flush=True)
    env = dict(os.environ, MICRO_L2_METRICS=",".join(metrics), MICRO_L2_GEMMS=os.environ.get("MICRO_L2_GEMMS", gemms),
               MICRO_L2_STEM=args.stem)
    return subprocess.run([sys.executable, os.path.join(HERE, "micro_l2_counters.py"), "--out", args.out,
                           "--seconds", str(args.seconds)], env=env).returncode


if __name__ == "__main__":
    sys.exit(main())
