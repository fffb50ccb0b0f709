"""Print the numbers the README's sweep paragraph quotes, from a sweep's results.

For an array-size x SRAM x HBM-data-rate sweep (sweeps/llama3-8b-decode.yaml,
sweeps/llama3-8b-quick.yaml) it prints

* the best tokens/s of each array size (and the SRAM / HBM rate it was found at);
* tokens/s along the HBM data-rate axis for each array size (best over SRAM), with the
  HBM ceiling at the same point (tokens/s / MBU: the rate if HBM moved the simulated
  bytes at its peak) and the gain from the slowest to the fastest rate;
* the spread SRAM size causes at fixed array and HBM rate;
* the fill/drain share of a weight-stationary fold at the workload's batch
  (SCALE-Sim's 2R + C + T - 2 cycles for T useful ones);
* physics checks: more HBM data rate never lowers tokens/s at fixed array and SRAM, a
  bigger array never lowers it at fixed SRAM and HBM rate; every violation is listed.

From the repository root:

    python plots/sweep_summary.py --results reports/sweeps/llama3-8b-decode
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from sim.apps.store import read_results  # noqa: E402

ARRAY = "cores.arrays.0.rows"
SRAM = "memory.levels.vmem.capacity_kib"
HBM = "memory.levels.hbm.data_rate_gbps_per_pin"
Z = "tokens_per_s"


def _monotone_violations(df, along: str, fixed: list[str], tol: float) -> list[tuple[float, str]]:
    """(relative drop, description) of every step along ``along`` that lowers tokens/s."""
    out = []
    for key, g in df.groupby(fixed):
        g = g.sort_values(along)
        xs, zs = g[along].tolist(), g[Z].tolist()
        for i in range(1, len(xs)):
            if zs[i] < zs[i - 1] * (1 - tol):
                key = key if isinstance(key, tuple) else (key,)
                where = ", ".join(f"{k.split('.')[-1]}={v:g}" for k, v in zip(fixed, key))
                out.append((zs[i] / zs[i - 1] - 1,
                            f"  {where}: {along.split('.')[-1]} {xs[i - 1]:g} -> {xs[i]:g}: "
                            f"{zs[i - 1]:.1f} -> {zs[i]:.1f} tokens/s ({100 * (zs[i] / zs[i - 1] - 1):+.2f} %)"))
    return out


def _report(name: str, found: list[tuple[float, str]], steps: int, show: int) -> None:
    drops = [-d for d, _ in found]
    print(f"{name}: {len(found)} of {steps} steps lower tokens/s"
          + (f" ({sum(d > 0.01 for d in drops)} by more than 1 %, {sum(d > 0.05 for d in drops)} by more than 5 %,"
             f" at most {100 * max(drops):.1f} %)" if found else ""))
    for _, line in sorted(found)[:show if show >= 0 else None]:
        print(line)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", required=True, help="a sweep folder, results.parquet or CSV")
    ap.add_argument("--batch", type=int, default=16, help="tokens streaming through a fold (the decode batch)")
    ap.add_argument("--tol", type=float, default=0.0, help="relative drop tolerated by the physics checks")
    ap.add_argument("--show", type=int, default=10, help="violations listed per check, worst first (-1: all)")
    ap.add_argument("--compare", default=None,
                    help="another sweep's results on a subset of the same points (e.g. llama3-8b-quick at "
                         "fidelity high): the tokens/s difference per shared point")
    args = ap.parse_args(argv)
    df = read_results(args.results)
    n = len(df)
    if "error" in df:
        bad = df[df["error"].notna()]
        df = df[df["error"].isna()]
    else:
        bad = df.iloc[:0]
    print(f"{n} points, {len(bad)} failed")
    for c in (ARRAY, SRAM, HBM, Z):
        if c not in df:
            print(f"no column {c}: not an array x SRAM x HBM sweep")
            return 2
    arrays, srams, rates = (sorted(df[c].unique()) for c in (ARRAY, SRAM, HBM))

    print("\nbest tokens/s per array size (SRAM KiB, HBM Gb/s/pin at the best point):")
    prev = None
    for a in arrays:
        g = df[df[ARRAY] == a]
        r = g.loc[g[Z].idxmax()]
        gain = f"  {100 * (r[Z] / prev - 1):+.1f} % over the previous size" if prev else ""
        print(f"  {a:4g}x{a:<4g} {r[Z]:8.1f}  (SRAM {r[SRAM]:g}, HBM {r[HBM]:g}){gain}")
        prev = r[Z]

    best = df.groupby([ARRAY, HBM])[Z].max().unstack(HBM)
    print("\ntokens/s along the HBM data-rate axis (best over SRAM); Gb/s per pin:")
    print("  array " + "".join(f"{r:>8g}" for r in rates) + f"   {rates[-1]:g}/{rates[0]:g}")
    for a in arrays:
        row = best.loc[a]
        print(f"  {a:5g} " + "".join(f"{row[r]:8.1f}" for r in rates) + f"   {row[rates[-1]] / row[rates[0]]:.2f}x")

    ceil = df.assign(ceiling=df[Z] / df["mbu"]) if "mbu" in df else None
    if ceil is not None:
        print("\nMBU at the best SRAM (the share of the HBM ceiling reached: the ceiling is tokens/s / MBU, the "
              "rate if HBM moved the simulated bytes at its peak):")
        idx = df.groupby([ARRAY, HBM])[Z].idxmax()
        sel = ceil.loc[idx.values]
        mbu = sel.set_index([ARRAY, HBM])["mbu"].unstack(HBM)
        cap = sel.set_index([ARRAY, HBM])["ceiling"].unstack(HBM)
        print("  array " + "".join(f"{r:>8g}" for r in rates))
        for a in arrays:
            print(f"  {a:5g} " + "".join(f"{100 * mbu.loc[a, r]:7.0f}%" for r in rates))
        print("  HBM ceiling, tokens/s (at the largest array): "
              + ", ".join(f"{r:g}: {cap.loc[arrays[-1], r]:.0f}" for r in rates))
        if "dram_gb_per_s" in df:
            dgb = sel.set_index([ARRAY, HBM])["dram_gb_per_s"].unstack(HBM)
            print("  peak HBM GB/s: "
                  + ", ".join(f"{r:g}: {dgb.loc[arrays[-1], r]:.0f}" for r in rates))

    spread = df.groupby([ARRAY, HBM])[Z].agg(lambda s: s.max() / s.min() - 1)
    worst = spread.idxmax()
    print(f"\nSRAM effect ({srams[0]:g}-{srams[-1]:g} KiB) at fixed array and HBM rate: max/min - 1 is "
          f"{100 * spread.median():.1f} % median, {100 * spread.max():.1f} % at most "
          f"(array {worst[0]:g}, HBM {worst[1]:g})")
    lo_hi = df.groupby([ARRAY, HBM]).apply(
        lambda g: g.loc[g[SRAM] == g[SRAM].max(), Z].iloc[0] / g.loc[g[SRAM] == g[SRAM].min(), Z].iloc[0] - 1)
    print(f"  largest vs smallest SRAM: {100 * lo_hi.median():+.1f} % median, "
          f"{100 * lo_hi.min():+.1f} % .. {100 * lo_hi.max():+.1f} %")

    t = args.batch
    print(f"\nweight-stationary full fold at T = {t} tokens: 2R + C + T - 2 cycles, T of them streaming "
          "(an edge fold spans only the rows and columns it uses, docs/dataflows.md):")
    for a in arrays:
        cyc = 2 * a + a + t - 2
        print(f"  {a:4g}x{a:<4g} {cyc:5.0f} cycles per fold, {100 * t / cyc:4.1f} % streaming")

    print(f"\nphysics checks (a drop of more than {100 * args.tol:g} % is listed):")
    v_hbm = _monotone_violations(df, HBM, [ARRAY, SRAM], args.tol)
    v_arr = _monotone_violations(df, ARRAY, [SRAM, HBM], args.tol)
    _report("more HBM data rate at fixed array and SRAM", v_hbm, len(arrays) * len(srams) * (len(rates) - 1),
            args.show)
    _report("bigger array at fixed SRAM and HBM rate", v_arr, len(srams) * len(rates) * (len(arrays) - 1), args.show)

    if args.compare:
        other = read_results(args.compare)
        if "error" in other:
            other = other[other["error"].isna()]
        keys = [ARRAY, SRAM, HBM]
        m = df[keys + [Z]].merge(other[keys + [Z]], on=keys, suffixes=("", "_other"))
        if m.empty:
            print(f"\n{args.compare}: no point in common")
            return 0
        d = (m[Z] / m[Z + "_other"] - 1)
        print(f"\n{len(m)} points also in {args.compare}: tokens/s here vs there {100 * d.abs().mean():.1f} % "
              f"apart on average (median {100 * d.abs().median():.1f} %, at most {100 * d.abs().max():.1f} %; "
              f"signed mean {100 * d.mean():+.1f} %); rank correlation {m[Z].rank().corr(m[Z + '_other'].rank()):.2f}")
        for _, r in m.assign(d=d).sort_values("d").head(max(args.show, 0)).iterrows():
            print(f"  {r[ARRAY]:g}x{r[ARRAY]:g}, SRAM {r[SRAM]:g} KiB, HBM {r[HBM]:g}: {r[Z]:.1f} here, "
                  f"{r[Z + '_other']:.1f} there ({100 * r['d']:+.1f} %)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
