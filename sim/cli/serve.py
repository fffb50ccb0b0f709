"""`sim serve CHIP MODEL ...`: the command-line front end of :func:`sim.apps.serving.serve`."""
from __future__ import annotations

import math
import sys

from sim.errors import SimError, WorkloadError
from sim.cli._common import check_formats
from sim.spec.registry import load_chip

#: printed summary keys, in order
_SHOWN = ("requests", "finished", "dropped", "unfinished", "ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s",
          "itl_p99_s", "e2e_p50_s", "e2e_p99_s", "queue_p99_s", "throughput_req_per_s", "output_tokens_per_s",
          "output_tokens_per_s_per_chip", "goodput_req_per_s", "slo_attainment", "kv_utilisation_mean",
          "kv_utilisation_max", "batch_mean", "preemptions", "prefix_hit_rate", "energy_per_output_token_j",
          "cost_per_million_output_tokens", "mean_in_system", "queue_growth_per_s", "stable", "iterations",
          "grid_points_simulated")


def parse_lengths(text: str, what: str):
    """``N`` (fixed), ``uniform:LOW:HIGH``, ``lognormal:MEDIAN:SIGMA[:LOW:HIGH]``, ``file:PATH[:COLUMN]``;
    every error names the option and its text (``--prompt file:lens.txt: ...``)."""
    try:
        return _parse_lengths(text, what)
    except SimError as exc:
        msg = str(exc)
        raise WorkloadError(msg if msg.startswith(f"--{what}") else f"--{what} {text}: {msg}") from None


def _parse_lengths(text: str, what: str):
    from sim.apps.serving.workload import LengthDist

    t = str(text).strip()
    parts = t.split(":")
    try:
        if len(parts) == 1:
            return LengthDist("fixed", value=int(parts[0]))
        kind = parts[0]
        if kind == "uniform" and len(parts) == 3:
            return LengthDist("uniform", low=int(parts[1]), high=int(parts[2]))
        if kind == "lognormal" and len(parts) in (3, 5):
            lo, hi = (int(parts[3]), int(parts[4])) if len(parts) == 5 else (1, 1 << 20)
            median, sigma = float(parts[1]), float(parts[2])
            if not (math.isfinite(median) and median > 0 and math.isfinite(sigma)):
                raise WorkloadError(f"--{what} {text}: the median must be a finite number > 0 and the sigma finite")
            return LengthDist("lognormal", mean_log=math.log(median), sigma_log=sigma, low=lo, high=hi)
        if kind == "file" and len(parts) in (2, 3):
            return LengthDist.from_file(parts[1], parts[2] if len(parts) == 3 else None)
    except ValueError:
        pass
    raise WorkloadError(f"--{what}: expected N, uniform:LOW:HIGH, lognormal:MEDIAN:SIGMA[:LOW:HIGH] or "
                        f"file:PATH[:COLUMN], got {text!r}")


