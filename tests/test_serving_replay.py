"""CI replay of the measured H200 serving loop (validation/measurements/serving/run3, run by
validation/gpu/serving_loop.py): the stored requests (arrival, prompt and output tokens) go
through ``sim serve`` with the loop's policy, and every request-level percentile and the
per-iteration medians must stay within validation/measurements/serving/thresholds.json
(the recorded errors plus a margin; ``python validation/compare_serving.py
--record-thresholds`` re-records them).  No GPU needed."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sim.apps.serving.latency import LatencyModel
from sim.apps.serving.replay import loop_policy, predict_iterations, read_run, replay
from sim.model.workload.models import load_model_spec
from sim.spec.registry import load_chip

RUN = Path(__file__).resolve().parents[1] / "validation" / "measurements" / "serving" / "run3"
THRESHOLDS = RUN.parent / "thresholds.json"
CHIP, MODEL = "h200_sxm", "llama3-8b"


@pytest.fixture(scope="module")
def run():
    return read_run(RUN)


@pytest.fixture(scope="module")
def bounds():
    return json.loads(THRESHOLDS.read_text())["replay"]


@pytest.fixture(scope="module")
def lm():
    return LatencyModel(load_chip(CHIP), load_model_spec(MODEL))


def test_loop_policy_is_read_from_the_run(run):
    assert loop_policy(run) == {"scheduler": "chunked_prefill", "token_budget": 512, "max_batch": 128,
                                "graphs": "decode"}


def test_request_percentiles_within_thresholds(run, bounds):
    """TTFT, TPOT and e2e p50/p90/p99 at each measured rate, within |recorded error| + margin."""
    res = replay(CHIP, MODEL, run)
    assert sorted(map(str, res)) == sorted(bounds["requests"])
    bad = []
    for rate, row in res.items():
        assert row["finished_sim"] == row["requests"] == row["finished_measured"]
        for key, lim in bounds["requests"][str(rate)].items():
            err = row[f"{key}_rel_error"]
            if not abs(err) <= lim:
                bad.append(f"rate {rate}/s {key}: {err:+.3f} (bound +-{lim:.3f})")
    assert not bad, "; ".join(bad)


def test_iteration_medians_within_thresholds(run, bounds, lm):
    """Every measured iteration priced from its composition, launched as it was: the median
    relative error of CUDA-graph (decode-only) and eager (mixed) iterations within bounds.
    The device time alone - no host model - misses the eager ones by far more than their
    bound: the check tells the modelled cause from its absence."""
    its = run.iterations
    measured = (its["end_s"] - its["start_s"]).to_numpy()
    pred = predict_iterations(lm, its)
    graph = its["graph"].to_numpy() == 1
    for kind, sel in (("decode_only_graph", graph), ("mixed_eager", ~graph)):
        err = float(np.median(pred[sel] / measured[sel] - 1.0))
        assert abs(err) <= bounds["iterations"][kind], (kind, err)
    # without the host: the eager iterations' device time alone
    from sim.apps.serving.replay import _chunks

    eager = its[~graph]
    device = np.array([lm.iteration(_chunks(r.chunks), int(r.decode_seqs), int(r.decode_context_tokens)).seconds
                       for r in eager.itertuples(index=False)])
    err_device = float(np.median(device / measured[~graph] - 1.0))
    assert err_device < -0.5 and abs(err_device) > bounds["iterations"]["mixed_eager"], err_device


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
    import importlib.util

    spec = importlib.util.spec_from_file_location("fit_serving_host", RUN.parents[2] / "fit_serving_host.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    params, d = mod.fit()
    assert len(d) >= 8 and float((d["fit_s"] / d["host_s"] - 1).abs().max()) < 0.15
    h = LatencyModel(load_chip(CHIP), load_model_spec(MODEL)).stack.host
    for key, v in params.items():
        assert getattr(h, key) == pytest.approx(round(v), abs=1.0), key
