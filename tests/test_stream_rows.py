"""A stream whose elements carry many bytes is walked in rows that fit a core's tile buffer:
a split-KV reduction over many splits (an MQA decode over a long cache) used to have no tile
that fit and failed the whole run (`sim run h200_sxm falcon-7b --phase decode --batch 2
--context-len 8192`: "no tile fits the per-core SRAM ... 532.0 KiB")."""
from __future__ import annotations

import pytest

import sim
from sim.ir.ops import Attention, VectorOp
from sim.model.engine.lower import STREAM_ROW_ELEMENTS, Options, lower_op


@pytest.fixture(scope="module")
def h200():
    return sim.load_chip("h200_sxm")


def test_an_mqa_decode_over_a_long_cache_is_priced_and_grows_with_the_cache(h200):
    times = []
    for kv in (4096, 8192, 16384, 65536):
        op = Attention(name="sdpa", batch=2, heads=71, kv_heads=1, head_dim=64, q_len=1, kv_len=kv, dtype="bf16")
        times.append(sim.simulate(h200, op).seconds)
    assert times == sorted(times) and times[-1] > times[0]


def test_a_long_mqa_decode_step_runs(h200):
    got = sim.run_llm(h200, "falcon-7b", phase="decode", batch=2, context_len=8192,
                      model_set={"max_context": 16384})
    assert got.seconds > 0


@pytest.mark.parametrize("chip_name", ["h200_sxm", "tpu_v1", "npu_128x128"])
def test_ordinary_streams_keep_full_rows_and_heavy_ones_fit(chip_name):
    chip = sim.load_chip(chip_name)
    light = lower_op(chip, VectorOp("v", "add", 1 << 20, 1.0, 4 << 20, 2 << 20), Options(), chip.cores.count)
    assert light.row_elements == STREAM_ROW_ELEMENTS
    # 64 fp32 partials per element (a reduction over 64 splits)
    heavy = VectorOp("r", "split_kv_reduce", 1 << 16, 128.0, (1 << 16) * 64 * 4, (1 << 16) * 2)
    low = lower_op(chip, heavy, Options(), chip.cores.count)
    buf = chip.memory.core_srams[-1]
    depth = buf.buffers
    row_bytes = low.row_elements * (64 * 4 * depth + 2 * min(depth, 2))
    if buf.partition is None:
        assert row_bytes <= buf.capacity_bytes
    assert sim.simulate(chip, heavy).seconds > 0
