"""Replaying a measured serving run through the simulator: the request-level validation of
issue 13.

A measured run is a folder written by ``validation/gpu/serving_loop.py`` (a real serving
loop on one GPU):

* ``requests.csv``: one row per request - ``rate`` (the run's label), ``arrival_s``,
  ``prompt_tokens``, ``output_tokens``, ``ttft_s``, ``tpot_s``, ``e2e_s``, ``status``;
* ``iterations.csv``: one row per iteration - ``rate``, ``start_s``, ``end_s``, ``chunks``
  (``new@cached;...`` per prompt chunk), ``decode_seqs``, ``decode_context_tokens``,
  ``graph`` (1: a CUDA-graph replay, 0: launched eagerly);
* ``env.json``: the GPU, the software and the loop's arguments (token budget, slots).

:func:`replay` feeds the measured requests (arrival time, prompt and output tokens) of each
rate to :func:`~sim.apps.serving.serve` with the loop's policy (:func:`loop_policy`) and
compares TTFT, TPOT and end-to-end latency percentiles; :func:`predict_iterations` prices
every measured iteration from its own composition, with the same host model.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.apps.serving.latency import LatencyModel
from sim.apps.serving.simulator import serve
from sim.apps.serving.workload import Request
from sim.errors import WorkloadError
from sim.model.workload.models import load_model_spec
from sim.spec.chip import ChipSpec

__all__ = ["MeasuredRun", "read_run", "loop_policy", "LOOP_STACKS", "replay", "predict_iterations", "METRICS", "PERCENTILES"]

#: request-level metrics compared (per-request columns, seconds) and their percentiles
METRICS = ("ttft", "tpot", "e2e")
PERCENTILES = (50, 90, 99)


@dataclass(frozen=True)
class MeasuredRun:
    path: Path
    requests: Any      # pandas DataFrame
    iterations: Any    # pandas DataFrame
    env: dict

    @property
    def rates(self) -> list:
        return sorted(self.requests["rate"].unique().tolist())


def read_run(path) -> MeasuredRun:
    """The three files of a measured run (errors name the missing file or column)."""
    import pandas as pd

    d = Path(path)
    need = {"requests.csv": ("rate", "arrival_s", "prompt_tokens", "output_tokens", "ttft_s", "tpot_s", "e2e_s",
                             "status"),
            "iterations.csv": ("rate", "start_s", "end_s", "chunks", "decode_seqs", "decode_context_tokens",
                               "graph")}
    tables = {}
    for name, cols in need.items():
        f = d / name
        if not f.is_file():
            raise WorkloadError(f"{f}: a measured serving run needs this file")
        t = pd.read_csv(f)
        missing = [c for c in cols if c not in t.columns]
        if missing:
            raise WorkloadError(f"{f}: missing column(s) {', '.join(missing)}")
        tables[name] = t
    env_path = d / "env.json"
    env = json.loads(env_path.read_text()) if env_path.is_file() else {}
    return MeasuredRun(d, tables["requests.csv"], tables["iterations.csv"], env)


#: the stack profile that prices each mode of serving_loop.py (its ``--graphs``; runs made
#: before the option existed ran ``decode``): eager PyTorch with decode graphs, or every
#: iteration from graphs padded to token buckets with a varlen Triton prefill attention
LOOP_STACKS = {"decode": "eager_pytorch", "none": "eager_pytorch", "all": "graph_serving_loop"}


def loop_policy(run: MeasuredRun) -> dict:
    """``serve`` arguments that reproduce serving_loop.py's policy: chunked prefill under its
    token budget (decodes first, then prompt chunks first come first served), at most
    ``slots`` sequences, and its graphs: decode-only iterations from CUDA graphs and the rest
    eager (``--graphs decode``, the runs before the option), every iteration from a graph
    (``--graphs all``), or none (``--no-graphs``); the stack profile of that mode
    (:data:`LOOP_STACKS`)."""
    a = run.env.get("args", {})
    graphs = "none" if a.get("no_graphs") else a.get("graphs", "decode")
    return {"scheduler": "chunked_prefill", "token_budget": int(a.get("token_budget", 512)),
            "max_batch": int(a.get("slots", 128)), "graphs": graphs, "stack": LOOP_STACKS[graphs]}


def loop_model_set(run: MeasuredRun) -> dict:
    """The served model as the loop ran it: its KV cache held ``max_len`` tokens per slot (the
    model's context; a split-KV decode kernel's grid spans it)."""
    a = run.env.get("args", {})
    return {"max_context": int(a["max_len"])} if a.get("max_len") else {}


def loop_latency_model(chip: ChipSpec, model, run: MeasuredRun, **kwargs) -> LatencyModel:
    """The iteration model of the loop's deployment: its stack (:func:`loop_policy`), its slots
    as the replica's sequences at once, its cache length as the model's context."""
    policy = loop_policy(run)
    spec = load_model_spec(model, overrides=loop_model_set(run) or None)
    return LatencyModel(chip, spec, stack=policy["stack"], max_batch=policy["max_batch"], **kwargs)


def _chunks(text) -> list[tuple[int, int]]:
    if not isinstance(text, str) or not text:
        return []
    return [tuple(int(x) for x in c.split("@")) for c in text.split(";")]


def predict_iterations(lm, its) -> np.ndarray:
    """Seconds of every measured iteration, priced from its composition (prompt chunks with
    their cached tokens, decoding sequences and their context) and launched as it was
    (``graph`` column) through ``lm``'s host model."""
    out = np.empty(len(its))
    for i, r in enumerate(its.itertuples(index=False)):
        c = lm.iteration(_chunks(r.chunks), int(r.decode_seqs), int(r.decode_context_tokens), graph=bool(r.graph))
        out[i] = lm.launched(c, bool(r.graph)).seconds
    return out