def add_parser(sub) -> None:
    s = sub.add_parser("serve", help="simulate request-level LLM serving (SimPy): batching, KV cache, TTFT/TPOT")
    s.add_argument("chip", help="chip YAML path or name (sim list chips)")
    s.add_argument("model", help="model YAML path or name (sim list workloads)")
    s.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE", help="override a chip value (repeatable)")
    w = s.add_argument_group("workload")
    w.add_argument("--rate", type=float, default=None, help="mean arrival rate, requests/s (default 8)")
    w.add_argument("--duration", type=float, default=None, help="seconds of arrivals (default 60)")
    w.add_argument("--num-requests", type=int, default=None, help="exactly this many requests (instead of --duration)")
    w.add_argument("--arrival", choices=["poisson", "gamma", "fixed"], default=None,
                   help="arrival process (default poisson)")
    w.add_argument("--cv", type=float, default=None,
                   help="gamma arrivals: coefficient of variation of the gaps (default 1)")
    w.add_argument("--prompt", default=None, help="prompt tokens: N, uniform:LO:HI, lognormal:MEDIAN:SIGMA[:LO:HI], "
                                                  "file:PATH[:COLUMN] (default 512)")
    w.add_argument("--output", default=None, help="output tokens, same forms as --prompt (default 128)")
    w.add_argument("--trace", default=None, help="replay a CSV/JSONL trace (arrival_s, prompt_tokens, output_tokens"
                                                 "[, prefix_id, prefix_tokens]) instead of generating arrivals")
    w.add_argument("--prefix-groups", type=int, default=0, help="requests share one of this many prefixes")
    w.add_argument("--prefix-tokens", type=int, default=0, help="tokens of each shared prefix")
    w.add_argument("--seed", type=int, default=0, help="seed of every random draw (default 0)")
    d = s.add_argument_group("deployment")
    d.add_argument("--scheduler", default="continuous",
                   help="static, dynamic, continuous, chunked_prefill or disaggregated (default continuous)")
    d.add_argument("--replicas", type=int, default=1, help="model replicas (default 1)")
    d.add_argument("--tensor-parallel", type=int, default=1, help="chips per replica, tensor parallel")
    d.add_argument("--router", default="least_outstanding",
                   help="round_robin, least_outstanding or prefix_affinity (default least_outstanding)")
    d.add_argument("--max-batch", type=int, default=256, help="sequences per iteration at most (default 256)")
    d.add_argument("--token-budget", type=int, default=None,
                   help="new tokens per iteration at most (chunked_prefill default 512; others max(context, 2048))")
    d.add_argument("--timeout-ms", type=float, default=None, help="dynamic batching: oldest request's wait limit")
    d.add_argument("--block-tokens", type=int, default=16, help="KV-cache block size in tokens (default 16)")
    d.add_argument("--kv-capacity-tokens", type=int, default=None,
                   help="KV-cache tokens per replica (default: chip memory x 0.9 minus weights)")
    d.add_argument("--preemption", choices=["recompute", "swap"], default="recompute", help="when the KV cache is full")
    d.add_argument("--prefix-caching", action="store_true", help="reuse cached prefixes (LRU)")
    d.add_argument("--speculative-k", type=int, default=0, help="speculative decoding: drafted tokens per step")
    d.add_argument("--alpha", default="0.7", help="acceptance rate, or a comma-separated per-position profile")
    d.add_argument("--draft-model", default=None,
                   help="draft model (costed on the target's chips unless --draft-chip); none: no draft cost")
    d.add_argument("--draft-chip", default=None,
                   help="chip YAML path or name the draft model runs on, beside each replica (default: the target's "
                        "chips, sharing their memory)")
    d.add_argument("--draft-tensor-parallel", type=int, default=1,
                   help="with --draft-chip: chips per replica the draft runs on (default 1)")
    d.add_argument("--draft-link-latency-us", type=float, default=None,
                   help="with --draft-chip: one hop between draft and target chips, us (default: the chip's "
                        "interconnect link latency)")
    d.add_argument("--prefill-replicas", type=int, default=None, help="disaggregated: replicas in the prefill pool")
    d.add_argument("--kv-link-gb-per-s", type=float, default=None,
                   help="disaggregated: KV transfer bandwidth per chip (default: the chip's interconnect)")
    d.add_argument("--dtype", default=None, help="activation format (default bf16 where the chip has it)")
    d.add_argument("--weight-dtype", default=None, help="weight format (int8, fp8, ...)")
    d.add_argument("--kv-dtype", default=None, help="KV-cache format")
    d.add_argument("--stack", default=None,
                   help="software stack whose kernels run the ops (stacks/: eager_pytorch, fused_serving, "
                        "graph_serving_loop, ideal; default: the chip's software_stack)")
    d.add_argument("--fidelity", choices=["high", "fast"], default="high", help="engine fidelity of the grid points")
    d.add_argument("--graphs", choices=["all", "decode", "none"], default="all",
                   help="which iterations replay a captured CUDA graph (padded to the stack's graph buckets, if "
                        "it has any; the rest launch kernel by kernel, at the stack's host cost per kernel): all "
                        "(default; vLLM V1, the validation loop's --graphs all), decode (decode-only ones: vLLM V0, "
                        "the validation loop's runs 1-5), none")
    o = s.add_argument_group("limits, SLOs and output")
    o.add_argument("--max-queue", type=int, default=None, help="drop arrivals when a replica has this many waiting")
    o.add_argument("--drain", type=float, default=None,
                   help="simulated seconds after the last arrival before stopping (default max(60, arrival span))")
    o.add_argument("--slo-ttft-ms", type=float, default=None, help="TTFT target for goodput")
    o.add_argument("--slo-tpot-ms", type=float, default=None, help="TPOT target for goodput")
    o.add_argument("--slo", action="append", metavar="METRIC=MS", help="any SLO: ttft, tpot, e2e or queue (repeatable)")
    o.add_argument("--price-per-chip-hour", type=float, default=None, help="$ per chip-hour, for cost per M tokens")
    o.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    o.add_argument("--out", default=None, help="write requests.csv, iterations.csv, timeline.csv, summary.json here")
    o.add_argument("--no-progress", action="store_true", help="no progress bar")
    x = s.add_argument_group("deployment search")
    x.add_argument("--search", action="append", metavar="AXIS=V1,V2,...",
                   help="simulate every combination of these deployment values on the same requests and rank them "
                        "(repeatable; axes: replicas, tensor_parallel, token_budget, scheduler (continuous, "
                        "chunked_prefill, disaggregated: aggregated vs disaggregated), prefill_replicas, max_batch, "
                        "weight_dtype, draft_chip, ... ; an axis replaces the option of the same name). Prints the "
                        "deployments best goodput per chip first, the best one and the Pareto front of output "
                        "tokens/s per chip vs tokens/s per user; --out writes search.csv and pareto.png")
    x.add_argument("--min-attainment", type=float, default=0.9,
                   help="with --search: a deployment meets the SLOs when at least this share of requests meet "
                        "every one (default 0.9)")
    s.set_defaults(func=run)


