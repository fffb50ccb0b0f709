"""Benchmark of the DRAM timing model: achieved bandwidth and per-call cost.

For every example device (sim.memory.dram.EXAMPLE_DEVICES) it prints

* efficiency (achieved / peak bandwidth) of random, size-aligned transfers of 64 B .. 64 MiB
  with plenty of requests in flight;
* efficiency of a long sequential read stream against the number of outstanding
  access-granularity requests (1 .. 65536), with in-order slot retirement (the engine's
  rule), with a pure count limit, and with in-order slots but unstaggered refresh;
* the warm cost of one ``dram_access`` call (from a compiled loop, as the engine calls it)
  and of one chunk through ``dram_stream``;

and writes plots/dram_bandwidth.png.  Run from the repository root:

    python benchmarks/bench_dram.py [--quick] [--out plots/dram_bandwidth.png]
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sim.kernels import dram as K  # noqa: E402
from sim.kernels.jit import kernel  # noqa: E402
from sim.memory import EXAMPLE_DEVICES, DramModel, DramParams, example_spec  # noqa: E402

SIZES = [64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20,
         16 << 20, 64 << 20]
OUTSTANDING = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
PLENTY = 1 << 16


@kernel
def _call_loop(p, state, addrs, sizes, t_ns):
    """The engine's pattern: one dram_access per chunk from compiled code."""
    s = 0.0
    for i in range(addrs.shape[0]):
        s += K.dram_access(p, state, addrs[i], sizes[i], t_ns[i], False)
    return s


def _fmt_size(n: int) -> str:
    for unit, k in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n >> k} {unit}"
    return f"{n} B"


