"""DRAM timing model, Python side: parameters, state, presets and a convenience API.

* :class:`DramParams` - a frozen, validated copy of a DRAM spec (any object with the
  attributes of the chip config's DRAM level; read with ``getattr``), with
  :meth:`~DramParams.to_array` (the kernels' parameter vector) and
  :meth:`~DramParams.new_state` (fresh state arrays).
* :class:`DramModel` - runs request streams through the kernels and reports achieved
  bandwidth, efficiency, row-buffer statistics and latency.
* :data:`EXAMPLE_DEVICES` / :func:`example_spec` - cited example parameter sets (HBM2,
  HBM3, DDR4-3200, LPDDR5-6400).

This module keeps the stateful model and the stream helpers built on it
(:func:`little_window`, :func:`long_read_stream`, :func:`stream_efficiency`,
:func:`dram_params`); the parameter record lives in :mod:`~sim.model.memory.dram_parameters`
(its checks in :mod:`~sim.model.memory.dram_checks`, its packing for the kernels in
:mod:`~sim.model.memory.dram_packing`, its address-hash arithmetic in :mod:`~sim.model.memory.dram_hash`)
and the example devices in :mod:`~sim.model.memory.dram_examples`.  Every name is re-exported here.

The timing model itself is described in :mod:`sim.model.kernels.dram` and docs/dram_model.md.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import math
from pathlib import Path
from typing import Any

import numpy as np

import sim.model.engine.run_cache as run_cache
import sim.model.kernels.dram as K
import sim.model.kernels.dram_stream as KS
from sim.model.kernels.jit import source_hash
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.model.memory.dram_examples import _CTRL_NS, _INTERLEAVE, _OUTSTANDING, EXAMPLE_DEVICES, example_spec
from sim.model.memory.dram_hash import _PRIMITIVE_POLY_TERMS, _hash_poly, _stagger_multiplier
from sim.model.memory.dram_checks import (_OPTIONAL, _REFRESH_MODES, _REQUIRED, _SCHEDULERS, _is_pow2,
                                          dram_param_problems)
from sim.model.memory.dram_packing import _log2_or_minus1, fresh_state, params_array
from sim.model.memory.dram_parameters import DramParams
from sim.spec.dram_technology import DRAM_TECHNOLOGIES, DramTechnology, dram_technology, technology_key

__all__ = ["DramParams", "DramModel", "EXAMPLE_DEVICES", "example_spec", "DRAM_TECHNOLOGIES", "little_window",
           "long_read_stream", "stream_efficiency", "dram_params",
           "DramTechnology", "dram_technology", "dram_param_problems", "fresh_state", "params_array"]


def _stats_dict(stats: np.ndarray) -> dict[str, float]:
    names = {v: k[2:].lower() for k, v in vars(K).items() if k.startswith("S_") and isinstance(v, int)}
    return {names[i]: float(stats[i]) for i in sorted(names)}


class DramModel:
    """A DRAM device with state: run request streams and read back statistics.

    ``DramModel(spec_or_params)`` accepts a :class:`DramParams`, a preset name from
    :data:`EXAMPLE_DEVICES`, or any object/mapping with the DRAM-level attributes.
    Successive calls continue in simulated time (each stream starts when the previous
    one finished); :meth:`reset` returns to an idle device at time 0.
    """

    def __init__(self, spec_or_params: Any):
        if isinstance(spec_or_params, DramParams):
            self.params = spec_or_params
        elif isinstance(spec_or_params, str):
            self.params = DramParams.from_spec(example_spec(spec_or_params))
        else:
            self.params = DramParams.from_spec(spec_or_params)
        self.p = self.params.to_array()
        self.reset()

    # ------------------------------------------------------------------ basics
    def reset(self) -> None:
        self.state = self.params.new_state()

    @property
    def peak_bytes_per_s(self) -> float:
        return self.params.peak_bytes_per_s

    @property
    def now_ns(self) -> float:
        """Completion time of the last request served so far (0 for a fresh model)."""
        return float(self.state[K.ST_STATS][K.S_LAST_DONE_NS])

    @property
    def stats(self) -> dict[str, float]:
        """Cumulative counters since the last :meth:`reset` (``S_*`` names, lower case)."""
        return _stats_dict(self.state[K.ST_STATS])

    def access(self, addr: int, nbytes: int | None = None, t_ns: float | None = None,
               is_write: bool = False) -> float:
        """Serve one chunk (must stay in one interleave block); return its completion (ns)."""
        n = self.params.access_bytes if nbytes is None else int(nbytes)
        if n <= 0:
            raise ValueError(f"nbytes must be positive, got {n}")
        if K.dram_chunk_bytes(self.p, np.int64(addr), np.int64(n)) != n:
            raise ValueError(f"{n} bytes at {addr:#x} cross an interleave block "
                             f"({self.params.interleave_bytes} B); split the transfer")
        t = self.now_ns if t_ns is None else float(t_ns)
        return float(K.dram_access(self.p, self.state, np.int64(addr), np.int64(n), t, bool(is_write)))

    # ------------------------------------------------------------------ streams
    def _arrays(self, addresses, sizes, is_write, t_issue):
        addrs = np.atleast_1d(np.asarray(addresses, dtype=np.int64))
        n = addrs.shape[0]
        sz = np.broadcast_to(np.asarray(sizes, dtype=np.int64), (n,)).copy()
        wr = np.broadcast_to(np.asarray(is_write, dtype=np.bool_), (n,)).copy()
        if t_issue is None:
            ti = np.zeros(n, dtype=np.float64)
        else:
            ti = np.broadcast_to(np.asarray(t_issue, dtype=np.float64), (n,)).copy()
        if n and (addrs.min() < 0 or (addrs + sz).max() > self.params.capacity_bytes):
            raise ValueError(f"transfers must lie in [0, {self.params.capacity_bytes}) "
                             f"(capacity {self.params.capacity_gib} GiB)")
        if n and sz.min() < 0:
            raise ValueError("sizes must be >= 0")
        return addrs, sz, wr, ti

    def _report(self, before: np.ndarray, t0: float, t_end: float, nbytes: int,
                done: np.ndarray) -> dict[str, Any]:
        s = self.state[K.ST_STATS] - before
        seconds = max(t_end - t0, 0.0) * 1e-9
        achieved = nbytes / seconds if seconds > 0 else 0.0
        rows = s[K.S_ROW_HITS] + s[K.S_ROW_EMPTY] + s[K.S_ROW_CONFLICTS]
        out: dict[str, Any] = {
            "seconds": seconds,
            "bytes": int(nbytes),
            "achieved_bytes_per_s": achieved,
            "efficiency": achieved / self.peak_bytes_per_s,
            "row_hit_rate": float(s[K.S_ROW_HITS] / rows) if rows else 0.0,
            "mean_latency_ns": float(s[K.S_LATENCY_SUM_NS] / s[K.S_REQUESTS]) if s[K.S_REQUESTS] else 0.0,
            "start_ns": t0,
            "end_ns": t_end,
            "done_ns": done,
        }
        delta = _stats_dict(s)
        delta.pop("first_arrival_ns")
        delta.pop("last_done_ns")
        out.update(delta)
        return out

    def stream(self, addresses, sizes, is_write=False, max_outstanding: int | None = None,
               t_issue=None, in_order: bool = True) -> dict[str, Any]:
        """Serve transfers from one requester; return what it achieved.

        ``addresses``/``sizes``: byte address and length of each transfer (sizes and
        ``is_write`` broadcast).  ``max_outstanding``: access-granularity requests in
        flight (default: ``max_outstanding_requests_per_core``).  ``t_issue``: earliest
        issue time of each transfer, ns after the stream's start (default 0).
        ``in_order``: request slots retire in issue order (default) or as soon as any
        request completes (``False``, a pure count limit: the engine's rule).

        Returns ``seconds`` (first issue to last completion), ``bytes``,
        ``achieved_bytes_per_s``, ``efficiency`` (of peak), ``row_hit_rate``,
        ``mean_latency_ns`` (per chunk), ``done_ns`` (per transfer) and the counters of
        this stream (``requests``, ``row_hits``, ``row_empty``, ``row_conflicts``,
        ``activates``, ``refreshes``, ``refresh_stall_ns``, ``turnarounds``, ...).
        """
        addrs, sz, wr, ti = self._arrays(addresses, sizes, is_write, t_issue)
        m = self.params.max_outstanding_requests_per_core if max_outstanding is None else int(max_outstanding)
        t0 = self.now_ns
        ti = ti + t0
        done = np.empty(addrs.shape[0], dtype=np.float64)
        before = self.state[K.ST_STATS].copy()
        t_end = KS.dram_stream(self.p, self.state, addrs, sz, ti, wr, np.int64(m), done, bool(in_order))
        start = float(ti.min()) if ti.size else t0
        return self._report(before, start, float(max(t_end, start)), int(sz.sum()), done)

    def stream_multi(self, addresses, sizes, requesters, max_outstanding, is_write=False,
                     t_issue=None, in_order: bool = True) -> dict[str, Any]:
        """Like :meth:`stream` for several requesters (``requesters[i]`` in 0..R-1), each
        with its own outstanding limit (``max_outstanding``: int or one per requester),
        served in time order."""
        addrs, sz, wr, ti = self._arrays(addresses, sizes, is_write, t_issue)
        req = np.broadcast_to(np.asarray(requesters, dtype=np.int64), addrs.shape).copy()
        n_req = int(req.max()) + 1 if req.size else 1
        if req.size and req.min() < 0:
            raise ValueError("requester ids must be >= 0")
        mo = np.broadcast_to(np.asarray(max_outstanding, dtype=np.int64), (n_req,)).copy()
        t0 = self.now_ns
        ti = ti + t0
        done = np.empty(addrs.shape[0], dtype=np.float64)
        before = self.state[K.ST_STATS].copy()
        t_end = KS.dram_stream_multi(self.p, self.state, addrs, sz, ti, wr, req, mo, done, bool(in_order))
        start = float(ti.min()) if ti.size else t0
        return self._report(before, start, float(max(t_end, start)), int(sz.sum()), done)


def little_window(p: DramParams) -> int:
    """Requests (of the access granularity) in flight that keep the memory busy by Little's
    law: 2 x peak bytes/ns x the unloaded (empty-bank) read latency / granularity."""
    return int(round(2 * p.peak_bytes_per_s * 1e-9 * p.closed_form_read_latency_ns("empty")
                     / p.access_bytes))


def long_read_stream(p: DramParams, cores: int, per_core: int) -> dict:
    """A long read stream as the engine's cores make it (what tests/test_dram.py and
    benchmarks/bench_dram.py measure a memory's stream efficiency with): 64 KiB transfers
    dealt round-robin to the chip's requesters (count limit), with the chip's requests in
    flight or a Little's-law window at this rate, whichever is larger (the memory's
    property, not the cores' limit).  More than 8 cores are folded into 8 requesters with
    the same total in flight (the multi-requester loop costs O(requesters) per chunk).  At
    least 8 us (two tREFI) and 40 unloaded latencies long, so the ramp-up and drain cost at
    most ~2.5 % (the H200's read latency is 350 ns)."""
    r = min(cores, 8)
    mo = max(per_core * cores, little_window(p)) // r
    tr = 64 << 10
    seconds = max(8e-6, 40 * p.closed_form_read_latency_ns("empty") * 1e-9)
    n = max(int(p.peak_bytes_per_s * seconds), 8 << 20) // tr
    addrs = np.arange(n, dtype=np.int64) * tr
    return DramModel(p).stream_multi(addrs, tr, np.arange(n) % r, mo, in_order=False)


@functools.lru_cache(maxsize=64)
def dram_params(spec: Any) -> DramParams:
    """:meth:`DramParams.from_spec` of a chip's (frozen, hashable) DRAM level, remembered."""
    return DramParams.from_spec(spec)


#: A transfer pattern's rate is measured on at least this many chunks and this many
#: visits of every bank (h200_sxm: 188 pseudo-channels x 48 banks = 36,096 chunks), so the
#: address hash is averaged over many rows.  The rate is taken from the completion of the
#: first quarter of the stream to the last, so ramp-up and the final latency cancel.
#: Numerical choices of the probe, not device properties (tests/test_dram_pattern.py
#: checks the probe against long kernel streams with refresh).
_PATTERN_MIN_CHUNKS = 4096
_PATTERN_VISITS_PER_BANK = 4
#: requests in flight for a pattern probe, in Little's-law windows of the device
#: (:func:`little_window`): plenty, so the probe measures what the device sustains (the
#: requesters' own limits are the mapper's per-core terms).
_PATTERN_WINDOWS_IN_FLIGHT = 8


#: this package's folder, whose sources version the stored probes (resolved once, not per probe)
_HERE = str(Path(__file__).resolve().parent)


@functools.lru_cache(maxsize=4096)
def stream_efficiency(p: DramParams, seg_bytes: int, stride_bytes: int, in_flight_chunks: int | None = None) -> float:
    """Fraction of the pin peak that a long read stream of ``seg_bytes``-byte segments
    ``stride_bytes`` apart sustains (:func:`_measure_stream_efficiency`, which says how it is
    measured).  Remembered per process and on disk beside the engine runs
    (:func:`sim.model.engine.run_cache.store_value`, under a digest of the device's parameters,
    the pattern and this package's source), so a fresh process - a repeated ``sim run``, each
    sweep or ``sim validate`` worker - reads a probe instead of running it again: on ``h200_sxm``
    a Llama-3-8B 8k prefill asks for 217 of them, 0.40 s of its 1.9 s repeat with its engine
    runs cached (2026-12-06, cProfile, one thread).  Off with ``SIM_NO_CACHE=1``, as the runs."""
    # this package's source: the probe procedure and how its parameters are packed (the kernels
    # it runs are the disk cache's own version, kernel_source_hash)
    key = hashlib.blake2b(b"stream_efficiency\0" + source_hash(_HERE).encode() + repr(
        (p, int(math.ceil(seg_bytes)), int(math.ceil(stride_bytes)),
         None if in_flight_chunks is None else int(in_flight_chunks))).encode(), digest_size=32).digest()
    stored = run_cache.load_value(key)
    if stored is not None:
        return stored
    eff = _measure_stream_efficiency(p, seg_bytes, stride_bytes, in_flight_chunks)
    run_cache.store_value(key, eff)
    return eff


def _measure_stream_efficiency(p: DramParams, seg_bytes: int, stride_bytes: int,
                               in_flight_chunks: int | None = None) -> float:
    """Fraction of the pin peak that a long read stream of ``seg_bytes``-byte segments
    ``stride_bytes`` apart sustains: the rows of a tile, i.e. a tile's contiguous length
    and its tensor's row pitch (``stride_bytes <= seg_bytes``: one contiguous stream).
    ``in_flight_chunks``: the chunks (a tile row's pieces within one interleave block)
    the requesters keep in flight, as the engine counts its cores' windows (None: plenty,
    what the device itself sustains).

    Measured, not fitted: the pattern runs through the DRAM kernel itself
    (:func:`sim.model.kernels.dram_stream.dram_stream`, cut into interleave-block chunks as the
    engine's DMA cuts a tile row), so the bursts, the row-buffer locality under the
    device's address hash, the bank and ACT limits (tRCD, tRP, tRAS, tRRD, tFAW) and the
    data bus count as they will in the engine.  Refresh is off in the probe and charged
    after it: all-bank refresh as the time it blocks a pseudo-channel (tRFC of every
    tREFI; the kernel's streams lose 1.0-1.6x that, docs/dram_model.md), per-bank refresh
    not at all (it costs those streams 0.3-1.6 %: another bank serves meanwhile), because
    a sample long enough to average refresh would cost too much on a 188-channel HBM3E
    and a short one is dominated by where its few refreshes fall.  Remembered per
    (device, segment, stride)."""
    seg = max(1, int(math.ceil(seg_bytes)))
    stride = int(math.ceil(stride_bytes))
    if stride <= seg:
        # contiguous: one sequential stream, in transfers of a DRAM row per pseudo-channel
        seg = stride = p.row_buffer_bytes * p.num_pseudo_channels
    if 7 * stride + seg > p.capacity_bytes:
        # rows farther apart than the device is large (a tensor larger than the DRAM, which only
        # a single op beyond the chip's capacity describes): 8 rows spread over the device,
        # each still in rows and banks of its own
        seg = min(seg, max(p.interleave_bytes, p.capacity_bytes // 8 // p.interleave_bytes * p.interleave_bytes))
        stride = max(seg, (p.capacity_bytes - seg) // 7 // p.interleave_bytes * p.interleave_bytes)
    chunks_per_seg = -(-seg // p.interleave_bytes) + 1
    want = max(_PATTERN_MIN_CHUNKS, _PATTERN_VISITS_PER_BANK * p.num_pseudo_channels * p.banks_per_pseudo_channel)
    n_seg = max(8, min(-(-want // chunks_per_seg), (p.capacity_bytes - seg) // max(stride, 1)))
    addrs = np.arange(n_seg, dtype=np.int64) * stride
    quiet = dataclasses.replace(p, t_refi_ns=0.0)
    plenty = _PATTERN_WINDOWS_IN_FLIGHT * little_window(p)
    if in_flight_chunks is None:
        window = plenty
    else:
        # the kernel's stream counts a chunk as its access-granularity requests
        units = min(-(-seg // p.access_bytes), max(1, p.interleave_bytes // p.access_bytes))
        window = max(1, min(plenty, int(in_flight_chunks) * units))
    r = DramModel(quiet).stream(addrs, seg, max_outstanding=window, in_order=False)
    done = np.maximum.accumulate(r["done_ns"])
    first = n_seg // 4
    t_ns = float(done[-1] - done[first - 1])
    if t_ns <= 0:
        return 1.0
    eff = (n_seg - first) * seg / t_ns * 1e9 / p.peak_bytes_per_s
    if p.t_refi_ns > 0 and p.refresh_mode_effective == "all_bank":
        eff *= 1.0 - p.refresh_overhead
    return float(min(1.0, eff))
