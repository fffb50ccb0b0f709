"""Request-level serving (sim.apps.serving): queueing laws, conservation, monotonicity,
speculative decoding's closed form, the latency model's interpolation error, determinism,
bad input, the CLI."""
from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from sim.apps.serving import Request, serve
from sim.apps.serving.kv import KVCache
from sim.apps.serving.speculative import Speculative, closed_form_tokens_per_step
from sim.apps.serving.workload import LengthDist, generate, load_trace, save_trace
from sim.errors import SimError, UnknownNameError, WorkloadError

CHIP, MODEL = "npu_128x128", "tiny"


@pytest.fixture(scope="module")
def chip():
    from sim.spec.registry import load_chip

    return load_chip(CHIP)


def _run(chip, **kw):
    base = dict(rate_per_s=400.0, duration_s=1.0, prompt=LengthDist("uniform", low=32, high=400),
                output=LengthDist("uniform", low=4, high=80), cache_dir=False, seed=1)
    base.update(kw)
    return serve(chip, MODEL, **base)


# ----------------------------------------------------------------------------- laws


def test_littles_law(chip):
    """Mean number in the system (sampled from the simulator's own queues at fixed times)
    equals the arrival rate times the mean time in the system."""
    r = _run(chip, rate_per_s=3000.0, duration_s=0.3, samples=4000)
    req = r.requests
    assert (req["status"] == "finished").all()
    end = r.summary["makespan_s"]
    lam = len(req) / end
    w = req["e2e_s"].mean()
    tl = r.timeline[r.timeline["time_s"] < end]
    L = tl["in_system"].mean()
    assert L > 2.0, "the test needs queueing to be meaningful"
    assert L == pytest.approx(lam * w, rel=0.05)


@pytest.mark.parametrize("scheduler,kw", [
    ("continuous", {}),
    ("chunked_prefill", {"token_budget": 128}),
    ("chunked_prefill", {"prefix_caching": True, "prefix_groups": 3, "prefix_tokens": 64}),
    ("continuous", {"kv_capacity_tokens": 2048, "rate_per_s": 5000.0, "duration_s": 0.2}),   # preemption (recompute)
    ("chunked_prefill", {"kv_capacity_tokens": 2048, "preemption": "swap", "rate_per_s": 5000.0, "duration_s": 0.2}),
    ("static", {"max_batch": 8}),
    ("dynamic", {"max_batch": 8, "timeout_s": 1e-4}),
    ("disaggregated", {"replicas": 3}),
])
def test_conservation_of_tokens_and_blocks(chip, scheduler, kw):
    r = _run(chip, scheduler=scheduler, **kw)
    req, its = r.requests, r.iterations
    assert (req["status"] == "finished").all(), req["status"].value_counts()
    assert (req["generated"] == req["output_tokens"]).all()
    if r.summary["preemptions"] == 0:
        # every prompt token computed once (minus those served from the prefix cache), every
        # output token but the first (emitted by the prefill) decoded once
        assert its["prefill_tokens"].sum() == (req["prompt_tokens"] - req["cached_tokens"]).sum()
        assert its["decode_seqs"].sum() == (req["output_tokens"] - 1).sum()
    else:
        assert its["prefill_tokens"].sum() > (req["prompt_tokens"] - req["cached_tokens"]).sum()
    for rep in r._replicas:
        kv = rep.sched.kv
        assert kv.free + kv.prefix_blocks == kv.total
        assert all(e.refs == 0 for e in kv.prefixes.values())
        kv.clear_prefixes()
        assert kv.free == kv.total
    if kw.get("prefix_caching"):
        assert r.summary["prefix_hit_rate"] > 0.9
    if "kv_capacity_tokens" in kw:
        assert r.summary["preemptions"] > 0
        assert r.summary["kv_utilisation_max"] > 0.9
    if kw.get("preemption") == "swap":
        assert r.summary["swaps"] > 0 and r.iterations["swap_s"].sum() > 0


def test_more_replicas_never_raise_latency(chip):
    reqs = generate(rate_per_s=2500.0, duration_s=0.25, prompt=LengthDist("uniform", low=32, high=400),
                    output=LengthDist("uniform", low=4, high=80), seed=3)
    seen = []
    for n in (1, 2, 4):
        s = serve(chip, MODEL, reqs, replicas=n, cache_dir=False).summary
        cur = (s["e2e_mean_s"], s["e2e_p50_s"], s["e2e_p90_s"], s["ttft_mean_s"])
        if seen:
            assert all(c <= p * (1 + 1e-9) for c, p in zip(cur, seen[-1])), (n, cur, seen[-1])
        seen.append(cur)
    assert seen[-1][0] < seen[0][0]


