"""A serving run (:func:`serve`): requests arrive, a router assigns them to replicas, each
replica runs iterations whose latency comes from the chip model (:mod:`.latency`).

This module checks the configuration, builds the workload, the latency grids, the KV
capacity and the replica pools, runs the SimPy event loop (:mod:`.events`: arrivals,
replicas, KV transfers, the monitor) and turns what it recorded into the result's tables
and summary (:mod:`.metrics`).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import numpy as np

from sim.apps.inference import computes, default_dtype, run_precision
from sim.apps.serving.events import ITERATION_COLUMNS, TIMELINE_COLUMNS, EventLoop, Pools, Replica
from sim.apps.serving.kv import DEFAULT_BLOCK_TOKENS, DEFAULT_MEMORY_UTILISATION, KVCache
from sim.apps.serving.latency import GRAPH_POLICIES, LatencyModel
from sim.apps.serving.metrics import ServingResult, check_slos, summarise
from sim.apps.serving.schedulers import DecodePoolScheduler, get_scheduler
from sim.apps.serving.schedulers.base import Scheduler
from sim.apps.serving.schedulers.chunked_prefill import DEFAULT_CHUNK_TOKENS
from sim.apps.serving.speculative import Speculative
from sim.apps.serving.workload import LengthDist, Request, generate, load_trace
from sim.errors import ConfigError, SimError, UnknownNameError, WorkloadError
from sim.model.engine.lower import Options
from sim.model.workload.llm import Parallelism, Precision, kv_cache_bytes, weight_bytes
from sim.model.workload.models import load_model_spec
from sim.spec.chip import ChipSpec
from sim.spec.model_spec import ModelSpec
from sim.spec.registry import as_chip

ROUTERS = ("round_robin", "least_outstanding", "prefix_affinity")
#: vLLM's default cap on sequences per iteration (engine argument ``--max-num-seqs`` = 256)
DEFAULT_MAX_BATCH = 256
#: host link for swapping KV blocks: PCIe 5.0 x16, 32 GT/s x 16 lanes, 128b/130b ≈ 63 GB/s
#: per direction (PCI-SIG PCIe 5.0 base specification)
DEFAULT_SWAP_GB_PER_S = 63.0
#: the most replicas one run simulates: each is a SimPy process with its scheduler and KV
#: cache (10^5 took 20 s and 670 MB before the first request; 10^7 never started)
MAX_REPLICAS = 16_384


@dataclass
class ServeConfig:
    """Every parameter of a serving run (see :func:`serve`)."""

    scheduler: str = "continuous"
    rate_per_s: float | None = 8.0
    duration_s: float | None = 60.0
    num_requests: int | None = None
    arrival: str = "poisson"
    cv: float = 1.0
    prompt: Any = 512
    output: Any = 128
    prefix_groups: int = 0
    prefix_tokens: int = 0
    trace: str | None = None
    seed: int = 0
    replicas: int = 1
    tensor_parallel: int = 1
    pipeline_parallel: int = 1
    router: str = "least_outstanding"
    dtype: str | None = None
    weight_dtype: str | None = None
    kv_dtype: str | None = None
    attention: str | None = None
    fidelity: str = "high"
    stack: str | None = None
    graphs: str = "all"
    max_batch: int = DEFAULT_MAX_BATCH
    token_budget: int | None = None
    timeout_s: float | None = None
    block_tokens: int = DEFAULT_BLOCK_TOKENS
    memory_utilisation: float = DEFAULT_MEMORY_UTILISATION
    kv_capacity_tokens: int | None = None
    preemption: str = "recompute"
    swap_gb_per_s: float = DEFAULT_SWAP_GB_PER_S
    prefix_caching: bool = False
    speculative_k: int = 0
    speculative_alpha: Any = 0.7
    draft_model: Any = None             # a name, a path or a ModelSpec
    draft_chip: Any = None              # a name, a path or a ChipSpec; None: the draft shares the target's chips
    draft_tensor_parallel: int = 1      # chips per replica the draft runs on, on draft_chip
    draft_link_latency_s: float | None = None  # one hop between draft and target chips (default: interconnect's)
    prefill_replicas: int | None = None
    kv_link_gb_per_s: float | None = None
    kv_link_latency_s: float | None = None
    max_queue: int | None = None
    drain_s: float | None = None
    slos: dict = field(default_factory=dict)
    price_per_chip_hour: float | None = None
    samples: int = 400
    cache_dir: Any = None
    progress: bool = False


def _check(cfg: ServeConfig) -> None:
    def whole(name, lo=1):
        v = getattr(cfg, name)
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
            raise WorkloadError(f"{name}: must be a whole number >= {lo}, got {v!r}")
    for n in ("replicas", "tensor_parallel", "pipeline_parallel", "max_batch", "block_tokens", "samples",
              "draft_tensor_parallel"):
        whole(n)
    for n in ("replicas", "prefill_replicas"):
        v = getattr(cfg, n)
        if isinstance(v, (int, np.integer)) and v > MAX_REPLICAS:
            raise WorkloadError(f"{n}: at most {MAX_REPLICAS:,} replicas are simulated, got {v:,}")
    if cfg.rate_per_s is not None and not (isinstance(cfg.rate_per_s, (int, float))
                                           and math.isfinite(cfg.rate_per_s) and cfg.rate_per_s > 0):
        raise WorkloadError(f"rate: must be a number > 0 requests/s, got {cfg.rate_per_s!r}")
    if cfg.router not in ROUTERS:
        raise UnknownNameError("router", cfg.router, ROUTERS)
    if cfg.graphs not in GRAPH_POLICIES:
        raise UnknownNameError("graphs policy", cfg.graphs, GRAPH_POLICIES)
    if cfg.preemption not in ("recompute", "swap"):
        raise UnknownNameError("preemption mode", cfg.preemption, ("recompute", "swap"))
    for n in ("token_budget", "kv_capacity_tokens", "max_queue"):
        if getattr(cfg, n) is not None:
            whole(n, 0 if n == "max_queue" else 1)
    for n in ("swap_gb_per_s", "kv_link_gb_per_s"):
        v = getattr(cfg, n)
        if v is not None and not v > 0:
            raise WorkloadError(f"{n}: must be > 0, got {v!r}")
    if cfg.speculative_k < 0:
        raise WorkloadError(f"speculative_k: must be >= 0, got {cfg.speculative_k}")
    v = cfg.draft_link_latency_s
    if v is not None and not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
        raise WorkloadError(f"draft_link_latency_s: must be a finite number of seconds >= 0, got {v!r}")
    if cfg.draft_chip is not None and cfg.draft_model is None:
        raise WorkloadError("draft_chip: names where the draft model runs; give draft_model too")
    if cfg.draft_tensor_parallel != 1 and cfg.draft_chip is None:
        raise WorkloadError("draft_tensor_parallel: applies to a draft on its own chips; give draft_chip too "
                            "(without it the draft shares the target's tensor-parallel group)")


def _load_named(value, load, flag: str, what: str, passthrough: tuple = ()):
    """``load(value)`` (None: None), an empty name refused and any other error prefixed by
    ``flag``, except the ``passthrough`` errors, raised as they are."""
    if value is None:
        return None
    if isinstance(value, str) and not value.strip():
        raise WorkloadError(f"{flag}: empty; give a {what} name or a {what} file, or leave it out")
    try:
        return load(value)
    except passthrough:
        raise
    except SimError as exc:
        raise WorkloadError(f"{flag}: {exc}") from None


def load_draft_chip(draft_chip, flag: str = "draft_chip") -> ChipSpec | None:
    """The chip the draft model runs on (a name, a path or a ChipSpec; None: the target's); an
    invalid chip file's own error names its file, line and key."""
    return _load_named(draft_chip, as_chip, flag, "chip", (ConfigError,))


def load_draft_model(draft_model, flag: str = "draft_model"):
    """The speculative-decoding draft model (a name, a path or a ModelSpec; None: none), loaded
    and checked even when no token is drafted (``speculative_k`` 0), so a typo is never silent
    (``draft_model="nomodel"`` passed ``serve`` without a word).  ``sim serve --draft-model`` and
    :func:`serve` both check it here; errors name ``flag``."""
    return _load_named(draft_model, load_model_spec, flag, "model")


def _requests(cfg: ServeConfig, requests) -> tuple[Request, ...]:
    if requests is not None:
        reqs = list(requests)
        if not reqs:
            raise WorkloadError("requests: the workload is empty")
        if not all(isinstance(r, Request) for r in reqs):
            raise WorkloadError("requests: every item must be a sim.apps.serving.Request")
        # in arrival order, numbered 0..N-1 in that order (ties keep the given order)
        order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_s, i))
        return tuple(Request(k, reqs[i].arrival_s, reqs[i].prompt_tokens, reqs[i].output_tokens, reqs[i].prefix_id,
                             reqs[i].prefix_tokens) for k, i in enumerate(order))
    if cfg.trace:
        return load_trace(cfg.trace)
    if cfg.rate_per_s is None:
        raise WorkloadError("rate: give an arrival rate, a trace or a list of requests")
    dur = None if cfg.num_requests else cfg.duration_s
    return generate(rate_per_s=cfg.rate_per_s, duration_s=dur, num_requests=cfg.num_requests,
                    arrival=cfg.arrival, cv=cfg.cv, prompt=cfg.prompt, output=cfg.output,
                    prefix_groups=cfg.prefix_groups, prefix_tokens=cfg.prefix_tokens, seed=cfg.seed)


