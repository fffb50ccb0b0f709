"""CI replay of the measured H200 serving loop (validation/gpu/serving_loop.py): the stored
requests (arrival, prompt and output tokens) go through ``sim serve`` with the loop's policy,
and every request-level percentile and the per-iteration medians must stay within
validation/measurements/serving/thresholds.json (the recorded errors plus a margin; ``python
validation/compare_serving.py --record-thresholds`` re-records the gate's).  Two stored runs:

* run 6 (the gate, ``replay``): the loop with every iteration from CUDA graphs
  (``--graphs all``), priced with stacks/graph_serving_loop.yaml;
* run 3 (``replay_run3``, kept as recorded when it was the gate): the loop with eager
  prompt-chunk iterations (``--graphs decode``), priced with eager_pytorch.yaml and its host rule.

No GPU needed."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from script_import import load_script

from sim.apps.serving.latency import LatencyModel
from sim.apps.serving.replay import _chunks, loop_latency_model, loop_policy, predict_iterations, read_run, replay
from sim.model.workload.models import load_model_spec
from sim.spec.registry import load_chip

SERVING = Path(__file__).resolve().parents[1] / "validation" / "measurements" / "serving"
RUN, RUN3 = SERVING / "run6", SERVING / "run3"
THRESHOLDS = SERVING / "thresholds.json"
CHIP, MODEL = "h200_sxm", "llama3-8b"


@pytest.fixture(scope="module")
def run():
    return read_run(RUN)


@pytest.fixture(scope="module")
def run3():
    return read_run(RUN3)


@pytest.fixture(scope="module")
def thresholds():
    return json.loads(THRESHOLDS.read_text())


@pytest.fixture(scope="module")
def lm(run3):
    """The eager loop's deployment (the chip's stack, eager_pytorch)."""
    return loop_latency_model(load_chip(CHIP), MODEL, run3)


@pytest.fixture(scope="module")
def lm_graph(run):
    """Run 6's deployment: graph_serving_loop, 128 slots, a 2,048-token cache."""
    return loop_latency_model(load_chip(CHIP), MODEL, run)


def test_loop_policy_is_read_from_the_run(run, run3):
    base = {"scheduler": "chunked_prefill", "token_budget": 512, "max_batch": 128}
    assert loop_policy(run) == {**base, "graphs": "all", "stack": "graph_serving_loop"}
    # runs made before --graphs existed ran decode graphs and eager prompt chunks
    assert loop_policy(run3) == {**base, "graphs": "decode", "stack": "eager_pytorch"}


def test_the_profile_pads_as_the_loop_did(run, lm_graph):
    """graph_serving_loop's token buckets are the ones the loop captured (env.json), every
    iteration of run 6 replayed a graph, and the bucket the profile gives each iteration's new
    tokens and logit rows is the one the loop replayed (iterations.csv)."""
    g = lm_graph.stack.graphs
    assert list(g.token_buckets) == run.env["graph_token_buckets"]
    its = run.iterations
    assert (its["graph"] == 1).all()
    tokens = its["decode_seqs"] + its["prefill_tokens"]
    rows = its["decode_seqs"] + its["prefill_chunks"]
    assert [g.bucket(t) for t in tokens] == its["tokens_padded"].tolist()
    mixed = its["prefill_chunks"] > 0
    assert [g.bucket(r) for r in rows[mixed]] == its.loc[mixed, "logit_rows_padded"].tolist()


@pytest.mark.parametrize("which,key", [("run", "replay"), ("run3", "replay_run3")])
def test_request_percentiles_within_thresholds(which, key, request, thresholds):
    """TTFT, TPOT and e2e p50/p90/p99 at each measured rate, within |recorded error| + margin."""
    measured = request.getfixturevalue(which)
    bounds = thresholds[key]
    res = replay(CHIP, MODEL, measured)
    assert sorted(map(str, res)) == sorted(bounds["requests"])
    bad = []
    for rate, row in res.items():
        assert row["finished_sim"] == row["requests"] == row["finished_measured"]
        for k, lim in bounds["requests"][str(rate)].items():
            err = row[f"{k}_rel_error"]
            if not abs(err) <= lim:
                bad.append(f"rate {rate}/s {k}: {err:+.3f} (bound +-{lim:.3f})")
    assert not bad, "; ".join(bad)


def test_graph_run_meets_the_issue_target(thresholds):
    """Issue 13's target, on the recorded replay of run 6: TTFT and TPOT p50 within 10 %, p99
    within 20 % of the real loop at every rate."""
    rec = thresholds["replay"]["recorded"]["requests"]
    assert len(rec) == 3
    for rate, row in rec.items():
        for m in ("ttft", "tpot"):
            assert abs(row[f"{m}_p50"]) <= 0.10, (rate, m, row[f"{m}_p50"])
            assert abs(row[f"{m}_p99"]) <= 0.20, (rate, m, row[f"{m}_p99"])


