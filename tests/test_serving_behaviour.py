"""Request-level serving (sim.apps.serving), behaviours test_serving.py leaves out: the routers,
tensor parallelism, the summary's metrics, the length distributions and dynamic batching's
timeout.  Every expectation is independent of the simulator's output: worked out by hand
from the constructed requests, a closed form of the chip or the model, or a statistical
bound at a fixed seed.  (Small chip, tiny model, a few dozen requests: seconds in all.)"""
from __future__ import annotations

import math
import zlib

import numpy as np
import pytest

from sim.apps.serving import Request, serve
from sim.apps.serving.workload import LengthDist, generate
from sim.errors import SimError

CHIP, MODEL = "npu_128x128", "tiny"

#: npu_128x128 by hand (arch_configs/npu_128x128.yaml): 4 cores x one 128x128 array, 1 bf16 MAC
#: per PE per cycle (2 FLOPs) at 1050 MHz; one HBM3 stack of 16 channels x 2 pseudo-channels x
#: 32 bits at 6.4 Gb/s per pin; 16 GiB
PEAK_BF16 = 4 * 128 * 128 * 2 * 1050e6          # 137.6 TFLOP/s
DRAM_BW = 16 * 2 * 32 * 6.4e9 / 8                 # 819.2 GB/s
DRAM_CAP = 16 * 2**30


@pytest.fixture(scope="module")
def chip():
    from sim.spec.registry import load_chip

    return load_chip(CHIP)


@pytest.fixture(scope="module")
def spec():
    from sim.model.workload.models import load_model_spec

    return load_model_spec(MODEL)


def _serve(chip, reqs, **kw):
    return serve(chip, MODEL, list(reqs), cache_dir=False, **kw)


def _linear_params(spec) -> int:
    """Weights of the decoder's matrices (QKV, output, gated MLP), from the model's sizes: every
    token multiplies each once (2 FLOPs a weight)."""
    h, hd = spec.hidden_size, spec.head_dim
    q, kv = spec.num_heads * hd, spec.num_kv_heads * hd
    per_layer = h * (q + 2 * kv) + q * h + 3 * h * spec.ffn_size
    return spec.num_layers * per_layer


# ----------------------------------------------------------------------------- routers


def test_round_robin_assigns_request_i_to_replica_i_mod_n(chip):
    # sizes that least_outstanding would spread differently (a long one first)
    sizes = [(1500, 300), (20, 5), (40, 3), (900, 50), (30, 2), (64, 64), (10, 1), (700, 9), (15, 15), (80, 8)]
    reqs = [Request(i, 0.0005 * i, p, o) for i, (p, o) in enumerate(sizes)]
    for n in (2, 3, 4):
        r = _serve(chip, reqs, replicas=n, router="round_robin")
        assert list(r.requests["replica"]) == [i % n for i in range(len(reqs))]
        assert (r.requests["status"] == "finished").all()
        # every iteration ran on the replica its requests were routed to: prompts in = prompts routed
        its = r.iterations
        for k in range(n):
            routed = r.requests.loc[r.requests["replica"] == k, "prompt_tokens"].sum()
            assert its.loc[its["replica"] == k, "prefill_tokens"].sum() == routed


def test_least_outstanding_routes_to_the_replica_with_fewest_tokens_in_flight(chip):
    """3 replicas. At t=0 a long request (1000 + 200 tokens) then six short ones (50 + 10): by
    hand, the long one takes replica 0 (all empty, lowest index first), and the short ones
    alternate between replicas 1 and 2 (60, 120, 180 tokens each: always below 1200), where
    round robin would put every third on replica 0.  At t=10 s everything has finished, so
    every replica is back at 0 outstanding tokens: the next two go to 0 and 1."""
    reqs = [Request(0, 0.0, 1000, 200)] + [Request(i, 0.0, 50, 10) for i in range(1, 7)]
    reqs += [Request(7, 10.0, 50, 10), Request(8, 10.0, 50, 10)]
    r = _serve(chip, reqs, replicas=3, router="least_outstanding")
    req = r.requests
    assert (req.loc[:6, "finish_s"] < 10.0).all()           # the premise of the t=10 s expectation
    assert list(req["replica"]) == [0, 1, 2, 1, 2, 1, 2, 0, 1]
    rr = _serve(chip, reqs, replicas=3, router="round_robin")
    assert list(rr.requests["replica"]) == [0, 1, 2, 0, 1, 2, 0, 1, 2]
    # the long request no longer shares its replica with short ones: their latency drops
    short = req["id"].between(1, 6)
    assert req.loc[short, "e2e_s"].mean() < rr.requests.loc[short, "e2e_s"].mean()


