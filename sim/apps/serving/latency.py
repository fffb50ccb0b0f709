"""Iteration latency for the serving simulation, from the chip model, memoised on a grid.

Simulating one iteration of Llama-3-8B exactly costs seconds (every distinct op goes
through the mapper and the engine), and a serving run has 10^4-10^5 iterations, each with
its own mix.  An iteration's ops split into three families whose costs depend on few
numbers (:func:`sim.model.workload.llm.build_iteration` is the source of every op):

* **dense**: projections, MLP, norms, RoPE, KV append, residuals, collectives, embedding:
  their shapes depend only on ``T``, the iteration's new tokens (all sequences are
  concatenated along M), so ``dense(T)`` is one function of one number;
* **LM head**: a GEMM over the ``L`` rows that need logits (one per sequence, ``k + 1`` per
  verifying sequence): ``lm(L)``;
* **attention**: one fused kernel per group of sequences.  The decoding sequences of a batch
  are one group (a paged-attention kernel walks the whole batch in one launch, as vLLM's
  does): ``decode_attn(q, B, C)`` with ``B`` sequences, ``q`` new tokens each and a mean
  cached context ``C``; each prefilling sequence (or chunk) is its own group:
  ``prefill_attn(n, p)`` with ``n`` new tokens behind ``p`` cached ones - unless the stack's
  prefill attention is varlen (``attention.prefill_varlen``): then all chunks of the iteration
  are one kernel per layer (:meth:`LatencyModel.varlen_prefill_attention`, priced by
  :mod:`sim.model.varlen_attention`, not interpolated); and unless the stack's decode kernel is a
  split-KV kernel over a CUDA graph's grid (``attention.decode_split``): then its time follows the
  graph's rows (``max_batch``) and the cache's length (``model.max_context``), with or without
  decoding sequences (:meth:`LatencyModel.split_decode_attention`, not interpolated).

Each function is sampled lazily on a grid (powers of two, with 1.5x midpoints above 64 for
``T``/``L``) and interpolated linearly (bilinearly for the two-argument ones).  An iteration
is ``dense(T) + lm(L) + decode_attn + Σ prefill_attn``: exactly the sum that
:func:`sim.apps.iteration.run_trace` forms over the same iteration's ops (the ops run one after
another on the chip), so the composition itself adds no error; the interpolation between grid
points does, and ``tests/test_serving.py::test_interpolation_error_vs_exact_iterations``
measures it against ``build_iteration`` + ``run_trace`` of real mixed batches.  A batch whose
decoding sequences have different contexts is costed at their mean context (the builder
itself would emit one kernel per distinct length, which no serving engine does).

**Host**: the grid prices the device.  :meth:`LatencyModel.launched` turns an iteration's
device time into its wall time with the software stack's ``host`` rule (its launches: a
CUDA-graph replay's input set-up before the device starts, or an eager iteration's kernels
launched one by one, the slower of host and device setting the pace); the serving
simulator decides per iteration which (``graphs``: all, decode-only or none).  Each grid
point carries its kernel count for that.

**Power window**: on a chip with DVFS (``power.dvfs``) a single op runs at the highest clock at
which its own power fits ``tdp_w`` (:mod:`sim.model.engine.dvfs`).  A serving loop runs its
iterations back to back, and the GPU's power controller averages the board power over tens of
milliseconds (``power.average_window_s``), longer than an iteration: an iteration whose average
power at the chip's clock fits ``tdp_w`` runs every op at that clock - its heavy GEMMs are not
throttled by their own power, the memory-bound ops around them make up for it.  So every grid
point is also priced with every op at ``clock_mhz`` (keys ``top:...``), and an iteration takes
that price when its energy over its device time, per chip, is at most ``tdp_w``; otherwise each
op's own DVFS clock (the loop then runs power capped).  Measured: nvidia-smi read 1,980 MHz and
600-655 W over the serving loop's 512-token mixed iterations, whose GEMMs the per-op rule
priced at 1,470-1,590 MHz (validation/measurements/h200_micro_serving_kernels*.csv).

Grid points are simulated once per (chip, model, precision, parallelism, options, simulator
source) and stored as JSON under ``$SIM_CACHE_DIR/serving`` (default
``~/.cache/sim/serving``), so a second run of the same deployment simulates nothing.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import asdict
from pathlib import Path

from sim.apps.serving.cost import ZERO, Cost, bracket, lerp, pow2_grid, token_grid
from sim.ir.ops import Attention, Copy
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op, simulate_ops
from sim.model.stacks import chip_stack, lower_trace
from sim.model.varlen_attention import split_decode, varlen_prefill
from sim.model.workload.llm import Iteration, Parallelism, Precision, Sequence, build_iteration
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format

#: op names of the attention family in a trace (fused kernel or its unfused pieces)
ATTENTION_OPS = frozenset({"attn.core", "attn.qk", "attn.softmax", "attn.pv", "attn.qk.dequant", "attn.pv.dequant"})
#: bump when the meaning of a stored grid point changes (4: points carry their kernel count;
#: 5: and their attention calls; 6: "top:" points at the chip's clock, for the power window)
TABLE_VERSION = 6
#: grid keys of points priced with every op at the chip's clock (DVFS off): the power window
TOP_CLOCK = "top:"
#: which iterations replay a captured CUDA graph (the rest are launched eagerly, kernel by kernel)
GRAPH_POLICIES = ("all", "decode", "none")


def _source_hash() -> str:
    """Hash of the simulator's sources that a grid point depends on (everything but the command
    line and the rest of serving; the other apps are in, since iterations are priced through them)."""
    root = Path(__file__).resolve().parents[2]
    h = hashlib.sha256()
    for p in sorted(root.rglob("*.py")):
        rel = p.relative_to(root).as_posix()
        if rel.startswith("apps/serving/") and rel not in ("apps/serving/latency.py", "apps/serving/cost.py"):
            continue
        if rel.startswith("cli/") or rel == "__init__.py":
            continue
        h.update(rel.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def default_cache_dir() -> Path:
    base = os.environ.get("SIM_CACHE_DIR")
    return (Path(base) if base else Path.home() / ".cache" / "sim") / "serving"


_TABLES: dict[str, dict] = {}


def clear_memory_cache() -> None:
    """Forget the in-process grid tables (the on-disk ones stay)."""
    _TABLES.clear()


class LatencyModel:
    """Iteration costs of one deployment (a chip or a TP/PP group of chips running one model)."""

    def __init__(self, chip: ChipSpec, model, precision: Precision = Precision(), attention: str | None = None,
                 parallel: Parallelism = Parallelism(), options: Options | None = None,
                 cache_dir: str | Path | None | bool = None, stack=None, max_batch: int | None = None):
        self.chip, self.model, self.precision = chip, model, precision
        self.attention = attention or chip.attention_lowering
        self.parallel = parallel
        self.max_batch = max_batch      # sequences a replica holds at once: the rows of a split decode's graphs
        self.options = options or Options()
        self.stack = chip_stack(chip, stack)
        self.chips = parallel.tensor * parallel.pipeline
        self.kw = dict(precision=precision, attention=self.attention, parallel=parallel)
        self.token_grid = token_grid(max(2 * model.max_context, 8192))
        self.kv_grid = [k for k in token_grid(model.max_context) if k >= 16]
        self.batch_grid = pow2_grid(1, 4096)
        self.past_grid = [0] + pow2_grid(16, model.max_context)
        ident = json.dumps({"v": TABLE_VERSION, "chip": chip.model_dump_json(), "model": model.model_dump_json(),
                            "precision": asdict(precision), "attention": self.attention,
                            "parallel": asdict(parallel), "options": repr(self.options),
                            # the host rule prices launches, not grid points (LatencyModel.launched)
                            "stack": repr(self.stack.model_copy(update={"host": None})),
                            "src": _source_hash()}, sort_keys=True, default=str)
        self.key = hashlib.sha256(ident.encode()).hexdigest()[:24]
        if cache_dir is False:
            self.path = None
        else:
            self.path = Path(cache_dir) if cache_dir not in (None, True) else default_cache_dir()
            self.path = self.path / f"{chip.name}-{model.name}-{self.key}.json"
        self.table = _TABLES.setdefault(self.key, self._load())
        self.simulated = 0          # grid points simulated by this instance
        # the power window: the same chip with every op at clock_mhz (None without DVFS)
        pw = getattr(chip, "power", None)
        self._chip_top = (chip.model_copy(update={"power": pw.model_copy(update={"dvfs": False})})
                          if pw is not None and pw.dvfs else None)
        self._mode = ""             # "": each op at its own DVFS clock; TOP_CLOCK: every op at clock_mhz
        self._dense_lm: dict[tuple[str, int, int], Cost] = {}   # interpolated dense(T) + lm(L), by (mode, T, L)
        self._varlen: dict[tuple, Cost] = {}     # (mode, prompt chunks) -> their varlen kernels (prefill_varlen)
        self._varlen_op = None
        self._decode_op = None
        self._split: dict[tuple, Cost] = {}      # (mode, rows, decoding seqs, mean context) -> split decode
        self._dirty = False

    # ----------------------------------------------------------------- storage
    def _load(self) -> dict:
        if self.path is not None and self.path.exists():
            try:
                raw = json.loads(self.path.read_text())
                return {k: Cost(*v) for k, v in raw["points"].items()}
            except (OSError, ValueError, KeyError, TypeError):
                return {}
        return {}

    def flush(self) -> None:
        """Write newly simulated grid points to the on-disk cache."""
        if self.path is None or not self._dirty:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".tmp{os.getpid()}")
        tmp.write_text(json.dumps({"chip": self.chip.name, "model": self.model.name,
                                   "points": {k: list(c.values()) for k, c in sorted(self.table.items())}}))
        os.replace(tmp, self.path)
        self._dirty = False

    # ----------------------------------------------------------------- exact pieces
    def _sum(self, trace, want) -> Cost:
        """The kernels the chip's software stack launches for ``trace`` (the lowering
        :func:`sim.apps.iteration.run_trace` uses), those ``want`` keeps, summed."""
        s = e = f = b = n = calls = masked = dec = 0.0
        wanted = [k for k in lower_trace(trace, self.stack) if want(k)]
        answers = simulate_ops(self._chip_now, [(k.op, k.options(self.options)) for k in wanted])
        for k, r in zip(wanted, answers):
            s += r.seconds * k.repeat
            e += r.energy_pj * k.repeat
            f += r.flops * k.repeat
            b += r.dram_bytes * k.repeat
            n += k.repeat
            if isinstance(k.op, Attention):   # one call of the framework's attention per kernel
                if k.op.q_len == 1:
                    dec += k.repeat
                else:
                    calls += k.repeat
                    masked += k.repeat if k.op.kv_len > k.op.q_len else 0
        c = self.chips
        return Cost(s, e * 1e-12 * c, f * c, b * c, n, calls, masked, dec)

    @staticmethod
    def _is_attn(k) -> bool:
        return (k.source or k.op.name) in ATTENTION_OPS

    @staticmethod
    def _is_lm(k) -> bool:
        return k.block == "lm_head" and (k.source or k.op.name).startswith("lm_head")

    @property
    def _chip_now(self) -> ChipSpec:
        return self._chip_top if self._mode else self.chip

    def _point(self, key: str, make) -> Cost:
        key = self._mode + key
        c = self.table.get(key)
        if c is None:
            c = make()
            self.table[key] = c
            self.simulated += 1
            self._dirty = True
            if self.simulated % 8 == 0:
                self.flush()
        return c

    def _dense_point(self, T: int) -> Cost:
        def make():
            tr = build_iteration(self.model, Iteration((Sequence(1, 0),) * T), **self.kw)
            return self._sum(tr, lambda t: not self._is_attn(t) and not self._is_lm(t))
        return self._point(f"dense:{T}", make)

    def _lm_point(self, L: int) -> Cost:
        def make():
            tr = build_iteration(self.model, Iteration((Sequence(1, 0),) * L), **self.kw)
            return self._sum(tr, self._is_lm)
        return self._point(f"lm:{L}", make)

    def _decode_attn_point(self, q: int, B: int, C: int) -> Cost:
        def make():
            seq = Sequence(q, C, logits=q) if q > 1 else Sequence(1, C)
            tr = build_iteration(self.model, Iteration((seq,) * B), **self.kw)
            return self._sum(tr, self._is_attn)
        return self._point(f"dattn:{q}:{B}:{C}", make)

    def _prefill_attn_point(self, n: int, p: int) -> Cost:
        def make():
            tr = build_iteration(self.model, Iteration((Sequence(n, p),)), **self.kw)
            return self._sum(tr, self._is_attn)
        return self._point(f"pattn:{n}:{p}", make)

    # ----------------------------------------------------------------- interpolated
    def _interp1(self, grid, x, point) -> Cost:
        lo, hi, w = bracket(grid, x)
        if x > grid[-1]:
            return point(int(x))
        a = point(lo)
        return a if w == 0.0 else lerp(a, point(hi), w)

    def dense(self, T: int) -> Cost:
        return self._interp1(self.token_grid, T, self._dense_point)

    def lm_head(self, L: int) -> Cost:
        return ZERO if L <= 0 else self._interp1(self.token_grid, L, self._lm_point)

    def decode_attention(self, B: int, context_tokens: int, q: int = 1) -> Cost:
        """``B`` sequences with ``context_tokens`` cached tokens in all, ``q`` new each.

        Sampled at key lengths (cached + new) on :attr:`kv_grid` (powers of two and their
        1.5x midpoints): an attention kernel's cost steps with whole key tiles, and tiles are
        powers of two, so grid points on tile boundaries keep the interpolation between them
        within about one tile's cost."""
        if B <= 0:
            return ZERO
        kv = max(1.0, context_tokens / B) + q
        b0, b1, wb = bracket(self.batch_grid, B)
        k0, k1, wk = bracket(self.kv_grid, kv)
        cap = self.model.max_context
        c0, c1 = max(0, min(k0, cap) - q), max(0, min(k1, cap) - q)

        def at(b):
            a = self._decode_attn_point(q, b, c0)
            return a if wk == 0.0 else lerp(a, self._decode_attn_point(q, b, c1), wk)
        lo = at(b0)
        return lo if wb == 0.0 else lerp(lo, at(b1), wb)

    def prefill_attention(self, new: int, past: int) -> Cost:
        n0, n1, wn = bracket(self.token_grid, new)
        p0, p1, wp = bracket(self.past_grid, past)

        def ok(n, p):
            return min(p, max(0, self.model.max_context - n))

        def at(n):
            a = self._prefill_attn_point(n, ok(n, p0))
            return a if wp == 0.0 else lerp(a, self._prefill_attn_point(n, ok(n, p1)), wp)
        lo = at(n0)
        return lo if wn == 0.0 else lerp(lo, at(n1), wn)

    def _windowed(self, price) -> Cost:
        """``price()`` under the power window (module docstring): with every op at the chip's
        clock when that fits ``tdp_w`` on average, else with each op at its own DVFS clock
        (priced only then: a loop under the cap never simulates the per-op clocks)."""
        if self._chip_top is None:
            return price()
        self._mode = TOP_CLOCK
        try:
            top = price()
        finally:
            self._mode = ""
        return top if self.fits_power(top) else price()

    def fits_power(self, c: Cost) -> bool:
        """Whether an iteration's average power per chip (its energy over its device time) is at
        most the chip's ``tdp_w``."""
        pw = getattr(self.chip, "power", None)
        if pw is None or c.seconds <= 0:
            return True
        return c.energy_j / self.chips / c.seconds <= pw.tdp_w

    def iteration(self, prefill: list[tuple[int, int]] | tuple = (), decode_seqs: int = 0,
                  decode_context_tokens: int = 0, decode_new: int = 1, graph: bool = False) -> Cost:
        """Cost of one iteration: prefill chunks ``(new, past)`` plus ``decode_seqs`` sequences
        with ``decode_context_tokens`` cached tokens in all and ``decode_new`` new tokens each
        (``k + 1`` when verifying ``k`` drafted tokens, all with logits).  ``graph``: replayed
        from a CUDA graph, whose dense work and LM head run over the stack's graph buckets
        (:class:`~sim.spec.stack_spec.GraphRule`: padding rows cost device time).  Under the
        power window (module docstring)."""
        return self._windowed(lambda: self._iteration(prefill, decode_seqs, decode_context_tokens, decode_new, graph))

    def _iteration(self, prefill, decode_seqs: int, decode_context_tokens: int, decode_new: int,
                   graph: bool) -> Cost:
        T = sum(n for n, _ in prefill) + decode_seqs * decode_new
        L = len(prefill) + decode_seqs * decode_new
        if graph and self.stack.graphs is not None:
            T, L = self.stack.graphs.bucket(T), self.stack.graphs.bucket(L)
        c = self._dense_lm.get((self._mode, T, L))
        if c is None:
            c = self._dense_lm[(self._mode, T, L)] = self.dense(T) + self.lm_head(L)
        if self.stack.attention.decode_split is not None and decode_new == 1 and (decode_seqs or (graph and prefill)):
            # a graph's split-KV decode runs over the graph's rows, with or without decoding sequences
            rows = decode_seqs
            if graph and self.stack.graphs is not None:
                # the graph's rows: its bucket T (a decode graph's is its batch's), at most the slots
                # for a mixed graph, which runs the kernel over them whatever the decodes
                rows = min(T, self.max_batch) if prefill and self.max_batch else T
            c = c + self.split_decode_attention(rows, decode_seqs, decode_context_tokens, decode_only=not prefill)
        elif decode_seqs:
            c = c + self.decode_attention(decode_seqs, decode_context_tokens, decode_new)
        if prefill and self.stack.attention.prefill_varlen:
            return c + self.varlen_prefill_attention(prefill)
        for n, p in prefill:
            c = c + self.prefill_attention(n, p)
        return c

    def _attention_kernel(self, seq: Sequence, decode: bool):
        """The first fused attention kernel of a lowered one-sequence iteration (``seq``): the
        decoding sequences' (``decode``: one query row) or a prompt chunk's."""
        tr = build_iteration(self.model, Iteration((seq,)), **self.kw)
        for k in lower_trace(tr, self.stack):
            if isinstance(k.op, Attention) and (k.op.q_len == 1) == decode and self._is_attn(k):
                return k
        kind = "decode" if decode else "fused prefill"
        raise ValueError(f"{self.model.name}: no {kind} attention kernel (stack '{self.stack.name}')")

    def _varlen_shape(self) -> tuple:
        """(query heads, head dim, dtype, KV dtype, kernels per iteration) of the prompt chunks'
        attention kernel on one chip."""
        if self._varlen_op is None:
            k = self._attention_kernel(Sequence(64, 0), decode=False)
            self._varlen_op = (k.op.heads * k.op.batch, k.op.head_dim, k.op.dtype, k.op.kv_dtype, k.repeat)
        return self._varlen_op

    def _decode_shape(self) -> tuple:
        """(KV heads, query heads, decode attention kernels per iteration, one row's query bytes)
        on one chip."""
        if self._decode_op is None:
            k = self._attention_kernel(Sequence(1, 64), decode=True)
            q_bytes = k.op.heads * k.op.head_dim * get_format(k.op.dtype).bytes_for(1)
            self._decode_op = (k.op.kv_heads, k.op.heads, k.repeat, q_bytes)
        return self._decode_op

    def split_decode_attention(self, rows: int, decode_seqs: int, context_tokens: int,
                               decode_only: bool = False) -> Cost:
        """The decoding sequences' split-KV kernel and its combine kernel over ``rows`` graph rows
        and the cache's length (``model.max_context``), per layer (the stack's
        ``attention.decode_split``; :func:`sim.model.varlen_attention.split_decode`), at least the
        engine's decode attention of the same sequences (what their K/V stream costs).  Energy,
        FLOPs and DRAM bytes are that op's (the rows without a sequence move no data); two kernels
        and one decode call per layer.  With the rule's ``query_copy_decode_only``, a decode-only
        iteration (``decode_only``) adds the queries' copy kernel per layer."""
        rule = self.stack.attention.decode_split
        C = int(round(context_tokens / decode_seqs)) if decode_seqs else 0
        copy = bool(rule.query_copy_decode_only and decode_only and decode_seqs)
        key = (self._mode, int(rows), int(decode_seqs), C, copy)
        hit = self._split.get(key)
        if hit is not None:
            return hit
        kv_heads, heads, per_iter, q_bytes = self._decode_shape()
        k = split_decode(self._chip_now, rule, max(int(rows), int(decode_seqs)),
                         [C + 1] * int(decode_seqs), self.model.max_context, kv_heads, heads)
        work = self.decode_attention(decode_seqs, context_tokens) if decode_seqs else ZERO
        c = dataclasses.replace(work, seconds=max(work.seconds, k.seconds * per_iter), kernels=2 * per_iter,
                                decode_calls=per_iter)
        if copy:
            r = simulate_op(self._chip_now, Copy("attn.core.query_copy", int(decode_seqs) * q_bytes))
            c = c + Cost(r.seconds * per_iter, r.energy_pj * 1e-12 * per_iter * self.chips, 0.0,
                         r.dram_bytes * per_iter * self.chips, per_iter)
        if len(self._split) < 100_000:
            self._split[key] = c
        return c

    def varlen_prefill_attention(self, prefill) -> Cost:
        """Every prompt chunk of an iteration in ONE varlen kernel per layer (the stack's
        ``attention.prefill_varlen``; :func:`sim.model.varlen_attention.varlen_prefill`): one
        launch per layer, the chunks' programs sharing the cores.  Its time is that kernel's;
        energy, FLOPs and DRAM bytes are the chunks' own kernels' (the same work), one kernel
        and one attention call per layer (a masked one when a chunk has cached tokens)."""
        key = tuple((int(n), int(p)) for n, p in prefill)
        hit = self._varlen.get((self._mode, key))
        if hit is not None:
            return hit
        heads, d, dt, kvdt, per_iter = self._varlen_shape()
        work = ZERO
        for n, p in key:
            work = work + self.prefill_attention(n, p)
        k = varlen_prefill(self._chip_now, self.stack, key, heads, d, dt, kvdt, self.options)
        masked = per_iter if any(p > 0 for _, p in key) else 0.0
        c = dataclasses.replace(work, seconds=k.seconds * per_iter, kernels=per_iter, attention_calls=per_iter,
                                masked_calls=masked)
        if len(self._varlen) < 100_000:
            self._varlen[(self._mode, key)] = c
        return c

    def launched(self, c: Cost, graph: bool) -> Cost:
        """``c`` (device time) as the iteration's wall time once the host has issued it, from the
        stack's ``host`` rule (none: the device time).  A CUDA-graph iteration: the host builds its
        inputs and replays the graph while the device idles, then the device runs
        (``graph_replay_ns`` + device).  An eager iteration: the host launches kernel after kernel
        and the device cannot run ahead of the launches, so the slower of the two sets the pace
        (``max(device, host)``: the pipeline's bound, which leaves out the last kernel's run after
        its launch and the first launch before the device starts), the host's time being
        :meth:`~sim.spec.stack_spec.HostRule.eager_host_ns` of its kernels and attention calls."""
        h = self.stack.host
        if h is None:
            return c
        if graph:
            wall = c.seconds + h.graph_replay_ns * 1e-9
        else:
            wall = max(c.seconds, h.eager_host_ns(c.kernels, c.attention_calls, c.masked_calls,
                                                  c.decode_calls) * 1e-9)
        return dataclasses.replace(c, seconds=wall)

    def exact(self, prefill=(), decode_seqs: int = 0, decode_context: int = 0, decode_new: int = 1) -> Cost:
        """The same iteration built by ``build_iteration`` and summed op by op (no grid):
        decoding sequences all at ``decode_context`` cached tokens.  For tests of the grid's
        interpolation: its decode attention is the engine's op even under a stack with
        ``attention.decode_split`` (that kernel is priced per iteration, never interpolated)."""
        seqs = [Sequence(n, p) for n, p in prefill]
        d = Sequence(decode_new, decode_context, logits=decode_new) if decode_new > 1 else Sequence(1, decode_context)
        seqs += [d] * decode_seqs
        tr = build_iteration(self.model, Iteration(tuple(seqs)), **self.kw)
        return self._windowed(lambda: self._sum(tr, lambda t: True))
