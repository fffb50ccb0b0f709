"""The SimPy event loop of a serving run; :func:`sim.apps.serving.simulator.serve` sets it up.

Processes: one arrival process (the workload, in arrival order), one process per replica
(plan an iteration, wait its latency, complete it), one transfer process per KV move between
disaggregated pools, and a monitor sampling the system state at fixed simulated intervals.
SimPy breaks ties by event order, and every random draw comes from seeded generators, so a
run is a pure function of its inputs.  The run stops when every request has finished or
been dropped, or ``drain_s`` after the last arrival (what is left is reported unfinished).
"""
from __future__ import annotations

import sys
import zlib
from dataclasses import dataclass
from typing import Any

from sim.apps.serving.cost import Cost
from sim.apps.serving.latency import ZERO, LatencyModel
from sim.apps.serving.schedulers.base import Scheduler, Seq
from sim.apps.serving.speculative import Speculative
from sim.apps.serving.workload import Request


#: the columns of ``EventLoop.its`` (one row per iteration)
ITERATION_COLUMNS = ["replica", "pool", "start_s", "end_s", "prefill_tokens", "prefill_seqs", "decode_seqs",
                     "padded_seqs", "decode_context_tokens", "waiting", "running", "kv_used_blocks", "kv_blocks",
                     "energy_j", "flops", "dram_bytes", "swap_s", "graph"]
#: the columns of ``EventLoop.timeline`` (one row per monitor sample)
TIMELINE_COLUMNS = ["time_s", "in_system", "waiting", "running", "kv_utilisation"]


class Replica:
    """One model replica: its scheduler, the latency grids that price its iterations,
    the event it sleeps on when idle, and the tokens routed to it and not yet done."""

    __slots__ = ("idx", "pool", "sched", "lat", "draft", "wake", "outstanding", "busy_s")

    def __init__(self, idx: int, pool: str, sched: Scheduler, lat: LatencyModel, draft: LatencyModel | None):
        self.idx, self.pool, self.sched, self.lat, self.draft = idx, pool, sched, lat, draft
        self.wake = None
        self.outstanding = 0
        self.busy_s = 0.0


@dataclass
class Pools:
    """The replicas, split into the pool requests arrive at (``front``) and, when serving
    is disaggregated, the decode pool (``back``) with the KV link between them."""

    replicas: list[Replica]
    front: list[Replica]
    back: list[Replica]
    link_bps: float | None              # KV transfer bytes/s per replica (disaggregated)
    link_lat: float                     # its latency, s


