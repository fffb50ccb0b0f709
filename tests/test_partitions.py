"""The block-mode core splits the mapper enumerates (sim.model.mapper.search.partitions): the
bounded walk gives exactly what trying every core count and every factorisation gives."""
from __future__ import annotations

import random

from sim.model.mapper.search import partitions


def _every_split(P: int, count: int, m_units: int, n_units: int, max_options: int = 24):
    """The definition, by brute force: for the most cores that admit a split, every
    (instances, m, n) factorisation that fits the work, in (instances, m) order."""
    for used in range(P, 0, -1):
        found = [(pc, pm, used // pc // pm)
                 for pc in range(1, min(used, count) + 1) if used % pc == 0
                 for pm in range(1, used // pc + 1) if (used // pc) % pm == 0
                 if pm <= m_units and used // pc // pm <= n_units]
        if found:
            return found[:max_options]
    return [(1, 1, 1)]


def test_partitions_are_every_split_that_fits():
    rng = random.Random(7)
    for _ in range(2000):
        args = (rng.choice([1, 2, 3, 4, 6, 8, 16, 24, 64, 100, 128, 132, 256, 300]),
                rng.choice([1, 2, 3, 4, 5, 8, 16, 32, 64, 100]),
                rng.choice([1, 2, 3, 4, 7, 8, 16, 33, 64, 128, 1000]),
                rng.choice([1, 2, 3, 5, 8, 16, 31, 64, 128, 1000]))
        assert partitions(*args) == _every_split(*args), args


def test_a_small_problem_on_a_huge_chip_uses_the_cores_its_work_allows():
    """A 64x64 output on 16,384 cores: the walk starts at the work's bound (trying every
    core count down from 16,384 took ~8 s of a 64^3 `sim gemm`; now 2 s in all)."""
    assert partitions(16384, 1, 1, 1) == [(1, 1, 1)]
    assert partitions(16384, 1, 2, 3) == [(1, 2, 3)]
    assert partitions(16384, 2, 2, 3) == [(2, 2, 3)]


def test_the_splits_of_fewer_cores_follow_those_of_the_most():
    """partitions_with_fewer_cores: partitions() first, then every split of each halving of
    the most cores the work allows (U) and of the chip's P below U (where the work can be
    split over exactly that many), down to one core; on
    twice the cores it still offers every split the smaller chip had (doubling the cores
    cannot take the smaller chip's mapping away)."""
    from sim.model.mapper.tiling import _splits_of, partitions_with_fewer_cores
    rng = random.Random(11)
    for _ in range(500):
        P = rng.choice([1, 2, 3, 4, 6, 8, 12, 16, 24, 64])
        args = (rng.choice([1, 2, 4, 8]), rng.choice([1, 2, 3, 8, 64]), rng.choice([1, 2, 5, 8, 64]))
        got = partitions_with_fewer_cores(P, *args)
        head = partitions(P, *args)
        assert got[:len(head)] == head
        used = {pc * pm * pn for pc, pm, pn in got}
        most = max(used)
        assert used == {most} | {u for s in (most, P) for u in (s >> j for j in range(8))
                                if 1 <= u < most and _splits_of(u, *args)}
        assert all(s in _splits_of(s[0] * s[1] * s[2], *args) for s in got)
        bigger = partitions_with_fewer_cores(2 * P, *args)
        assert set(partitions(P, *args)) <= set(bigger), (P, args)


def test_only_chips_without_a_kernel_library_place_ops_on_fewer_cores():
    """A compiler may place an op on a subset of an NPU's cores; a library kernel's grid is
    dealt over every SM by the hardware, so on a chip with a kernel library no op gets the
    splits of fewer cores (TileProblem.fewer_cores, set by lower_op)."""
    from sim.ir.ops import Gemm, VectorOp
    from sim.model.engine.lower import Options, lower_op
    from sim.spec.registry import load_chip
    for name, expected in (("npu_128x128", True), ("tpu_v1", True), ("h200_sxm", False), ("a100_sxm4_80gb", False)):
        chip = load_chip(name)
        for op in (Gemm("g", 64, 1024, 1024, dtype="bf16" if name != "tpu_v1" else "int8"),
                   VectorOp("add", "add", 1 << 20, 1.0, 1 << 21, 1 << 21)):
            assert lower_op(chip, op, Options(), chip.cores.count).problem.fewer_cores is expected, (name, op)