def serve(chip: ChipSpec | str, model, requests=None, *, model_set=None, **kwargs) -> ServingResult:
    """Simulate serving ``model`` on replicas of ``chip``; returns a :class:`ServingResult`.

    ``model_set`` edits the model first, as ``run_llm(model_set=...)`` and ``--model-set``
    do (``["max_context=131072"]`` or ``{"max_context": 131072}``).

    ``requests``: a sequence of :class:`~.workload.Request` (else generated from ``rate_per_s``,
    ``duration_s`` or ``num_requests``, ``arrival``, ``prompt``, ``output``, ``seed``, or replayed
    from ``trace``).  Every other keyword is a :class:`ServeConfig` field.
    """
    import simpy

    unknown = sorted(set(kwargs) - set(ServeConfig.__dataclass_fields__))
    if unknown:
        raise UnknownNameError("serve parameter", unknown[0], list(ServeConfig.__dataclass_fields__))
    cfg = ServeConfig(**kwargs)
    _check(cfg)
    checked_draft = load_draft_model(cfg.draft_model)
    draft_chip = load_draft_chip(cfg.draft_chip)
    slos = check_slos(cfg.slos)
    chip = as_chip(chip)
    spec = load_model_spec(model, overrides=model_set)
    sched_cls = get_scheduler(cfg.scheduler)
    reqs = _requests(cfg, requests)

    dtype = cfg.dtype or default_dtype(chip)
    precision = run_precision(chip, dtype, cfg.weight_dtype, cfg.kv_dtype)
    parallel = Parallelism(tensor=cfg.tensor_parallel, pipeline=cfg.pipeline_parallel)
    models = _cost_models(cfg, chip, spec, precision, parallel, checked_draft, draft_chip)
    blocks, per_token = _kv_blocks(cfg, chip, spec, models, precision, parallel, reqs)
    default_budget = DEFAULT_CHUNK_TOKENS if sched_cls.name == "chunked_prefill" else max(spec.max_context, 2048)
    token_budget = cfg.token_budget or default_budget
    pools = _pools(cfg, chip, sched_cls, models, blocks, per_token, token_budget, parallel)

    loop = EventLoop(simpy.Environment(), reqs, pools, router=cfg.router, max_queue=cfg.max_queue, graphs=cfg.graphs,
                     spec_dec=models.speculative, per_token=per_token, draft_hop_s=models.draft_hop_s)
    end_s = loop.run(cfg.drain_s, cfg.samples, cfg.progress)
    for m in (models.target, models.draft):
        if m is not None:
            m.flush()

    replicas = pools.replicas
    req_df, it_df, tl_df = _tables(reqs, loop)
    target_chips = parallel.tensor * parallel.pipeline
    chips = (target_chips + models.draft_chips) * len(replicas)
    replica_peak_flops = chip.dtype_peak_flops(dtype) * target_chips
    replica_peak_bytes = chip.memory.dram.peak_bytes_per_s * target_chips
    if models.draft_chips:      # MFU / MBU against every chip's peak, the draft's included
        replica_peak_flops += draft_chip.dtype_peak_flops(models.draft_precision.dtype) * models.draft_chips
        replica_peak_bytes += draft_chip.memory.dram.peak_bytes_per_s * models.draft_chips
    extra = {"chip": chip.name, "model": spec.name, "scheduler": sched_cls.name, "replicas": len(replicas),
             "tensor_parallel": cfg.tensor_parallel, "stack": models.target.stack.name, "kv_blocks_per_replica": blocks,
             "kv_tokens_per_replica": blocks * cfg.block_tokens, "token_budget": token_budget,
             "swaps": sum(r.sched.swaps for r in replicas),
             "grid_points_simulated": models.target.simulated + (models.draft.simulated if models.draft else 0),
             "grid_points_cached": len(models.target.table)}
    if models.speculative:
        extra["speculative_expected_tokens_per_step"] = models.speculative.expected_tokens_per_step()
    if models.draft is not None:
        extra["draft_chip"] = (draft_chip or chip).name
        extra["draft_chips_per_replica"] = models.draft_chips
    summary = summarise(req_df, it_df, tl_df, slos=slos, chips=chips,
                        peak_flops=replica_peak_flops * len(replicas),
                        peak_bytes_per_s=replica_peak_bytes * len(replicas),
                        price_per_chip_hour=cfg.price_per_chip_hour, end_s=end_s, kv_stats=_kv_stats(replicas),
                        extra=extra)
    conf = asdict(cfg)
    conf["prompt"] = repr(cfg.prompt)
    conf["output"] = repr(cfg.output)
    conf["draft_model"] = getattr(cfg.draft_model, "name", cfg.draft_model)
    conf["draft_chip"] = getattr(cfg.draft_chip, "name", cfg.draft_chip)
    res = ServingResult(req_df, it_df, tl_df, summary, conf)
    object.__setattr__(res, "_replicas", replicas)   # for tests: the final KV state
    return res