def test_least_outstanding_picks_a_minimum_at_every_arrival(chip):
    """A Poisson workload on 3 replicas: at each request's arrival, the tokens in flight on each
    replica (prompt + output of the requests routed there that arrived before it and finish after
    it, recomputed from the requests table) are smallest on the replica it went to."""
    reqs = generate(rate_per_s=3000.0, num_requests=150, prompt=LengthDist("uniform", low=16, high=600),
                    output=LengthDist("uniform", low=2, high=120), seed=11)
    r = _serve(chip, reqs, replicas=3, router="least_outstanding")
    req = r.requests
    assert (req["status"] == "finished").all()
    arr, fin = req["arrival_s"].to_numpy(), req["finish_s"].to_numpy()
    tok = (req["prompt_tokens"] + req["output_tokens"]).to_numpy()
    rep = req["replica"].to_numpy().astype(int)
    busy = 0
    for i in range(len(req)):
        inflight = (np.arange(len(req)) < i) & (fin > arr[i])
        load = [int(tok[inflight & (rep == k)].sum()) for k in range(3)]
        assert load[rep[i]] == min(load), (i, load, rep[i])
        busy += max(load) > 0
    assert busy > 100                                          # the loads were mostly non-trivial


def _prefix_workload(n=48, groups=("sys-a", "sys-b", "sys-c")):
    """Requests 10 ms apart (each prefill long done before the next arrives), each in one of
    ``groups`` (a seeded draw), a 64-token shared prefix in a 128-token prompt."""
    g = np.random.default_rng(5).integers(0, len(groups), size=n)
    return [Request(i, 0.01 * i, 128, 4, groups[g[i]], 64) for i in range(n)]


def test_prefix_affinity_keeps_a_prefix_on_one_replica(chip):
    reqs = _prefix_workload()
    # two requests without a prefix, together: they fall back to least_outstanding
    reqs += [Request(48, 0.485, 4, 2), Request(49, 0.485, 4, 2)]
    r = _serve(chip, reqs, replicas=4, router="prefix_affinity")
    req = r.requests
    with_prefix = req[req["prefix_id"].notna()]
    per_group = with_prefix.groupby("prefix_id")["replica"].nunique()
    assert (per_group == 1).all() and len(per_group) == 3
    # (its replica: a hash of the prefix id, not the load)
    for pid, rep in with_prefix.groupby("prefix_id")["replica"].first().items():
        assert rep == zlib.crc32(pid.encode()) % 4
    # prefix-less requests: least outstanding; the system is empty when they arrive (each
    # request finishes well within its 10 ms), so replica 0 (lowest index), then the next idle one
    assert with_prefix["finish_s"].max() < 0.485
    assert list(req.loc[req["prefix_id"].isna(), "replica"]) == [0, 1]


def test_prefix_affinity_beats_round_robin_on_prefix_hits(chip):
    """With prefix caching, a lookup misses only the first time its prefix reaches a replica
    (no eviction: the cache is far from full; no overlap: 10 ms between arrivals).  So, by hand,
    hits = requests - distinct (prefix, replica) pairs: under affinity the pairs are the
    prefixes (3); under round robin the (prefix of i, i mod 4) pairs of the workload."""
    reqs = _prefix_workload()
    n, reps = len(reqs), 4
    groups = [q.prefix_id for q in reqs]
    aff = _serve(chip, reqs, replicas=reps, router="prefix_affinity", prefix_caching=True)
    rr = _serve(chip, reqs, replicas=reps, router="round_robin", prefix_caching=True)
    rr_pairs = len({(g, i % reps) for i, g in enumerate(groups)})
    assert rr_pairs > 3
    for res, pairs in ((aff, 3), (rr, rr_pairs)):
        s = res.summary
        assert s["prefix_lookups"] == n
        assert s["prefix_hits"] == n - pairs
        assert s["prefix_hit_rate"] == pytest.approx((n - pairs) / n)
        # a hit serves the prefix's 64 tokens (4 whole blocks of 16) from the cache
        assert sorted(res.requests["cached_tokens"].unique()) == [0, 64]
        assert (res.requests["cached_tokens"] == 64).sum() == n - pairs
    assert aff.summary["prefix_hit_rate"] > rr.summary["prefix_hit_rate"]
    assert aff.iterations["prefill_tokens"].sum() < rr.iterations["prefill_tokens"].sum()


