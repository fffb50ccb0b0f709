"""Per-kernel timing of one call, shared by the kernel-by-kernel microbenchmarks
(micro_cudnn_decode_kernels.py, micro_splitk_reduce_kernels.py): the call timed with CUDA events
as measure.py times it, and the same calls under CUPTI (torch.profiler), whose device activities
give each kernel's own duration and the gaps between them.  Standalone: torch, numpy and the
standard library only."""
from __future__ import annotations

import subprocess

import numpy as np
import torch

FLUSH_BYTES = 256 << 20


def smi(fields: str) -> str:
    """One nvidia-smi query (CSV, no header), or why it failed."""
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                              capture_output=True, text=True, timeout=20).stdout.strip()
    except Exception as e:  # noqa: BLE001
        return f"unavailable ({type(e).__name__})"


def gpu_tag() -> str:
    """h200 / h100 / gpu: the prefix of the files a run writes."""
    name = torch.cuda.get_device_name(0).lower()
    return "h200" if "h200" in name else "h100" if "h100" in name else "gpu"


def pct(xs, q) -> float:
    return float(np.percentile(np.asarray(xs, dtype=float), q)) if xs else float("nan")


class Flush:
    """measure.py's default L2 flush: torch.sum over a 256 MiB buffer (its kernel is
    at::native's reduce_kernel, which the callers tell apart from the measured kernels)."""

    def __init__(self):
        self.buf = torch.empty(FLUSH_BYTES // 4, dtype=torch.float32, device="cuda").uniform_()
        self.out = torch.empty((), dtype=torch.float32, device="cuda")

    def __call__(self):
        torch.sum(self.buf, 0, out=self.out)


def timed_calls(fn, flush: Flush, calls: int, warmup: int = 5) -> tuple[list[float], list[tuple[float, float, str]]]:
    """(CUDA-event time of each call in us, every device activity of ``calls`` more calls as
    (start us, end us, name), in time order): each call after a flush."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for e0, e1 in ev:
        flush()
        e0.record()
        fn()
        e1.record()
    torch.cuda.synchronize()
    events_us = [e0.elapsed_time(e1) * 1e3 for e0, e1 in ev]
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            flush()
            fn()
        torch.cuda.synchronize()
    kernels = sorted((float(e.time_range.start), float(e.time_range.end), e.name) for e in prof.events()
                     if getattr(e, "device_type", None) == torch.autograd.DeviceType.CUDA)
    return events_us, kernels


def warm_clock(seconds: float = 2.0) -> None:
    """Keep the GPU busy for a while so the first case does not run at an idle clock."""
    import time
    a = torch.randn(4096, 4096, dtype=torch.bfloat16, device="cuda")
    t = time.time()
    while time.time() - t < seconds:
        a @ a
    torch.cuda.synchronize()


def write_rows(path: str, rows: list[dict]) -> None:
    """All rows so far to ``path`` (rewritten after every case, so a cut run keeps what it
    measured); columns in order of first appearance."""
    import csv
    cols = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=cols)
        w.writeheader()
        w.writerows(rows)


def measure_all(items: list, measure, key_of, path: str, deadline_s: float, show: tuple[str, ...]) -> list[dict]:
    """``measure(item)`` for each item until ``deadline_s`` seconds have passed, every row
    written to ``path`` as it comes (an error is a row of ``key_of(item)`` and the message)."""
    import time
    rows, t0 = [], time.time()
    for i, item in enumerate(items):
        if time.time() - t0 > deadline_s:
            print(f"deadline: {len(items) - i} cases left", flush=True)
            break
        try:
            row = measure(item)
        except Exception as e:  # noqa: BLE001
            row = dict(key_of(item), error=f"{type(e).__name__}: {str(e)[:200]}")
        rows.append(row)
        write_rows(path, rows)
        print(i, {k: (round(row[k], 2) if isinstance(row.get(k), float) else row.get(k)) for k in show}, flush=True)
    return rows


def write_env(env: dict, path: str) -> None:
    """``env`` (GPU, versions, the idle clocks) with the clocks and power after the run, as JSON."""
    import json
    env = dict(env, smi_after=smi("clocks.sm,clocks.mem,power.draw,temperature.gpu"))
    with open(path, "w") as f:
        json.dump(env, f, indent=2)
