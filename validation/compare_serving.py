"""Compare `sim serve` with the real serving loop measured on the H200.

    python validation/compare_serving.py [--measured DIR ...] [--chip h200_sxm] [--out FILE]

For each measured run (default: serving/run6, the loop with every iteration from CUDA graphs,
and its repeat in the same lease; serving/run3 and its repeat on another lease, serving/run4,
the loop with eager prompt-chunk iterations; the first loop's runs are the folder itself and
serving/run2) and each arrival rate the loop ran (validation/gpu/serving_loop.py), the same
requests (arrival time, prompt and output tokens) are replayed through ``serve`` with the
loop's policy (chunked prefill under its 512-token budget, decodes first, at most 128
sequences, the run's graphs and the stack profile of that mode:
``sim.apps.serving.replay.loop_policy``), and TTFT / TPOT / e2e p50, p90 and p99 are
compared.  Every measured iteration is also predicted from its own composition (prompt
chunks with their cached tokens, decoding sequences and their context) with the serving
latency model and the stack's host model: decode-only (CUDA-graph), mixed from graphs and
mixed eager iterations separately, mixed ones also by their number of chunks.  Each pair of
runs of the same requests (run 6 and its repeat, runs 3 and 4) is compared too: it bounds how
closely any model can follow one run.  Writes validation/results/serving_h200.json.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

MEASURED = ROOT / "validation" / "measurements" / "serving"
#: run 6: the loop with every iteration from CUDA graphs (``--graphs all``: mixed iterations
#: padded to token buckets, a varlen Triton prefill attention), priced with
#: stacks/graph_serving_loop.yaml, and its repeat in the same lease; then runs 3 and 4 (another
#: lease each): the loop with eager prompt-chunk iterations (``--graphs decode``: SDPA flash for
#: chunks behind cached tokens, split-KV decode attention), priced with eager_pytorch.yaml.
#: Runs 1 (the folder itself) and 2 are the first loop (``--bool-mask --decode-nosplit``):
#: ``--measured`` compares them
DEFAULT_RUNS = (MEASURED / "run6", MEASURED / "run6" / "repeat", MEASURED / "run3", MEASURED / "run4")


def iteration_errors(lm, its: pd.DataFrame) -> dict:
    from sim.apps.serving.replay import predict_iterations

    its = its.assign(measured_s=its["end_s"] - its["start_s"])
    its["predicted_s"] = predict_iterations(lm, its)
    its["rel_error"] = its["predicted_s"] / its["measured_s"] - 1.0
    mixed = its["chunks"].fillna("") != ""
    nch = its["chunks"].fillna("").map(lambda c: len(c.split(";")) if c else 0)
    out = {}
    for kind, sel in (("decode_only_graph", (its["graph"] == 1) & ~mixed), ("mixed_graph", (its["graph"] == 1) & mixed),
                      ("mixed_eager", its["graph"] == 0)):
        if not sel.any():
            continue
        e = its.loc[sel, "rel_error"]
        out[f"iterations_{kind}"] = {
            "count": int(sel.sum()), "median_rel_error": float(e.median()),
            "p10_rel_error": float(e.quantile(0.1)), "p90_rel_error": float(e.quantile(0.9)),
            "median_abs_rel_error": float(e.abs().median()), "p90_abs_rel_error": float(e.abs().quantile(0.9)),
            "mean_rel_error": float(e.mean()),
            "measured_median_s": float(its.loc[sel, "measured_s"].median()),
            "predicted_median_s": float(its.loc[sel, "predicted_s"].median())}
    for kind, sel in (("mixed_graph", (its["graph"] == 1) & mixed), ("mixed_eager", its["graph"] == 0)):
        if sel.any():
            out[f"{kind}_by_chunks"] = [
                {"chunks": int(k), "count": int(len(v)), "measured_median_s": float(v["measured_s"].median()),
                 "predicted_median_s": float(v["predicted_s"].median()),
                 "median_rel_error": float(v["rel_error"].median())}
                for k, v in its[sel].groupby(nch[sel].clip(upper=4))]
    if ((its["graph"] == 1) & mixed).any():
        m = its[(its["graph"] == 1) & mixed]
        tok = m["chunks"].map(lambda c: sum(int(x.split("@")[0]) for x in c.split(";"))) + m["decode_seqs"]
        out["mixed_graph_by_tokens"] = [
            {"tokens": str(k), "count": int(len(v)), "measured_median_s": float(v["measured_s"].median()),
             "predicted_median_s": float(v["predicted_s"].median()), "median_rel_error": float(v["rel_error"].median())}
            for k, v in m.groupby(pd.cut(tok, [0, 64, 128, 256, 384, 448, 512]), observed=True)]
    g = its[(its["graph"] == 1) & ~mixed]
    buckets = pd.cut(g["decode_seqs"], [0, 1, 4, 8, 16, 32, 64, 128])
    out["decode_only_by_batch"] = [
        {"batch": str(k), "count": int(len(v)), "measured_median_s": float(v["measured_s"].median()),
         "predicted_median_s": float(v["predicted_s"].median()),
         "median_rel_error": float(v["rel_error"].median())}
        for k, v in g.groupby(buckets, observed=True)]
    return out


def run_to_run(a, b) -> dict:
    """Relative difference of the second run's request percentiles from the first's."""
    from sim.apps.serving.replay import METRICS, PERCENTILES

    out = {}
    for rate in a.rates:
        fa = a.requests[(a.requests["rate"] == rate) & (a.requests["status"] == "finished")]
        fb = b.requests[(b.requests["rate"] == rate) & (b.requests["status"] == "finished")]
        row = {}
        for m in METRICS:
            for p in PERCENTILES:
                x = float(np.nanpercentile(fa[f"{m}_s"], p))
                y = float(np.nanpercentile(fb[f"{m}_s"], p))
                row[f"{m}_p{p}_rel_diff"] = y / x - 1.0
        out[str(rate)] = row
    return out


def compare(runs, chip_name: str = "h200_sxm", model: str = "llama3-8b") -> dict:
    from sim.apps.serving.replay import loop_latency_model, loop_policy, read_run, replay
    from sim.spec.registry import load_chip

    chip = load_chip(chip_name)
    out = {"chip": chip_name, "model": model, "stacks": {}, "runs": {}}
    models = {}
    measured = [read_run(r) for r in runs]
    for run in measured:
        rel = str(run.path.relative_to(ROOT)) if run.path.is_relative_to(ROOT) else str(run.path)
        env = run.env
        policy = loop_policy(run)
        if policy["stack"] not in models:
            models[policy["stack"]] = loop_latency_model(chip, model, run)
            st = models[policy["stack"]].stack
            out["stacks"][st.name] = {"host": st.host.model_dump() if st.host else None,
                                      "graphs": st.graphs.model_dump() if st.graphs else None}
        lm = models[policy["stack"]]
        res = {"measured_on": env.get("gpu"), "torch": env.get("torch"), "decode_attention": env.get("decode_attention"),
               "chunk_attention": env.get("chunk_attention"), "policy": policy}
        res.update(iteration_errors(lm, run.iterations))
        lm.flush()
        res["rates"] = {str(k): v for k, v in replay(chip, model, run).items()}
        out["runs"][rel] = res
    names = list(out["runs"])
    for i in range(0, len(measured) - 1, 2):
        out.setdefault("run_to_run", {})[f"{names[i + 1]} vs {names[i]}"] = run_to_run(measured[i], measured[i + 1])
    return out


#: margin of the replay thresholds over the recorded errors (absolute, in relative-error units)
MARGIN = 0.05
#: the iteration classes compared: decode-only from graphs, mixed from graphs, mixed eager
ITERATION_KINDS = ("decode_only_graph", "mixed_graph", "mixed_eager")


def record_thresholds(res: dict, path: Path) -> dict:
    """Bounds on |relative error| for the CI replay (tests/test_serving_replay.py): the stored
    run's recorded errors plus :data:`MARGIN`, the way validation/thresholds.json bounds the
    kernel cases (recorded statistics plus two points).  A model change that moves an error
    further from zero than its bound fails CI; one that brings it closer passes (re-record)."""
    from sim.version import __version__

    name = str(DEFAULT_RUNS[0].relative_to(ROOT))   # run 6; run 3's bounds stay under "replay_run3"
    r = res["runs"][name]
    old = json.loads(path.read_text()) if path.exists() else {}
    out = {k: v for k, v in old.items() if k not in ("replay", "source")}
    out["source"] = (f"validation/compare_serving.py --record-thresholds (sim {__version__}): the replay of the stored "
                     f"serving-loop run {name} through sim serve with the loop's policy and the stack's host model; "
                     f"each bound is the recorded |relative error| plus {MARGIN:g}")
    out["replay"] = {
        "margin": MARGIN,
        "requests": {rate: {k.removesuffix("_rel_error"): round(abs(v) + MARGIN, 4) for k, v in row.items()
                            if k.endswith("_rel_error")} for rate, row in r["rates"].items()},
        "iterations": {k: round(abs(r[f"iterations_{k}"]["median_rel_error"]) + MARGIN, 4)
                       for k in ITERATION_KINDS if f"iterations_{k}" in r},
        "recorded": {"requests": {rate: {k.removesuffix("_rel_error"): round(v, 4) for k, v in row.items()
                                         if k.endswith("_rel_error")} for rate, row in r["rates"].items()},
                     "iterations": {k: round(r[f"iterations_{k}"]["median_rel_error"], 4)
                                    for k in ITERATION_KINDS if f"iterations_{k}" in r}},
    }
    path.write_text(json.dumps(out, indent=2) + "\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--measured", nargs="+", default=[str(r) for r in DEFAULT_RUNS])
    ap.add_argument("--chip", default="h200_sxm")
    ap.add_argument("--out", default=str(ROOT / "validation" / "results" / "serving_h200.json"))
    ap.add_argument("--record-thresholds", action="store_true",
                    help=f"write the CI replay bounds into {MEASURED.relative_to(ROOT)}/thresholds.json")
    args = ap.parse_args(argv)
    res = compare([Path(m).resolve() for m in args.measured], args.chip)
    Path(args.out).write_text(json.dumps(res, indent=2) + "\n")
    if args.record_thresholds:
        record_thresholds(res, MEASURED / "thresholds.json")
    for name, r in res["runs"].items():
        print(name)
        for rate, row in r["rates"].items():
            print(f"  rate {rate}/s: " + ", ".join(f"{m}_p{p} {row[f'{m}_p{p}_rel_error']:+.0%}"
                                                   for m in ("ttft", "tpot", "e2e") for p in (50, 99)))
        for k in (f"iterations_{x}" for x in ITERATION_KINDS if f"iterations_{x}" in r):
            print(f"  {k}: median {r[k]['median_rel_error']:+.1%} (measured {r[k]['measured_median_s'] * 1e3:.2f} ms, "
                  f"predicted {r[k]['predicted_median_s'] * 1e3:.2f} ms)")
        for k in ("mixed_graph_by_chunks", "mixed_eager_by_chunks", "mixed_graph_by_tokens"):
            if k in r:
                print(f"  {k}: " + ", ".join(f"{x.get('chunks', x.get('tokens'))}: {x['median_rel_error']:+.1%} "
                                             f"({x['count']})" for x in r[k]))
    for pair, rates in res.get("run_to_run", {}).items():
        for rate, row in rates.items():
            print(f"{pair}, rate {rate}/s: " + ", ".join(f"{k.removesuffix('_rel_diff')} {v:+.0%}"
                                                         for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