class EventLoop:
    """The SimPy processes of one run and what they record: the arrivals (routed to a
    front replica, or dropped at ``max_queue``), one loop per replica (plan an iteration,
    wait its latency, complete it), a KV transfer per disaggregated hand-over, and the
    monitor that samples the system at fixed simulated intervals."""

    def __init__(self, env: Any, reqs: tuple[Request, ...], pools: Pools, *, router: str, max_queue: int | None,
                 graphs: str, spec_dec: Speculative | None, per_token: int, draft_hop_s: float = 0.0) -> None:
        # env: a simpy.Environment (typed Any: simpy is imported only when a run starts)
        self.env, self.reqs, self.spec_dec, self.per_token = env, reqs, spec_dec, per_token
        self.draft_hop_s = draft_hop_s
        self.router, self.max_queue = router, max_queue
        self.replicas, self.front, self.back = pools.replicas, pools.front, pools.back
        self.link_bps, self.link_lat = pools.link_bps, pools.link_lat
        self.finished = self.dropped_n = self.arrived = 0
        self.seqs: list[Seq | None] = [None] * len(reqs)
        self.dropped: list[int] = []
        self.done = env.event()
        self.its: list[tuple] = []          # one row per iteration (columns: ITERATION_COLUMNS)
        self.timeline: list[tuple] = []     # one row per monitor sample
        self.rr = 0                         # round-robin position
        self.graphs_all, self.graphs_decode = graphs == "all", graphs == "decode"
        for r in self.replicas:
            r.sched.on_finish = self._on_finish(r)
        for r in self.front:
            if self.back:
                r.sched.on_prefilled = self._on_prefilled(r)

    def run(self, drain_s: float | None, samples: int, progress: bool) -> float:
        """Run until every request has finished or been dropped, or ``drain_s`` (default
        max(60 s, the arrival span)) after the last arrival, with ``samples`` monitor
        samples over the arrivals; returns the simulated end time."""
        env, reqs = self.env, self.reqs
        last_arrival = reqs[-1].arrival_s if reqs else 0.0
        drain = drain_s if drain_s is not None else max(60.0, last_arrival)
        limit = last_arrival + drain
        # samples over the arrivals (at most 20 x as many if the run drains for long)
        step = max(last_arrival / samples, limit / (20 * samples), 1e-9)
        bar = None
        if progress:
            from tqdm import tqdm

            tty = bool(getattr(sys.stderr, "isatty", lambda: False)())
            # in a terminal a live bar; in a log a line every 10 s, as sim run and sim validate do
            bar = tqdm(total=round(last_arrival, 1), unit="sim s", file=sys.stderr, desc="serve", leave=not tty,
                       mininterval=0.5 if tty else 10.0)
        env.process(self.arrivals())
        for r in self.replicas:
            env.process(self.replica(r))
        env.process(self.monitor(step, last_arrival, bar))
        env.run(until=env.any_of([self.done, env.timeout(limit)]))
        if bar is not None:
            bar.close()
        return env.now if self.done.triggered else limit

    # ---- bookkeeping shared by the processes

    @staticmethod
    def _wake(rep: Replica) -> None:
        if rep.wake is not None and not rep.wake.triggered:
            rep.wake.succeed()

    def _check_done(self) -> None:
        if self.finished + self.dropped_n >= len(self.reqs) and not self.done.triggered:
            self.done.succeed()

    def _on_finish(self, rep: Replica):
        def f(seq):
            rep.outstanding -= seq.req.prompt_tokens + seq.req.output_tokens
            self.finished += 1
            self._check_done()
        return f

    def _on_prefilled(self, rep: Replica):
        def f(seq):
            seq.prefill_replica = rep.idx
            self.env.process(self.transfer(seq, rep))
        return f

    @staticmethod
    def _least(pool: list[Replica]) -> Replica:
        return min(pool, key=lambda r: (r.outstanding, r.idx))

    def _route(self, req: Request) -> Replica:
        pool = self.front
        if self.router == "round_robin":
            r = pool[self.rr % len(pool)]
            self.rr += 1
            return r
        if self.router == "prefix_affinity" and req.prefix_id is not None:
            return pool[zlib.crc32(req.prefix_id.encode()) % len(pool)]
        return self._least(pool)

    def _cost(self, rep: Replica, b, dctx: int, graph: bool):
        """An iteration's cost: the target model's, plus the draft's passes when a draft
        model is costed (its prefill and first step, then k - 1 more decode steps);
        ``graph``: replayed from a CUDA graph (padded to the stack's token buckets)."""
        pre = [(n, s.ctx) for s, n in b.prefill]
        nd = len(b.decode) + b.padded
        ctx = dctx + b.padded_context_tokens
        q = rep.sched.q
        c = rep.lat.iteration(pre, nd, ctx, q, graph=graph)
        if rep.draft is not None and (nd or pre):
            c = c + rep.draft.iteration(pre, nd, ctx, 1, graph=graph)
            if nd and self.spec_dec.k > 1:
                c = c + rep.draft.iteration((), nd, ctx, 1, graph=graph).scale(self.spec_dec.k - 1)
        return c

    # ---- the processes

    def transfer(self, seq: Seq, src: Replica):
        """Move a prefilled sequence's KV cache to the least loaded decode replica."""
        env = self.env
        t = seq.ctx * self.per_token / self.link_bps + self.link_lat
        seq.transfer_s = t
        yield env.timeout(t)
        src.sched.transferred(seq)
        src.outstanding -= seq.req.prompt_tokens + seq.req.output_tokens
        dst = self._least(self.back)
        dst.outstanding += seq.req.prompt_tokens + seq.req.output_tokens
        seq.replica = dst.idx
        dst.sched.receive(seq, env.now)
        self._wake(dst)

    def arrivals(self):
        """Route each request to a replica at its arrival time (or drop it at a full queue)."""
        env = self.env
        for req in self.reqs:
            if req.arrival_s > env.now:
                yield env.timeout(req.arrival_s - env.now)
            self.arrived += 1
            rep = self._route(req)
            if self.max_queue is not None and rep.sched.queued >= self.max_queue:
                self.dropped.append(req.id)
                self.dropped_n += 1
                self._check_done()
                continue
            s = Seq(req, rep.idx, env.now)
            self.seqs[req.id] = s
            rep.outstanding += req.prompt_tokens + req.output_tokens
            rep.sched.add(s, env.now)
            self._wake(rep)
        for rep in self.replicas:
            rep.sched.arrivals_done = True
            self._wake(rep)

    def replica(self, rep: Replica):
        """A replica's loop: plan an iteration (or sleep until woken or until the time the
        scheduler names), wait its latency, record it, complete it."""
        env, sched = self.env, rep.sched
        while True:
            p = sched.plan(env.now)
            if p is None:
                rep.wake = env.event()
                yield rep.wake
                rep.wake = None
                continue
            if isinstance(p, float):
                rep.wake = env.event()
                yield env.any_of([rep.wake, env.timeout(max(0.0, p - env.now))])
                rep.wake = None
                continue
            dctx = 0
            for s in p.decode:
                dctx += s.ctx
            graph = self.graphs_all or (self.graphs_decode and not p.prefill)
            c = rep.lat.launched(self._cost(rep, p, dctx, graph), graph) if (p.prefill or p.decode or p.padded) else ZERO
            if self.draft_hop_s and c is not ZERO:
                # a draft on chips of its own: one hop to the target and, when sequences
                # decode, one back (the draft's next step needs the verified tokens, so
                # nothing overlaps)
                c = c + Cost(seconds=self.draft_hop_s * (2 if p.decode or p.padded else 1))
            start = env.now
            dt = c.seconds + p.extra_s
            yield env.timeout(dt)
            rep.busy_s += dt
            pt = 0
            for _, n in p.prefill:
                pt += n
            self.its.append((rep.idx, rep.pool, start, env.now, pt, len(p.prefill), len(p.decode), p.padded,
                             dctx, len(sched.waiting), len(sched.running),
                             sched.kv.used, sched.kv.total, c.energy_j, c.flops, c.dram_bytes, p.extra_s, int(graph)))
            sched.complete(p, env.now)

    def monitor(self, step: float, last_arrival: float, bar):
        """Sample requests in the system, waiting and running sequences and KV use every
        ``step`` simulated seconds (and move the progress bar)."""
        env, replicas = self.env, self.replicas
        while True:
            waiting = sum(r.sched.queued for r in replicas)
            running = sum(len(r.sched.running) for r in replicas)
            used = sum(r.sched.kv.used for r in replicas)
            total = sum(r.sched.kv.total for r in replicas)
            self.timeline.append((env.now, self.arrived - self.finished - self.dropped_n, waiting, running,
                                  used / total))
            if bar is not None:
                bar.n = round(min(env.now, last_arrival), 1)
                bar.refresh()
            yield env.timeout(step)
