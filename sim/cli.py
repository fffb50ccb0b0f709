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
from .results import _json_default


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
    """A table in the one number format of every human-readable output
    (:func:`sim.results.format_number`: thousands separators, SI units for bytes)."""
    import pandas as pd

    from .results import format_number

    df = pd.DataFrame(rows)
    if columns:
        df = df[[c for c in columns if c in df.columns]]
    for c in df.columns:
        df[c] = [format_number(v, str(c)) for v in df[c]]
    with pd.option_context("display.max_columns", None, "display.width", 200):
        print(df.to_string(index=False), file=file or sys.stdout)


def _print_kv(d: dict, file=None) -> None:
    from .results import format_number

    width = max(len(k) for k in d) if d else 0
    for k, v in d.items():
        print(f"  {k:<{width}}  {format_number(v, k)}", file=file or sys.stdout)


def note(args, msg: str) -> None:
    """A remark on stderr (a default chosen, a fallback taken); silent under ``-q``."""
    if not getattr(args, "quiet", False):
        print(f"note: {msg}", file=sys.stderr)


# ----------------------------------------------------------------------------- commands


def cmd_gemm(args) -> int:
    from .api import simulate_gemm

    from .inference import DEFAULT_DTYPES, default_dtype

    chip = _chip_from_args(args)
    dtype = args.dtype
    if dtype is None:  # as `sim run` does: the first usual format the chip computes
        dtype = default_dtype(chip)
        if dtype != DEFAULT_DTYPES[0]:
            note(args, f"--dtype not given: using {dtype}, the first of {', '.join(DEFAULT_DTYPES)} that "
                       f"{chip.name} computes")
    r = simulate_gemm(chip, m=args.m, k=args.k, n=args.n, count=args.count, dtype=dtype,
                      weight_dtype=args.weight_dtype, sparsity=args.sparsity, dataflow=args.dataflow,
                      memory=args.memory, row_length=args.row_length, fidelity=args.fidelity)
    if args.json:
        print(json.dumps({"dtype": dtype, **r.to_dict()}, default=_json_default))
        return 0
    m = r.mapping
    comp = m.get("compute", {})
    print(f"GEMM {args.m}x{args.k}x{args.n} ({dtype}) on {chip.name}: {comp.get('rows')}x{comp.get('cols')} "
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

    checked: list = []
    problems = check_files(args.files, checked=checked)
    if problems:
        for p in problems:
            print(p, file=sys.stderr)
        return 2
    kinds: dict[str, int] = {}
    for _path, kind in checked:
        kinds[kind] = kinds.get(kind, 0) + 1
    if getattr(args, "verbose", 0):
        for path, kind in checked:
            print(f"  {path}: {kind}")
    print(f"ok: {len(checked)} file(s) valid (" + ", ".join(f"{n} {k}" for k, n in kinds.items()) + ")")
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


#: the largest batch `sim run` accepts (the workload is built per sequence)
MAX_BATCH = 1 << 20


def _run_workload(args) -> int:
    from .inference import cmd_run

    for opt in ("batch", "tensor_parallel", "pipeline_parallel", "prompt_len", "new_tokens"):
        v = getattr(args, opt, None)
        if v is not None and v < (0 if opt == "new_tokens" else 1):
            raise SimError(f"--{opt.replace('_', '-')} must be >= {0 if opt == 'new_tokens' else 1}, got {v}")
    if args.batch > MAX_BATCH:
        raise SimError(f"--batch {args.batch:,} is above the limit of {MAX_BATCH:,} sequences")
    from .api import check_limits
    from .config.registry import load_chip

    check_limits(load_chip(args.chip, overrides=args.set or []))
    if getattr(args, "model_set", None):
        from .workload.models import load_model_spec

        args.model = load_model_spec(args.model, overrides=list(args.model_set))
    return cmd_run(args)


def cmd_show(args) -> int:
    from .api import chip_summary

    chip = _chip_from_args(args)
    info = chip_summary(chip)
    if args.json:
        print(json.dumps(info, default=_json_default))
        return 0
    print(f"{info['name']}: {info['description']}" if info.get("description") else info["name"])
    print(f"  clock {info['clock_mhz']:,g} MHz, {info['cores']:,} core(s), vector unit "
          f"{info['vector_ops_per_cycle_per_core']:,g} ops/cycle/core")
    for a in info["arrays"]:
        rates = ", ".join(f"{k} {v:g}" for k, v in a["macs_per_pe_per_cycle"].items())
        print(f"  array {a['name']}: {a['count']} x {a['rows']}x{a['cols']} per core, MACs/PE/cycle: {rates}; "
              f"dataflows {', '.join(a['dataflows'])} (default {a['default_dataflow']})"
              + ("; 2:4 sparsity" if a["sparsity_2_4"] else ""))
    print("\nmemories (inner to outer):")
    _print_table(info["memories"])
    print("\npeaks and ridge points (FLOP per DRAM byte at which compute and DRAM time are equal):")
    _print_table([{"format": r["format"], "peak_tflops": r["peak_tflops"],
                   "sparse_2_4_tflops": r.get("sparse_2_4_tflops", ""), "ridge_flop_per_byte": r["ridge_flop_per_byte"],
                   "runs_as": r["runs_as"]} for r in info["peaks"]])
    return 0


def cmd_import_model(args) -> int:
    from .api import import_hf_config

    text, spec = import_hf_config(args.config, name=args.name, source=args.source)
    if args.out:
        out = Path(args.out)
        if out.exists() and not args.force:
            raise SimError(f"--out {out} exists; pass --force to overwrite it")
        if out.exists() and not out.is_file():
            raise SimError(f"--out {out} is not a file")
        try:
            out.write_text(text, encoding="utf-8")
        except OSError as exc:
            raise SimError(f"cannot write {out}: {exc.strerror or exc}") from None
        note(args, f"wrote {out}: model '{spec.name}' ({spec.num_layers} layers, hidden {spec.hidden_size}); "
                   f"run it with `sim run CHIP {out}`")
    else:
        sys.stdout.write(text)
    return 0


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
    from . import __version__

    p = argparse.ArgumentParser(prog="sim", description="Cycle-level simulator of AI accelerators for LLM inference.")
    p.add_argument("--version", action="version", version=f"sim {__version__}",
                   help="print the simulator's version and exit")
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
    g.add_argument("--json", action="store_true", help="print one JSON object")
    g.set_defaults(func=cmd_gemm)

    c = sub.add_parser("check", help="validate config files (chips, dataflows, models, sweeps, software stacks)")
    c.add_argument("files", nargs="+", metavar="FILE",
                   help="config files, folders of them or chip names; each file's kind (chip, dataflow, model, "
                        "sweep or software stack) is recognised by its keys or its folder")
    c.set_defaults(func=cmd_check)

    ls = sub.add_parser("list", help="list shipped chips, dataflows, workloads or number formats")
    ls.add_argument("what", choices=["chips", "dataflows", "workloads", "formats"], help="what to list")
    ls.set_defaults(func=cmd_list)

    s = sub.add_parser("scalesim", help="run a SCALE-Sim .cfg and topology CSV; report its COMPUTE_REPORT fields and ours")
    s.add_argument("cfg", help="SCALE-Sim .cfg file ([architecture_presets], [run_presets])")
    s.add_argument("topology", help="SCALE-Sim topology CSV (convolution or 'name, M, N, K,' GEMM format)")
    s.add_argument("--format", choices=["auto", "conv", "gemm"], default="auto",
                   help="topology format (SCALE-Sim's -i conv|gemm); auto detects from the header")
    s.add_argument("--chip", default="scalesim_32x32", help="base chip for the memory system (default scalesim_32x32)")
    s.add_argument("--memory", choices=["ideal", "modeled"], default="modeled",
                   help="our own numbers with ideal or modeled memory")
    s.add_argument("--json", action="store_true", help="one JSON object per layer per line")
    s.set_defaults(func=cmd_scalesim)

    d = sub.add_parser("demo", help="the main job: default chip and workload, summary table and report folder")
    d.add_argument("--out", default="reports/demo", metavar="DIR",
                   help="report folder: per-op CSVs, summary.json, roofline.png (default reports/demo)")
    d.add_argument("--chip", default="npu_128x128", help="chip name or YAML path (default npu_128x128)")
    d.add_argument("--model", default="llama3-8b", help="model name or YAML path (default llama3-8b)")
    d.set_defaults(func=cmd_demo)

    sh = sub.add_parser("show", help="a chip's summary: peaks per number format, memories, ridge points")
    chip_opts(sh)
    sh.add_argument("--json", action="store_true", help="print one JSON object")
    sh.set_defaults(func=cmd_show)

    im = sub.add_parser("import-model", help="a Hugging Face config.json -> a workloads/ model YAML",
                        description="Convert a Hugging Face transformers config.json (Llama, Mistral, Mixtral, "
                                    "Qwen2, Gemma, Falcon, GPT-2/NeoX, ... decoder-only models) into a model YAML "
                                    "for `sim run` and sweeps, recording the source file in its 'source' key. "
                                    "The result is validated before it is written.")
    im.add_argument("config", help="the model's config.json (Hugging Face format)")
    im.add_argument("--name", default=None, help="model name (default: the folder or file name)")
    im.add_argument("--source", default=None,
                    help="what to record as the source (default: the config file's path; e.g. a Hugging Face URL)")
    im.add_argument("--out", default=None, metavar="FILE", help="write the YAML here (default: print it)")
    im.add_argument("--force", action="store_true", help="overwrite --out if it exists")
    im.set_defaults(func=cmd_import_model)

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
        from .apps.serving.cli import add_serve_parser, cmd_serve

        add_serve_parser(sub, cmd_serve)
    except ImportError:  # pragma: no cover
        pass
    try:
        from .plotting import add_plot_parser

        add_plot_parser(sub, _plot)
    except ImportError:  # pragma: no cover
        pass
    _finish_parser(sub)
    return p


#: help for options that their own registration leaves without one
_HELP = {
    ("run", "--phase"): "prefill (one pass over the prompt), decode (one step behind --context-len cached tokens) "
                        "or generate (prefill, then --new-tokens decode steps; default)",
    ("run", "--batch"): "sequences processed together (default 1)",
    ("run", "--tensor-parallel"): "chips a layer is split over (tensor parallelism; default 1)",
    ("run", "--pipeline-parallel"): "chips the layers are split over (pipeline stages; default 1)",
    ("run", "--dataflow"): "ws, os, is or rs for every GEMM (default: each array's default dataflow)",
    ("run", "--memory"): "modeled: SRAM + cycle-level DRAM timing (default); ideal: stall-free compute",
    ("plot", "kind"): "roofline, breakdown (of a run's ops), pareto or heatmap (of a sweep)",
    ("plot", "--title"): "figure title (default: from the data)",
}


def _nonempty(what: str):
    def parse(text: str) -> str:
        if not text.strip():
            raise argparse.ArgumentTypeError(f"{what} must not be empty (leave the option out for the default)")
        return text
    return parse


def _finish_parser(sub) -> None:
    """What every subcommand shares: -q/-v, help on every option, no empty --dataflow;
    `sim run` also takes --model-set."""
    for name, sp in sub.choices.items():
        opts = {o for a in sp._actions for o in a.option_strings}
        if name == "run" and "--model-set" not in opts:
            sp.add_argument("--model-set", action="append", metavar="DOTTED.KEY=VALUE",
                            help="override a model value, e.g. --model-set max_context=131072 (repeatable)")
        if "-q" not in opts:
            sp.add_argument("-q", "--quiet", action="store_true",
                            help="print only the results and errors: no progress, no notes")
        if "-v" not in opts:
            sp.add_argument("-v", "--verbose", action="count", default=0,
                            help="log what is being done on stderr (-vv: debug detail)")
        for a in sp._actions:
            key = (name, a.option_strings[0] if a.option_strings else a.dest)
            if not a.help and key in _HELP:
                a.help = _HELP[key]
            if "--dataflow" in a.option_strings and a.type is None:
                a.type = _nonempty("--dataflow")


def _setup_output(args) -> None:
    """-q: no progress bars (tqdm reads TQDM_DISABLE) and no notes; -v / -vv: logging."""
    if getattr(args, "quiet", False):
        os.environ["TQDM_DISABLE"] = "1"
    verbose = getattr(args, "verbose", 0) or 0
    if verbose:
        import logging

        logging.basicConfig(level=logging.DEBUG if verbose > 1 else logging.INFO, stream=sys.stderr,
                            format="%(levelname)s %(name)s: %(message)s")
        logging.getLogger("numba").setLevel(logging.WARNING)


#: commands that run the compiled engine
_SIMULATING = ("gemm", "run", "validate", "sweep", "scalesim", "demo", "serve")


def _compile_notice(args) -> None:
    """Say so before the first Numba compile (tens of seconds of silence otherwise)."""
    if getattr(args, "quiet", False) or getattr(args, "command", None) not in _SIMULATING:
        return
    if os.environ.get("SIM_DISABLE_JIT", "") not in ("", "0"):
        return
    try:
        import numba

        from .kernels import jit  # noqa: F401  (sets numba.config.CACHE_DIR)

        folder = Path(numba.config.CACHE_DIR) if numba.config.CACHE_DIR else None
        warm = folder is not None and folder.is_dir() and next(folder.rglob("*.nbi"), None) is not None
    except Exception:  # pragma: no cover - a notice only
        return
    if not warm:
        where = f"; they are cached in {folder}" if folder is not None else ""
        print(f"compiling kernels (first run only, about a minute){where}", file=sys.stderr, flush=True)


def _check_out(args) -> None:
    """An --out that must be a folder and names an existing file is a clear error."""
    out = getattr(args, "out", None)
    if out and args.command in ("demo", "validate", "sweep") and Path(out).exists() and not Path(out).is_dir():
        raise SimError(f"--out {out} is an existing file; {args.command} writes a folder there (choose another path)")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    debug = os.environ.get("SIM_DEBUG", "") not in ("", "0")
    # what a command sets in the environment for itself and its workers is put back after
    # it, so that main() called in-process (notebooks, tests) leaves no -q or --no-cache behind
    saved_env = {k: os.environ.get(k) for k in ("SIM_NO_CACHE", "TQDM_DISABLE")}
    _setup_output(args)
    if getattr(args, "no_cache", False):
        os.environ["SIM_NO_CACHE"] = "1"  # an environment variable, so that sweep workers inherit it
    try:
        _check_out(args)
        _compile_notice(args)
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
    except RecursionError:
        if debug:
            raise
        print("error: the input is nested too deeply to process", file=sys.stderr)
        return 2
    except OSError as exc:  # a read-only folder, a full disk, a missing directory: name the path
        if debug:
            raise
        if exc.filename:
            print(f"error: cannot access {exc.filename}: {exc.strerror or exc}", file=sys.stderr)
        else:
            print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:  # a bug: say so plainly, keep the traceback for SIM_DEBUG=1
        if debug:
            raise
        print(f"internal error: {type(exc).__name__}: {exc}\n(this is a bug in sim; rerun with SIM_DEBUG=1 "
              "for a traceback and please report it)", file=sys.stderr)
        return 3
    finally:
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
