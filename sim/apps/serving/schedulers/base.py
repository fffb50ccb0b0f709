"""The shared base of every replica scheduler: sequence state, KV growth, preemption, bookkeeping.

A scheduler owns one replica's queues (``waiting``, ``running``, ``swapped``) and its
:class:`~sim.apps.serving.kv.KVCache`.  The simulator asks it for the next iteration
(:meth:`Scheduler.plan`: a :class:`Batch`, ``None`` when idle, or a time to wake up at),
waits the iteration's latency, then hands the batch back (:meth:`Scheduler.complete`).
A policy (one file each, registered in ``schedulers/__init__.py``) only decides what goes into
the batch; the token and block accounting here is the same for all of them.

Token semantics (vLLM's): a sequence's prefill computes its prompt's K/V and emits its first
token; a decode step processes the last emitted token (one new K/V entry) and emits the
next.  ``ctx`` is the tokens whose K/V is in the cache; ``to_prefill`` the prompt tokens
still to compute.  Preemption by recompute frees the blocks and prefills prompt + generated
tokens again later; by swap it copies the blocks to host memory over a link and back.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from sim.apps.serving.kv import KVCache


class Seq:
    """The serving state of one request on one replica."""

    __slots__ = ("req", "ctx", "to_prefill", "generated", "blocks", "shared", "prefix", "first_token_s",
                 "last_token_s", "first_sched_s", "finish_s", "preemptions", "swapped_blocks", "done",
                 "cached_tokens", "replica", "enqueued_s", "prefill_replica", "transfer_s")

    def __init__(self, req, replica: int = 0, now: float = 0.0):
        self.req = req
        self.ctx = 0
        self.to_prefill = req.prompt_tokens
        self.generated = 0
        self.blocks = 0          # blocks this sequence owns
        self.shared = 0          # blocks of a cached prefix it reads
        self.prefix = None
        self.first_token_s = None
        self.last_token_s = None
        self.first_sched_s = None
        self.finish_s = None
        self.preemptions = 0
        self.swapped_blocks = 0
        self.done = False
        self.cached_tokens = 0   # prompt tokens served from the prefix cache
        self.replica = replica
        self.enqueued_s = now
        self.prefill_replica = None
        self.transfer_s = 0.0

    @property
    def remaining(self) -> int:
        return self.req.output_tokens - self.generated


@dataclass
class Batch:
    """One iteration: prefill chunks ``(seq, new_tokens)``, decoding sequences, and the
    decode slots of finished sequences still padded into a static batch."""

    prefill: list = field(default_factory=list)
    decode: list = field(default_factory=list)
    padded: int = 0
    padded_context_tokens: int = 0
    extra_s: float = 0.0            # swap traffic on the host link, serialised with the iteration
    kind: str = ""


class Scheduler:
    """Base class: subclasses implement :meth:`plan` (and may extend :meth:`complete`)."""

    name = "base"
    #: a disaggregated policy runs separate prefill and decode pools (see disaggregated.py)
    disaggregated = False

    def __init__(self, kv: KVCache, *, max_batch: int = 256, token_budget: int = 8192,
                 preemption: str = "recompute", swap_bytes_per_s: float = 0.0, kv_bytes_per_token: int = 0,
                 speculative=None, rng=None, **policy):
        self.kv = kv
        self.max_batch = int(max_batch)
        self.token_budget = int(token_budget)
        self.preemption = preemption
        self.swap_bytes_per_s = float(swap_bytes_per_s)
        self.kv_bytes_per_token = int(kv_bytes_per_token)
        self.spec = speculative
        self.q = speculative.k + 1 if speculative else 1
        self.rng = rng
        self.policy = policy
        self.waiting: deque[Seq] = deque()
        self.running: list[Seq] = []
        self.swapped: deque[Seq] = deque()
        self.arrivals_done = False
        self.on_finish = None        # set by the simulator: called with each finished Seq
        self.on_prefilled = None     # disaggregated prefill pools: called when a prompt is done
        self.preemptions = 0
        self.swaps = 0
        self.finished = 0
        self._some_done = False

    # ----------------------------------------------------------------- queue
    def add(self, seq: Seq, now: float) -> None:
        seq.enqueued_s = now
        self.waiting.append(seq)

    @property
    def queued(self) -> int:
        return len(self.waiting) + len(self.swapped)

    def plan(self, now: float) -> Batch | float | None:  # pragma: no cover - abstract
        raise NotImplementedError

    # ----------------------------------------------------------------- KV helpers
    def blocks_needed(self, seq: Seq, tokens_after: int) -> int:
        return max(0, self.kv.blocks_for(tokens_after) - seq.shared - seq.blocks)

    def ensure(self, seq: Seq, tokens_after: int, reserve: int = 0) -> bool:
        n = self.blocks_needed(seq, tokens_after)
        if n and not self.kv.allocate(n, reserve):
            return False
        seq.blocks += n
        return True

    def lookup_prefix(self, seq: Seq) -> None:
        """On admission: reuse a cached prefix (whole blocks, leaving >= 1 token to compute)."""
        r = seq.req
        if seq.prefix is not None or seq.ctx or r.prefix_id is None:
            return
        e = self.kv.lookup(r.prefix_id, r.prefix_tokens)
        if e is None:
            return
        bt = self.kv.block_tokens
        usable = min(e.tokens, ((seq.to_prefill - 1) // bt) * bt)
        seq.prefix = e
        seq.shared = usable // bt
        seq.ctx = usable
        seq.to_prefill -= usable
        seq.cached_tokens += usable

    def admit(self, seq: Seq, now: float, chunk: int | None = None, extra: int = 0,
              reserve: int | None = None) -> bool:
        """Move the head of ``waiting`` into ``running`` if blocks for its prompt (or its first
        ``chunk`` prompt tokens) plus ``extra`` tokens fit the cache above ``reserve`` blocks
        (default: the watermark)."""
        reserve = self.kv.watermark if reserve is None else reserve

        def tokens_after() -> int:
            return seq.ctx + (seq.to_prefill if chunk is None else min(chunk, seq.to_prefill)) + extra
        est = self.kv.blocks_for(tokens_after()) - seq.shared - seq.blocks
        if not self.kv.can_allocate(max(0, est), reserve):
            return False
        ctx, tp, cached = seq.ctx, seq.to_prefill, seq.cached_tokens
        self.lookup_prefix(seq)
        if not self.ensure(seq, tokens_after(), reserve):
            self.free(seq)
            seq.ctx, seq.to_prefill, seq.cached_tokens = ctx, tp, cached
            return False
        self.waiting.popleft()
        if seq.first_sched_s is None:
            seq.first_sched_s = now
        self.running.append(seq)
        return True

    def free(self, seq: Seq) -> None:
        if seq.blocks:
            self.kv.release(seq.blocks)
            seq.blocks = 0
        if seq.prefix is not None:
            self.kv.unref(seq.prefix)
            seq.prefix = None
            seq.shared = 0

    def preempt(self, seq: Seq, batch: Batch) -> None:
        """Take ``seq`` out of ``running`` (recompute: back to the head of the queue; swap:
        its blocks to host memory, its swap-out time added to this iteration)."""
        self.running.remove(seq)
        self.preemptions += 1
        seq.preemptions += 1
        if self.preemption == "swap" and seq.to_prefill == 0 and self.swap_bytes_per_s > 0:
            batch.extra_s += seq.ctx * self.kv_bytes_per_token / self.swap_bytes_per_s
            self.kv.release(seq.blocks)
            seq.swapped_blocks, seq.blocks = seq.blocks, 0
            self.swaps += 1
            self.swapped.append(seq)
            return
        # recompute: the prompt and every emitted token are prefilled again (the last emitted
        # token is the next input, so it is part of the recomputed prompt)
        total = seq.ctx + seq.to_prefill + (1 if seq.generated and seq.to_prefill == 0 else 0)
        self.free(seq)
        seq.ctx = 0
        seq.to_prefill = total
        self.waiting.appendleft(seq)

    def swap_in(self, batch: Batch) -> None:
        while self.swapped and len(self.running) < self.max_batch:
            s = self.swapped[0]
            if not self.kv.allocate(s.swapped_blocks, self.kv.watermark):
                return
            self.swapped.popleft()
            s.blocks, s.swapped_blocks = s.swapped_blocks, 0
            batch.extra_s += s.ctx * self.kv_bytes_per_token / self.swap_bytes_per_s
            self.running.append(s)

    def grow_decodes(self, batch: Batch) -> list[Seq]:
        """Blocks for one more step of every decoding sequence; when the cache is full, preempt
        the most recently admitted sequences (vLLM's policy) until the rest fit."""
        q = self.q
        out: list[Seq] = []
        gone: set[int] = set()
        bt = self.kv.block_tokens
        for s in list(self.running):
            if s.to_prefill or id(s) in gone:
                continue
            if (s.ctx + q + bt - 1) // bt <= s.shared + s.blocks:   # fast path: its blocks have room
                out.append(s)
                continue
            while not self.ensure(s, s.ctx + q):
                victim = self.running[-1]
                if victim is s:
                    break
                self.preempt(victim, batch)
                gone.add(id(victim))
            else:
                out.append(s)
                continue
            self.preempt(s, batch)   # nothing left to take from: it waits
            gone.add(id(s))
        if gone:
            out = [s for s in out if id(s) not in gone]
        return out

    # ----------------------------------------------------------------- completion
    def emit(self, seq: Seq, n: int, now: float) -> None:
        n = min(n, seq.remaining)
        seq.generated += n
        if seq.first_token_s is None:
            seq.first_token_s = now
        seq.last_token_s = now
        if seq.generated >= seq.req.output_tokens:
            self.finish(seq, now)

    def finish(self, seq: Seq, now: float) -> None:
        seq.done = True
        self._some_done = True
        seq.finish_s = now
        self.free(seq)
        self.finished += 1
        if self.on_finish is not None:
            self.on_finish(seq)

    def prefill_done(self, seq: Seq, now: float) -> None:
        """A prompt is computed: register its prefix, emit the first token."""
        r = seq.req
        if r.prefix_id is not None and seq.prefix is None and self.kv.prefix_caching:
            e = self.kv.insert(r.prefix_id, r.prefix_tokens)
            if e is not None:
                seq.blocks -= e.blocks
                seq.shared = e.blocks
                seq.prefix = e
        self.emit(seq, 1, now)

    def decode_tokens(self, n: int):
        """Tokens each of ``n`` decoding sequences emits this step (speculative: sampled)."""
        if self.spec is None:
            return None
        return self.spec.sample_tokens(self.rng, n)

    def complete(self, batch: Batch, now: float) -> None:
        for s, n in batch.prefill:
            s.ctx += n
            s.to_prefill -= n
            if s.to_prefill == 0:
                self.prefill_done(s, now)
        toks = self.decode_tokens(len(batch.decode))
        if toks is None:
            for s in batch.decode:       # the common case, inlined: one token each
                s.ctx += 1
                s.generated += 1
                s.last_token_s = now
                if s.generated >= s.req.output_tokens:
                    self.finish(s, now)
        else:
            for i, s in enumerate(batch.decode):
                t = min(int(toks[i]), s.remaining)
                s.ctx += t
                self.emit(s, t, now)
        if self._some_done:
            self.running = [s for s in self.running if not s.done]
            self._some_done = False