def _pct(x: np.ndarray, p: float) -> float:
    x = x[~np.isnan(x)]
    return float(np.percentile(x, p)) if len(x) else float("nan")


def replay(chip: ChipSpec | str, model, run: MeasuredRun, rates=None, progress: bool = False, **overrides) -> dict:
    """Each rate's measured requests through ``serve`` (the loop's policy, then ``overrides``):
    ``{rate: {"requests", "finished_measured", "finished_sim", "<m>_p<q>_measured_s",
    "<m>_p<q>_sim_s", "<m>_p<q>_rel_error", ...}}`` for m in :data:`METRICS`, q in
    :data:`PERCENTILES`, plus mean decoding sequences per iteration and the share of
    iterations with prompt chunks, measured and simulated."""
    policy = {**loop_policy(run), **overrides}
    out = {}
    todo = run.rates if rates is None else list(rates)
    for rate in todo:
        rq = run.requests[run.requests["rate"] == rate].sort_values("arrival_s", kind="stable")
        if not len(rq):
            raise WorkloadError(f"{run.path}: no requests at rate {rate!r} (rates: {run.rates})")
        reqs = [Request(i, float(r.arrival_s), int(r.prompt_tokens), int(r.output_tokens))
                for i, r in enumerate(rq.itertuples(index=False))]
        res = serve(chip, model, reqs, progress=progress, model_set=loop_model_set(run) or None, **policy)
        fin = rq[rq["status"] == "finished"]
        sim = res.requests[res.requests["status"] == "finished"]
        mi = run.iterations[run.iterations["rate"] == rate]
        row = {"requests": int(len(rq)), "finished_measured": int(len(fin)), "finished_sim": int(len(sim)),
               "iterations_measured": int(len(mi)), "iterations_sim": int(len(res.iterations)),
               "mean_decode_seqs_measured": float(mi["decode_seqs"].mean()),
               "mean_decode_seqs_sim": float(res.iterations["decode_seqs"].mean()),
               "mixed_share_measured": float((mi["chunks"].fillna("") != "").mean()),
               "mixed_share_sim": float((res.iterations["prefill_tokens"] > 0).mean())}
        for m in METRICS:
            a = fin[f"{m}_s"].to_numpy(dtype=float)
            b = sim[f"{m}_s"].to_numpy(dtype=float)
            for p in PERCENTILES:
                meas, pred = _pct(a, p), _pct(b, p)
                row[f"{m}_p{p}_measured_s"] = meas
                row[f"{m}_p{p}_sim_s"] = pred
                row[f"{m}_p{p}_rel_error"] = pred / meas - 1.0
        out[rate] = row
    return out
