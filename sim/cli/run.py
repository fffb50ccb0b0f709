"""`sim run CHIP MODEL`: an LLM's prefill, decode step or generation on a chip
(:func:`sim.apps.inference.run_llm`, imported when the command runs)."""
from __future__ import annotations

import json

from sim.cli._common import check_formats, print_kv, print_table
from sim.errors import SimError
from sim.ir.results import _json_default
from sim.model.cost.power import POWER_TOLERANCE
from sim.spec.registry import load_chip

#: the largest batch `sim run` accepts (the workload is built per sequence)
MAX_BATCH = 1 << 20


def add_parser(sub) -> None:
    r = sub.add_parser("run", help="simulate an LLM (prefill, decode step, or generation) on a chip")
    r.add_argument("chip", help="chip YAML path or name (sim list chips)")
    r.add_argument("model", help="model YAML path or name (sim list workloads)")
    r.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE", help="override a chip value")
    r.add_argument("--phase", choices=["prefill", "decode", "generate"], default="generate")
    r.add_argument("--batch", type=int, default=1)
    r.add_argument("--prompt-len", type=int, default=None,
                   help="prompt tokens per sequence (default 2048, or fewer where the model's max_context "
                        "needs room for the new tokens: tiny's 2048 gives 1920 with 128 new tokens)")
    r.add_argument("--context-len", type=int, default=None,
                   help="decode: cached tokens (default --prompt-len); prefill: cached prefix tokens")
    r.add_argument("--new-tokens", type=int, default=128, help="generate: decode steps after the prefill")
    r.add_argument("--draft-tokens", type=int, default=0, help="decode: verify this many speculative tokens (+1)")
    r.add_argument("--dtype", default=None,
                   help="activation/compute format (default: bf16, or the chip's first of fp16, fp8, int8 "
                        "when it has no bf16 units)")
    r.add_argument("--weight-dtype", default=None, help="weight format (int8, int4, fp8, mxfp4, nvfp4, ...)")
    r.add_argument("--kv-dtype", default=None, help="KV-cache format (int8, fp8, ...)")
    r.add_argument("--sparsity", choices=["2:4", "unstructured"], default=None,
                   help="sparse weights: 2:4 structured or unstructured (no speedup on a dense array)")
    r.add_argument("--tensor-parallel", type=int, default=1)
    r.add_argument("--collective", choices=["ring", "tree"], default="ring",
                   help="algorithm of the tensor-parallel all-reduces and all-gathers")
    r.add_argument("--pipeline-parallel", type=int, default=1)
    r.add_argument("--attention", choices=["fused", "unfused"], default=None,
                   help="attention lowering (default: the chip's attention_lowering, fused unless it says)")
    r.add_argument("--stack", default=None,
                   help="software stack that turns the model's ops into kernels (stacks/*.yaml: ideal, eager_pytorch, "
                        "fused_serving, ...; default: the chip's software_stack, else ideal)")
    r.add_argument("--dataflow", default=None)
    r.add_argument("--memory", choices=["ideal", "modeled"], default="modeled")
    r.add_argument("--fidelity", choices=["high", "fast"], default="high",
                   help="fast: sample large ops more briefly (a few %% less accurate)")
    r.add_argument("--allow-overflow", action="store_true", help="simulate even if the model does not fit")
    r.add_argument("--top", type=int, default=12, help="ops shown in the breakdown table")
    r.add_argument("--json", action="store_true", help="print one JSON object")
    r.set_defaults(func=run)


def _checked_chip(args):
    """The chip of ``args`` after checking the run's arguments and limits (loaded once)."""
    for opt in ("batch", "tensor_parallel", "pipeline_parallel", "prompt_len", "new_tokens"):
        v = getattr(args, opt, None)
        if v is not None and v < (0 if opt == "new_tokens" else 1):
            raise SimError(f"--{opt.replace('_', '-')} must be >= {0 if opt == 'new_tokens' else 1}, got {v}")
    for opt in ("context_len", "draft_tokens"):  # else 'Sequence: past_tokens must be >= 0', naming no option
        v = getattr(args, opt, None)
        if v is not None and v < 0:
            raise SimError(f"--{opt.replace('_', '-')} must be >= 0, got {v}")
    if getattr(args, "phase", None) == "generate" and args.new_tokens is not None and args.new_tokens < 1:
        raise SimError(f"--new-tokens must be >= 1 for --phase generate (a prefill alone is --phase prefill), "
                       f"got {args.new_tokens}")
    if getattr(args, "top", 1) < 1:
        raise SimError(f"--top must be >= 1 (ops shown), got {args.top}")
    check_formats(args)
    if args.batch > MAX_BATCH:
        raise SimError(f"--batch {args.batch:,} is above the limit of {MAX_BATCH:,} sequences")
    from sim.apps.single_op import check_limits

    chip = load_chip(args.chip, overrides=args.set or [])
    check_limits(chip)
    return chip