# ----------------------------------------------------------------------------- tensor parallelism


def test_tensor_parallel_chips_capacity_and_decode_latency(chip, spec):
    """TP=2 against TP=1 on the same 128 requests (2 replicas, all at t=0, 64 per replica)."""
    assert chip.interconnect is not None                    # TP's collectives need the chip links
    reqs = [Request(i, 0.0, 24, 6) for i in range(128)]
    runs = {tp: _serve(chip, reqs, replicas=2, tensor_parallel=tp) for tp in (1, 2)}
    for tp, r in runs.items():
        s = r.summary
        assert s["chips"] == 2 * tp and s["tensor_parallel"] == tp
        assert s["output_tokens"] == 128 * 6
        assert s["output_tokens_per_s_per_chip"] == pytest.approx(s["output_tokens_per_s"] / (2 * tp), rel=1e-12)
        assert s["mfu"] == pytest.approx(r.iterations["flops"].sum() / s["makespan_s"] / (PEAK_BF16 * 2 * tp),
                                         rel=1e-9)
        # KV capacity by hand: the replica's tp chips' memory x 0.9 (vLLM's gpu-memory-utilization)
        # less the bf16 weights (2 bytes a parameter), in 16-token blocks of K and V over every
        # layer and KV head (2 x 2 layers x 2 heads x 64 x 2 bytes = 1024 bytes a token; at TP=2
        # each chip holds one of the 2 KV heads, nothing replicated)
        kv_token = 2 * spec.num_layers * spec.num_kv_heads * spec.head_dim * 2
        assert kv_token == 1024
        blocks = math.floor((tp * DRAM_CAP * 0.9 - 2 * spec.params_total) / (16 * kv_token))
        assert s["kv_blocks_per_replica"] == blocks
    one, two = runs[1], runs[2]
    assert two.summary["kv_blocks_per_replica"] > 2 * one.summary["kv_blocks_per_replica"]  # weights split too
    # the work is split over the chips, not repeated: the group's FLOPs are TP=1's (plus the
    # all-reduces' additions and a few replicated element-wise ops)
    assert two.iterations["flops"].sum() == pytest.approx(one.iterations["flops"].sum(), rel=0.02)
    # decode-only iterations of 64 sequences, the same batches in both runs: each chip does half
    # the matrix work (it cannot take less than half the time: at best it halves) and the
    # all-reduces cost time (so more than half); at batch 64 the halved GEMMs outweigh them
    a, b = one.iterations, two.iterations
    cols = ["replica", "prefill_tokens", "decode_seqs", "decode_context_tokens"]
    assert (a[cols].to_numpy() == b[cols].to_numpy()).all()
    dec = (a["prefill_seqs"] == 0) & (a["decode_seqs"] == 64)
    assert dec.sum() >= 8
    t1 = (a["end_s"] - a["start_s"])[dec].to_numpy()
    t2 = (b["end_s"] - b["start_s"])[dec].to_numpy()
    assert (t2 < t1).all() and (t2 > t1 / 2).all(), (t1, t2)
    # TP=4 over 2 KV heads: each chip keeps one head, so the group stores every head twice
    # (its cache and its K/V weight columns: 2 layers x 64 x 128 K/V columns x 2 bytes more)
    four = _serve(chip, reqs[:8], replicas=1, tensor_parallel=4).summary
    kv_token_4 = 2 * kv_token
    extra_w = spec.num_layers * spec.hidden_size * 2 * spec.num_kv_heads * spec.head_dim * 2
    assert four["kv_blocks_per_replica"] == math.floor((4 * DRAM_CAP * 0.9 - 2 * spec.params_total - extra_w)
                                                       / (16 * kv_token_4))
    assert four["kv_blocks_per_replica"] < 2.1 * one.summary["kv_blocks_per_replica"]
    # a chip without chip-to-chip links cannot run the all-reduces
    with pytest.raises(SimError, match="interconnect"):
        serve("edge_npu", MODEL, [Request(0, 0.0, 16, 2)], tensor_parallel=2, cache_dir=False)


