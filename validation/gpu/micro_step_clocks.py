#!/usr/bin/env python3
"""The SM clock inside whole-model steps replayed back to back, read between their GEMMs.

Why (issue 11, README "Power and clocks"): the clock-from-power model needs the clock a
step's GEMMs run at in a steady loop of CUDA-graph replays - what the whole-model cases
measure - not nvidia-smi's reading (it reports 1,980 MHz while tensor-core kernels run at
1,710-1,790 MHz under Nsight Compute) and not an isolated kernel's (Nsight Compute idles the
GPU between replays).  Here the step is captured into a CUDA graph with a probe kernel after
the GEMMs of every ``--every``-th layer: one block per SM spinning ``--spin-us`` on
%globaltimer and counting clock64 (as ``micro_probe_clock.py``), so each replay records the
SM clock the GPU holds at those points; the same step without probes is timed too (the
probes' cost), and nvidia-smi samples clock and power throughout.

Standalone: torch, cupy (NVRTC for the probe), numpy; the model and step are
``measure_models.py``'s (random weights, Llama-3-8B shapes).

    python3 validation/gpu/micro_step_clocks.py --out DIR [--seconds 4] [--only NAME,...]
    # DIR/<gpu>_micro_step_clocks.csv       step, replay, probe (layer, after which GEMM),
    #                                       SM MHz (median, min, max over the SMs), host time
    # DIR/<gpu>_micro_step_clocks_steps.csv step, with/without probes: per-replay step ms
    # DIR/<gpu>_micro_step_clocks_smi.csv   nvidia-smi samples (host time, MHz, W, reasons)
    # DIR/<gpu>_micro_step_clocks_env.json  GPU, driver, torch, arguments, summary per step
    python3 validation/gpu/micro_step_clocks.py --dry-run --out DIR   # CPU, tiny shapes, no probes
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_models as MM  # noqa: E402
import torch  # noqa: E402
from micro_csv import write_rows  # noqa: E402
# the probe of micro_probe_clock.py: per block (clock64 ticks, ns, SM id); the stored H100 run of
# 2026-12-07 used the same body without the SM id word
from micro_probe_clock import PROBE_SRC  # noqa: E402


#: (name, weight format, groups (count, new, past), probe every N-th layer): Llama-3-8B steps
#: like the stored whole-model cases (h200_models_dev.csv) and the serving loop's mixed ones
STEPS = [
    ("prefill_1x2048_bf16", "bf16", [(1, 2048, 0)], 4),
    ("prefill_1x512_bf16", "bf16", [(1, 512, 0)], 4),
    ("mixed_512+16x1024_bf16", "bf16", [(1, 496, 0), (16, 1, 1024)], 4),
    ("decode_16x1024_bf16", "bf16", [(16, 1, 1024)], 8),
    ("prefill_1x2048_fp8", "fp8", [(1, 2048, 0)], 4),
    ("prefill_4x2048_bf16", "bf16", [(4, 2048, 0)], 8),
    # (session 38's second run: the clock against the step's size and mix)
    ("prefill_1x128_bf16", "bf16", [(1, 128, 0)], 4),
    ("prefill_1x256_bf16", "bf16", [(1, 256, 0)], 4),
    ("prefill_1x1024_bf16", "bf16", [(1, 1024, 0)], 4),
    ("prefill_1x4096_bf16", "bf16", [(1, 4096, 0)], 8),
    ("mixed_256+16x1024_bf16", "bf16", [(1, 240, 0), (16, 1, 1024)], 4),
    ("mixed_384+16x1024_bf16", "bf16", [(1, 368, 0), (16, 1, 1024)], 4),
    ("mixed_448+16x1024_bf16", "bf16", [(1, 432, 0), (16, 1, 1024)], 4),
    ("decode_64x1024_bf16", "bf16", [(64, 1, 1024)], 8),
    ("decode_256x1024_bf16", "bf16", [(256, 1, 1024)], 8),
    ("prefill_1x512_fp8", "fp8", [(1, 512, 0)], 4),
]
GEMMS = ("qkv", "o", "gu", "down")


class _Ctx:
    """What measure_models.Model and Step need of a context."""

    def __init__(self, dry: bool):
        self.dry = dry
        self.cuda = torch.cuda.is_available() and not dry
        self.dev = torch.device("cuda" if self.cuda else "cpu")

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()


class Probes:
    """Probe kernels launched on torch's current stream (captured into a graph with it), each
    writing its own slot of one device buffer: (clock64 ticks, ns, SM id) per block."""

    def __init__(self, sms: int, slots: int, spin_us: float):
        import cupy as cp
        self.cp = cp
        self.fn = cp.RawModule(code=PROBE_SRC).get_function("probe")
        self.sms, self.slots = sms, slots
        self.buf = cp.zeros((slots, sms, 3), dtype=cp.int64)
        self.spin = cp.int64(int(spin_us * 1000))
        self.labels: list[str] = []
        self.on = False

    def __call__(self, label: str):
        if not self.on:
            return
        i = len(self.labels)
        if i >= self.slots:
            raise RuntimeError(f"more than {self.slots} probes in one step")
        self.labels.append(label)
        stream = self.cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        with stream:
            self.fn((self.sms,), (32,), (self.buf[i], self.spin))

    def mhz(self, snap) -> list[tuple[float, float, float]]:
        """(median, min, max) SM MHz of each probe in a copied buffer ``snap`` (slots, sms, 3)."""
        out = []
        for i in range(len(self.labels)):
            v = [c / ns * 1e3 for c, ns, _sm in snap[i].tolist() if ns > 0]
            out.append((statistics.median(v), min(v), max(v)) if v else (float("nan"),) * 3)
        return out


def _probed_forward(step, probes, every: int):
    """``step.forward`` with a probe after each weight GEMM of every ``every``-th layer (the
    layer's Linear objects replaced by probing calls for the call)."""
    m = step.m
    wrapped = []
    for li, L in enumerate(m.layers):
        if li % every:
            continue
        for name in GEMMS:
            lin = L.get(name)
            if lin is None:
                continue
            orig = lin.__call__

            def call(x, _orig=orig, _label=f"L{li}.{name}"):
                y = _orig(x)
                probes(_label)
                return y
            L[name] = call
            wrapped.append((L, name, lin))
    try:
        return step.forward()
    finally:
        for L, name, lin in wrapped:
            L[name] = lin


def _replay_loop(g, seconds: float, after=None):
    """Replays ``g`` back to back for ``seconds`` (host time); ``after(i)`` is enqueued after
    replay ``i``.  Returns (per-replay ms, host start times)."""
    evs, starts = [], []
    t_end = time.perf_counter() + seconds
    i = 0
    while time.perf_counter() < t_end:
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        g.replay()
        e1.record()
        if after is not None:
            after(i)
        evs.append((e0, e1))
        starts.append(time.perf_counter())
        i += 1
        if i % 8 == 0:
            evs[-4][1].synchronize()   # keep the host at most a few replays ahead
    torch.cuda.synchronize()
    return [a.elapsed_time(b) for a, b in evs], starts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--seconds", type=float, default=4.0, help="replays per step, host seconds (each variant)")
    ap.add_argument("--spin-us", type=float, default=20.0)
    ap.add_argument("--only", default="", help="comma-separated step names (default all)")
    ap.add_argument("--deadline", type=float, default=480.0, help="no new step starts after this many seconds")
    ap.add_argument("--dry-run", action="store_true", help="CPU, tiny shapes, no probes: the Python paths only")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    ctx = _Ctx(a.dry_run)
    t_start = time.perf_counter()
    steps = [s for s in STEPS if not a.only or s[0] in a.only.split(",")]
    if not ctx.cuda:
        for name, fmt, groups, every in steps:
            model = MM.Model("llama3-8b", "bf16", ctx)   # (fp8 has no CPU kernel)
            st = MM.Step(model, groups, ctx)
            seen = []
            _probed_forward(st, lambda label: seen.append(label), every)
            print(name, "dry run:", len(seen), "probe points, e.g.", seen[:5])
        return 0
    gpu = torch.cuda.get_device_name(0)
    tag = "h200" if "H200" in gpu else "h100" if "H100" in gpu else "gpu"
    torch.backends.cuda.matmul.allow_tf32 = False
    from smi_sampler import Smi
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    smi_q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,clocks.max.sm,clocks.sm,power.draw,"
                            "power.limit,temperature.gpu", "--format=csv,noheader"], capture_output=True, text=True)
    env = {"gpu": gpu, "torch": torch.__version__, "cuda": torch.version.cuda, "sms": sms,
           "smi_start": smi_q.stdout.strip(), "args": vars(a), "steps": {}}
    smi = Smi(period_ms=20)
    probes = Probes(sms, 64, a.spin_us)
    rows, step_rows = [], []
    models = {}
    env_path = os.path.join(a.out, f"{tag}_micro_step_clocks_env.json")
    try:
        for name, fmt, groups, every in steps:
            if time.perf_counter() - t_start > a.deadline:
                print(name, "skipped: deadline", flush=True)
                continue
            try:
                if fmt not in models:
                    models.clear()
                    torch.cuda.empty_cache()
                    models[fmt] = MM.Model("llama3-8b", fmt, ctx)
                model = models[fmt]
                st = MM.Step(model, groups, ctx)
                plain = MM.capture_graph(st.forward, warm=1)[0]
                probes.labels.clear()
                probes.on = True
                try:
                    probed = MM.capture_graph(lambda: (probes.labels.clear(), _probed_forward(st, probes, every)),
                                              warm=1)[0]
                finally:
                    probes.on = False
                labels = list(probes.labels)
                buf_t = torch.as_tensor(probes.buf, device="cuda")
                time.sleep(2.0)   # idle between steps: every step starts from the same state
                t0 = time.perf_counter()
                ms_plain, _ = _replay_loop(plain, a.seconds)
                t1 = time.perf_counter()
                # one copy of the probe buffer per replay (the probed loop runs about as many)
                hist = torch.zeros((int(len(ms_plain) * 1.25) + 16,) + tuple(probes.buf.shape), dtype=torch.int64,
                                   device="cuda")

                def snap(i):
                    if i < hist.shape[0]:
                        hist[i].copy_(buf_t, non_blocking=True)
                ms_probed, starts = _replay_loop(probed, a.seconds, snap)
                t2 = time.perf_counter()
                n = min(len(ms_probed), hist.shape[0])
                host = hist[:n].cpu().numpy()
                for i in range(n):
                    for j, (med, lo, hi) in enumerate(probes.mhz(host[i])):
                        layer, gemm = labels[j].split(".")
                        rows.append({"step": name, "weights": fmt, "replay": i, "t_s": round(starts[i] - t_start, 4),
                                     "probe": j, "layer": int(layer[1:]), "after": gemm,
                                     "sm_mhz_median": round(med, 1), "sm_mhz_min": round(lo, 1),
                                     "sm_mhz_max": round(hi, 1), "step_ms": round(ms_probed[i], 5)})
                for variant, ms in (("plain", ms_plain), ("probed", ms_probed)):
                    for i, v in enumerate(ms):
                        step_rows.append({"step": name, "variant": variant, "replay": i, "ms": round(v, 5)})
                half = [r for r in rows if r["step"] == name and r["replay"] >= n // 2]
                by_gemm = {g: round(statistics.median(r["sm_mhz_median"] for r in half if r["after"] == g), 1)
                           for g in GEMMS if any(r["after"] == g for r in half)}
                summ = {"groups": groups, "probes_per_step": len(labels), "every": every,
                        "plain_ms_median_second_half": round(statistics.median(ms_plain[len(ms_plain) // 2:]), 4),
                        "probed_ms_median_second_half": round(statistics.median(ms_probed[n // 2:n]), 4),
                        "replays_plain": len(ms_plain), "replays_probed": len(ms_probed),
                        "probe_mhz_median_second_half": by_gemm,
                        "smi_plain_mhz": smi.between(t0 + (t1 - t0) / 2, t1, 1),
                        "smi_plain_w": smi.between(t0 + (t1 - t0) / 2, t1, 2),
                        "smi_probed_mhz": smi.between(t1 + (t2 - t1) / 2, t2, 1),
                        "smi_probed_w": smi.between(t1 + (t2 - t1) / 2, t2, 2)}
                env["steps"][name] = summ
                print(name, json.dumps(summ), flush=True)
                del plain, probed, st, hist
                torch.cuda.empty_cache()
            except Exception as exc:  # noqa: BLE001 - record it, go on with the next step
                env["steps"][name] = {"error": f"{type(exc).__name__}: {exc}"}
                print(name, "failed:", type(exc).__name__, exc, flush=True)
            write_rows(os.path.join(a.out, f"{tag}_micro_step_clocks.csv"), rows)
            write_rows(os.path.join(a.out, f"{tag}_micro_step_clocks_steps.csv"), step_rows)
            with open(env_path, "w") as f:
                json.dump(env, f, indent=1)
    finally:
        smi.stop()
        smi.write(os.path.join(a.out, f"{tag}_micro_step_clocks_smi.csv"), t_start,
                  ["t_s", "sm_mhz", "power_w", "reasons"])
        with open(env_path, "w") as f:
            json.dump(env, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
