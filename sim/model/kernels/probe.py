"""Drained samples of one engine run (cyclic mode): the samples a wave extrapolation
(:mod:`sim.model.engine.extrapolate`) needs, from one run instead of one run each.

The event loop (:func:`sim.model.kernels.engine._event_loop`) can pause just before a core
that finished its output tile asks for tile number t, and resume.  At each probe t the run
pauses, a deep copy of its whole state is run to the end with no tile from t on - event for
event the run with G_TILE_LIMIT = t, since both were identical up to that instant - and the
original resumes.  So k samples cost one run of the largest plus k drains (each at most one
tile per core) where running them one by one costs their sum.
"""
from __future__ import annotations

import numpy as np

from sim.model.kernels.engine import (F_STEADY_TOL, G_P, L_PAUSED, L_PROBE, S_DRAM_READ, S_DRAM_WRITE, S_LEN,
                                      _event_loop, new_state)
from sim.model.kernels.jit import kernel

# ---- probes (int64 [n, 3]): the samples asked of one run, ascending -----------------------
PR_TILES = 0        # output tiles dealt before the sample (a tile_limit run's G_TILE_LIMIT)
PR_CHECK = 1        # 1: one of the samples the steady-state check compares
PR_ROUNDS = 2       # the sample's size in whole waves (the check's abscissa)


@kernel
def _clone_state(cur, prev, tmp, dma, l2, mc, xs, ws, core, hk, hc, stats, hist):
    """A deep copy of the event loop's whole state (arrays copied, scalars kept), so that
    a copy can be drained to the end while the original goes on."""
    ideal, qn, cycle_ns, issue_gap, dram_p, ds, slots, slots_meta, port_free, dma_t = dma
    # the DRAM model's state, (bank_row, bank_t, pc_t, pc_i, bank_i, stats) as
    # sim.model.memory.dram.DramParams.new_state builds it
    ds2 = (ds[0].copy(), ds[1].copy(), ds[2].copy(), ds[3].copy(), ds[4].copy(), ds[5].copy())
    dma2 = (ideal, qn, cycle_ns, issue_gap, dram_p, ds2, slots.copy(), slots_meta.copy(), port_free.copy(),
            dma_t.copy())
    cur2 = (cur[0].copy(), cur[1].copy(), cur[2].copy(), cur[3].copy(), cur[4].copy())
    prev2 = (prev[0].copy(), prev[1].copy(), prev[2].copy(), prev[3].copy(), prev[4].copy(), prev[5].copy())
    tmp2 = (tmp[0].copy(), tmp[1].copy(), tmp[2].copy())
    l2_2 = (l2[0].copy(), l2[1].copy(), l2[2].copy(), l2[3].copy(), l2[4].copy(), l2[5], l2[6], l2[7])
    mc2 = (mc[0], mc[1].copy(), mc[2].copy(), mc[3].copy())
    xs2 = (xs[0].copy(), xs[1].copy(), xs[2].copy(), xs[3].copy(), xs[4].copy(), xs[5].copy(), xs[6].copy(),
           xs[7].copy(), xs[8].copy())
    ws2 = (ws[0].copy(), ws[1].copy(), ws[2].copy(), ws[3].copy(), ws[4].copy(), ws[5].copy(), ws[6].copy(),
           ws[7].copy())
    core2 = (core[0].copy(), core[1].copy(), core[2].copy(), core[3].copy(), core[4].copy(), core[5].copy(),
             core[6].copy(), core[7].copy())
    return cur2, prev2, tmp2, dma2, l2_2, mc2, xs2, ws2, core2, hk.copy(), hc.copy(), stats.copy(), hist.copy()


@kernel
def _bytes_moved(stats):
    total = 0.0
    for c in range(stats.shape[0]):
        total += stats[c, S_DRAM_READ] + stats[c, S_DRAM_WRITE]
    return total


