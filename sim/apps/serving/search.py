"""Deployment search: for a model, a chip, an arrival rate and SLOs, every combination of
serving parameters (replicas, tensor parallelism, scheduler, token budget, ...) is simulated
on the same requests; the result ranks them and marks the Pareto front of output tokens/s
per chip against tokens/s per user (1 / TPOT p50), among deployments meeting the SLOs.

Aggregated against disaggregated serving is the ``scheduler`` axis (``disaggregated`` beside
``continuous`` or ``chunked_prefill``); the axes that only a disaggregated deployment reads
(``prefill_replicas``, ``kv_link_gb_per_s``) are dropped from the others, so each distinct
deployment is simulated once.  ``sim serve ... --search AXIS=V1,V2`` is the command line.
"""
from __future__ import annotations

import itertools

from sim.apps.serving.schedulers import get_scheduler
from sim.apps.serving.simulator import ServeConfig, _check, _requests, load_draft_chip, load_draft_model, serve
from sim.errors import ConfigError, SimError, UnknownNameError, WorkloadError
from sim.model.stacks import chip_stack
from sim.model.workload.models import load_model_spec
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format
from sim.spec.registry import as_chip

#: what a search reports per candidate (summary keys)
COLUMNS = ("finished", "unfinished", "dropped", "ttft_p99_s", "tpot_p50_s", "tpot_p99_s", "e2e_p99_s",
           "output_tokens_per_s", "output_tokens_per_s_per_chip", "goodput_req_per_s", "slo_attainment", "chips",
           "stable")
#: the axes a search (and ``sim serve --search``) takes: deployment parameters, with their type
SEARCH_AXES: dict[str, type] = {
    "replicas": int, "tensor_parallel": int, "pipeline_parallel": int, "prefill_replicas": int,
    "token_budget": int, "max_batch": int, "block_tokens": int, "speculative_k": int,
    "draft_tensor_parallel": int, "kv_capacity_tokens": int, "scheduler": str, "router": str,
    "preemption": str, "graphs": str, "stack": str, "dtype": str, "weight_dtype": str, "kv_dtype": str,
    "draft_model": str, "draft_chip": str, "prefix_caching": bool, "kv_link_gb_per_s": float,
    "memory_utilisation": float, "timeout_s": float, "speculative_alpha": float,
}
#: the most deployments one search simulates (each is a whole serving run: seconds apiece)
MAX_DEPLOYMENTS = 4096
#: axes only a disaggregated deployment reads
DISAGGREGATED_ONLY = ("prefill_replicas", "kv_link_gb_per_s")


def parse_axis(text: str) -> tuple[str, list]:
    """``"replicas=1,2,4"`` -> ``("replicas", [1, 2, 4])`` (dashes allowed in the name; values
    typed by :data:`SEARCH_AXES`); an unknown axis or a value of the wrong type is refused,
    naming it."""
    name, sep, vals = str(text).partition("=")
    name = name.strip().replace("-", "_")
    if not sep or not vals.strip():
        raise WorkloadError(f"--search {text!r}: expected AXIS=V1,V2,... (axes: {', '.join(SEARCH_AXES)})")
    if name not in SEARCH_AXES:
        raise UnknownNameError("search axis", name, list(SEARCH_AXES))
    kind = SEARCH_AXES[name]
    out = []
    for v in vals.split(","):
        v = v.strip()
        try:
            if kind is bool:
                if v.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                out.append(v.lower() in ("true", "1", "yes"))
            elif kind is int:
                out.append(int(v))
            elif kind is float:
                out.append(float(v))
            else:
                if not v:
                    raise ValueError
                out.append(v)
        except ValueError:
            want = {int: "a whole number", float: "a number", bool: "true or false"}.get(kind, "a name")
            raise WorkloadError(f"--search {name}: {v!r} is not {want}") from None
    if len(set(map(repr, out))) != len(out):
        raise WorkloadError(f"--search {name}: a value is repeated in {vals!r}")
    return name, out


def _check_name(axis: str, value, chip: ChipSpec) -> None:
    """A named value of an axis (scheduler, stack, format, draft) exists: refused before the
    first deployment runs, not after some have."""
    if axis == "scheduler":
        get_scheduler(value)
    elif axis == "stack":
        chip_stack(chip, value)
    elif axis in ("dtype", "weight_dtype", "kv_dtype"):
        get_format(value)
    elif axis == "draft_model":
        load_draft_model(value)
    elif axis == "draft_chip":
        load_draft_chip(value)


def _deployments(grid: dict, fixed: dict, chip: ChipSpec) -> list[dict]:
    """Every distinct combination of the grid's values, the disaggregated-only axes dropped
    where the scheduler is not disaggregated; each value checked alone first, as ``serve``
    would, so a bad value is one error naming the axis (not one failed row per combination)."""
    for k, values in grid.items():
        if not isinstance(values, (list, tuple)) or not values:
            raise WorkloadError(f"search axis {k}: give a non-empty list of values, got {values!r}")
        for v in values:
            try:
                _check(ServeConfig(**{**{f: x for f, x in fixed.items() if f in ServeConfig.__dataclass_fields__},
                                      k: v}))
                _check_name(k, v, chip)
            except ConfigError:
                raise               # a chip or stack file: its message names file, line and key
            except SimError as exc:
                raise WorkloadError(f"search axis {k} = {v!r}: {exc}") from None
    keys = list(grid)
    total = 1
    for k in keys:
        total *= len(grid[k])
    if total > MAX_DEPLOYMENTS:
        raise WorkloadError(f"search: {' x '.join(str(len(grid[k])) for k in keys)} = {total:,} combinations, more "
                            f"than the {MAX_DEPLOYMENTS:,} one search simulates; give fewer values")
    seen, out = set(), []
    for values in itertools.product(*(grid[k] for k in keys)):
        params = dict(zip(keys, values))
        sched = params.get("scheduler", fixed.get("scheduler", "continuous"))
        if sched != "disaggregated":
            for k in DISAGGREGATED_ONLY:
                params.pop(k, None)
        key = tuple(sorted((k, repr(v)) for k, v in params.items()))
        if key not in seen:
            seen.add(key)
            out.append(params)
    return out


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
    chip = as_chip(chip)

    if not grid:
        raise WorkloadError("search: the grid names no parameter")
    bad = sorted(set(grid) - set(ServeConfig.__dataclass_fields__))
    if bad:
        raise UnknownNameError("search axis", bad[0], list(ServeConfig.__dataclass_fields__))
    if requests is None:
        cfg = ServeConfig(**{k: v for k, v in fixed.items() if k in ServeConfig.__dataclass_fields__})
        requests = _requests(cfg, None)
    combos = _deployments(grid, fixed, chip)
    it = combos
    if progress:
        import sys

        from tqdm import tqdm

        it = tqdm(combos, desc="deployments", file=sys.stderr)
    rows = []
    for params in it:
        try:
            s = serve(chip, model, requests, slos=slos or {}, **{**fixed, **params}).summary
        except SimError as e:       # a deployment that cannot run (weights do not fit, ...); the rest go on
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
