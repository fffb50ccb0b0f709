"""One varlen prefill-attention launch for every prompt chunk of an iteration.

A serving stack whose prefill attention is varlen (``attention.prefill_varlen`` in its profile,
e.g. ``stacks/graph_serving_loop.yaml``: the Triton kernel of ``validation/gpu/serving_loop.py``)
runs, per layer, ONE kernel over every prompt chunk of the iteration: its grid is the union of
the chunks' query blocks times the query heads, each program (query block, head) walking the keys
of its own chunk - the chunk's cached tokens, then its new tokens up to the block's last row
(causal, aligned to the bottom right) - in steps of ``prefill_tiles[1]`` keys.  Pricing each chunk
as a kernel of its own pays one launch per chunk and leaves the cores idle between them (32
chunks of 16 tokens: 114 us modelled against 19 us measured for the one launch,
``validation/measurements/serving/run6/chunk_attn.csv``).

Time of the launch (per layer)::

    launch + makespan of the programs, dispatched in grid order onto cores x programs_per_core slots
    program = program_ns + steps x max(step_ns, the engine's time of one tile step)

The engine's tile step (a (query rows x keys) step of QK^T, softmax and PV on one core,
:func:`sim.model.engine.simulate.simulate_op` of a one-step attention at the stack's tile) is
what the kernel's tensor work costs at the core's rate; a program of the Triton kernel cannot
reach that rate: each step is a dependent chain (load K, QK^T, mask and exponentials, load V,
PV, rescale) of one 4-warp program, and only ``programs_per_core`` programs fit on an SM at
once (shared memory), so the step's latency, not the core's throughput, sets the pace
(``prefill_latency``: CALIBRATED on chunk_attn.csv, see the profile).  Without
``prefill_latency`` a program is its engine tile steps and one program runs per core.
"""
from __future__ import annotations

import dataclasses
import heapq
from dataclasses import dataclass

from sim.ir.ops import Attention
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op

__all__ = ["VarlenKernel", "program_steps", "makespan", "varlen_prefill", "SplitDecodeKernel", "split_decode"]


