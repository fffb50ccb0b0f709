"""The `sim` command: a thin front end over the apps, one module per command (this package owns
all printing and argument parsing; nothing below it prints a table).

Every user error (bad config, impossible shape, unknown name) is printed as one clear
message and exits with status 2 - never a traceback.  ``SIM_DEBUG=1`` shows tracebacks.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from sim.cli import cache, check, conv, demo, gemm, import_model, list_, plot, run, scalesim, serve, show, sweep, validate
from sim.errors import SimError
from sim.version import __version__

#: the commands, in the order `sim --help` lists them: one module each, with ``add_parser(sub)``
#: registering the command's arguments and ``run(args) -> int`` doing it (modules import the
#: apps they drive when the command runs, so `sim --help` and argument errors stay instant)
COMMANDS = (cache, gemm, conv, check, list_, scalesim, demo, show, import_model, run, validate, sweep, serve, plot)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="sim", description="Cycle-level simulator of AI accelerators for LLM inference.")
    p.add_argument("--version", action="version", version=f"sim {__version__}",
                   help="print the simulator's version and exit")
    p.add_argument("--no-cache", action="store_true",
                   help="neither read nor write the on-disk cache of engine runs (same answers, computed afresh)")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for command in COMMANDS:
        command.add_parser(sub)
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
    `sim run` and `sim serve` also take --model-set."""
    for name, sp in sub.choices.items():
        opts = {o for a in sp._actions for o in a.option_strings}
        if name in ("run", "serve") and "--model-set" not in opts:
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

        import sim.model.kernels.jit as jit  # noqa: F401  (sets numba.config.CACHE_DIR)

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


def _written_to(args) -> str:
    """Where a command writes, for an error that names no file: its output options, else its
    default output and the result cache."""
    given = [f"--{k} {v}" for k in ("out", "csv") if (v := getattr(args, k, None))]
    if given:
        return "its output (" + ", ".join(given) + ")"
    return "its output or the result cache (a full disk? choose another place with --out where the command has it)"


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
            # a write that failed part-way (a full disk) carries no file name: name where the
            # command writes ("OSError: [Errno 28] No space left on device" named nothing)
            print(f"error: {exc.strerror or exc} while writing {_written_to(args)}", file=sys.stderr)
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