class _CostModels(NamedTuple):
    """What prices an iteration: the served model's latency grid, and with speculative
    decoding the draft model's grid (None when no draft model is costed), on the target's
    chips or on its own (``draft_chips`` of them per replica, 0 when it shares the target's;
    then each speculative step also pays ``draft_hop_s`` twice: drafted tokens to the target,
    the verified ones back)."""

    target: LatencyModel
    speculative: Speculative | None
    draft: LatencyModel | None
    draft_spec: ModelSpec | None
    draft_precision: Precision | None = None
    draft_chips: int = 0
    draft_hop_s: float = 0.0


def _cost_models(cfg: ServeConfig, chip: ChipSpec, spec: ModelSpec, precision: Precision, parallel: Parallelism,
                 checked_draft: ModelSpec | None, draft_chip: ChipSpec | None) -> _CostModels:
    options = Options(fidelity=cfg.fidelity)
    lat = LatencyModel(chip, spec, precision, cfg.attention, parallel, options, cache_dir=cfg.cache_dir,
                       stack=cfg.stack, max_batch=cfg.max_batch)
    spec_dec = Speculative(cfg.speculative_k, cfg.speculative_alpha if not isinstance(cfg.speculative_alpha, list)
                           else tuple(cfg.speculative_alpha),
                           getattr(cfg.draft_model, "name", cfg.draft_model)) if cfg.speculative_k else None
    if not (spec_dec and checked_draft is not None):
        return _CostModels(lat, spec_dec, None, None)
    if draft_chip is None:      # the draft shares the target's chips, precision and parallelism
        draft = LatencyModel(chip, checked_draft, precision, cfg.attention, parallel, options,
                             cache_dir=cfg.cache_dir, stack=cfg.stack, max_batch=cfg.max_batch)
        return _CostModels(lat, spec_dec, draft, checked_draft, precision)
    # its own chips: their default activation format unless one was asked for, the same
    # weight and KV formats (a format the draft chip lacks is refused, naming the option)
    try:
        d_dtype = cfg.dtype or default_dtype(draft_chip)
        d_precision = run_precision(draft_chip, d_dtype, cfg.weight_dtype, cfg.kv_dtype)
    except SimError as exc:
        raise WorkloadError(f"draft_chip {draft_chip.name}: {exc}") from None
    if not computes(draft_chip, d_dtype):
        raise WorkloadError(f"draft_chip {draft_chip.name}: its arrays cannot compute in {d_dtype}, the format "
                            f"asked for the run (dtype); leave dtype to each chip's default or pick another draft chip")
    d_parallel = Parallelism(tensor=cfg.draft_tensor_parallel)
    # the draft's own stack: the target's stack profile may name kernels only the target chip has
    draft = LatencyModel(draft_chip, checked_draft, d_precision, cfg.attention, d_parallel, options,
                         cache_dir=cfg.cache_dir, stack=None, max_batch=cfg.max_batch)
    hop = cfg.draft_link_latency_s
    if hop is None:             # the link between the two chips: the target's interconnect hop, if it has one
        hop = chip.interconnect.link_latency_ns * 1e-9 if chip.interconnect is not None else 0.0
    return _CostModels(lat, spec_dec, draft, checked_draft, d_precision, cfg.draft_tensor_parallel, hop)


