#!/usr/bin/env python3
"""cuSPARSELt's 2:4 kernel when its token tile is at most half full: the k-step time per
resident tile, from the H100 microbenchmark ``micro_sparse_ctas`` (issue 11).

PyTorch's 2:4 path (F.linear with a semi-structured weight) runs one cuSPARSELt kernel,
``sm90_xmma_sparse_gemm_*_tilesize128x256x64_*``: 128 weight rows x 256 tokens x 64 k per
tile.  When a tile holds at most 128 of its 256 token rows, a k-step takes longer than a full
tile's and longer still the more tiles run at once (Nsight Compute: the same bytes cross the
L2-SM crossbar at every m, the same instructions, and the warps wait on the long scoreboard:
26 warps stalled per issuing cycle at 8 rows against 8 at 256; h100_micro_sparse_stalls.csv).
Why is not known, so it is not derived; this measures it.

Data: ``validation/measurements/h100_micro_sparse_ctas_stats.csv`` (an H100: the same SM, L2
and libraries as the H200), m = 8 and 128 tokens, k = 8192 (128 k-steps), n = 4,096 ... 32,768
weight rows, i.e. 32, 64, 128 tiles in one wave and 256 tiles on a persistent grid of 132
CTAs (launch__grid_size, h100_micro_sparse_grid.csv).  The k-step time of a tile is
(call time - launch) / (k-steps x tiles per CTA), in cycles of the 1.98 GHz boost clock
(the time x 1.98 GHz: the kernel is latency-bound and draws little power), at each number of
tiles resident at once (min(tiles, SMs)).

Held out (never fitted): the H200's and the H100's stored 2:4 cases with at most 128 rows
(validation/measurements/h200_dev.csv, h200_holdout.csv, h100_dev.csv, h100_holdout.csv) and
the Nsight Compute run of those shapes on the H100 (h100_micro_sparse_grid.csv).

    python validation/fit_sparse_partial_tile.py     # prints the table stacks/*.yaml carry
"""
from __future__ import annotations

import csv
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from sim.model.engine.assemble import partial_token_tile_cycles  # noqa: E402
from sim.model.stacks import load_stack  # noqa: E402
from sim.spec.stack_spec import PartialTokenTileRule  # noqa: E402

DATA = ROOT / "validation" / "measurements" / "h100_micro_sparse_ctas_stats.csv"
#: the kernel's (tokens, weight rows, k) tile, as the stack profile has it, and the GPU's SMs
TILES = load_stack("eager_pytorch").gemm.sparse_2_4.tiles
SMS = 132
#: cycles per second the table counts in: the boost clock ([DS] 1,980 MHz)
BOOST_HZ = 1.98e9
#: a kernel's launch inside a graph and its prologue, as h200_sxm prices every GEMM kernel
#: (kernel_prologue_ns 1,297 plus the graph's 1.257 us per kernel; the engine's
#: launch_overhead_cycles, 4,214 at 1,650 MHz): subtracted before dividing by the k-steps
LAUNCH_US = 2.554
#: a rule of one k-step of one cycle: partial_token_tile_cycles then counts the k-steps each
#: resident tile walks exactly as the model does
_COUNT = PartialTokenTileRule(max_rows=TILES[0], curves=[{"rows": 1, "kstep_cycles": [[1, 1.0]]}])


def fit() -> dict[int, list[tuple[int, float]]]:
    """{token rows: [(resident tiles, boost cycles per k-step), ...]} from the microbenchmark."""
    out: dict[int, list[tuple[int, float]]] = {}
    with open(DATA) as f:
        for r in csv.DictReader(f):
            if r["dtype"] != "bf16_2:4" or r["status"] != "ok":
                continue
            m, k, n = int(r["m"]), int(r["k"]), int(r["n"])
            if m > TILES[0] // 2:
                continue
            got = partial_token_tile_cycles(m, k, n, 1, SMS, TILES, _COUNT)
            us = float(r["median_ms"]) * 1e3 - LAUNCH_US
            out.setdefault(m, []).append((got["resident_tiles"], round(us * 1e-6 * BOOST_HZ / got["ksteps_per_core"])))
    for rows in out.values():
        rows.sort()
    return out


def main() -> int:
    table = fit()
    print("token rows -> [resident tiles, boost cycles per k-step]")
    for m, pts in sorted(table.items()):
        print(f"  {m}: {[list(p) for p in pts]}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