# ----------------------------------------------------------------------------- metrics


def test_queueing_delay_is_first_schedule_minus_arrival(chip):
    """One replica, one sequence at a time, two requests at t=0: the second is scheduled when
    the first has finished, so its queueing delay is the first's end-to-end time."""
    r = _serve(chip, [Request(0, 0.0, 64, 8), Request(1, 0.0, 64, 8)], max_batch=1)
    a, b = r.requests.iloc[0], r.requests.iloc[1]
    assert a["queue_s"] == 0.0 and a["first_sched_s"] == 0.0
    assert b["first_sched_s"] == pytest.approx(a["finish_s"], abs=1e-15)
    assert b["queue_s"] == pytest.approx(a["finish_s"], abs=1e-15)
    its = r.iterations
    # the first's iterations: its prefill and 7 decodes; the second starts with the 9th
    assert len(its) == 16 and its["start_s"].iloc[8] == pytest.approx(b["first_sched_s"], abs=1e-15)
    assert r.summary["queue_mean_s"] == pytest.approx(b["queue_s"] / 2)


def test_summary_metrics_recomputed_from_the_tables(chip, spec):
    reqs = generate(rate_per_s=1500.0, num_requests=200, prompt=LengthDist("uniform", low=16, high=500),
                    output=LengthDist("uniform", low=2, high=60), seed=21)
    r = _serve(chip, reqs, replicas=2)
    req, its, s = r.requests, r.iterations, r.summary
    assert (req["status"] == "finished").all() and s["chips"] == 2
    # queueing delay: each request is first scheduled at the start of an iteration that
    # prefills on its replica, no earlier than it arrives
    starts = {k: set(g["start_s"]) for k, g in its[its["prefill_seqs"] > 0].groupby("replica")}
    for row in req.itertuples():
        assert row.first_sched_s in starts[row.replica]
        assert row.queue_s == pytest.approx(row.first_sched_s - row.arrival_s, abs=1e-15) and row.queue_s >= 0
    assert s["queue_mean_s"] == pytest.approx(float(np.mean(req["first_sched_s"] - req["arrival_s"])))
    assert s["queue_p90_s"] == pytest.approx(float(np.percentile(req["first_sched_s"] - req["arrival_s"], 90)))
    assert s["queue_mean_s"] > 0                              # some requests did wait
    # makespan: the run ends with its last finish, which is its last iteration's end
    end = req["finish_s"].max()
    assert s["makespan_s"] == pytest.approx(end, abs=1e-15) and its["end_s"].max() == pytest.approx(end, abs=1e-15)
    out = req["output_tokens"].sum()                          # every token asked for was generated
    assert s["output_tokens_per_s"] == pytest.approx(out / end, rel=1e-12)
    assert s["output_tokens_per_s_per_chip"] == pytest.approx(out / end / 2, rel=1e-12)
    assert s["total_tokens_per_s"] == pytest.approx((out + req["prompt_tokens"].sum()) / end, rel=1e-12)
    assert s["throughput_req_per_s"] == pytest.approx(200 / end, rel=1e-12)
    # MFU and MBU against the chip's peaks worked out by hand
    assert chip.dtype_peak_flops("bf16") == PEAK_BF16 and chip.memory.dram.peak_bytes_per_s == DRAM_BW
    assert s["mfu"] == pytest.approx(its["flops"].sum() / end / (PEAK_BF16 * 2), rel=1e-9)
    assert s["mbu"] == pytest.approx(its["dram_bytes"].sum() / end / (DRAM_BW * 2), rel=1e-9)
    assert 0 < s["mfu"] <= 1 and 0 < s["mbu"] <= 1
    # no iteration beats its chip's peaks (a replica is one chip here)
    dt = (its["end_s"] - its["start_s"]).to_numpy()
    assert (its["flops"].to_numpy() <= PEAK_BF16 * dt).all()
    assert (its["dram_bytes"].to_numpy() <= DRAM_BW * dt).all()
    # FLOPs from the model's sizes: every token processed multiplies every decoder matrix
    # (2 FLOPs a weight: 2 x parameters x tokens, the parameters less embeddings and norms), every sequence of an iteration gets logits (2 x hidden x vocab), and a
    # decoding token's query meets each cached key and value (QK and PV: 4 x heads x head_dim
    # a key a layer); prompt attention, norms and activations come on top
    p_lin = _linear_params(spec)
    assert p_lin == spec.params_non_embedding - (2 * spec.num_layers + 1) * spec.hidden_size   # RMSNorm weights
    tokens = its["prefill_tokens"].sum() + its["decode_seqs"].sum()
    assert tokens == (req["prompt_tokens"] + req["output_tokens"] - 1).sum()
    rows = its["prefill_seqs"].sum() + its["decode_seqs"].sum()
    keys = its["decode_context_tokens"].sum() + its["decode_seqs"].sum()
    attn = 4 * spec.num_layers * spec.num_heads * spec.head_dim * keys
    floor = 2 * p_lin * tokens + 2 * spec.hidden_size * spec.vocab_size * rows + attn
    assert its["flops"].sum() >= floor
    # per decode-only iteration the same floor, and little above it (the rest is element-wise)
    d = its[its["prefill_seqs"] == 0]
    dfloor = (2 * p_lin * d["decode_seqs"] + 2 * spec.hidden_size * spec.vocab_size * d["decode_seqs"]
              + 4 * spec.num_layers * spec.num_heads * spec.head_dim * (d["decode_context_tokens"] + d["decode_seqs"]))
    ratio = (d["flops"] / dfloor).to_numpy()
    assert len(ratio) > 100 and ratio.min() >= 1.0 and ratio.max() < 1.05