def _kv_blocks(cfg: ServeConfig, chip: ChipSpec, spec: ModelSpec, models: _CostModels, precision: Precision, parallel: Parallelism,
               reqs: tuple[Request, ...]) -> tuple[int, int]:
    """KV-cache blocks of one replica (given, or what the chips' memory holds beside the
    weights, the draft's included) and KV bytes per token; refuse a workload one of whose
    requests could never fit the cache or the model's context."""
    chips_per_replica = parallel.tensor * parallel.pipeline
    per_token = kv_cache_bytes(spec, 1, 1, precision.kv_format, parallel.tensor)
    w = weight_bytes(spec, precision, parallel.tensor)
    own_draft = models.draft_spec is not None and models.draft_chips > 0
    if models.draft_spec is not None and not own_draft:      # the draft's weights and KV beside the target's
        per_token += kv_cache_bytes(models.draft_spec, 1, 1, precision.kv_format, parallel.tensor)
        w += weight_bytes(models.draft_spec, precision, parallel.tensor)
    cap = chip.memory.dram.capacity_bytes * chips_per_replica
    if not 0 < cfg.memory_utilisation <= 1:
        raise WorkloadError(f"memory_utilisation: must be in (0, 1], got {cfg.memory_utilisation}")
    if cfg.kv_capacity_tokens is not None:
        blocks = cfg.kv_capacity_tokens // cfg.block_tokens
    else:
        budget = cap * cfg.memory_utilisation - w
        if budget <= 0:
            raise WorkloadError(
                f"kv_capacity_tokens: {spec.name} weights ({w / 1e9:,.1f} GB) leave no KV cache on "
                f"{chips_per_replica} x {chip.name} ({cap * cfg.memory_utilisation / 1e9:,.1f} GB usable); "
                "use more --tensor-parallel or narrower weights")
        blocks = int(budget // (per_token * cfg.block_tokens))
    if own_draft:
        # the draft keeps a KV entry for every token the target does, on its own chips: the
        # cache holds what both memories allow
        dchip, dprec = models.draft.chip, models.draft_precision
        d_cap = dchip.memory.dram.capacity_bytes * models.draft_chips * cfg.memory_utilisation
        d_w = weight_bytes(models.draft_spec, dprec, models.draft_chips)
        d_per_token = kv_cache_bytes(models.draft_spec, 1, 1, dprec.kv_format, models.draft_chips)
        if d_cap - d_w <= 0:
            raise WorkloadError(
                f"draft_chip: {models.draft_spec.name} weights ({d_w / 1e9:,.1f} GB) leave no KV cache on "
                f"{models.draft_chips} x {dchip.name} ({d_cap / 1e9:,.1f} GB usable); use more "
                "draft_tensor_parallel, a bigger draft chip or narrower weights")
        blocks = min(blocks, int((d_cap - d_w) // (d_per_token * cfg.block_tokens)))
    extra_tokens = (cfg.speculative_k + 1) if models.speculative else 1
    big = max(reqs, key=lambda r: r.prompt_tokens + r.output_tokens)
    need = -(-(big.prompt_tokens + big.output_tokens + extra_tokens) // cfg.block_tokens)
    if need > blocks:
        raise WorkloadError(
            f"kv_capacity_tokens: the KV cache of one replica holds {blocks * cfg.block_tokens:,} tokens "
            f"({blocks:,} block{'s' if blocks != 1 else ''} of {cfg.block_tokens}), smaller than one request "
            f"(request {big.id}: {big.prompt_tokens} prompt + {big.output_tokens} output tokens)")
    too_long = next((r for r in reqs if r.prompt_tokens + r.output_tokens + extra_tokens > spec.max_context), None)
    if too_long is not None:
        raise WorkloadError(f"request {too_long.id}: prompt_tokens + output_tokens = "
                            f"{too_long.prompt_tokens + too_long.output_tokens} exceeds max_context "
                            f"{spec.max_context} of {spec.name}")
    return blocks, per_token


def _pools(cfg: ServeConfig, chip: ChipSpec, sched_cls: type[Scheduler], models: _CostModels, blocks: int, per_token: int,
           token_budget: int, parallel: Parallelism) -> Pools:
    swap_bps = cfg.swap_gb_per_s * 1e9
    policy = {"timeout_s": cfg.timeout_s} if cfg.timeout_s is not None else {}
    replicas: list[Replica] = []

    def make(idx, pool, cls):
        kv = KVCache(blocks, cfg.block_tokens, cfg.prefix_caching)
        rng = np.random.default_rng([cfg.seed, 7, idx])
        s = cls(kv, max_batch=cfg.max_batch, token_budget=token_budget, preemption=cfg.preemption,
                swap_bytes_per_s=swap_bps, kv_bytes_per_token=per_token, speculative=models.speculative, rng=rng,
                **policy)
        r = Replica(idx, pool, s, models.target, models.draft)
        replicas.append(r)
        return r

    if not sched_cls.disaggregated:
        front = [make(i, "all", sched_cls) for i in range(cfg.replicas)]
        return Pools(replicas, front, [], None, 0.0)
    if cfg.replicas < 2:
        raise WorkloadError("replicas: disaggregated serving needs >= 2 replicas (prefill and decode pools)")
    npre = cfg.prefill_replicas or max(1, cfg.replicas // 2)
    if not 1 <= npre < cfg.replicas:
        raise WorkloadError(f"prefill_replicas: must be in 1..{cfg.replicas - 1}, got {npre}")
    front = [make(i, "prefill", sched_cls) for i in range(npre)]
    back = [make(npre + i, "decode", DecodePoolScheduler) for i in range(cfg.replicas - npre)]
    ic = chip.interconnect
    link_bps = (cfg.kv_link_gb_per_s * 1e9 if cfg.kv_link_gb_per_s else
                (ic.chip_bytes_per_s if ic is not None else None))
    if link_bps is None:
        raise WorkloadError(f"kv_link_gb_per_s: {chip.name} has no interconnect; give the KV link's bandwidth")
    link_bps *= parallel.tensor * parallel.pipeline
    link_lat = (cfg.kv_link_latency_s if cfg.kv_link_latency_s is not None else
                (ic.link_latency_ns * 1e-9 if ic is not None else 0.0))
    return Pools(replicas, front, back, link_bps, link_lat)


def _tables(reqs: tuple[Request, ...], loop: EventLoop):
    """The run's requests, iterations and timeline as DataFrames."""
    import pandas as pd

    rows = []
    dropped_ids = set(loop.dropped)
    for req in reqs:
        s = loop.seqs[req.id]
        if s is None:
            rows.append({"id": req.id, "replica": None, "arrival_s": req.arrival_s, "prompt_tokens": req.prompt_tokens,
                         "output_tokens": req.output_tokens, "prefix_id": req.prefix_id, "cached_tokens": 0,
                         "generated": 0, "first_sched_s": np.nan, "first_token_s": np.nan, "finish_s": np.nan,
                         "queue_s": np.nan, "ttft_s": np.nan, "tpot_s": np.nan, "e2e_s": np.nan,
                         "preemptions": 0, "prefill_replica": None, "kv_transfer_s": 0.0,
                         "status": "dropped" if req.id in dropped_ids else "unfinished"})
            continue
        ft = s.first_token_s if s.first_token_s is not None else np.nan
        tpot = ((s.last_token_s - s.first_token_s) / (s.generated - 1)
                if s.generated > 1 and s.first_token_s is not None else np.nan)
        rows.append({"id": req.id, "replica": s.replica, "arrival_s": req.arrival_s,
                     "prompt_tokens": req.prompt_tokens, "output_tokens": req.output_tokens,
                     "prefix_id": req.prefix_id, "cached_tokens": s.cached_tokens, "generated": s.generated,
                     "first_sched_s": s.first_sched_s if s.first_sched_s is not None else np.nan,
                     "first_token_s": ft, "finish_s": s.finish_s if s.finish_s is not None else np.nan,
                     "queue_s": (s.first_sched_s - req.arrival_s) if s.first_sched_s is not None else np.nan,
                     "ttft_s": ft - req.arrival_s, "tpot_s": tpot,
                     "e2e_s": (s.finish_s - req.arrival_s) if s.finish_s is not None else np.nan,
                     "preemptions": s.preemptions, "prefill_replica": s.prefill_replica,
                     "kv_transfer_s": s.transfer_s, "status": "finished" if s.done else "unfinished"})
    req_df = pd.DataFrame(rows)
    it_df = pd.DataFrame(loop.its, columns=ITERATION_COLUMNS)
    tl_df = pd.DataFrame(loop.timeline, columns=TIMELINE_COLUMNS)
    return req_df, it_df, tl_df


def _kv_stats(replicas: list[Replica]) -> dict[str, float]:
    """Prefix-cache counters summed over the replicas, and the hit rates (by lookup and
    by token)."""
    kvs = [r.sched.kv.stats() for r in replicas]
    kv_stats = {k: sum(d[k] for d in kvs) for k in ("prefix_lookups", "prefix_hits", "prefix_evictions")}
    kv_stats["prefix_hit_rate"] = kv_stats["prefix_hits"] / kv_stats["prefix_lookups"] if kv_stats["prefix_lookups"] else 0.0
    hit_tok = sum(r.sched.kv.hit_tokens for r in replicas)
    look_tok = sum(r.sched.kv.lookup_tokens for r in replicas)
    kv_stats["prefix_token_hit_rate"] = hit_tok / look_tok if look_tok else 0.0
    return kv_stats