def _slos(args) -> dict:
    slos = {}
    if args.slo_ttft_ms is not None:
        slos["ttft"] = args.slo_ttft_ms / 1e3
    if args.slo_tpot_ms is not None:
        slos["tpot"] = args.slo_tpot_ms / 1e3
    for item in args.slo or []:
        k, sep, v = item.partition("=")
        if not sep:
            raise WorkloadError(f"--slo: expected METRIC=MS, got {item!r}")
        try:
            ms = float(v)
        except ValueError:
            raise WorkloadError(f"--slo {k}: {v!r} is not a number of milliseconds") from None
        slos[k.strip()] = ms / 1e3
    return slos


#: the options that describe generated arrivals (attribute, default), which a trace replaces
GENERATED_ARRIVALS = {"--rate": ("rate", 8.0), "--duration": ("duration", 60.0), "--num-requests": ("num_requests", None),
                      "--arrival": ("arrival", "poisson"), "--cv": ("cv", 1.0), "--prompt": ("prompt", "512"),
                      "--output": ("output", "128")}


def _check_args(args) -> None:
    """Numbers the serving model would take silently (a negative drain, a NaN coefficient of
    variation, an acceptance rate of 1.5) or fail on deep inside (a negative seed, 10^12
    requests): refused here, naming the option."""
    from sim.apps.serving.workload import MAX_CV, MAX_REQUESTS

    def bad(flag, value, want):
        raise WorkloadError(f"{flag} must be {want}, got {value}")

    def finite(v):
        return v is not None and math.isfinite(v)

    given = [flag for flag, (attr, _) in GENERATED_ARRIVALS.items() if getattr(args, attr) is not None]
    if args.trace is not None and given:
        # they were ignored without a word: the trace's own arrivals and lengths ran
        raise WorkloadError(f"{', '.join(given)} describe generated arrivals; --trace replays the trace's own "
                            "(give one or the other)")
    for attr, default in GENERATED_ARRIVALS.values():
        if getattr(args, attr) is None:
            setattr(args, attr, default)
    if not (finite(args.rate) and args.rate > 0):
        bad("--rate", args.rate, "a finite number of requests/s > 0")
    if not (finite(args.duration) and args.duration > 0):
        bad("--duration", args.duration, "a finite number of seconds > 0")
    if args.num_requests is not None and not 1 <= args.num_requests <= MAX_REQUESTS:
        bad("--num-requests", f"{args.num_requests:,}", f"between 1 and {MAX_REQUESTS:,} (the limit of one run)")
    if args.num_requests is None and args.trace is None and args.rate * args.duration > MAX_REQUESTS:
        raise WorkloadError(f"--rate {args.rate:g} x --duration {args.duration:g} s is "
                            f"{args.rate * args.duration:,.3g} requests, beyond the limit of {MAX_REQUESTS:,} "
                            "of one run (use a shorter --duration or --num-requests)")
    if not (finite(args.cv) and 0 < args.cv <= MAX_CV):
        bad("--cv", args.cv, f"a coefficient of variation in (0, {MAX_CV:g}]")
    if args.seed < 0:
        bad("--seed", args.seed, ">= 0")
    for flag, v in (("--prefix-groups", args.prefix_groups), ("--prefix-tokens", args.prefix_tokens),
                    ("--speculative-k", args.speculative_k)):
        if v < 0:
            bad(flag, v, ">= 0")
    if args.speculative_k > 64:
        bad("--speculative-k", args.speculative_k, "at most 64 drafted tokens per step")
    if args.draft_model is not None:
        # named even when no token is drafted (--speculative-k 0); the check sim.serve makes
        from sim.apps.serving.simulator import load_draft_model

        load_draft_model(args.draft_model, "--draft-model")
    if args.draft_chip is not None or args.draft_tensor_parallel != 1 or args.draft_link_latency_us is not None:
        if args.draft_model is None:
            raise WorkloadError("--draft-chip, --draft-tensor-parallel and --draft-link-latency-us place a draft "
                                "model; give --draft-model too")
        if args.draft_chip is None:
            raise WorkloadError("--draft-tensor-parallel and --draft-link-latency-us apply to a draft on chips of "
                                "its own; give --draft-chip too")
        if args.draft_tensor_parallel < 1:
            bad("--draft-tensor-parallel", args.draft_tensor_parallel, ">= 1")
        v = args.draft_link_latency_us
        if v is not None and not (finite(v) and v >= 0):
            bad("--draft-link-latency-us", v, "a finite number >= 0")
    for flag, v, low in (("--replicas", args.replicas, 1), ("--tensor-parallel", args.tensor_parallel, 1),
                         ("--max-batch", args.max_batch, 1), ("--token-budget", args.token_budget, 1),
                         ("--block-tokens", args.block_tokens, 1), ("--kv-capacity-tokens", args.kv_capacity_tokens, 1),
                         ("--max-queue", args.max_queue, 0), ("--prefill-replicas", args.prefill_replicas, 1)):
        if v is not None and v < low:
            bad(flag, v, f">= {low}")
    for flag, v in (("--kv-link-gb-per-s", args.kv_link_gb_per_s), ("--slo-ttft-ms", args.slo_ttft_ms),
                    ("--slo-tpot-ms", args.slo_tpot_ms)):
        if v is not None and not (finite(v) and v > 0):
            bad(flag, v, "a finite number > 0")
    for flag, v in (("--timeout-ms", args.timeout_ms), ("--drain", args.drain),
                    ("--price-per-chip-hour", args.price_per_chip_hour)):
        if v is not None and not (finite(v) and v >= 0):
            bad(flag, v, "a finite number >= 0")