def test_disaggregated_transfer_time_is_bytes_over_bandwidth(chip):
    from sim.model.workload.models import load_model_spec

    r = _run(chip, scheduler="disaggregated", replicas=2, kv_link_gb_per_s=1.0, kv_link_latency_s=1e-5)
    req = r.requests
    per_token = load_model_spec(MODEL).kv_bytes_per_token("bf16")
    expect = req["prompt_tokens"] * per_token / 1e9 + 1e-5
    multi = req["output_tokens"] > 1
    np.testing.assert_allclose(req.loc[multi, "kv_transfer_s"], expect[multi], rtol=1e-12)
    assert set(req.loc[multi, "replica"]) == {1} and set(req.loc[multi, "prefill_replica"]) == {0}


# ----------------------------------------------------------------------------- speculative


@pytest.mark.parametrize("alpha,k", [(0.0, 3), (0.5, 1), (0.6, 4), (0.8, 5), (0.95, 7), (1.0, 4)])
def test_speculative_expected_tokens_closed_form(alpha, k):
    s = Speculative(k, alpha)
    assert s.expected_tokens_per_step() == pytest.approx(closed_form_tokens_per_step(alpha, k), rel=1e-12)
    draws = s.sample_tokens(np.random.default_rng(0), 200_000)
    assert draws.min() >= 1 and draws.max() <= k + 1
    assert draws.mean() == pytest.approx(closed_form_tokens_per_step(alpha, k), rel=0.01)


def test_speculative_profile_and_serving_steps(chip):
    prof = Speculative(3, (0.9, 0.7, 0.5))
    assert prof.expected_tokens_per_step() == pytest.approx(1 + 0.9 + 0.9 * 0.7 + 0.9 * 0.7 * 0.5)
    k, alpha = 4, 0.7
    r = _run(chip, rate_per_s=100.0, duration_s=1.0, output=400, speculative_k=k, speculative_alpha=alpha,
             draft_model="tiny")
    req = r.requests
    assert (req["generated"] == 400).all()
    steps = r.iterations["decode_seqs"].sum()
    # tokens per verification step: the closed form, less the truncation at each request's end
    assert (req["output_tokens"] - 1).sum() / steps == pytest.approx(closed_form_tokens_per_step(alpha, k), rel=0.03)
    plain = _run(chip, rate_per_s=100.0, duration_s=1.0, output=400)
    assert r.summary["tpot_p50_s"] != plain.summary["tpot_p50_s"]
    with pytest.raises(WorkloadError, match="alpha"):
        Speculative(3, 1.5)
    with pytest.raises(WorkloadError, match="profile"):
        Speculative(3, (0.5, 0.5))


# ----------------------------------------------------------------------------- latency model

#: measured bound of the grid interpolation on tiny / npu_128x128 over the cases below (see
#: validation/serving_interpolation.py for the Llama-3-8B / H200 measurement in the README)
TINY_INTERPOLATION_BOUND = 0.15


def test_interpolation_error_vs_exact_iterations(chip):
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation"))
    from serving_interpolation import measure

    res = measure(CHIP, MODEL, 24, seed=5, cache_dir=False)
    errs = [abs(c["rel_error"]) for c in res["cases"]]
    assert max(errs) < TINY_INTERPOLATION_BOUND, res["cases"]
    assert np.mean(errs) < 0.06
    # grid points themselves are exact: a decode batch at a grid batch and context
    from sim.apps.serving.latency import LatencyModel
    from sim.model.workload.models import load_model_spec

    lm = LatencyModel(chip, load_model_spec(MODEL), cache_dir=False)
    # (grid points sit at key lengths = cached + new tokens of 2^k and 1.5 x 2^k)
    assert lm.iteration((), 16, 16 * 255).seconds == pytest.approx(lm.exact((), 16, 255).seconds, rel=1e-9)
    assert lm.iteration(((64, 0),), 0, 0).seconds == pytest.approx(lm.exact(((64, 0),), 0, 0).seconds, rel=1e-9)


def test_latency_table_is_cached_on_disk(chip, tmp_path):
    from sim.apps.serving.latency import LatencyModel, clear_memory_cache
    from sim.model.workload.models import load_model_spec

    spec = load_model_spec(MODEL)
    clear_memory_cache()
    lm = LatencyModel(chip, spec, cache_dir=tmp_path)
    a = lm.iteration(((100, 20),), 5, 5 * 300)
    lm.flush()
    assert lm.simulated > 0
    clear_memory_cache()
    lm2 = LatencyModel(chip, spec, cache_dir=tmp_path)
    assert lm2.iteration(((100, 20),), 5, 5 * 300) == a
    assert lm2.simulated == 0