def _tokens(args) -> str:
    """What each sequence of the run holds, for the header line."""
    if args.phase == "decode":
        return f"context {args.context_len if args.context_len is not None else args.prompt_len:,}"
    cached = f" behind {args.context_len:,} cached" if args.context_len else ""
    if args.phase == "prefill":
        return f"prompt {args.prompt_len:,}{cached}"
    return f"prompt {args.prompt_len:,}{cached} + {args.new_tokens:,} new tokens"


def run(args) -> int:
    from sim.apps.inference import run_llm
    from sim.model.workload.models import default_prompt_len, load_model_spec
    from sim.model.engine.lower import Options

    chip = _checked_chip(args)
    spec = load_model_spec(args.model, overrides=getattr(args, "model_set", None))  # loaded once, edits applied
    if args.prompt_len is None:  # the default, fitted to the model's context (and shown in the header)
        args.prompt_len = default_prompt_len(spec, args.phase, args.new_tokens, args.draft_tokens or 0,
                                             args.context_len)
    res = run_llm(chip, spec, phase=args.phase, batch=args.batch, prompt_len=args.prompt_len,
                  context_len=args.context_len, new_tokens=args.new_tokens, draft_tokens=args.draft_tokens,
                  dtype=args.dtype, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, sparsity=args.sparsity,
                  tensor_parallel=args.tensor_parallel, pipeline_parallel=args.pipeline_parallel,
                  collective=args.collective,
                  attention=args.attention, stack=args.stack, options=Options(dataflow=args.dataflow, memory=args.memory, fidelity=args.fidelity),
                  allow_overflow=args.allow_overflow, progress=not args.json and not getattr(args, "quiet", False))
    if args.json:
        print(json.dumps(res.to_dict(), default=_json_default))
        return 0
    p = res.precision
    print(f"{res.model} on {res.chip} ({res.phase}, batch {res.batch}, {_tokens(args)}, "
          f"{p.dtype}/{p.weight_dtype} weights/{p.kv_dtype} KV, "
          f"TP{res.parallel.tensor} PP{res.parallel.pipeline}, {res.attention} attention, "
          f"{res.stack} stack)")
    keys = ["seconds", "ttft_s", "tpot_s", "tokens_per_s", "mfu", "mbu", "energy_j", "energy_per_token_j",
            "kv_cache_bytes", "kv_cache_bytes_per_sequence"]
    # ttft_s is None for a decode step, tpot_s for a prefill: not shown
    print_kv({k: v for k in keys if (v := getattr(res, k)) is not None})
    for note in (_power_note(chip, res), _weight_only_note(res)):
        if note:
            print(note)
    keys_ = (["phase"] if res.phase == "generate" else []) + ["op", "kind", "bound"]
    seconds: dict[tuple, float] = {}
    for r in res.ops:
        key = tuple(r[k] for k in keys_)
        seconds[key] = seconds.get(key, 0.0) + r["total_seconds"]
    total = sum(seconds.values())
    top = sorted(seconds.items(), key=lambda kv: -kv[1])[:args.top]   # ties in the order the ops first run
    print("\nbiggest ops:")
    print_table([dict(zip(keys_, key), total_seconds=s, share=s / total if total else float("nan")) for key, s in top])
    return 0


def _weight_only_note(res) -> str:
    """A note when the run's weight-only GEMMs take the stack's one-thread-per-output kernel
    (eager PyTorch's torch._weight_int8pack_mm): far slower than a weight stream, which a user
    asking what int8 weights buy may not expect from the chip's default stack."""
    from sim.model.stacks import load_stack

    wdt = res.precision.weight_dtype
    try:
        stack = load_stack(res.stack)
    except SimError:
        return ""
    rule = stack.gemm.weight_only.get(wdt) if wdt else None
    if rule is None or rule.thread_per_output is None:
        return ""
    gemm_s = sum(r["total_seconds"] for r in res.ops if r.get("kind") == "gemm")
    total_s = sum(r["total_seconds"] for r in res.ops)
    share = f" (GEMMs: {gemm_s / total_s:.0%} of the op time here)" if total_s else ""
    return (f"note: on the {res.stack} stack {wdt} weight-only GEMMs run PyTorch's one-thread-per-output "
            f"kernel (torch._weight_int8pack_mm: no tensor cores, byte loads){share}; "
            f"a serving library's fused W8A16 kernel: --stack fused_serving")


def _power_note(chip, res) -> str:
    """A note when the run's average power per chip is above the chip's board limit, which
    only a chip whose DVFS is off can report (its ops all run at ``clock_mhz``): the answer is
    then a what-if at that clock, not what the part would sustain."""
    pw = getattr(chip, "power", None)
    chips = max(1, res.parallel.tensor * res.parallel.pipeline)
    if pw is None or pw.dvfs or not res.seconds or res.energy_j is None:
        return ""
    watts = res.energy_j / res.seconds / chips
    if watts <= pw.tdp_w * (1.0 + POWER_TOLERANCE):
        return ""
    return (f"note: {watts:,.0f} W per chip on average, above this chip's {pw.tdp_w:,g} W board limit: its "
            f"power.dvfs is off, so every op runs at clock_mhz {chip.clock_mhz:,g} MHz (--set power.dvfs=true "
            f"lowers each op's clock until its power fits)")
