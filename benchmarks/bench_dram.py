"""Benchmark of the DRAM timing model: achieved bandwidth and per-call cost.

For the npu_128x128 chip's HBM3 and every example device (sim.model.memory.dram.EXAMPLE_DEVICES)
it prints

* efficiency (achieved / peak bandwidth) of random, size-aligned transfers of 64 B .. 64 MiB
  with plenty of requests in flight;
* efficiency of a long sequential read stream against the number of outstanding
  access-granularity requests (1 .. 65536), with in-order slot retirement, with a pure
  count limit (the engine's rule), and with the count limit but all-bank refresh;
* concurrent streams: 1 .. 32 sequential read streams at 64 MiB-aligned bases sharing a
  Little's-law window (2 x peak x unloaded latency), count-limited, with the default
  model and with each of its three parts switched off (plain address mapping, all-bank
  refresh, strict FCFS), plus random 64 B reads with the same window;
* the warm cost of one ``dram_access`` call from a compiled loop, as the engine calls it
  (arrivals at the peak rate, and a count-limited window of the Little's-law size), and
  of one chunk through ``dram_stream``;

* speed bins: for every shipped chip (``sim.list_chips()``), a long read stream (the
  chip's requesters and requests in flight, or a Little's-law window if larger; 64 KiB
  transfers; refresh on) at the lowest and highest pin rate of its technology's speed bin,
  at the chip's own rate and at twice it, in % of the pin peak and in GB/s;

writes the numbers to benchmarks/results/dram.json and plots/dram_bandwidth.png.  Run
from the repository root:

    python benchmarks/bench_dram.py [--quick] [--out plots/dram_bandwidth.png]
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sim.model.kernels import dram as K  # noqa: E402
from sim.model.kernels.jit import kernel  # noqa: E402
from sim.model.memory import EXAMPLE_DEVICES, DramModel, DramParams, example_spec  # noqa: E402
from sim.model.memory.dram import little_window, long_read_stream  # noqa: E402

SIZES = [64, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20,
         16 << 20, 64 << 20]
OUTSTANDING = [1, 4, 16, 64, 256, 1024, 4096, 16384, 65536]
STREAMS = [1, 2, 4, 8, 16, 32]
PLENTY = 1 << 16


# cache=False: a cached caller keeps a stale inlined copy of dram_access when only
# sim/model/kernels/dram.py changes (Numba does not track cross-module dependencies)
@kernel(cache=False)
def _call_loop(p, state, addrs, sizes, t_ns):
    """The engine's pattern: one dram_access per chunk from compiled code."""
    s = 0.0
    for i in range(addrs.shape[0]):
        s += K.dram_access(p, state, addrs[i], sizes[i], t_ns[i], False)
    return s


@kernel(cache=False)
def _window_loop(p, state, addrs, sizes, m, ring):
    """Like the engine: chunk i issues when chunk i - m has completed (``m`` in flight)."""
    t = 0.0
    s = 0.0
    for i in range(addrs.shape[0]):
        j = i % m
        if ring[j] > t:
            t = ring[j]
        d = K.dram_access(p, state, addrs[i], sizes[i], t, False)
        ring[j] = d
        s += d
    return s


def _fmt_size(n: int) -> str:
    for unit, k in (("MiB", 20), ("KiB", 10)):
        if n >= 1 << k:
            return f"{n >> k} {unit}"
    return f"{n} B"


def devices() -> dict[str, DramParams]:
    out = {}
    try:
        from sim.spec.registry import load_chip
        out["npu_128x128"] = DramParams.from_spec(load_chip("npu_128x128").memory.dram)
    except Exception as exc:  # pragma: no cover - the chip config is optional here
        print(f"(npu_128x128 not loaded: {exc})")
    for name in EXAMPLE_DEVICES:
        out[name] = DramParams.from_spec(example_spec(name))
    return out


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
    ab = p.replace(refresh_mode="all_bank")
    for m in OUTSTANDING:
        a = DramModel(p).stream([0], [total], max_outstanding=m)
        b = DramModel(p).stream([0], [total], max_outstanding=m, in_order=False)
        c = DramModel(ab).stream([0], [total], max_outstanding=m, in_order=False)
        rows.append({"m": m, "eff": a["efficiency"], "eff_count": b["efficiency"],
                     "eff_allbank": c["efficiency"],
                     "gbps": b["achieved_bytes_per_s"] / 1e9, "lat": b["mean_latency_ns"]})
    return rows