# ----------------------------------------------------------------------------- determinism, workloads


def test_deterministic_by_seed(chip):
    a = _run(chip, seed=7)
    b = _run(chip, seed=7)
    pd.testing.assert_frame_equal(a.requests, b.requests)
    pd.testing.assert_frame_equal(a.iterations, b.iterations)
    sa, sb = dict(a.summary), dict(b.summary)
    for k in ("grid_points_simulated", "grid_points_cached"):   # how much the cache held, not the result
        sa.pop(k), sb.pop(k)
    assert sa == sb
    c = _run(chip, seed=8)
    assert not a.requests["arrival_s"].equals(c.requests["arrival_s"])


def test_arrival_processes_and_lengths():
    g = generate(rate_per_s=50.0, num_requests=20000, arrival="gamma", cv=3.0, seed=0)
    gaps = np.diff([0.0] + [r.arrival_s for r in g])
    assert gaps.mean() == pytest.approx(1 / 50, rel=0.05)
    assert gaps.std() / gaps.mean() == pytest.approx(3.0, rel=0.1)
    p = generate(rate_per_s=50.0, num_requests=20000, seed=0)
    gp = np.diff([0.0] + [r.arrival_s for r in p])
    assert gp.std() / gp.mean() == pytest.approx(1.0, rel=0.05)
    f = generate(rate_per_s=8.0, duration_s=10.0, arrival="fixed")      # gaps of exactly 0.125 s
    assert len(f) == 79 and f[-1].arrival_s == 9.875
    ln = LengthDist("lognormal", mean_log=np.log(300), sigma_log=0.5, low=10, high=5000)
    x = ln.sample(np.random.default_rng(0), 20000)
    assert np.median(x) == pytest.approx(300, rel=0.03)
    assert generate(rate_per_s=5.0, duration_s=20.0, seed=4) == generate(rate_per_s=5.0, duration_s=20.0, seed=4)


def test_trace_round_trip_and_replay(chip, tmp_path):
    reqs = generate(rate_per_s=100.0, duration_s=1.0, prompt=LengthDist("uniform", low=10, high=300), output=20,
                    prefix_groups=2, prefix_tokens=8, seed=2)
    p = save_trace(reqs, tmp_path / "t.csv")
    back = load_trace(p)
    assert back == reqs
    jl = tmp_path / "t.jsonl"
    jl.write_text("\n".join(json.dumps({"arrival_s": r.arrival_s, "prompt_tokens": r.prompt_tokens,
                                        "output_tokens": r.output_tokens}) for r in reversed(reqs)))
    assert [r.arrival_s for r in load_trace(jl)] == [r.arrival_s for r in reqs]
    a = serve(chip, MODEL, trace=str(p), cache_dir=False)
    b = serve(chip, MODEL, list(reqs), cache_dir=False)
    pd.testing.assert_frame_equal(a.requests, b.requests)


# ----------------------------------------------------------------------------- bad input, overload


@pytest.mark.parametrize("text,field", [
    ("arrival_s,prompt_tokens\n0.1,10\n", "output_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0.1,ten,5\n", "prompt_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n-1,10,5\n", "arrival_s"),
    ("arrival_s,prompt_tokens,output_tokens\n0.1,10,0\n", "output_tokens"),
    ("arrival_s,prompt_tokens,output_tokens\n0.1,10.5,3\n", "prompt_tokens"),
])
def test_malformed_trace_names_the_field(tmp_path, text, field):
    p = tmp_path / "bad.csv"
    p.write_text(text)
    with pytest.raises(WorkloadError, match=field):
        load_trace(p)
    q = tmp_path / "bad.jsonl"
    q.write_text('{"arrival_s": 0.1, "prompt_tokens": 3}\n')
    with pytest.raises(WorkloadError, match="bad.jsonl:1: field 'output_tokens' is missing"):
        load_trace(q)
    q.write_text('{"arrival_s": 0.1, "prompt_tokens": 3, "output_tokens": 4}\nnot json\n')
    with pytest.raises(WorkloadError, match="bad.jsonl:2: not valid JSON"):
        load_trace(q)


