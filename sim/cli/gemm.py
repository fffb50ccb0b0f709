"""`sim gemm CHIP --m --k --n`: one GEMM on a chip."""
from __future__ import annotations

import json

from sim.cli._common import check_formats, chip_from_args, chip_options, engine_progress, note, print_kv
from sim.errors import SimError
from sim.ir.results import _json_default


def add_parser(sub) -> None:
    g = sub.add_parser("gemm", help="simulate one GEMM C[m×n] = A[m×k]·B[k×n]")
    chip_options(g)
    g.add_argument("--m", type=int, required=True, help="rows of A and C (tokens, for an LLM layer)")
    g.add_argument("--k", type=int, required=True, help="the reduction dimension (columns of A, rows of B)")
    g.add_argument("--n", type=int, required=True, help="columns of B and C (output features)")
    g.add_argument("--count", type=int, default=1, help="independent GEMMs of this shape (batched)")
    g.add_argument("--array", metavar="ROWSxCOLS", help="override the (first) array's size")
    g.add_argument("--dataflow", help="ws, os, is or rs (default: the array's default)")
    g.add_argument("--row-length", type=int, default=None, help="RS: weight row segment length per PE")
    g.add_argument("--dtype", default=None,
                   help="input/compute format (bf16, fp16, fp32, fp8, int8, fp4, ...; `sim list formats`); default: "
                        "the first of bf16, fp16, fp8, int8, fp32 that the chip computes, as `sim run` does")
    g.add_argument("--weight-dtype", default=None, help="weight storage format (default: --dtype)")
    g.add_argument("--sparsity", choices=["2:4", "unstructured"], default=None,
                   help="sparse weights: 2:4 structured (compressed, 2:4 units skip half the MACs) or "
                        "unstructured (no speedup on a dense array)")
    g.add_argument("--memory", choices=["ideal", "modeled"], default="modeled",
                   help="ideal: stall-free compute cycles (SCALE-Sim comparable); modeled: SRAM + HBM timing")
    g.add_argument("--fidelity", choices=["high", "fast"], default="high",
                   help="fast: sample large problems more briefly (a few %% less accurate)")
    g.add_argument("--stack", default=None,
                   help="software stack whose kernels price the GEMM (stacks/*.yaml: ideal, eager_pytorch, ...; "
                        "default: the chip's software_stack, else ideal, the GEMM as one kernel)")
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=run)


#: a GEMM this large says, before it starts, that it is sampled and may take a while
HUGE_NOTE_MACS = 10 ** 14


def run(args) -> int:
    from sim.apps.inference import DEFAULT_DTYPES, default_dtype
    from sim.apps.single_op import MAX_OP_MACS, simulate_gemm

    check_formats(args)
    if args.row_length is not None and args.row_length < 1:  # was taken silently (0, -1)
        raise SimError(f"--row-length must be >= 1 (weights per PE row segment), got {args.row_length}")
    chip = chip_from_args(args)
    dtype = args.dtype
    if dtype is None:  # as `sim run` does: the first usual format the chip computes
        dtype = default_dtype(chip)
        if dtype != DEFAULT_DTYPES[0]:
            note(args, f"--dtype not given: using {dtype}, the first of {', '.join(DEFAULT_DTYPES)} that "
                       f"{chip.name} computes")
    macs = args.m * args.k * args.n * args.count
    if HUGE_NOTE_MACS <= macs <= MAX_OP_MACS:
        # ~4-13 s for 10^15 MACs on the shipped chips, up to ~2 min at the 10^17 limit (2-core machine)
        note(args, f"{macs:.2g} multiply-accumulates: simulated from samples of its loops and extrapolated "
                   "(seconds, up to a couple of minutes near the limit of 1e17)")
    with engine_progress(args):
        r = simulate_gemm(chip, m=args.m, k=args.k, n=args.n, count=args.count, dtype=dtype,
                          weight_dtype=args.weight_dtype, sparsity=args.sparsity, dataflow=args.dataflow,
                          memory=args.memory, row_length=args.row_length, fidelity=args.fidelity,
                          stack=args.stack)
    if args.json:
        print(json.dumps({"dtype": dtype, **r.to_dict()}, default=_json_default))
        return 0
    m = r.mapping
    comp = m.get("compute", {})
    print(f"GEMM {args.m}x{args.k}x{args.n} ({dtype}) on {chip.name}: {comp.get('rows')}x{comp.get('cols')} "
          f"array, dataflow {comp.get('dataflow')}, memory {r.memory}")
    print_kv({
        "cycles": r.cycles, "compute_cycles": r.compute_cycles, "stall_cycles": r.stall_cycles,
        "seconds": r.seconds, "utilization": r.utilization, "macs": r.macs,
        "dram_read_bytes": r.dram_read_bytes, "dram_write_bytes": r.dram_write_bytes,
        "energy_pj": r.energy_pj, "bound": r.bound, "traffic_bound": r.traffic_bound,
        "limited_by": f"{r.limited_by} (" + ", ".join(f"{k} {v / r.cycles:.0%}" for k, v in r.time_split_cycles.items()
                                                 if r.cycles and v > 0) + ")",
        "roofline_cycles": r.roofline_cycles,
        "mapping": f"{m['distribution']} on {m['cores_used']} core(s), tiles {m['tile_m']}x{m['tile_n']}x{m['tile_k']} "
                   f"(m x n x k), order {m['loop_order']}, {m['search_space']} candidates searched",
        **({"array": comp["array"]} if comp.get("array") else {}),
        # the software stack's kernels for this GEMM, when it launches more than one
        **({"stack_kernels": ", ".join(f"{k['name']} {k['seconds'] * 1e6:.2f} us" for k in r.details["stack_kernels"])}
           if r.details.get("stack_kernels") else {}),
        **({"kernel_rule": rule} if (rule := _kernel_rule(r.details)) else {}),
    })
    return 0


def _kernel_rule(details: dict) -> str:
    """What a stack's GEMM kernel rule made of the GEMM's time ('' when none applied):
    the array, tiles and limited_by above describe the engine's GEMM, not such a kernel."""
    t = details.get("thread_per_output")
    if t:
        return (f"thread_per_output (one thread per output element, no tensor cores): "
                f"{t['wavefronts_per_iteration']:g} L1 wavefronts and {t['sectors_per_iteration']} sectors per warp "
                f"iteration, {t['waves']} wave(s), at {t['boost_clock_mhz']:g} MHz ({t['source']})")
    p = details.get("partial_token_tile")
    if p and p["kernel_cycles"] > p["engine_cycles"]:
        return (f"partial_token_tile (a sparse kernel's token tile at most half full): {p['tiles']} tile(s), "
                f"{p['resident_tiles']} at once, {p['kstep_boost_cycles']:,.0f} cycles per k-step at "
                f"{p['boost_clock_mhz']:g} MHz ({p['source']})")
    w = details.get("row_work")
    if w:
        return (f"row_work: +{w['extra_cycles']:,.0f} cycles of per-row work at {w['fraction']:g} of {w['array']}'s "
                f"peak ({w['source']})")
    return ""