# ----------------------------------------------------------------------------- length distributions


def _normal_cdf(z: float) -> float:
    return 0.5 * (1 + math.erf(z / math.sqrt(2)))


def _binomial_ok(count: int, n: int, p: float, z: float = 4.5) -> bool:
    return abs(count - n * p) <= z * math.sqrt(n * p * (1 - p)) + 1


@pytest.mark.parametrize("fmt", ["text", "csv"])
def test_empirical_lengths_from_a_file(tmp_path, fmt):
    values = [7, 7, 7, 7, 30, 30, 120, 512, 512, 2000]      # 7: 40 %, 30: 20 %, 512: 20 %, ...
    if fmt == "text":
        path = tmp_path / "lengths.txt"
        path.write_text("\n".join(str(v) for v in values) + "\n\n")
        dist = LengthDist.from_file(path)
    else:
        path = tmp_path / "lengths.csv"
        path.write_text("id,tokens\n" + "\n".join(f"{i},{v}" for i, v in enumerate(values)) + "\n")
        dist = LengthDist.from_file(path, column="tokens")
    assert dist.kind == "empirical" and dist.max_value == 2000
    n = 40_000
    x = dist.sample(np.random.default_rng(3), n)
    assert set(np.unique(x)) == set(values)
    for v in set(values):
        p = values.count(v) / len(values)
        assert _binomial_ok(int((x == v).sum()), n, p), (v, (x == v).sum(), n * p)
    # and through generate(): every prompt is one of the file's lengths
    reqs = generate(rate_per_s=10.0, num_requests=500, prompt=dist, output=dist, seed=1)
    assert {q.prompt_tokens for q in reqs} <= set(values) and {q.output_tokens for q in reqs} <= set(values)


def test_uniform_lengths_cover_the_range_evenly():
    lo, hi, n = 3, 12, 30_000
    x = LengthDist("uniform", low=lo, high=hi).sample(np.random.default_rng(4), n)
    assert x.min() == lo and x.max() == hi                  # inclusive at both ends, and reached
    k = hi - lo + 1
    sd = math.sqrt((k * k - 1) / 12)                          # the discrete uniform's
    assert abs(x.mean() - (lo + hi) / 2) <= 3 * sd / math.sqrt(n)
    counts = np.bincount(x - lo, minlength=k)
    chi2 = float(((counts - n / k) ** 2 / (n / k)).sum())
    assert chi2 < 27.88                                       # chi-square, 9 degrees of freedom, p = 0.001
    one = LengthDist("uniform", low=5, high=5).sample(np.random.default_rng(0), 100)
    assert (one == 5).all()


