"""The README's request-level serving figures (``sim serve``), drawn with
``sim.apps.serving.plots``:

* ``serving_latency_cdf.png``: TTFT / TPOT / end-to-end CDFs of Llama-3-8B on one H200,
  continuous batching against chunked prefill at one arrival rate;
* ``serving_throughput_latency.png``: output tokens/s per chip against TTFT p99 and TPOT p99
  over five arrival rates, both schedulers;
* ``serving_timeline.png``: batch size, KV-cache occupancy and waiting requests of one run
  whose KV cache (capped with ``kv_capacity_tokens``) saturates;
* ``serving_pareto.png``: a deployment search (``sim.apps.serving.search.search``) over
  replicas x tensor parallelism x chunk budget (12 deployments): output tokens/s per chip
  against tokens/s per user, SLO-meeting points filled, the Pareto front connected.

It prints the numbers the README quotes and writes them to ``serving_figures.json`` beside
the PNGs.  Runtime on 2 shared cores (2026-12-08): 3 min 4 s with an empty cache
(``$SIM_CACHE_DIR``: most of it simulating the grid points of h200_sxm x llama3-8b at TP 1 and
2), 8-10 s with the serving grid cached.

    python validation/serving_figures.py                 # -> docs/figures/serving_*.png
    python validation/serving_figures.py --out /tmp/figs --num-requests 200
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

from sim.apps.serving import LengthDist, plots, serve
from sim.apps.serving.search import search

#: the workload of every figure: lognormal prompts (median 512, clipped to 16..4,096 tokens),
#: uniform outputs (16..512 tokens), Poisson arrivals
PROMPT = LengthDist("lognormal", mean_log=math.log(512), sigma_log=0.8, low=16, high=4096)
OUTPUT = LengthDist("uniform", low=16, high=512)
SCHEDULERS = ("continuous", "chunked_prefill")
SEARCH_GRID = {"replicas": [1, 2], "tensor_parallel": [1, 2], "token_budget": [256, 512, 2048]}
PCTS = ("ttft_p50_s", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p50_s", "e2e_p99_s")


class Runner:
    """``serve`` with the figures' chip, model and workload, each (scheduler, rate, extras)
    simulated once."""

    def __init__(self, chip: str, model: str, *, num_requests: int, seed: int = 0, prompt=PROMPT, output=OUTPUT,
                 **serve_kw):
        self.chip, self.model = chip, model
        self.base = dict(num_requests=num_requests, seed=seed, prompt=prompt, output=output, **serve_kw)
        self._memo: dict = {}

    def run(self, scheduler: str, rate: float, **kw):
        key = (scheduler, float(rate), tuple(sorted(kw.items())))
        if key not in self._memo:
            self._memo[key] = serve(self.chip, self.model, scheduler=scheduler, rate_per_s=rate, **self.base, **kw)
        return self._memo[key]


def _ms(s: dict, keys=PCTS) -> dict:
    return {k.removesuffix("_s") + "_ms": round(s[k] * 1e3, 2) if s.get(k) is not None else None for k in keys}


def cdf_figure(runner: Runner, out: Path, rate: float, schedulers=SCHEDULERS) -> dict:
    """Latency CDFs of the schedulers at one rate, overlaid."""
    runs = {s: runner.run(s, rate) for s in schedulers}
    plots.latency_cdf(runs, out / "serving_latency_cdf.png")
    return {"rate_per_s": rate, **{s: _ms(r.summary) for s, r in runs.items()}}


def sweep_figure(runner: Runner, out: Path, rates, schedulers=SCHEDULERS) -> dict:
    """Throughput against TTFT p99 and TPOT p99 over arrival rates, one curve per scheduler."""
    runs = {s: [runner.run(s, r) for r in rates] for s in schedulers}
    plots.throughput_latency(runs, out / "serving_throughput_latency.png", metric=("ttft_p99_s", "tpot_p99_s"))
    return {s: [{"rate_per_s": r, "output_tokens_per_s_per_chip": round(x.summary["output_tokens_per_s_per_chip"], 1),
                 **_ms(x.summary, ("ttft_p99_s", "tpot_p99_s"))} for r, x in zip(rates, rs)]
            for s, rs in runs.items()}


def timeline_figure(runner: Runner, out: Path, rate: float, kv_capacity_tokens: int,
                    scheduler: str = "continuous") -> dict:
    """Batch size, KV occupancy and waiting requests of a run whose KV cache saturates."""
    r = runner.run(scheduler, rate, kv_capacity_tokens=kv_capacity_tokens)
    plots.timeline(r, out / "serving_timeline.png")
    s, its, tl = r.summary, r.iterations, r.timeline
    uncapped = runner.run(scheduler, rate).summary
    return {"scheduler": scheduler, "rate_per_s": rate, "kv_capacity_tokens": kv_capacity_tokens,
            "kv_utilisation_max": round(s["kv_utilisation_max"], 3),
            "kv_utilisation_mean": round(s["kv_utilisation_mean"], 3),
            "time_kv_above_95pct_s": round(float(tl["time_s"].diff().fillna(0)[tl["kv_utilisation"] > 0.95].sum()), 2),
            "preemptions": s["preemptions"], "waiting_max": int(tl["waiting"].max()),
            "batch_max": int((its["decode_seqs"] + its["prefill_seqs"]).max()), "batch_mean": round(s["batch_mean"], 1),
            "makespan_s": round(s["makespan_s"], 2), **_ms(s, ("ttft_p99_s", "tpot_p99_s")),
            "uncapped": {"kv_tokens_per_replica": uncapped["kv_tokens_per_replica"],
                         "kv_utilisation_max": round(uncapped["kv_utilisation_max"], 3),
                         "preemptions": uncapped["preemptions"], **_ms(uncapped, ("ttft_p99_s", "tpot_p99_s"))}}


def pareto_figure(runner: Runner, out: Path, rate: float, grid=None, slos=None, scheduler="chunked_prefill") -> dict:
    """A deployment search at one rate and its Pareto front."""
    grid = grid or SEARCH_GRID
    slos = slos or {"ttft": 0.3, "tpot": 0.02}
    df = search(runner.chip, runner.model, grid, slos=slos, rate_per_s=rate, scheduler=scheduler, **runner.base)
    title = (f"{runner.model} on {runner.chip}, {rate:g} req/s, {scheduler}: "
             f"{len(df)} deployments\nSLOs TTFT {slos['ttft'] * 1e3:g} ms, TPOT {slos['tpot'] * 1e3:g} ms "
             "for 90 % of requests")
    plots.pareto(df, out / "serving_pareto.png", title=title)
    front = set(plots.pareto_rows(df))
    cols = [c for c in grid] + ["chips", "output_tokens_per_s_per_chip", "tokens_per_s_per_user", "ttft_p99_s",
                                "tpot_p50_s", "tpot_p99_s", "slo_attainment", "meets_slo"]
    rows = []
    for i, row in df.iterrows():
        d = {c: (row[c].item() if hasattr(row[c], "item") else row[c]) for c in cols if c in df}
        for c in list(d):
            if isinstance(d[c], float):
                d[c] = round(d[c], 4)
        d["on_front"] = i in front
        rows.append(d)
    return {"rate_per_s": rate, "scheduler": scheduler, "slos_s": slos, "grid": grid, "deployments": rows}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default="docs/figures", help="folder of the PNGs (default docs/figures)")
    ap.add_argument("--chip", default="h200_sxm")
    ap.add_argument("--model", default="llama3-8b")
    ap.add_argument("--num-requests", type=int, default=400, help="requests per run (default 400)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rate", type=float, default=32.0, help="arrival rate of the CDF figure, req/s (default 32)")
    ap.add_argument("--rates", default="8,16,24,32,40", help="rates of the throughput-latency figure")
    ap.add_argument("--timeline-rate", type=float, default=32.0)
    ap.add_argument("--timeline-kv-tokens", type=int, default=65536,
                    help="KV-cache cap of the timeline's run, tokens per replica (default 65,536)")
    ap.add_argument("--search-rate", type=float, default=32.0)
    args = ap.parse_args(argv)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runner = Runner(args.chip, args.model, num_requests=args.num_requests, seed=args.seed)
    rates = [float(r) for r in args.rates.split(",")]
    numbers, t_all = {"chip": args.chip, "model": args.model, "num_requests": args.num_requests, "seed": args.seed,
                      "workload": {"prompt": repr(PROMPT), "output": repr(OUTPUT), "arrival": "poisson"}}, time.time()
    for name, make in (("throughput_latency", lambda: sweep_figure(runner, out, rates)),
                       ("latency_cdf", lambda: cdf_figure(runner, out, args.rate)),
                       ("timeline", lambda: timeline_figure(runner, out, args.timeline_rate, args.timeline_kv_tokens)),
                       ("pareto", lambda: pareto_figure(runner, out, args.search_rate))):
        t = time.time()
        numbers[name] = make()
        numbers[name]["seconds"] = round(time.time() - t, 1)
        print(f"{name}: {numbers[name]['seconds']} s", file=sys.stderr, flush=True)
    numbers["seconds"] = round(time.time() - t_all, 1)
    (out / "serving_figures.json").write_text(json.dumps(numbers, indent=1, default=str) + "\n")
    print(json.dumps(numbers, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