def test_bad_inputs_raise_clear_errors(chip):
    with pytest.raises(WorkloadError, match="rate"):
        _run(chip, rate_per_s=-3.0)
    with pytest.raises(UnknownNameError, match="SLO metric 'ttfb'.*valid: e2e, queue, tpot, ttft"):
        _run(chip, slos={"ttfb": 0.1})
    with pytest.raises(WorkloadError, match="kv_capacity_tokens.*smaller than one request"):
        _run(chip, kv_capacity_tokens=256)
    with pytest.raises(UnknownNameError, match="scheduler 'orca'.*continuous"):
        _run(chip, scheduler="orca")
    with pytest.raises(UnknownNameError, match="router"):
        _run(chip, router="random")
    with pytest.raises(UnknownNameError, match="serve parameter"):
        _run(chip, replica=2)
    with pytest.raises(WorkloadError, match="replicas"):
        _run(chip, scheduler="disaggregated", replicas=1)
    with pytest.raises(WorkloadError, match="max_context"):
        serve(chip, MODEL, [Request(0, 0.0, 2000, 100)], cache_dir=False)
    with pytest.raises(WorkloadError, match="kv_capacity_tokens"):
        serve(chip, "llama3-70b", [Request(0, 0.0, 20, 10)], cache_dir=False)   # weights alone overflow


def test_overload_stops_and_reports(chip):
    r = _run(chip, rate_per_s=20000.0, duration_s=0.2, max_queue=20, drain_s=0.01)
    s = r.summary
    assert s["dropped"] > 0 and not s["stable"]
    assert s["dropped"] + s["finished"] + s["unfinished"] == s["requests"]
    r2 = _run(chip, rate_per_s=20000.0, duration_s=0.2, drain_s=0.001)
    assert r2.summary["unfinished"] > 0 and r2.summary["queue_growth_per_s"] > 0
    assert r2.summary["makespan_s"] == pytest.approx(r2.requests["arrival_s"].max() + 0.001)


def test_kv_cache_accounting():
    kv = KVCache(10, 16, prefix_caching=True)
    assert kv.allocate(4) and kv.free == 6
    e = kv.insert("a", 40)            # two whole blocks move to the cache
    assert e.blocks == 2 and kv.prefix_blocks == 2
    kv.release(2)
    kv.unref(e)
    assert kv.free == 8
    assert not kv.allocate(11)         # 8 free + 2 evictable < 11
    assert kv.allocate(9) and kv.evictions == 1 and kv.free == 1
    with pytest.raises(RuntimeError):
        kv.release(11)
    with pytest.raises(WorkloadError, match="block"):
        KVCache(0, 16)


# ----------------------------------------------------------------------------- metrics, CLI


def test_goodput_cost_and_energy(chip):
    r = _run(chip, slos={"ttft": 1.0, "tpot": 1.0}, price_per_chip_hour=3.6)
    s = r.summary
    assert s["slo_attainment"] == 1.0 and s["goodput_req_per_s"] == pytest.approx(s["throughput_req_per_s"])
    tight = _run(chip, slos={"ttft": 1e-9})
    assert tight.summary["goodput_req_per_s"] == 0.0
    assert s["cost_per_million_output_tokens"] == pytest.approx(3.6 * s["makespan_s"] / 3600 / s["output_tokens"] * 1e6)
    assert s["energy_j"] == pytest.approx(r.iterations["energy_j"].sum()) and s["energy_j"] > 0
    tpot = r.requests["tpot_s"].dropna()
    assert s["tpot_p50_s"] == pytest.approx(float(np.percentile(tpot, 50)))


def test_cli_json_and_errors(capsys, tmp_path):
    from sim.cli import main

    rc = main(["serve", CHIP, MODEL, "--rate", "200", "--duration", "1", "--prompt", "uniform:16:200",
               "--output", "lognormal:20:0.5:2:100", "--scheduler", "chunked_prefill", "--slo-ttft-ms", "5",
               "--json", "--out", str(tmp_path / "o")])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    s = out["summary"]
    assert s["scheduler"] == "chunked_prefill" and s["finished"] == s["requests"] > 100
    assert "goodput_req_per_s" in s and s["ttft_p99_s"] > 0
    assert (tmp_path / "o" / "requests.csv").exists() and (tmp_path / "o" / "iterations.csv").exists()
    assert main(["serve", CHIP, MODEL, "--rate", "-2"]) == 2
    assert main(["serve", CHIP, MODEL, "--slo", "latency=3"]) == 2
    assert main(["serve", CHIP, MODEL, "--prompt", "gauss:3"]) == 2
    err = capsys.readouterr().err
    assert "rate" in err and "SLO metric" in err and "--prompt" in err