def program_steps(chunks, heads: int, block_q: int, block_k: int) -> list[int]:
    """Key steps of every program in grid order (head after head, each head's query blocks chunk
    after chunk): chunk ``(new, cached)``'s query block ``j`` walks keys ``0 .. cached +
    min((j + 1) * block_q, new)``."""
    per_head = []
    for n, p in chunks:
        n, p = int(n), int(p)
        for j in range(-(-n // block_q)):
            per_head.append(-(-(p + min((j + 1) * block_q, n)) // block_k))
    return per_head * heads


def makespan(durations: list[float], slots: int) -> tuple[float, int]:
    """Greedy list scheduling in order (the block scheduler hands each program to the first
    free slot): the last finish time and the number of waves (ceil(programs / slots))."""
    if not durations:
        return 0.0, 0
    if len(durations) <= slots:
        return max(durations), 1
    free = [0.0] * slots
    end = 0.0
    for d in durations:
        t = heapq.heappop(free) + d
        end = max(end, t)
        heapq.heappush(free, t)
    return end, -(-len(durations) // slots)


@dataclass(frozen=True)
class VarlenKernel:
    """One launch of the varlen kernel (one layer), seconds and what they are made of."""

    seconds: float          # launch + makespan
    launch_s: float         # the engine's launch overhead of one kernel
    makespan_s: float       # the programs on the cores
    programs: int           # programs with work (query blocks x heads)
    waves: int              # ceil(programs / slots)
    slots: int              # cores x programs_per_core
    step_s: float           # one key step of one program: max(step_ns, engine_step_s)
    engine_step_s: float    # the engine's time of one tile step on one core
    program_s: float        # the fixed time of one program
    max_steps: int          # the longest program's key steps


_STEP_CACHE: dict[tuple, tuple[float, float]] = {}


def engine_step(chip, head_dim: int, dtype: str, kv_dtype: str | None, block_q: int, block_k: int,
                options: Options | None = None) -> tuple[float, float]:
    """(seconds of one (block_q x block_k) attention tile step on one core, launch overhead in
    seconds) from the engine: a one-program attention (one head, one query block, one key
    block) at the stack's tile."""
    key = (id(chip), chip.name, head_dim, dtype, kv_dtype, block_q, block_k, repr(options))
    hit = _STEP_CACHE.get(key)
    if hit is None:
        op = Attention("varlen.step", 1, 1, 1, head_dim, block_q, block_k, causal=False, dtype=dtype,
                       kv_dtype=kv_dtype)
        opts = (options or Options())
        r = simulate_op(chip, op, dataclasses.replace(opts, tiles=(block_q, 1, block_k)))
        mhz = (r.details or {}).get("clock_mhz") or chip.clock_mhz
        launch = float((r.details or {}).get("launch_overhead_cycles", 0.0)) / (mhz * 1e6)
        hit = _STEP_CACHE[key] = (float(r.compute_cycles) / (mhz * 1e6), launch)
    return hit


def varlen_prefill(chip, stack, chunks, heads: int, head_dim: int, dtype: str = "bf16",
                   kv_dtype: str | None = None, options: Options | None = None) -> VarlenKernel:
    """The varlen kernel of ``stack`` (its ``attention.prefill_tiles`` and ``prefill_latency``)
    over ``chunks`` = [(new tokens, cached tokens), ...] on ``chip``, one layer."""
    a = stack.attention
    if a.prefill_tiles is None:
        raise ValueError(f"stack '{stack.name}': the varlen prefill kernel needs attention.prefill_tiles")
    bq, bk = a.prefill_tiles
    eng, launch = engine_step(chip, head_dim, dtype, kv_dtype, bq, bk, options)
    lat = a.prefill_latency
    step = max(lat.step_ns * 1e-9, eng) if lat else eng
    fixed = lat.program_ns * 1e-9 if lat else 0.0
    slots = chip.cores.count * (lat.programs_per_core if lat else 1)
    steps = program_steps(chunks, heads, bq, bk)
    span, waves = makespan([fixed + s * step for s in steps], slots)
    return VarlenKernel(seconds=launch + span, launch_s=launch, makespan_s=span, programs=len(steps), waves=waves,
                        slots=slots, step_s=step, engine_step_s=eng, program_s=fixed,
                        max_steps=max(steps) if steps else 0)


@dataclass(frozen=True)
class SplitDecodeKernel:
    """The split-KV decode kernel and its combine kernel of one layer (``attention.decode_split``)."""

    seconds: float          # both kernels, each with the chip's launch overhead
    split_s: float
    combine_s: float
    active: int             # split programs with tokens
    idle: int               # split programs without (past their sequence, or a row without one)
    waves: int              # ceil(active / slots)


def split_decode(chip, rule, rows: int, contexts, cache_tokens: int, kv_heads: int, heads: int) -> SplitDecodeKernel:
    """The kernels of a split-KV decode over ``rows`` graph rows (``len(contexts) <= rows`` rows
    hold a sequence of that many keys; the rest hold none) and a cache of ``cache_tokens`` per
    row, one layer (``rule``: :class:`~sim.spec.stack_spec.DecodeSplitRule`)::

        split   = launch + kernel_ns + ceil(active / slots) x steps x step_ns + idle x empty_program_ns / slots
        combine = launch + combine_kernel_ns + ceil(rows x heads / slots) x combine_program_ns

    ``steps``: the longest program's key steps; ``slots`` = cores x programs_per_core.  Programs
    are dealt to the cores in waves (one resident per core on the H200's fit: a wave of
    programs waits for its slowest), and a program's steps are a dependent chain (load K and
    V, QK^T, softmax, PV) whose latency, not the cores' throughput, sets the pace."""
    splits = -(-int(cache_tokens) // rule.split_tokens)
    active = 0
    steps = 0
    for n in contexts:
        n = min(int(n), splits * rule.split_tokens)
        if n <= 0:
            continue
        active += -(-n // rule.split_tokens)
        steps = max(steps, -(-min(n, rule.split_tokens) // rule.block_k))
    active *= kv_heads
    idle = rows * kv_heads * splits - active
    slots = chip.cores.count * rule.programs_per_core
    launch = chip.runtime.op_launch_overhead_ns * 1e-9 if chip.runtime is not None else 0.0
    waves = -(-active // slots)
    split = launch + 1e-9 * (rule.kernel_ns + waves * steps * rule.step_ns + idle * rule.empty_program_ns / slots)
    combine = launch + 1e-9 * (rule.combine_kernel_ns + -(-rows * heads // slots) * rule.combine_program_ns)
    return SplitDecodeKernel(seconds=split + combine, split_s=split, combine_s=combine, active=active,
                             idle=idle, waves=waves)