def sweep_size(p: DramParams, total: int) -> list[dict]:
    rows = []
    for size in SIZES:
        n = max(4, total // size)
        rng = np.random.default_rng(size)
        addrs = rng.integers(0, p.capacity_bytes // size, n, dtype=np.int64) * size
        r = DramModel(p).stream(addrs, size, max_outstanding=PLENTY)
        rows.append({"size": size, "eff": r["efficiency"], "gbps": r["achieved_bytes_per_s"] / 1e9,
                     "hit": r["row_hit_rate"]})
    return rows


def sweep_outstanding(p: DramParams, total: int) -> list[dict]:
    rows = []
    for m in OUTSTANDING:
        a = DramModel(p).stream([0], [total], max_outstanding=m)
        b = DramModel(p).stream([0], [total], max_outstanding=m, in_order=False)
        c = DramModel(p.replace(refresh_stagger=False)).stream([0], [total], max_outstanding=m)
        rows.append({"m": m, "eff": a["efficiency"], "eff_count": b["efficiency"],
                     "eff_sync": c["efficiency"],
                     "gbps": a["achieved_bytes_per_s"] / 1e9, "lat": a["mean_latency_ns"]})
    return rows


def call_cost(p: DramParams, n: int) -> dict:
    """Warm ns per dram_access call (sequential and random chunks) and per dram_stream chunk."""
    il = p.interleave_bytes
    seq_a = np.arange(n, dtype=np.int64) * il
    seq_s = np.full(n, il, dtype=np.int64)
    rng = np.random.default_rng(0)
    rnd_a = rng.integers(0, p.capacity_bytes // 64, n, dtype=np.int64) * 64
    rnd_s = np.full(n, 64, dtype=np.int64)
    t = np.arange(n, dtype=np.float64) * (il / (p.peak_bytes_per_s * 1e-9))
    m = DramModel(p)
    _call_loop(m.p, m.state, seq_a[:8], seq_s[:8], t[:8])     # compile / load
    out = {}
    for key, a, s in (("seq", seq_a, seq_s), ("rand", rnd_a, rnd_s)):
        best = np.inf
        for _ in range(3):
            m.reset()
            t0 = time.perf_counter()
            _call_loop(m.p, m.state, a, s, t)
            best = min(best, time.perf_counter() - t0)
        out[key] = best / n * 1e9
    best = np.inf
    for _ in range(3):
        m.reset()
        t0 = time.perf_counter()
        r = m.stream([0], [n * il], max_outstanding=PLENTY)
        best = min(best, (time.perf_counter() - t0) / r["requests"])
    out["stream"] = best * 1e9
    return out


def plot(results: dict, out: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 5.4), gridspec_kw={"width_ratios": [1, 1]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, res) in enumerate(results.items()):
        c = colors[i % len(colors)]
        peak = res["peak_gbps"]
        label = f"{name} (peak {peak:.0f} GB/s)"
        xs = [r["size"] for r in res["size"]]
        ax1.plot(xs, [100 * r["eff"] for r in res["size"]], "o-", color=c, label=label)
        ms = [r["m"] for r in res["outstanding"]]
        ax2.plot(ms, [100 * r["eff"] for r in res["outstanding"]], "o-", color=c,
                 label=f"{name}, in-order slots")
        ax2.plot(ms, [100 * r["eff_count"] for r in res["outstanding"]], "s--", color=c, alpha=0.6,
                 label=f"{name}, count limit")
    ax1.set_xscale("log", base=2)
    ax1.set_xticks(SIZES)
    ax1.set_xticklabels([_fmt_size(s) for s in SIZES], rotation=45, ha="right")
    ax1.set_xlabel("transfer size (random, size-aligned addresses)")
    ax1.set_ylabel("achieved bandwidth (% of peak)")
    ax1.set_title(f"Bandwidth vs transfer size ({PLENTY} requests in flight)")
    ax1.set_ylim(0, 100)
    ax1.grid(True, which="both", alpha=0.3)
    ax1.legend(fontsize=8, loc="lower right")
    ax2.set_xscale("log", base=2)
    ax2.set_xlabel("outstanding requests (access-granularity bursts in flight)")
    ax2.set_ylabel("achieved bandwidth (% of peak)")
    ax2.set_title("Bandwidth vs concurrency (long sequential read stream)")
    ax2.set_ylim(0, 100)
    ax2.grid(True, which="both", alpha=0.3)
    ax2.legend(fontsize=7.5, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.suptitle("sim DRAM timing model: example devices (refresh on, staggered)")
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=130, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="smaller streams (for a smoke run)")
    ap.add_argument("--out", default=str(ROOT / "plots" / "dram_bandwidth.png"))
    args = ap.parse_args(argv)
    total = (16 << 20) if args.quick else (128 << 20)
    calls = (1 << 18) if args.quick else (1 << 20)

    results = {}
    for name in EXAMPLE_DEVICES:
        p = DramParams.from_spec(example_spec(name))
        t0 = time.perf_counter()
        res = {"peak_gbps": p.peak_bytes_per_s / 1e9,
               "size": sweep_size(p, total),
               "outstanding": sweep_outstanding(p, total // 2),
               "cost": call_cost(p, calls)}
        seq = DramModel(p).stream([0], [256 << 20], max_outstanding=PLENTY)
        res["seq256"] = seq
        res["wall_s"] = time.perf_counter() - t0
        results[name] = res

        print(f"\n=== {name}: {p.technology}, {p.num_pseudo_channels} pseudo-channels x "
              f"{p.bus_width_bits} bit @ {p.data_rate_gbps_per_pin:g} Gb/s, "
              f"peak {res['peak_gbps']:.1f} GB/s, access {p.access_bytes} B, "
              f"tRFC/tREFI {p.refresh_overhead:.3f}")
        print(f"  256 MiB sequential read, {PLENTY} in flight: {100 * seq['efficiency']:.1f} % "
              f"({seq['achieved_bytes_per_s'] / 1e9:.1f} GB/s), row-hit rate {seq['row_hit_rate']:.3f}")
        print("  transfer size   GB/s      % peak  row-hit")
        for r in res["size"]:
            print(f"  {_fmt_size(r['size']):>12}  {r['gbps']:8.1f}  {100 * r['eff']:8.1f}  {r['hit']:7.3f}")
        print("  outstanding   GB/s(in-order)  % peak  % peak(count limit)  % peak(no stagger)"
              "  mean latency ns")
        for r in res["outstanding"]:
            print(f"  {r['m']:>11}  {r['gbps']:14.2f}  {100 * r['eff']:6.1f}  {100 * r['eff_count']:19.1f}"
                  f"  {100 * r['eff_sync']:17.1f}  {r['lat']:15.1f}")
        c = res["cost"]
        print(f"  per-call cost (warm): dram_access {c['seq']:.1f} ns (sequential chunks), "
              f"{c['rand']:.1f} ns (random 64 B); dram_stream {c['stream']:.1f} ns per chunk")
        print(f"  wall time for this device: {res['wall_s']:.1f} s")

    plot(results, Path(args.out))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
