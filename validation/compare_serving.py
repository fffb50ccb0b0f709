"""Compare `sim serve` with the real serving loop measured on the H200.

    python validation/compare_serving.py [--measured DIR ...] [--chip h200_sxm] [--out FILE]

For each measured run (default: serving/run3 and its repeat on another lease, serving/run4;
the first loop's runs are the folder itself and serving/run2) and each arrival rate the loop ran (validation/gpu/serving_loop.py),
the same requests (arrival time, prompt and output tokens) are replayed through ``serve``
with the loop's policy (chunked prefill under its 512-token budget, decodes first, at most
128 sequences, CUDA graphs for decode-only iterations and eager launches otherwise:
``sim.apps.serving.replay.loop_policy``), and TTFT / TPOT / e2e p50, p90 and p99 are
compared.  Every measured iteration is also predicted from its own composition (prompt
chunks with their cached tokens, decoding sequences and their context) with the serving
latency model and the stack's host model, decode-only (CUDA-graph) and mixed (eager)
iterations separately.  The two runs' own difference (same requests, two leases) is
reported too: it bounds how closely any model can follow one run.  Writes
validation/results/serving_h200.json.
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
#: the loop as it is (flash attention for chunks behind cached tokens, split-KV decode
#: attention): run 3 and its repeat on another lease, run 4.  Runs 1 (the folder itself) and 2
#: are the first loop (``--bool-mask --decode-nosplit``): ``--measured`` compares them
DEFAULT_RUNS = (MEASURED / "run3", MEASURED / "run4")


def iteration_errors(lm, its: pd.DataFrame) -> dict:
    from sim.apps.serving.replay import predict_iterations

    its = its.assign(measured_s=its["end_s"] - its["start_s"])
    its["predicted_s"] = predict_iterations(lm, its)
    its["rel_error"] = its["predicted_s"] / its["measured_s"] - 1.0
    out = {}
    for kind, sel in (("decode_only_graph", its["graph"] == 1), ("mixed_eager", its["graph"] == 0)):
        e = its.loc[sel, "rel_error"]
        out[f"iterations_{kind}"] = {
            "count": int(sel.sum()), "median_rel_error": float(e.median()),
            "p10_rel_error": float(e.quantile(0.1)), "p90_rel_error": float(e.quantile(0.9)),
            "measured_median_s": float(its.loc[sel, "measured_s"].median()),
            "predicted_median_s": float(its.loc[sel, "predicted_s"].median())}
    g = its[its["graph"] == 1]
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
    from sim.apps.serving.latency import LatencyModel
    from sim.apps.serving.replay import loop_policy, read_run, replay
    from sim.model.workload.models import load_model_spec
    from sim.spec.registry import load_chip

    chip = load_chip(chip_name)
    lm = LatencyModel(chip, load_model_spec(model))
    out = {"chip": chip_name, "model": model, "stack": lm.stack.name,
           "host": lm.stack.host.model_dump() if lm.stack.host else None, "runs": {}}
    measured = [read_run(r) for r in runs]
    for run in measured:
        rel = str(run.path.relative_to(ROOT)) if run.path.is_relative_to(ROOT) else str(run.path)
        env = run.env
        res = {"measured_on": env.get("gpu"), "torch": env.get("torch"), "decode_attention": env.get("decode_attention"),
               "policy": loop_policy(run)}
        res.update(iteration_errors(lm, run.iterations))
        lm.flush()
        res["rates"] = {str(k): v for k, v in replay(chip, model, run).items()}
        out["runs"][rel] = res
    if len(measured) >= 2:
        out["run_to_run"] = run_to_run(measured[0], measured[1])
    return out


#: margin of the replay thresholds over the recorded errors (absolute, in relative-error units)
MARGIN = 0.05


def record_thresholds(res: dict, path: Path) -> dict:
    """Bounds on |relative error| for the CI replay (tests/test_serving_replay.py): the stored
    run's recorded errors plus :data:`MARGIN`, the way validation/thresholds.json bounds the
    kernel cases (recorded statistics plus two points).  A model change that moves an error
    further from zero than its bound fails CI; one that brings it closer passes (re-record)."""
    from sim.version import __version__

    name = str(DEFAULT_RUNS[0].relative_to(ROOT))
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
                       for k in ("decode_only_graph", "mixed_eager")},
        "recorded": {"requests": {rate: {k.removesuffix("_rel_error"): round(v, 4) for k, v in row.items()
                                         if k.endswith("_rel_error")} for rate, row in r["rates"].items()},
                     "iterations": {k: round(r[f"iterations_{k}"]["median_rel_error"], 4)
                                    for k in ("decode_only_graph", "mixed_eager")}},
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
        for k in ("iterations_decode_only_graph", "iterations_mixed_eager"):
            print(f"  {k}: median {r[k]['median_rel_error']:+.1%} (measured {r[k]['measured_median_s'] * 1e3:.2f} ms, "
                  f"predicted {r[k]['predicted_median_s'] * 1e3:.2f} ms)")
    names = list(res["runs"])
    for rate, row in res.get("run_to_run", {}).items():
        print(f"{names[1]} vs {names[0]}, rate {rate}/s: " + ", ".join(f"{k.removesuffix('_rel_diff')} {v:+.0%}"
                                                             for k, v in row.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