def test_h200_decode_iterations_stay_within_measured_band():
    """The stored H200 serving-loop measurement (validation/measurements/serving): batch-1
    decode iterations (CUDA-graph replays, the replay's host time included) against the
    serving latency model, within the band in thresholds.json."""
    from pathlib import Path

    from sim.apps.serving.latency import LatencyModel
    from sim.spec.registry import load_chip
    from sim.model.workload.models import load_model_spec

    d = Path(__file__).resolve().parents[1] / "validation" / "measurements" / "serving"
    band = json.loads((d / "thresholds.json").read_text())["decode_batch1_rel_error"]
    its = pd.read_csv(d / "iterations.csv")
    g = its[(its["graph"] == 1) & (its["decode_seqs"] == 1)]
    g = g[(g["decode_context_tokens"] > 128) & (g["decode_context_tokens"] <= 512)]
    assert len(g) > 200
    measured = float((g["end_s"] - g["start_s"]).median())
    ctx = int(g["decode_context_tokens"].median())
    lm = LatencyModel(load_chip("h200_sxm"), load_model_spec("llama3-8b"), cache_dir=False)
    err = lm.launched(lm.iteration((), 1, ctx), graph=True).seconds / measured - 1.0
    assert band["min"] <= err <= band["max"], err


def test_plots_write_pngs(chip, tmp_path):
    from sim.apps.serving import plots

    runs = [_run(chip, rate_per_s=r, duration_s=0.3, replicas=2) for r in (200.0, 800.0)]
    for p in (plots.latency_cdf(runs[0], tmp_path / "cdf.png"), plots.timeline(runs[1], tmp_path / "tl.png"),
              plots.throughput_latency(runs, tmp_path / "tl2.png")):
        assert p.stat().st_size > 5000


def test_search_marks_slo_and_pareto_front(chip):
    from sim.apps.serving.search import pareto_front, search

    assert pareto_front([(1, 5), (2, 4), (1, 4), (3, 1)]) == [True, True, False, True]
    reqs = generate(rate_per_s=1500.0, duration_s=0.2, prompt=200, output=40, seed=0)
    df = search(chip, MODEL, {"replicas": [1, 2], "scheduler": ["continuous", "chunked_prefill"]},
                slos={"ttft": 2e-3, "tpot": 1e-3}, requests=reqs, cache_dir=False)
    assert len(df) == 4 and df["pareto"].sum() >= 1
    assert (df.loc[df["pareto"], "meets_slo"]).all()
    with pytest.raises(UnknownNameError, match="search axis"):
        search(chip, MODEL, {"replica": [1]}, requests=reqs)


@pytest.mark.slow
def test_power_window_prices_an_iteration_under_the_tdp_at_the_chips_clock():
    """The serving model's power window (sim.apps.serving.latency): a budget-filled 512-token
    prefill iteration of Llama-3-8B on h200_sxm averages under 700 W at clock_mhz, so it is
    priced with every op there - exactly the DVFS-off model - although per-op DVFS throttles
    its large GEMMs (slower); with a TDP it does not fit on average, each op's own DVFS clock."""
    from sim.apps.serving.latency import LatencyModel
    from sim.model.workload.models import load_model_spec
    from sim.spec.registry import load_chip

    spec = load_model_spec("llama3-8b")
    it = ([(512, 0)], 0, 0)
    chip = load_chip("h200_sxm")
    windowed = LatencyModel(chip, spec, cache_dir=False)
    c = windowed.iteration(*it)
    off = LatencyModel(load_chip("h200_sxm", ["power.dvfs=false"]), spec, cache_dir=False).iteration(*it)
    per_op = LatencyModel(chip, spec, cache_dir=False)
    per_op._chip_top = None              # the window off: each op at its own DVFS clock
    throttled = per_op.iteration(*it)
    assert windowed.fits_power(c) and c.energy_j / c.seconds <= chip.power.tdp_w
    assert c.seconds == off.seconds and c.energy_j == off.energy_j
    assert throttled.seconds > 1.02 * c.seconds      # per op, the GEMMs run below clock_mhz
    # a 400 W board: at clock_mhz the iteration averages above it, so each op gets its own clock
    low = load_chip("h200_sxm", ["power.tdp_w=400"])
    lm_low = LatencyModel(low, spec, cache_dir=False)
    c_low = lm_low.iteration(*it)
    per_low = LatencyModel(low, spec, cache_dir=False)
    per_low._chip_top = None
    assert not lm_low.fits_power(off) and c_low.seconds == per_low.iteration(*it).seconds
    assert c_low.seconds > throttled.seconds
