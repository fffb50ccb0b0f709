"""The mapper's per-order pick (search._pick_rows) is search._pick applied row by row."""
import numpy as np

from sim.model.mapper.search import _pick, _pick_rows


def test_pick_rows_is_pick_of_every_row():
    rng = np.random.default_rng(7)
    for _ in range(300):
        rows, n = rng.integers(1, 7), rng.integers(1, 40)
        # few distinct values, so ties in every key are common; some infinite estimates
        est = rng.choice([100.0, 101.0, 102.5, 103.0, 200.0, np.inf], size=(rows, n))
        traffic = rng.choice([0.0, 5.0, 6.0, np.inf], size=(rows, n))
        volume = rng.choice([64, 128, 256], size=n).astype(np.int64)
        assert _pick_rows(est, traffic, volume) == [_pick(e, t, volume) for e, t in zip(est, traffic)]


def test_loop_orders_of_one_reload_class_share_one_estimate():
    """search._order_classes: the estimate of every loop order equals that of the first
    order of its class (the mapper estimates each class once), on GEMMs and attention."""
    from sim.ir.ops import Attention, Gemm
    from sim.model.engine.lower import Options, lower_op, memory_budget
    from sim.model.mapper.search import ORDERS, _block_estimate, _candidates, _core_shares, _order_classes
    from sim.model.mapper.tiling import block_ranges, partitions
    from sim.spec.registry import load_chip

    ops = [Gemm(name="g", m=384, n=1000, k=2304, dtype="bf16"),
           Gemm(name="g2", m=7, n=4096, k=777, dtype="fp8"),
           Attention(name="a", batch=2, heads=8, kv_heads=2, head_dim=64, q_len=128, kv_len=640, dtype="bf16")]
    for chip_name in ("npu_128x128", "h100_sxm"):
        chip = load_chip(chip_name)
        for op in ops:
            prob = lower_op(chip, op, Options(), chip.cores.count).problem
            mem = memory_budget(chip, False)
            cand = _candidates(prob, chip.cores.count, mem)
            firsts, rows = _order_classes(prob, list(ORDERS))
            if isinstance(op, Gemm):
                assert firsts == ["mnk", "mkn", "nkm"] and rows == [0, 0, 1, 2, 1, 2]
            for part in partitions(chip.cores.count, prob.count, -(-prob.m // prob.unit_m),
                                   -(-prob.n // prob.unit_n))[:3]:
                ranges = block_ranges(prob, part, prob.unit_m, prob.unit_n)
                every, every_bytes = _block_estimate(prob, mem, cand, list(ORDERS), _core_shares(ranges), len(ranges))
                once, once_bytes = _block_estimate(prob, mem, cand, firsts, _core_shares(ranges), len(ranges))
                assert np.array_equal(every, once[rows]) and np.array_equal(every_bytes, once_bytes[rows])