@kernel
def run_tiled_probed(inputs, dram_p, dram_state, probes, samples):
    """Drained samples of one run: at each probe the run pauses, a copy of its state is
    run to the end with no tile from the probe on, and that copy's counters become the
    probe's sample; the original resumes.  Each sample is exactly the run with
    G_TILE_LIMIT = the probe's tile count, at the cost of one run of the largest plus one
    drain per sample.  With ``F_STEADY_TOL`` set, the run ends at the first checked sample
    whose growth over the last two checked intervals agrees within it in time and DRAM
    bytes (the steady-state test of :mod:`sim.model.engine.extrapolate`).  Returns the
    samples taken (``inputs`` a :class:`~sim.model.kernels.io.KernelInputs`; ``samples`` a
    :class:`~sim.model.kernels.io.ProbeSamples`: per-probe stats [n, P, S_LEN], hist
    [n, P, 8], makespans [n], DRAM statistics [n, len], and ``out_time[0]`` < 0 when the
    engine stalled); ``probes`` int64 [n, 3], the samples asked (``PR_*`` columns, above)."""
    geo, desc, ranges, ctab, fp = inputs
    s_stats, s_hist, s_time, s_dram, out_time = samples
    P = geo[G_P]
    stats = np.zeros((P, S_LEN))
    hist = np.zeros((P, 8), np.int64)
    stages, cyclic, cur, prev, tmp, dma, l2, mc, xs, ws, core, hk, hc, lp = new_state(geo, ranges, fp, dram_p,
                                                                                    dram_state, stats)
    n = probes.shape[0]
    checked = np.zeros(n, np.int64)  # sample indices of the checked probes so far
    n_checked = 0
    taken = 0
    tol = fp[F_STEADY_TOL]
    while taken < n:
        lp[L_PROBE] = probes[taken, PR_TILES]
        r = _event_loop(geo, desc, ranges, ctab, fp, stats, hist, out_time, stages, cyclic, cur, prev, tmp, dma,
                        l2, mc, xs, ws, core, hk, hc, lp)
        if lp[L_PAUSED] == 0.0:
            return taken  # finished (or stalled: out_time says so) before the probe
        cur2, prev2, tmp2, dma2, l2_2, mc2, xs2, ws2, core2, hk2, hc2, st2, hi2 = _clone_state(
            cur, prev, tmp, dma, l2, mc, xs, ws, core, hk, hc, stats, hist)
        core2[7][1] = probes[taken, PR_TILES]  # the copy deals no tile from the probe on
        lp2 = lp.copy()
        lp2[L_PROBE] = 0.0
        t2 = np.zeros(1)
        r = _event_loop(geo, desc, ranges, ctab, fp, st2, hi2, t2, stages, cyclic, cur2, prev2, tmp2, dma2,
                        l2_2, mc2, xs2, ws2, core2, hk2, hc2, lp2)
        s_stats[taken] = st2
        s_hist[taken] = hi2
        s_time[taken] = r
        s_dram[taken] = dma2[5][5]
        taken += 1
        if r < 0.0:
            out_time[0] = r  # the copy stalled: the caller raises EngineStall
            return taken
        if probes[taken - 1, PR_CHECK] == 1:
            checked[n_checked] = taken - 1
            n_checked += 1
            if tol > 0.0 and n_checked >= 3:
                a = checked[n_checked - 3]
                b = checked[n_checked - 2]
                c = checked[n_checked - 1]
                ra = probes[a, PR_ROUNDS]
                rb = probes[b, PR_ROUNDS]
                rc = probes[c, PR_ROUNDS]
                steady = True
                for key in range(2):
                    if key == 0:
                        va, vb, vc = s_time[a], s_time[b], s_time[c]
                    else:
                        va, vb, vc = _bytes_moved(s_stats[a]), _bytes_moved(s_stats[b]), _bytes_moved(s_stats[c])
                    s1 = (vb - va) / (rb - ra)
                    s2 = (vc - vb) / (rc - rb)
                    if abs(s2 - s1) > tol * max(abs(s2), 1e-9):
                        steady = False
                if steady:
                    return taken
    return taken
