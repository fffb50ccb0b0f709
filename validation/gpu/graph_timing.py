"""In-graph timing helpers shared by the microbenchmark scripts here (run on the GPU box from
the repository root: ``python3 validation/gpu/<script>.py``; needs torch, not ``sim``).

A kernel is captured into a CUDA graph ``reps`` times and once; each graph is replayed after
a 100 us GPU sleep (so the replay starts from an idle queue) and the median is kept; one more
call costs ``(t_reps - t_1) / (reps - 1)``, which removes the graph launch and event pair."""
from __future__ import annotations

import subprocess

import torch

T = torch.cuda


def smi(query: str) -> str:
    """One ``nvidia-smi --query-gpu`` value (clocks, driver...), or why it is unavailable."""
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout.strip()
    except Exception as exc:  # recorded, not fatal
        return f"unavailable: {exc}"


def graph(fn, reps: int):
    """``fn`` captured ``reps`` times into one CUDA graph (after three warm-up calls)."""
    s = T.Stream()
    s.wait_stream(T.current_stream())
    with T.stream(s):
        for _ in range(3):
            fn()
    T.current_stream().wait_stream(s)
    g = T.CUDAGraph()
    with T.graph(g):
        for _ in range(reps):
            fn()
    return g


def timed_us(g, n: int = 25) -> float:
    """Median replay time of graph ``g`` in microseconds over ``n`` replays."""
    e0, e1 = T.Event(enable_timing=True), T.Event(enable_timing=True)
    g.replay()
    T.synchronize()
    xs = []
    for _ in range(n):
        T._sleep(100000)
        e0.record()
        g.replay()
        e1.record()
        e1.synchronize()
        xs.append(e0.elapsed_time(e1) * 1e3)
    xs.sort()
    return xs[n // 2]


def per_call_us(fn, reps: int, n: int = 25) -> tuple[float, float]:
    """(time of a one-call graph, time of one more call), both in microseconds."""
    t1 = timed_us(graph(fn, 1), n)
    tr = timed_us(graph(fn, reps), n)
    return t1, (tr - t1) / (reps - 1)