#: columns ``sim serve --search`` prints (after the axes), with their headers
_SEARCH_SHOWN = {"chips": "chips", "finished": "finished", "ttft_p99_s": "TTFT p99 ms", "tpot_p50_s": "TPOT p50 ms",
                 "tpot_p99_s": "TPOT p99 ms", "output_tokens_per_s_per_chip": "tok/s/chip",
                 "tokens_per_s_per_user": "tok/s/user", "slo_attainment": "SLO met", "meets_slo": "meets",
                 "pareto": "pareto"}


def _run_search(chip, args, kw: dict, progress: bool) -> int:
    """``sim serve --search``: every combination of the axes, ranked (:func:`sim.apps.serving.search.search`)."""
    from sim.apps.serving.search import parse_axis, search

    if not 0.0 <= args.min_attainment <= 1.0:  # NaN fails both comparisons
        raise WorkloadError(f"--min-attainment must be a share between 0 and 1, got {args.min_attainment}")
    grid: dict = {}
    for text in args.search:
        name, values = parse_axis(text)
        if name in grid:
            raise WorkloadError(f"--search {name}: given twice (give every value in one --search {name}=...)")
        grid[name] = values
    slos = kw.pop("slos")
    df = search(chip, args.model, grid, slos=slos, min_attainment=args.min_attainment, progress=progress,
                model_set=getattr(args, "model_set", None), **kw)
    if args.out:
        from pathlib import Path

        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "search.csv", index=False)
        from sim.apps.serving import plots

        plots.pareto(df, out / "pareto.png")
    if args.json:
        import json

        print(json.dumps({"axes": grid, "slos_s": slos, "deployments": json.loads(df.to_json(orient="records"))}))
        return 0
    failed = df[df["error"].notna()] if "error" in df else df.iloc[:0]
    view = df.drop(failed.index)
    view = view[[c for c in list(grid) + list(_SEARCH_SHOWN) if c in view]].copy()
    for c in ("ttft_p99_s", "tpot_p50_s", "tpot_p99_s"):
        if c in view:
            view[c] = view[c] * 1e3
    view = view.rename(columns=_SEARCH_SHOWN)
    print(f"{len(df)} deployments of {args.model} on {chip.name}"
          + (f", SLOs {', '.join(f'{k} <= {v * 1e3:g} ms' for k, v in slos.items())} for "
             f">= {args.min_attainment:.0%} of requests" if slos else "") + ":")
    import pandas as pd

    with pd.option_context("display.width", 200, "display.max_columns", 40, "display.float_format", "{:,.4g}".format):
        print(view.to_string(index=False))
    for msg, g in failed.groupby("error", sort=False):
        which = "; ".join(", ".join(f"{k}={r[k]}" for k in grid if k in r and r[k] == r[k]) for _, r in g.iterrows())
        print(f"not run ({len(g)}): {msg}: {which}")
    ok = df[df["meets_slo"]]
    if len(ok):
        best = ok.iloc[0]
        what = ", ".join(f"{k}={best[k]}" for k in grid if k in best and best[k] == best[k])
        chips = f"{best['chips']:g} chip{'s' if best['chips'] != 1 else ''}"
        print(f"\nbest: {what} ({chips}, {best['output_tokens_per_s_per_chip']:,.1f} output tokens/s per chip)")
        print(f"Pareto front (tokens/s per chip vs per user): {int(df['pareto'].sum())} deployment(s)")
    else:
        print("\nno deployment meets " + ("the SLOs" if slos else "the load (every one dropped or left requests)"),
              file=sys.stderr)
    if args.out:
        print(f"\nwrote {args.out}/search.csv, pareto.png", file=sys.stderr)
    return 0