def test_lognormal_lengths_median_spread_and_clipping():
    mu, sigma, lo, hi, n = math.log(300), 1.0, 100, 2000, 40_000
    x = LengthDist("lognormal", mean_log=mu, sigma_log=sigma, low=lo, high=hi).sample(np.random.default_rng(9), n)
    assert x.min() == lo and x.max() == hi
    # the median of a lognormal is exp(mu) (clipping far from it leaves it alone); standard error
    # of a sample median ~ 1.2533 sd / sqrt(n) in log space
    assert abs(math.log(np.median(x)) - mu) < 4 * 1.2533 * sigma / math.sqrt(n)
    # one sigma up: P(X <= e^(mu + sigma)) = Phi(1); rounding to integers moves it by < 0.5 token
    assert _binomial_ok(int((x <= round(math.exp(mu + sigma))).sum()), n, _normal_cdf(1.0))
    # the clipped tails pile up on the bounds: P(X < lo + 0.5) and P(X >= hi - 0.5)
    assert _binomial_ok(int((x == lo).sum()), n, _normal_cdf((math.log(lo + 0.5) - mu) / sigma))
    assert _binomial_ok(int((x == hi).sum()), n, 1 - _normal_cdf((math.log(hi - 0.5) - mu) / sigma))


# ----------------------------------------------------------------------------- dynamic batching


def test_dynamic_batch_starts_when_the_oldest_has_waited_the_timeout(chip):
    """max_batch 8, timeout 5 ms, three requests at 1, 2, 3 ms (more arrive later): the batch
    forms at 1 + 5 = 6 ms with all three; the next, alone at 1 s, at 1.005 s."""
    reqs = [Request(0, 0.001, 64, 4), Request(1, 0.002, 80, 4), Request(2, 0.003, 40, 4),
            Request(3, 1.0, 64, 4), Request(4, 2.0, 64, 4)]
    r = _serve(chip, reqs, scheduler="dynamic", max_batch=8, timeout_s=0.005)
    its, req = r.iterations, r.requests
    first = its.iloc[0]
    assert first["start_s"] == pytest.approx(0.006, abs=1e-12)
    assert first["prefill_seqs"] == 3 and first["prefill_tokens"] == 64 + 80 + 40
    np.testing.assert_allclose(req["first_sched_s"][:3], 0.006, atol=1e-12)
    np.testing.assert_allclose(req["queue_s"][:3], [0.005, 0.004, 0.003], atol=1e-12)
    assert req["first_sched_s"][3] == pytest.approx(1.005, abs=1e-12)


def test_dynamic_full_batch_does_not_wait_for_the_timeout(chip):
    """max_batch 4, timeout 1 s: the 4th request (at 4 ms) fills the batch, which starts then."""
    reqs = [Request(i, 0.001 * (i + 1), 64, 4) for i in range(4)] + [Request(4, 3.0, 64, 4)]
    r = _serve(chip, reqs, scheduler="dynamic", max_batch=4, timeout_s=1.0)
    first = r.iterations.iloc[0]
    assert first["start_s"] == pytest.approx(0.004, abs=1e-12) and first["prefill_seqs"] == 4
    np.testing.assert_allclose(r.requests["first_sched_s"][:4], 0.004, atol=1e-12)


def test_dynamic_smaller_timeout_never_raises_ttft_at_low_load(chip):
    # requests 100 ms apart, each served long before the next: a request waits exactly the
    # timeout, so its TTFT is the timeout plus its own prefill, whatever else ran
    spaced = generate(rate_per_s=10.0, num_requests=12, arrival="fixed", prompt=LengthDist("uniform", low=16, high=300),
                      output=8, seed=2)
    ttft = {t: _serve(chip, spaced, scheduler="dynamic", max_batch=16, timeout_s=t).requests["ttft_s"].to_numpy()
            for t in (0.02, 0.005)}
    # (the last request is left out: once no request is left to come the batcher does not wait)
    np.testing.assert_allclose(ttft[0.02][:-1] - ttft[0.005][:-1], 0.015, atol=1e-12)
    # Poisson arrivals at a low load: the mean TTFT falls with the timeout
    reqs = generate(rate_per_s=40.0, duration_s=1.0, prompt=LengthDist("uniform", low=16, high=300), output=8, seed=6)
    means = [_serve(chip, reqs, scheduler="dynamic", max_batch=16, timeout_s=t).summary["ttft_mean_s"]
             for t in (0.05, 0.02, 0.005, 0.001, 1e-5)]
    assert all(b <= a * (1 + 1e-12) for a, b in zip(means, means[1:])), means
    assert means[-1] < means[0]
