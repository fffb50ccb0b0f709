"""Deployment search: for a model, a chip, an arrival rate and SLOs, every combination of
serving parameters (replicas, tensor parallelism, scheduler, token budget, ...) is simulated
on the same requests; the result ranks them and marks the Pareto front of output tokens/s
per chip against tokens/s per user (1 / TPOT p50), among deployments meeting the SLOs.
"""
from __future__ import annotations

import itertools

from sim.apps.serving.simulator import ServeConfig, _requests, serve
from sim.errors import UnknownNameError, WorkloadError
from sim.model.workload.models import load_model_spec
from sim.spec.chip import ChipSpec

#: what a search reports per candidate (summary keys)
COLUMNS = ("finished", "unfinished", "dropped", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s",
           "output_tokens_per_s", "output_tokens_per_s_per_chip", "goodput_req_per_s", "slo_attainment", "chips",
           "stable")


def pareto_front(points: list[tuple[float, float]]) -> list[bool]:
    """True where no other point is at least as good in both coordinates (maximised) and
    better in one."""
    out = []
    for i, (a, b) in enumerate(points):
        dominated = any((c >= a and d >= b) and (c > a or d > b) for j, (c, d) in enumerate(points) if j != i)
        out.append(not dominated)
    return out


def search(chip: ChipSpec | str, model, grid: dict, *, slos: dict | None = None, min_attainment: float = 0.9,
           requests=None,
           progress: bool = False, model_set=None, **fixed):
    """Simulate every combination of ``grid`` (``{"replicas": [1, 2], "tensor_parallel": [1, 2],
    "scheduler": ["continuous", "chunked_prefill"], "token_budget": [512, 2048]}``) with the
    ``fixed`` serve parameters; returns a DataFrame, one row per deployment, with
    ``meets_slo`` and ``pareto`` columns, best goodput per chip first.  ``model_set`` edits
    the model (as :func:`~sim.apps.serving.simulator.serve`); a bad model or edit is raised
    here, once, not recorded as a failed deployment."""
    import pandas as pd

    model = load_model_spec(model, overrides=model_set)

    if not grid:
        raise WorkloadError("search: the grid names no parameter")
    bad = sorted(set(grid) - set(ServeConfig.__dataclass_fields__))
    if bad:
        raise UnknownNameError("search axis", bad[0], list(ServeConfig.__dataclass_fields__))
    if requests is None:
        cfg = ServeConfig(**{k: v for k, v in fixed.items() if k in ServeConfig.__dataclass_fields__})
        requests = _requests(cfg, None)
    keys = list(grid)
    combos = list(itertools.product(*(grid[k] for k in keys)))
    it = combos
    if progress:
        import sys

        from tqdm import tqdm

        it = tqdm(combos, desc="deployments", file=sys.stderr)
    rows = []
    for values in it:
        params = dict(zip(keys, values))
        try:
            s = serve(chip, model, requests, slos=slos or {}, **fixed, **params).summary
        except WorkloadError as e:       # a deployment that cannot run (weights do not fit, ...)
            rows.append({**params, "error": str(e)})
            continue
        row = {**params, **{k: s.get(k) for k in COLUMNS}}
        if slos:
            row["goodput_req_per_s_per_chip"] = s["goodput_req_per_s"] / s["chips"]
        row["tokens_per_s_per_user"] = 1.0 / s["tpot_p50_s"] if s.get("tpot_p50_s") else None
        row["meets_slo"] = bool(s["stable"] and (not slos or s["slo_attainment"] >= min_attainment))
        rows.append(row)
    df = pd.DataFrame(rows)
    if "meets_slo" not in df:
        df["meets_slo"] = False
    df["meets_slo"] = df["meets_slo"].fillna(False).astype(bool)
    ok = df["meets_slo"]
    df["pareto"] = False
    if ok.any():
        pts = list(zip(df.loc[ok, "output_tokens_per_s_per_chip"], df.loc[ok, "tokens_per_s_per_user"]))
        df.loc[ok, "pareto"] = pareto_front(pts)
    sort = "goodput_req_per_s_per_chip" if slos and "goodput_req_per_s_per_chip" in df else "output_tokens_per_s_per_chip"
    return df.sort_values(["meets_slo", sort], ascending=[False, False], kind="stable").reset_index(drop=True)