def run(args) -> int:
    from sim.apps.serving import serve

    _check_args(args)
    check_formats(args)
    chip = load_chip(args.chip, overrides=args.set or [])
    draft_chip = None
    if args.draft_chip is not None:
        from sim.apps.serving.simulator import load_draft_chip

        draft_chip = load_draft_chip(args.draft_chip, "--draft-chip")
    try:
        alpha = [float(a) for a in str(args.alpha).split(",")]
    except ValueError:
        raise SimError(f"--alpha: expected a number or comma-separated numbers, got {args.alpha!r}") from None
    if not all(0.0 <= a <= 1.0 for a in alpha):  # NaN fails both comparisons
        raise SimError(f"--alpha: acceptance rates are between 0 and 1, got {args.alpha!r}")
    kw = dict(scheduler=args.scheduler, rate_per_s=args.rate, duration_s=args.duration,
                num_requests=args.num_requests, arrival=args.arrival, cv=args.cv,
                prompt=parse_lengths(args.prompt, "prompt"), output=parse_lengths(args.output, "output"),
                trace=args.trace, prefix_groups=args.prefix_groups, prefix_tokens=args.prefix_tokens, seed=args.seed,
                replicas=args.replicas, tensor_parallel=args.tensor_parallel, router=args.router,
                max_batch=args.max_batch, token_budget=args.token_budget,
                timeout_s=None if args.timeout_ms is None else args.timeout_ms / 1e3, block_tokens=args.block_tokens,
                kv_capacity_tokens=args.kv_capacity_tokens, preemption=args.preemption,
                prefix_caching=args.prefix_caching, speculative_k=args.speculative_k,
                speculative_alpha=alpha[0] if len(alpha) == 1 else tuple(alpha), draft_model=args.draft_model,
                draft_chip=draft_chip, draft_tensor_parallel=args.draft_tensor_parallel,
                draft_link_latency_s=None if args.draft_link_latency_us is None else args.draft_link_latency_us / 1e6,
                prefill_replicas=args.prefill_replicas, kv_link_gb_per_s=args.kv_link_gb_per_s, dtype=args.dtype,
                weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, fidelity=args.fidelity, stack=args.stack,
                graphs=args.graphs,
                max_queue=args.max_queue, drain_s=args.drain, slos=_slos(args),
                price_per_chip_hour=args.price_per_chip_hour)
    progress = not args.no_progress and not args.json  # a terminal or not (issue 14): rate-limited when not
    if args.search:
        return _run_search(chip, args, kw, progress)
    res = serve(chip, args.model, progress=progress, model_set=getattr(args, "model_set", None), **kw)
    if args.out:
        res.save(args.out)
    if args.json:
        print(res.to_json())
        return 0
    s = res.summary
    print(f"{s['model']} on {s['replicas']} x {s['chip']} (TP{s['tensor_parallel']}), {s['scheduler']} scheduler, "
          f"{s['requests']} requests over {s['makespan_s']:.1f} simulated s")
    width = max(len(k) for k in _SHOWN)
    for k in _SHOWN:
        if k in s and s[k] is not None:
            v = s[k]
            txt = f"{v:,.6g}" if isinstance(v, float) else str(v)
            print(f"  {k:<{width}}  {txt}")
    if not s["stable"]:
        print(f"\noverloaded: {s['dropped']} dropped, {s['unfinished']} unfinished when the run stopped; the queue "
              f"grew by {s.get('queue_growth_per_s', 0.0):,.2f} requests/s", file=sys.stderr)
    if args.out:
        print(f"\nwrote {args.out}/requests.csv, iterations.csv, timeline.csv, summary.json", file=sys.stderr)
    return 0
