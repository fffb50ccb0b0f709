"""Serving metrics: per-request and per-iteration tables, their summary, the result object.

Latency percentiles are over finished requests (numpy's linear interpolation).  TPOT is a
request's (last token − first token) / (generated − 1) (vLLM's benchmark definition);
inter-token latency (ITL) percentiles weight each iteration's latency by the sequences that
decoded in it.  Goodput is the rate of finished requests that meet every SLO (DistServe,
Zhong et al., OSDI 2024).  Throughputs divide by the makespan (time 0 to the last event).
Energy is the chips' simulated energy of the iterations (idle time is not costed).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sim.errors import UnknownNameError, WorkloadError

#: metrics an SLO can name (per-request columns, seconds)
SLO_METRICS = ("ttft", "tpot", "e2e", "queue")
PERCENTILES = (50, 90, 99)


def check_slos(slos: dict | None) -> dict[str, float]:
    out = {}
    for k, v in (slos or {}).items():
        key = str(k).removesuffix("_s").removesuffix("_ms")
        if key not in SLO_METRICS:
            raise UnknownNameError("SLO metric", str(k), list(SLO_METRICS))
        if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
            raise WorkloadError(f"SLO {k}: the target must be a number of seconds > 0, got {v!r}")
        out[key] = float(v)
    return out


def _pcts(x: np.ndarray, name: str, out: dict, weights: np.ndarray | None = None) -> None:
    if len(x) == 0:
        for p in PERCENTILES:
            out[f"{name}_p{p}_s"] = None
        out[f"{name}_mean_s"] = None
        return
    if weights is None:
        for p in PERCENTILES:
            out[f"{name}_p{p}_s"] = float(np.percentile(x, p))
        out[f"{name}_mean_s"] = float(np.mean(x))
        return
    order = np.argsort(x, kind="stable")
    xs, ws = x[order], weights[order]
    cw = np.cumsum(ws)
    for p in PERCENTILES:
        i = int(np.searchsorted(cw, p / 100.0 * cw[-1]))
        out[f"{name}_p{p}_s"] = float(xs[min(i, len(xs) - 1)])
    out[f"{name}_mean_s"] = float(np.sum(xs * ws) / cw[-1])


def summarise(req, its, timeline, *, slos: dict, chips: int, peak_flops: float, peak_bytes_per_s: float,
              price_per_chip_hour: float | None, end_s: float, kv_stats: dict, extra: dict) -> dict[str, Any]:
    """The run's summary; ``peak_flops`` and ``peak_bytes_per_s`` are those of all ``chips``
    together (MFU and MBU divide by them)."""
    fin = req[req["status"] == "finished"]
    s: dict[str, Any] = {"requests": int(len(req)), "finished": int(len(fin)),
                         "dropped": int((req["status"] == "dropped").sum()),
                         "unfinished": int((req["status"] == "unfinished").sum())}
    for m in ("ttft", "tpot", "e2e", "queue"):
        col = fin[f"{m}_s"].to_numpy(dtype=float)
        _pcts(col[~np.isnan(col)], m, s)
    if len(its):
        lat = (its["end_s"] - its["start_s"]).to_numpy(dtype=float)
        w = its["decode_seqs"].to_numpy(dtype=float)
        m = w > 0
        _pcts(lat[m], "itl", s, w[m])
    else:
        _pcts(np.array([]), "itl", s)
    out_tok = float(req["generated"].sum())
    in_tok = float(req.loc[req["status"] != "dropped", "prompt_tokens"].sum())
    span = max(end_s, 1e-12)
    s.update({
        "makespan_s": end_s, "chips": chips,
        "throughput_req_per_s": len(fin) / span,
        "output_tokens": out_tok, "output_tokens_per_s": out_tok / span,
        "total_tokens_per_s": (out_tok + in_tok) / span,
        "output_tokens_per_s_per_chip": out_tok / span / chips,
        "iterations": int(len(its)),
    })
    if slos:
        ok = np.ones(len(fin), dtype=bool)
        for k, v in slos.items():
            ok &= fin[f"{k}_s"].to_numpy(dtype=float) <= v
        s["slos_s"] = dict(slos)
        s["slo_attainment"] = float(ok.sum() / len(req)) if len(req) else 0.0
        s["goodput_req_per_s"] = float(ok.sum()) / span
    if len(its):
        dt = (its["end_s"] - its["start_s"]).to_numpy(dtype=float)
        util = (its["kv_used_blocks"] / its["kv_blocks"]).to_numpy(dtype=float)
        s["kv_utilisation_mean"] = float(np.sum(util * dt) / max(np.sum(dt), 1e-30))
        s["kv_utilisation_max"] = float(util.max())
        s["batch_mean"] = float(np.sum((its["decode_seqs"] + its["prefill_seqs"]).to_numpy() * dt) / max(np.sum(dt), 1e-30))
        energy = float(its["energy_j"].sum())
        flops = float(its["flops"].sum())
        dram = float(its["dram_bytes"].sum())
    else:
        s["kv_utilisation_mean"] = s["kv_utilisation_max"] = s["batch_mean"] = 0.0
        energy = flops = dram = 0.0
    s["preemptions"] = int(req["preemptions"].sum())
    s["energy_j"] = energy
    s["energy_per_output_token_j"] = energy / out_tok if out_tok else None
    s["energy_per_token_j"] = energy / (out_tok + in_tok) if out_tok + in_tok else None
    s["mfu"] = flops / span / peak_flops if peak_flops else None
    s["mbu"] = dram / span / peak_bytes_per_s if peak_bytes_per_s else None
    if price_per_chip_hour is not None:
        s["price_per_chip_hour"] = price_per_chip_hour
        s["cost_per_million_output_tokens"] = (price_per_chip_hour * chips * span / 3600.0 / out_tok * 1e6
                                               if out_tok else None)
    if len(timeline):
        t = timeline["time_s"].to_numpy(dtype=float)
        s["mean_in_system"] = float(timeline["in_system"].mean())
        q = timeline["waiting"].to_numpy(dtype=float)
        # growth of the waiting queue over the second half of the arrivals (a stable system's
        # queue does not grow while requests keep arriving)
        span = float(req["arrival_s"].max()) if len(req) else 0.0
        half = (t >= span / 2) & (t <= span)
        s["queue_growth_per_s"] = float(np.polyfit(t[half], q[half], 1)[0]) if half.sum() >= 2 else 0.0
        s["max_waiting"] = int(q.max())
    # stable: every request finished, none dropped (queue_growth_per_s says whether it was keeping up)
    s["stable"] = s["dropped"] == 0 and s["unfinished"] == 0
    s.update(kv_stats)
    s.update(extra)
    return s


def _clean(x):
    if isinstance(x, float) and not math.isfinite(x):
        return None
    if isinstance(x, (np.integer,)):
        return int(x)
    if isinstance(x, (np.floating,)):
        return None if not np.isfinite(x) else float(x)
    if isinstance(x, dict):
        return {k: _clean(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_clean(v) for v in x]
    return x


@dataclass(frozen=True)
class ServingResult:
    """A serving run: one row per request, one per iteration, a sampled timeline, a summary."""

    requests: Any            # pandas DataFrame
    iterations: Any          # pandas DataFrame
    timeline: Any            # pandas DataFrame: time_s, in_system, waiting, running, kv_utilisation
    summary: dict
    config: dict = field(default_factory=dict)

    def to_json(self, path=None, include_tables: bool = False) -> str:
        obj = {"summary": _clean(self.summary), "config": _clean(self.config)}
        if include_tables:
            obj["requests"] = json.loads(self.requests.to_json(orient="records"))
            obj["iterations"] = json.loads(self.iterations.to_json(orient="records"))
        text = json.dumps(obj, default=str)
        if path is not None:
            from pathlib import Path

            Path(path).write_text(text)
        return text

    def save(self, out_dir) -> None:
        """``requests.csv``, ``iterations.csv``, ``timeline.csv`` and ``summary.json`` in ``out_dir``."""
        from pathlib import Path

        d = Path(out_dir)
        d.mkdir(parents=True, exist_ok=True)
        self.requests.to_csv(d / "requests.csv", index=False)
        self.iterations.to_csv(d / "iterations.csv", index=False)
        self.timeline.to_csv(d / "timeline.csv", index=False)
        self.to_json(d / "summary.json")