def test_graph_iteration_medians_within_thresholds(run, thresholds, lm_graph):
    """Every iteration of run 6 priced from its composition as a graph replay (dense work and LM
    head over their buckets, plus the graph set-up): the median relative error of decode-only
    and mixed iterations within bounds.  Priced unpadded, the mixed iterations come out cheaper
    (2.7 % at the median of the padded ones when recorded) and further below the measurement:
    the padding the profile declares is device time the loop spends."""
    bounds = thresholds["replay"]["iterations"]
    its = run.iterations
    measured = (its["end_s"] - its["start_s"]).to_numpy()
    pred = predict_iterations(lm_graph, its)
    mixed = (its["prefill_chunks"] > 0).to_numpy()
    errs = {}
    for kind, sel in (("decode_only_graph", ~mixed), ("mixed_graph", mixed)):
        errs[kind] = float(np.median(pred[sel] / measured[sel] - 1.0))
        assert abs(errs[kind]) <= bounds[kind], (kind, errs[kind])
    unpadded = np.array([lm_graph.launched(lm_graph.iteration(_chunks(r.chunks), int(r.decode_seqs),
                                                              int(r.decode_context_tokens)), True).seconds
                         for r in its[mixed].itertuples(index=False)])
    padded = (its["tokens_padded"] != its["decode_seqs"] + its["prefill_tokens"]).to_numpy()[mixed]
    assert float(np.median(pred[mixed][padded] / unpadded[padded] - 1.0)) > 0.01
    assert float(np.median(unpadded / measured[mixed] - 1.0)) < errs["mixed_graph"] - 0.01


def test_eager_iteration_medians_within_thresholds(run3, thresholds, lm):
    """Run 3, every measured iteration priced from its composition, launched as it was: the
    median relative error of CUDA-graph (decode-only) and eager (mixed) iterations within
    bounds.  The device time alone - no host model - misses the eager ones by far more than
    their bound: the check tells the modelled cause from its absence."""
    bounds = thresholds["replay_run3"]["iterations"]
    its = run3.iterations
    measured = (its["end_s"] - its["start_s"]).to_numpy()
    pred = predict_iterations(lm, its)
    graph = its["graph"].to_numpy() == 1
    for kind, sel in (("decode_only_graph", graph), ("mixed_eager", ~graph)):
        err = float(np.median(pred[sel] / measured[sel] - 1.0))
        assert abs(err) <= bounds[kind], (kind, err)
    # without the host: the eager iterations' device time alone
    eager = its[~graph]
    device = np.array([lm.iteration(_chunks(r.chunks), int(r.decode_seqs), int(r.decode_context_tokens)).seconds
                       for r in eager.itertuples(index=False)])
    err_device = float(np.median(device / measured[~graph] - 1.0))
    assert err_device < -0.5 and abs(err_device) > bounds["mixed_eager"], err_device


def test_host_model_arithmetic(lm):
    """launched(): a graph iteration adds the replay's host time; an eager one takes the slower
    of device and kernels x host time per kernel (the stack's calibration)."""
    h = lm.stack.host
    assert h is not None and h.eager_ns_per_kernel > 0 and h.graph_replay_ns > 0
    c = lm.iteration([(256, 0)], 16, 16 * 256)
    assert c.kernels > 500
    g = lm.launched(c, True)
    assert g.seconds == pytest.approx(c.seconds + h.graph_replay_ns * 1e-9)
    e = lm.launched(c, False)
    host_ns = (c.kernels * h.eager_ns_per_kernel + c.attention_calls * h.eager_ns_per_attention_call
               + c.masked_calls * h.eager_ns_per_masked_attention_call
               + c.decode_calls * h.eager_ns_per_decode_attention_call)
    assert e.seconds == pytest.approx(max(c.seconds, host_ns * 1e-9))
    assert e.energy_j == c.energy_j and e.kernels == c.kernels


def test_attention_calls_are_counted_per_layer_and_kind(lm):
    """One call per layer and prompt chunk (masked when tokens are cached before it), one per
    layer for the decoding sequences - what the host rule prices beyond the kernels."""
    layers = lm.model.num_layers
    c = lm.exact([(256, 0), (128, 512)], 16, 512)
    assert (c.attention_calls, c.masked_calls, c.decode_calls) == (2 * layers, layers, layers)
    d = lm.exact([], 8, 256)
    assert (d.attention_calls, d.masked_calls, d.decode_calls) == (0, 0, layers)
    # the grid's interpolated iteration counts the same calls
    g = lm.iteration([(256, 0), (128, 512)], 16, 16 * 512)
    assert (g.attention_calls, g.masked_calls, g.decode_calls) == (2 * layers, layers, layers)
    # a chunk's call costs host time beyond its kernels
    h = lm.stack.host
    one, two = lm.iteration([(256, 0)], 16, 16 * 256), lm.iteration([(128, 0), (128, 0)], 16, 16 * 256)
    extra = h.eager_host_ns(two.kernels, two.attention_calls) - h.eager_host_ns(one.kernels, one.attention_calls)
    assert extra >= layers * h.eager_ns_per_attention_call > 0


def test_host_rule_is_the_microbenchmark_fit():
    """stacks/eager_pytorch.yaml's eager host numbers are validation/fit_serving_host.py's fit
    of the stored drift-cancelled microbenchmark, to the nanosecond."""
    mod = load_script(RUN3.parents[2] / "fit_serving_host.py")
    params, d = mod.fit()
    assert len(d) >= 8 and float((d["fit_s"] / d["host_s"] - 1).abs().max()) < 0.15
    h = LatencyModel(load_chip(CHIP), load_model_spec(MODEL)).stack.host
    for key, v in params.items():
        assert getattr(h, key) == pytest.approx(round(v), abs=1.0), key


def test_graph_replay_time_is_the_microbenchmark_median():
    """stacks/graph_serving_loop.yaml's graph_replay_ns is the median host set-up of the stored
    graph microbenchmark (serving_loop.py --micro-graph-host, run6/smoke/graph_host.csv)."""
    import pandas as pd

    host = pd.read_csv(RUN / "smoke" / "graph_host.csv")["host_s"]
    h = LatencyModel(load_chip(CHIP), load_model_spec(MODEL), stack="graph_serving_loop").stack.host
    assert h.graph_replay_ns == pytest.approx(float(host.median()) * 1e9, abs=1.0)