def streams(p: DramParams, n_streams: int, total: int, window: int) -> dict:
    bases = np.arange(n_streams, dtype=np.int64) << 26
    return DramModel(p).stream_multi(bases, total // n_streams, np.arange(n_streams),
                                     max(1, window // n_streams), in_order=False)


def sweep_streams(p: DramParams, total: int) -> dict:
    w = little_window(p)
    variants = {"model": p, "plain mapping": p.replace(address_hash=False),
                "all-bank refresh": p.replace(refresh_mode="all_bank"),
                "strict FCFS": p.replace(scheduler="fcfs")}
    rows = []
    for n in STREAMS:
        row = {"n": n}
        for key, q in variants.items():
            r = streams(q, n, total, w)
            row[key] = r["efficiency"]
            if key == "model":
                row["hit"] = r["row_hit_rate"]
                row["reordered"] = r["reordered_hits"] / max(1.0, r["requests"])
        rows.append(row)
    rng = np.random.default_rng(1)
    addrs = rng.integers(0, p.capacity_bytes // 64, 50_000, dtype=np.int64) * 64
    rand = DramModel(p).stream(addrs, 64, max_outstanding=w, in_order=False)
    return {"window": w, "rows": rows, "variants": list(variants), "random64": rand["efficiency"]}


def _best(fn, reps: int) -> float:
    best = np.inf
    for _ in range(reps):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def call_cost(p: DramParams, n: int) -> dict:
    """Warm ns per dram_access call (sequential and random chunks, arrivals at the peak
    rate or through a Little's-law window) and per dram_stream chunk.  CPU time of this
    thread, best of 5, so other load on the machine does not count."""
    il = p.interleave_bytes
    seq_a = np.arange(n, dtype=np.int64) * il
    seq_s = np.full(n, il, dtype=np.int64)
    rng = np.random.default_rng(0)
    rnd_a = rng.integers(0, p.capacity_bytes // 64, n, dtype=np.int64) * 64
    rnd_s = np.full(n, 64, dtype=np.int64)
    t = np.arange(n, dtype=np.float64) * (il / (p.peak_bytes_per_s * 1e-9))
    w = little_window(p)
    m = DramModel(p)
    _call_loop(m.p, m.state, seq_a[:8], seq_s[:8], t[:8])     # compile
    _window_loop(m.p, m.state, seq_a[:8], seq_s[:8], 2, np.zeros(2))
    out = {}
    for key, a, s in (("seq", seq_a, seq_s), ("rand", rnd_a, rnd_s)):
        def run():
            m.reset()
            _call_loop(m.p, m.state, a, s, t)
        out[key] = _best(run, 5) / n * 1e9
        k = max(1, w * p.access_bytes // int(s[0]))

        def run_w():
            m.reset()
            _window_loop(m.p, m.state, a, s, k, np.zeros(k))
        out[key + "_win"] = _best(run_w, 5) / n * 1e9
    r = {}

    def run_s():
        m.reset()
        r.update(m.stream([0], [n * il], max_outstanding=PLENTY))
    out["stream"] = _best(run_s, 3) / (n) * 1e9
    return out


def speed_bins() -> dict:
    """Stream efficiency of every shipped chip's DRAM across its speed bin (and at 2x)."""
    import sim
    from sim.spec.registry import load_chip
    out = {}
    for name in sim.list_chips():
        chip = load_chip(name)
        p = DramParams.from_spec(chip.memory.dram)
        lo, hi = p.speed_bin_gbps
        rates = sorted({lo, hi, p.data_rate_gbps_per_pin, 2 * p.data_rate_gbps_per_pin})
        rows = []
        for rate in rates:
            q = p.replace(data_rate_gbps_per_pin=rate)
            res = long_read_stream(q, chip.cores.count, chip.memory.dram.max_outstanding_requests_per_core)
            rows.append({"gbps_per_pin": rate, "in_bin": bool(lo <= rate <= hi),
                         "peak_gbps": q.peak_bytes_per_s / 1e9,
                         "bus_peak_gbps": q.bus_peak_bytes_per_s / 1e9,
                         "achieved_gbps": res["achieved_bytes_per_s"] / 1e9,
                         "eff": res["efficiency"]})
        out[name] = {"technology": p.technology, "bin_gbps": [lo, hi],
                     "chip_gbps": p.data_rate_gbps_per_pin, "rows": rows}
    return out


def plot(results: dict, out: Path, bins: dict | None = None) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax1, ax2, ax3, ax4) = plt.subplots(1, 4, figsize=(28, 5.6))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (name, res) in enumerate(results.items()):
        c = colors[i % len(colors)]
        peak = res["peak_gbps"]
        label = f"{name} (peak {peak:.0f} GB/s)"
        xs = [r["size"] for r in res["size"]]
        ax1.plot(xs, [100 * r["eff"] for r in res["size"]], "o-", color=c, label=label)
        ms = [r["m"] for r in res["outstanding"]]
        ax2.plot(ms, [100 * r["eff_count"] for r in res["outstanding"]], "o-", color=c,
                 label=f"{name}, count limit")
        ax2.plot(ms, [100 * r["eff"] for r in res["outstanding"]], "s--", color=c, alpha=0.6,
                 label=f"{name}, in-order slots")
        st = res["streams"]
        ns = [r["n"] for r in st["rows"]]
        ax3.plot(ns, [100 * r["model"] for r in st["rows"]], "o-", color=c,
                 label=f"{name} (window {st['window']})")
        ax3.plot(ns, [100 * r["strict FCFS"] for r in st["rows"]], "x:", color=c, alpha=0.5)
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
    ax2.legend(fontsize=7, loc="upper left")
    ax3.set_xscale("log", base=2)
    ax3.set_xticks(STREAMS)
    ax3.set_xticklabels([str(s) for s in STREAMS])
    ax3.set_xlabel("concurrent sequential streams (64 MiB-aligned bases, one shared window)")
    ax3.set_ylabel("achieved bandwidth (% of peak)")
    ax3.set_title("Concurrent streams, Little's-law window (solid: model, dotted: strict FCFS)")
    ax3.set_ylim(0, 100)
    ax3.grid(True, which="both", alpha=0.3)
    ax3.legend(fontsize=7.5, loc="lower left")
    for i, (name, b) in enumerate((bins or {}).items()):
        c = colors[i % len(colors)]
        rows = b["rows"]
        ax4.plot([r["gbps_per_pin"] for r in rows], [100 * r["eff"] for r in rows], "o-", color=c,
                 label=f"{name} ({b['technology']}, bin {b['bin_gbps'][0]:g}-{b['bin_gbps'][1]:g})")
        ax4.plot([b["chip_gbps"]], [100 * next(r["eff"] for r in rows if r["gbps_per_pin"] == b["chip_gbps"])],
                 "*", color=c, markersize=12)
    ax4.axhspan(85, 95, color="grey", alpha=0.12)
    ax4.set_xscale("log", base=2)
    ax4.set_xlabel("pin rate, Gb/s (star: the chip's own)")
    ax4.set_ylabel("long read stream (% of pin peak)")
    ax4.set_title("Shipped chips across their speed bins (shaded: 85-95 %)")
    ax4.set_ylim(60, 100)
    ax4.grid(True, which="both", alpha=0.3)
    ax4.legend(fontsize=7, loc="lower left")
    fig.suptitle("sim DRAM timing model (refresh on, staggered; per-bank refresh for HBM/LPDDR; "
                 "FR-FCFS approximation)")
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
    for name, p in devices().items():
        t0 = time.perf_counter()
        res = {"peak_gbps": p.peak_bytes_per_s / 1e9,
               "size": sweep_size(p, total),
               "outstanding": sweep_outstanding(p, total // 2),
               "streams": sweep_streams(p, total // 4),
               "cost": call_cost(p, calls)}
        seq = DramModel(p).stream([0], [256 << 20], max_outstanding=PLENTY)
        res["seq256"] = seq
        res["wall_s"] = time.perf_counter() - t0
        results[name] = res

        print(f"\n=== {name}: {p.technology}, {p.num_pseudo_channels} pseudo-channels x "
              f"{p.bus_width_bits} bit @ {p.data_rate_gbps_per_pin:g} Gb/s, "
              f"peak {res['peak_gbps']:.1f} GB/s, access {p.access_bytes} B, "
              f"{p.refresh_mode_effective} refresh (tRFC{'pb' if p.refresh_mode_effective == 'per_bank' else ''}"
              f"/tREFI {p.refresh_overhead:.3f}), scheduler {p.scheduler}")
        print(f"  256 MiB sequential read, {PLENTY} in flight: {100 * seq['efficiency']:.1f} % "
              f"({seq['achieved_bytes_per_s'] / 1e9:.1f} GB/s), row-hit rate {seq['row_hit_rate']:.3f}")
        print("  transfer size   GB/s      % peak  row-hit")
        for r in res["size"]:
            print(f"  {_fmt_size(r['size']):>12}  {r['gbps']:8.1f}  {100 * r['eff']:8.1f}  {r['hit']:7.3f}")
        print("  outstanding   GB/s(count)  % peak(count limit)  % peak(in-order)  % peak(all-bank ref.)"
              "  mean latency ns")
        for r in res["outstanding"]:
            print(f"  {r['m']:>11}  {r['gbps']:11.2f}  {100 * r['eff_count']:19.1f}  {100 * r['eff']:16.1f}"
                  f"  {100 * r['eff_allbank']:21.1f}  {r['lat']:15.1f}")
        st = res["streams"]
        print(f"  concurrent streams (64 MiB-aligned bases, window {st['window']} requests shared,"
              f" count limit), % of peak:")
        print("  streams " + "".join(f"{k:>18}" for k in st["variants"]) + "   row-hit  reordered")
        for r in st["rows"]:
            print(f"  {r['n']:>7} " + "".join(f"{100 * r[k]:18.1f}" for k in st["variants"])
                  + f"   {r['hit']:7.3f}  {r['reordered']:9.3f}")
        print(f"  random 64 B reads, same window: {100 * st['random64']:.1f} %")
        c = res["cost"]
        print(f"  per-call cost (warm, CPU time): dram_access {c['seq']:.1f} ns sequential / "
              f"{c['rand']:.1f} ns random 64 B (arrivals at peak rate), {c['seq_win']:.1f} / "
              f"{c['rand_win']:.1f} ns through a Little's-law window; dram_stream "
              f"{c['stream']:.1f} ns per chunk")
        print(f"  wall time for this device: {res['wall_s']:.1f} s")

    t0 = time.perf_counter()
    bins = speed_bins()
    print("\n=== speed bins: long read stream of every shipped chip's DRAM, % of the pin peak"
          " (* = outside the technology's bin)")
    for name, b in bins.items():
        cells = "  ".join(f"{r['gbps_per_pin']:g}{'' if r['in_bin'] else '*'}: {100 * r['eff']:.1f} %"
                          f" ({r['achieved_gbps']:.0f} GB/s)" for r in b["rows"])
        print(f"  {name:16s} {b['technology']:7s} {cells}")
    print(f"  wall time: {time.perf_counter() - t0:.1f} s")
    plot(results, Path(args.out), bins)
    summary = {
        "devices": {name: {"peak_gbps": r["peak_gbps"],
                           "seq256_eff": r["seq256"]["efficiency"],
                           "size": r["size"], "outstanding": r["outstanding"],
                           "streams": {k: v for k, v in r["streams"].items()},
                           "cost_ns": r["cost"], "wall_s": r["wall_s"]}
                    for name, r in results.items()},
        "speed_bins": bins,
    }
    res_path = ROOT / "benchmarks" / "results" / "dram.json"
    res_path.parent.mkdir(parents=True, exist_ok=True)
    res_path.write_text(json.dumps(summary, indent=1, default=float) + "\n")
    print(f"wrote {res_path.relative_to(ROOT)}")
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
