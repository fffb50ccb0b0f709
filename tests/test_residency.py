"""Activations held on chip between ops (``holds_activations``: TPU v1's Unified Buffer, issue
12): an op whose activation operands fit the buffer's activation space moves only its weights
(and KV cache) through DRAM, never runs slower for it, and a chip without such a buffer is
untouched."""
from __future__ import annotations

import pytest

from sim import ConfigError, load_chip, run_llm, simulate_gemm
from sim.ir.ops import Attention, Gemm, VectorOp
from sim.model.engine.residency import activation_operand_bytes, resident_operands
from sim.model.engine.simulate import simulate_op
from sim.model.workload.models import load_model_spec

OFF = ["memory.levels.unified_buffer.holds_activations=false"]


@pytest.fixture(scope="module")
def tpu():
    return load_chip("tpu_v1"), load_chip("tpu_v1", OFF)


def test_a_gemm_whose_activations_fit_reads_its_weights_once_and_writes_nothing(tpu):
    """256x4096x4096 int8 (1 MiB in, 4 MiB of int32 out, 16 MiB of weights): DRAM reads are
    exactly the weights, no DRAM writes; the time sits on the weights' roofline at the
    DDR3's 34 GB/s and below the same GEMM with activations in DRAM."""
    on, off = tpu
    held = simulate_gemm(on, m=256, k=4096, n=4096, dtype="int8")
    spilled = simulate_gemm(off, m=256, k=4096, n=4096, dtype="int8")
    weights = Gemm("g", m=256, k=4096, n=4096, dtype="int8").b_bytes()
    assert held.mapping["compute"]["activations_on_chip"] == ["a", "c"]
    assert held.dram_read_bytes == weights and held.dram_write_bytes == 0
    assert spilled.dram_read_bytes > weights and spilled.dram_write_bytes > 0
    peak_s = weights / on.memory.dram.peak_bytes_per_s
    assert peak_s <= held.seconds < spilled.seconds
    # the roofline's intensity is the paper's: ops per weight byte
    assert held.arithmetic_intensity == pytest.approx(held.flops / weights)


def test_an_op_whose_activations_do_not_fit_is_priced_as_before(tpu):
    """8192x4096x4096 int8: 32 MiB in and 128 MiB out exceed the 24 MiB buffer, so the
    answer is the one without the buffer's rule, to the bit."""
    on, off = tpu
    op = Gemm("g", m=8192, k=4096, n=4096, dtype="int8")
    assert resident_operands(on, op) == ((), 0)
    a, b = simulate_gemm(on, m=8192, k=4096, n=4096, dtype="int8"), simulate_gemm(off, m=8192, k=4096, n=4096, dtype="int8")
    assert a.seconds == b.seconds and a.dram_read_bytes == b.dram_read_bytes and a.energy_pj == b.energy_pj
    assert "activations_on_chip" not in a.mapping["compute"]


def test_an_elementwise_op_on_chip_costs_its_lanes_alone(tpu):
    """An RMSNorm over 512 x 4096 int8 values held in the buffer: no DRAM bytes, and the time
    is the vector unit's closed form (4 ops x elements / 256 lanes at 700 MHz)."""
    on, off = tpu
    n = 512 * 4096
    op = VectorOp("norm", "rmsnorm", n, 4.0, read_bytes=n, write_bytes=n, row_elements=4096)
    held, spilled = simulate_op(on, op), simulate_op(off, op)
    assert held.dram_read_bytes == 0 and held.dram_write_bytes == 0
    assert held.seconds == pytest.approx(4.0 * n / 256 / 700e6, rel=1e-6)
    assert held.seconds < spilled.seconds


def test_attention_keeps_queries_and_output_on_chip_and_reads_the_kv_cache(tpu):
    on, off = tpu
    op = Attention("attn", batch=1, heads=32, kv_heads=8, head_dim=128, q_len=512, kv_len=512, causal=True, dtype="int8")
    held, spilled = simulate_op(on, op), simulate_op(off, op)
    kv = 2 * 512 * 8 * 128  # K and V, int8
    assert held.dram_read_bytes == kv and held.dram_write_bytes == 0
    assert held.seconds <= spilled.seconds


@pytest.mark.parametrize("kw", [dict(phase="prefill", batch=1, prompt_len=512),
                                dict(phase="decode", batch=4, context_len=1024)])
def test_holding_activations_never_slows_a_model_and_keeps_its_weights_traffic(tpu, kw):
    """Llama-3-8B on tpu_v1: with the buffer's rule the run is no slower, moves fewer DRAM
    bytes, and still reads at least every weight once."""
    on, off = tpu
    held, spilled = run_llm(on, "llama3-8b", **kw), run_llm(off, "llama3-8b", **kw)
    assert held["seconds"] < spilled["seconds"] and held["dram_bytes"] < spilled["dram_bytes"]
    m = load_model_spec("llama3-8b")
    h, f = m.hidden_size, m.ffn_size
    decoder_weights = m.num_layers * (h * m.qkv_size + m.q_size * h + h * 2 * f + f * h)  # int8: 1 B each
    assert held["dram_bytes"] >= decoder_weights


def test_chips_without_such_a_buffer_hold_nothing():
    for name in ("npu_128x128", "h200_sxm", "edge_npu", "eyeriss"):
        chip = load_chip(name)
        assert resident_operands(chip, Gemm("g", m=1, k=64, n=64)) == ((), 0), name


def test_activation_operands_by_op_kind():
    g = Gemm("g", m=2, k=3, n=4, dtype="bf16")
    assert activation_operand_bytes(g) == {"a": 12, "c": 16}
    v = VectorOp("v", "add", 8, 1.0, read_bytes=16, write_bytes=8)
    assert activation_operand_bytes(v) == {"a": 16, "b": 0, "c": 8}


def test_a_chip_level_cache_cannot_hold_activations_and_the_error_names_the_key():
    with pytest.raises(ConfigError) as exc:
        load_chip("tpu_v1", ["memory.levels.unified_buffer.scope=chip"])
    assert "holds_activations" in str(exc.value)


def test_two_cores_each_holding_the_activations_run_a_held_gemm_faster(tpu):
    on, _ = tpu
    two = load_chip("tpu_v1", ["cores.count=2"])
    one, both = (simulate_gemm(c, m=256, k=4096, n=4096, dtype="int8") for c in (on, two))
    assert both.mapping["compute"]["activations_on_chip"] == ["a", "c"]
    assert both.dram_write_bytes == 0 and both.seconds <= one.seconds
