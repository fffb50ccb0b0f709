"""Command line: a thin front end over the public API.

Every user error (bad config, impossible shape, unknown name) is printed as one clear
message and exits with status 2 - never a traceback.  ``SIM_DEBUG=1`` shows tracebacks.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any, Callable

from .errors import SimError


def _chip_from_args(args) -> Any:
    from .config.registry import load_chip

    overrides = list(getattr(args, "set", None) or [])
    arr = getattr(args, "array", None)
    if arr:
        try:
            rows, cols = (int(x) for x in arr.lower().split("x"))
        except ValueError:
            raise SimError(f"--array must look like ROWSxCOLS (e.g. 128x128), got '{arr}'") from None
        overrides += [f"cores.arrays.0.rows={rows}", f"cores.arrays.0.cols={cols}"]
    return load_chip(args.chip, overrides=overrides)


def _print_table(rows: list[dict], columns: list[str] | None = None, file=None) -> None:
    import pandas as pd

    df = pd.DataFrame(rows)
    if columns:
        df = df[[c for c in columns if c in df.columns]]
    with pd.option_context("display.max_columns", None, "display.width", 200, "display.float_format",
                           lambda v: f"{v:,.4g}"):
        print(df.to_string(index=False), file=file or sys.stdout)


def _print_kv(d: dict, file=None) -> None:
    width = max(len(k) for k in d) if d else 0
    for k, v in d.items():
        if isinstance(v, float):
            v = f"{v:,.6g}"
        print(f"  {k:<{width}}  {v}", file=file or sys.stdout)


# ----------------------------------------------------------------------------- commands


def cmd_gemm(args) -> int:
    from .api import simulate_gemm

    chip = _chip_from_args(args)
    r = simulate_gemm(chip, m=args.m, k=args.k, n=args.n, count=args.count, dtype=args.dtype,
                      weight_dtype=args.weight_dtype, sparsity=args.sparsity, dataflow=args.dataflow,
                      memory=args.memory, row_length=args.row_length, fidelity=args.fidelity)
    if args.json:
        print(r.to_json())
        return 0
    m = r.mapping
    comp = m.get("compute", {})
    print(f"GEMM {args.m}x{args.k}x{args.n} ({args.dtype}) on {chip.name}: {comp.get('rows')}x{comp.get('cols')} "
          f"array, dataflow {comp.get('dataflow')}, memory {r.memory}")
    _print_kv({
        "cycles": r.cycles, "compute_cycles": r.compute_cycles, "stall_cycles": r.stall_cycles,
        "seconds": r.seconds, "utilization": r.utilization, "macs": r.macs,
        "dram_read_bytes": r.dram_read_bytes, "dram_write_bytes": r.dram_write_bytes,
        "energy_pj": r.energy_pj, "bound": r.bound, "traffic_bound": r.traffic_bound, "roofline_cycles": r.roofline_cycles,
        "mapping": f"{m['distribution']} on {m['cores_used']} core(s), tiles {m['tile_m']}x{m['tile_n']}x{m['tile_k']} "
                   f"(m x n x k), order {m['loop_order']}, {m['search_space']} candidates searched",
    })
    return 0


def cmd_check(args) -> int:
    from .config.registry import check_files

    problems = check_files(args.files)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    print(f"ok: {len(args.files)} file(s) valid")
    return 0


def cmd_list(args) -> int:
    what = args.what
    if what == "chips":
        from .config.registry import list_chips

        names = list_chips()
    elif what == "dataflows":
        from .dataflow import list_dataflows

        names = list_dataflows()
    elif what == "workloads":
        from .workload.models import list_models

        names = list_models()
    elif what == "formats":
        from .dtypes import format_names

        names = format_names()
    else:  # pragma: no cover - argparse restricts choices
        raise SimError(f"unknown list '{what}'")
    for n in names:
        print(n)
    return 0


def cmd_scalesim(args) -> int:
    from .scalesim_compat import run_scalesim

    rows = run_scalesim(args.cfg, args.topology, topology_format=args.format, chip=args.chip,
                        memory=args.memory)
    if args.json:
        for r in rows:
            print(json.dumps(r))
        return 0
    _print_table(rows, ["layer", "dataflow", "m", "n", "k", "scalesim_total_cycles", "scalesim_stall_cycles",
                        "overall_util_pct", "mapping_efficiency_pct", "compute_util_pct", "cycles", "stall_cycles",
                        "dram_read_bytes", "energy_pj"])
    return 0


def cmd_demo(args) -> int:
    from .demo import run_demo

    run_demo(Path(args.out), chip=args.chip, model=args.model)
    return 0


def _run_workload(args) -> int:
    from .inference import cmd_run

    return cmd_run(args)


def _validate(args) -> int:
    from .validation import cmd_validate

    return cmd_validate(args)


def _sweep(args) -> int:
    from .sweep import cmd_sweep

    return cmd_sweep(args)


def _plot(args) -> int:
    from .plotting import cmd_plot

    return cmd_plot(args)


# ----------------------------------------------------------------------------- parser


def cmd_cache(args) -> int:
    import dataclasses

    from .engine import run_cache

    if args.action == "clear":
        removed = run_cache.clear()
        print(f"removed {removed:,} cached engine run(s) from {run_cache.cache_dir()}")
        return 0
    info = run_cache.info()
    if args.json:
        print(json.dumps(dataclasses.asdict(info)))
        return 0
    print(f"engine-run cache at {info.folder} ({'on' if info.enabled else 'off: SIM_NO_CACHE is set'})")
    _print_kv({"runs": f"{info.runs:,} ({info.runs_this_version:,} of this physics version {info.physics_version})",
               "size": f"{info.size_bytes / 2**20:,.1f} MiB of {info.limit_bytes / 2**20:,.0f} MiB "
                       "(SIM_CACHE_MAX_MB; least recently used runs go first)"})
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sim", description="Cycle-level simulator of AI accelerators for LLM inference.")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the on-disk cache of engine runs (same answers, computed afresh)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True

    cc = sub.add_parser("cache", help="the on-disk cache of engine runs: where it is, how big, clear it")
    cc.add_argument("action", choices=["info", "clear"], help="info: folder, runs and size; clear: delete every run")
    cc.add_argument("--json", action="store_true", help="print one JSON object")
    cc.set_defaults(func=cmd_cache)

    def chip_opts(sp):
        sp.add_argument("chip", help="chip YAML path or a name from arch_configs/ (see `sim list chips`)")
        sp.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE",
                        help="override a chip config value, e.g. --set clock_mhz=1400 (repeatable)")

    g = sub.add_parser("gemm", help="simulate one GEMM C[m×n] = A[m×k]·B[k×n]")
    chip_opts(g)
    g.add_argument("--m", type=int, required=True)
    g.add_argument("--k", type=int, required=True)
    g.add_argument("--n", type=int, required=True)
    g.add_argument("--count", type=int, default=1, help="independent GEMMs of this shape (batched)")
    g.add_argument("--array", metavar="ROWSxCOLS", help="override the (first) array's size")
    g.add_argument("--dataflow", help="ws, os, is or rs (default: the array's default)")
    g.add_argument("--row-length", type=int, default=None, help="RS: weight row segment length per PE")
    g.add_argument("--dtype", default="bf16", help="input/compute format (bf16, fp16, fp32, fp8, int8, fp4, ...)")
    g.add_argument("--weight-dtype", default=None, help="weight storage format (default: --dtype)")
    g.add_argument("--sparsity", choices=["2:4", "unstructured"], default=None,
                   help="sparse weights: 2:4 structured (compressed, 2:4 units skip half the MACs) or "
                        "unstructured (no speedup on a dense array)")
    g.add_argument("--memory", choices=["ideal", "modeled"], default="modeled",
                   help="ideal: stall-free compute cycles (SCALE-Sim comparable); modeled: SRAM + HBM timing")
    g.add_argument("--fidelity", choices=["high", "fast"], default="high",
                   help="fast: sample large problems more briefly (a few %% less accurate)")
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=cmd_gemm)

    c = sub.add_parser("check", help="validate config files (chips, dataflows, models, sweeps)")
    c.add_argument("files", nargs="+")
    c.set_defaults(func=cmd_check)

    ls = sub.add_parser("list", help="list shipped chips, dataflows, workloads or number formats")
    ls.add_argument("what", choices=["chips", "dataflows", "workloads", "formats"])
    ls.set_defaults(func=cmd_list)

    s = sub.add_parser("scalesim", help="run a SCALE-Sim .cfg and topology CSV; report its COMPUTE_REPORT fields and ours")
    s.add_argument("cfg")
    s.add_argument("topology")
    s.add_argument("--format", choices=["auto", "conv", "gemm"], default="auto",
                   help="topology format (SCALE-Sim's -i conv|gemm); auto detects from the header")
    s.add_argument("--chip", default="scalesim_32x32", help="base chip for the memory system (default scalesim_32x32)")
    s.add_argument("--memory", choices=["ideal", "modeled"], default="modeled",
                   help="our own numbers with ideal or modeled memory")
    s.add_argument("--json", action="store_true", help="one JSON object per layer per line")
    s.set_defaults(func=cmd_scalesim)

    d = sub.add_parser("demo", help="the main job: default chip and workload, summary table and report folder")
    d.add_argument("--out", default="reports/demo")
    d.add_argument("--chip", default="npu_128x128")
    d.add_argument("--model", default="llama3-8b")
    d.set_defaults(func=cmd_demo)

    from .inference import add_run_parser

    add_run_parser(sub, _run_workload)
    try:
        from .validation import add_validate_parser

        add_validate_parser(sub, _validate)
    except ImportError:  # pragma: no cover - during development
        pass
    try:
        from .sweep import add_sweep_parser

        add_sweep_parser(sub, _sweep)
    except ImportError:  # pragma: no cover
        pass
    try:
        from .plotting import add_plot_parser

        add_plot_parser(sub, _plot)
    except ImportError:  # pragma: no cover
        pass
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = os.environ.get("SIM_DEBUG", "") not in ("", "0")
    saved_no_cache = os.environ.get("SIM_NO_CACHE")
    if getattr(args, "no_cache", False):
        os.environ["SIM_NO_CACHE"] = "1"  # an environment variable, so that sweep workers inherit it
    try:
        return int(args.func(args) or 0)
    except SimError as exc:
        if debug:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # a bug: say so plainly, keep the traceback for SIM_DEBUG=1
        if debug:
            raise
        print(f"internal error: {type(exc).__name__}: {exc}\n(this is a bug in sim; rerun with SIM_DEBUG=1 "
              "for a traceback and please report it)", file=sys.stderr)
        return 3
    finally:
        if saved_no_cache is None:
            os.environ.pop("SIM_NO_CACHE", None)
        else:
            os.environ["SIM_NO_CACHE"] = saved_no_cache


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
