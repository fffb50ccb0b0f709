"""LLM runs on chips: the memory wall of decode, the compute wall of prefill, fit checks."""
from __future__ import annotations

import pytest

from sim.spec.registry import load_chip, list_chips
from sim.errors import WorkloadError
from sim.apps.inference import run_llm
from sim.model.workload.llm import kv_cache_bytes
from sim.model.workload.models import load_model_spec

# h200_sxm with its HBM slowed to 3.35 TB/s (the textbook number; the H200 holds the 141 GB
# of FP16 weights that an 80 GB H100 could not)
SLOW_HBM = ["memory.levels.hbm3e.data_rate_gbps_per_pin=4.455"]


@pytest.fixture(scope="module")
def chip_335():
    chip = load_chip("h200_sxm", overrides=SLOW_HBM)
    assert abs(chip.memory.dram.peak_bytes_per_s - 3.35e12) < 0.01e12
    return chip


#: the textbook statements are about a serving library's kernels: its W8A16 GEMV streams the
#: int8 weights (eager PyTorch's torch._weight_int8pack_mm, the default eager_pytorch stack's int8
#: path, is a one-thread-per-output kernel ~10x slower: tests/test_int8_weight_only.py)
STACK = "fused_serving"


@pytest.fixture(scope="module")
def decode_fp16(chip_335):
    return run_llm(chip_335, "llama3-70b", phase="decode", batch=1, context_len=1024, dtype="fp16", stack=STACK)


def test_textbook_70b_fp16_decode_is_bound_by_bandwidth(chip_335, decode_fp16):
    weights = decode_fp16["fit"]["weight_bytes"]
    assert 139e9 < weights < 143e9                      # ~140 GB of FP16 weights
    bound = chip_335.memory.dram.peak_bytes_per_s / weights
    assert bound < 24.0
    tps = decode_fp16["tokens_per_s"]
    assert tps <= bound                                  # never above the bandwidth bound
    assert tps >= 0.70 * bound                           # and close under it (MBU >= 70%)


def test_int8_weights_nearly_double_decode(chip_335, decode_fp16):
    int8 = run_llm(chip_335, "llama3-70b", phase="decode", batch=1, context_len=1024, dtype="fp16",
                   weight_dtype="int8", stack=STACK)
    assert int8["tokens_per_s"] >= 1.6 * decode_fp16["tokens_per_s"]
    assert int8["tokens_per_s"] <= 2.0 * decode_fp16["tokens_per_s"] * 1.05
    # eager PyTorch's int8 weight-only path is the slow reference kernel, and says so
    eager = run_llm(chip_335, "llama3-70b", phase="decode", batch=1, context_len=1024, dtype="fp16",
                    weight_dtype="int8", stack="eager_pytorch")
    assert eager["tokens_per_s"] < 0.5 * decode_fp16["tokens_per_s"]


def test_batching_multiplies_throughput_latency_grows_little(chip_335, decode_fp16):
    b16 = run_llm(chip_335, "llama3-70b", phase="decode", batch=16, context_len=1024, dtype="fp16", stack=STACK)
    assert b16["tokens_per_s"] >= 8 * decode_fp16["tokens_per_s"]
    assert b16["tpot_s"] <= 1.5 * decode_fp16["tpot_s"]


def test_kv_cache_bytes_closed_form():
    spec = load_model_spec("llama3-8b")
    got = kv_cache_bytes(spec, tokens=3000, batch=7, kv_dtype="bf16")
    assert got == 2 * 32 * 8 * 128 * 3000 * 7 * 2
    assert kv_cache_bytes(spec, tokens=3000, batch=7, kv_dtype="fp8") == got // 2


def _time_share(res, bound: str) -> float:
    ops = [o for o in res["ops"] if o["kind"] != "collective"]
    total = sum(o["total_seconds"] for o in ops)
    return sum(o["total_seconds"] for o in ops if o["bound"] == bound) / total


#: chips whose buffers let a 4k-token prefill's GEMMs reach their ridge point with the traffic
#: their mappings really cause (``traffic_bound``); on Eyeriss (108 KB buffer) and the edge
#: NPU (512 KiB) the re-reads a small buffer forces keep some of them under it
COMPUTE_BOUND_PREFILL = ("npu_128x128", "h200_sxm", "h100_sxm", "blackwell_b200", "scalesim_32x32")

def _at_its_clock(chip_name: str):
    """The shipped chip with DVFS off: a roofline statement is a fixed-clock one, and a
    power-limited clock only lengthens compute-bound ops (tests/test_power.py covers it)."""
    chip = load_chip(chip_name)
    if chip.power is not None and chip.power.dvfs:
        chip = load_chip(chip_name, overrides=["power.dvfs=false"])
    return chip


def _prompt_beyond_the_ridge(chip) -> int:
    """Prompt tokens that put a prefill's weight GEMMs 4x past the chip's ridge point: a
    GEMM of M tokens against a weight matrix does 2*M FLOP per weight element, so M tokens
    give M * 2 / (weight bytes) FLOP per DRAM byte.  Rounded up to 512, at most 4,096 (the
    tokens this test used on every chip before; TPU v1's DDR3 ridge asks for more)."""
    from sim.apps.inference import default_dtype
    from sim.apps.single_op import chip_summary
    from sim.spec.dtypes import get_format

    dtype = default_dtype(chip)
    ridge = next(r["ridge_flop_per_byte"] for r in chip_summary(chip)["peaks"] if r["format"] == dtype)
    tokens = 4 * ridge * (get_format(dtype).bits / 8) / 2
    return int(min(4096, max(512, -(-tokens // 512) * 512)))


@pytest.mark.parametrize("chip_name", list_chips())
def test_prefill_compute_bound_decode_memory_bound(chip_name):
    """The roofline's prediction on every shipped chip, at the chip's default format: a
    prefill well past the chip's ridge point spends most of its time in compute-bound ops, a
    batch-1 decode step in memory-bound ones.  At the chip's clock (DVFS off): the roofline
    is a fixed-clock statement, and a power-limited clock only makes compute-bound ops longer
    (the clocks under the power limit are tests/test_power.py's)."""
    chip = _at_its_clock(chip_name)
    dec = run_llm(chip, "llama3-8b", phase="decode", batch=1, context_len=4096, allow_overflow=True)
    assert _time_share(dec, "memory") > 0.5, chip_name
    prompt = _prompt_beyond_the_ridge(chip)
    pre = run_llm(chip, "llama3-8b", phase="prefill", batch=1, prompt_len=prompt, allow_overflow=True)
    assert _time_share(pre, "compute") > 0.5, (chip_name, prompt)


def test_default_format_is_one_the_chip_computes():
    from sim.apps.inference import default_dtype

    assert default_dtype(load_chip("h200_sxm")) == "bf16"
    assert default_dtype(load_chip("tpu_v1")) == "int8"      # int8-only MXU
    res = run_llm(load_chip("tpu_v1"), "tiny", phase="decode", batch=1, context_len=64)
    assert res["precision"]["dtype"] == "int8" and res["precision"]["kv_dtype"] == "int8"
    assert all(o["kind"] != "gemm" or o["flops"] > 0 for o in res["ops"])
    # an int8-only chip keeps 8-bit tensors between its GEMMs (TPU v1's Unified Buffer)
    from sim.model.workload.llm import Precision, build_iteration, Iteration, Sequence

    trace = build_iteration(load_model_spec("tiny"), Iteration((Sequence(8, 0),)),
                            precision=Precision(dtype="int8", vector_dtype="int8", kv_dtype="int8",
                                                      quantised_lm_head=True))
    gemms = [t.op for t in trace if t.op.kind == "gemm"]
    assert gemms and all(g.c_dtype == "int8" for g in gemms)


@pytest.mark.parametrize("chip_name", list_chips())
def test_model_gemms_follow_the_roofline_on_every_chip(chip_name):
    """Every shipped chip, at its best format (int8-only chips run W8A8): Llama-3-8B's
    decode GEMVs are memory-bound; ``bound`` is the roofline's class at each op's own
    (compulsory) intensity and ``traffic_bound`` the same test with the traffic the
    mapping really causes.  Prefill GEMMs are compute-bound by the roofline on every chip,
    and with their real traffic on COMPUTE_BOUND_PREFILL.  At the chip's clock, as the
    test above."""
    import dataclasses

    from sim.apps.single_op import simulate
    from sim.model.workload.llm import decode, prefill

    chip = _at_its_clock(chip_name)
    classes = {k for a in chip.cores.arrays for k in a.macs_per_pe_per_cycle}
    dtype = "bf16" if "bf16" in classes else "int8"
    spec = load_model_spec("llama3-8b")
    ridge = chip.peak_flops(dtype) / chip.memory.dram.peak_bytes_per_s

    def gemms(trace):
        for t in trace:
            if t.op.kind == "gemm" and "weight" in t.op.tags:
                # outputs in the chip's tensor format (int8 on an int8-only chip, not int32)
                yield dataclasses.replace(t.op, dtype=dtype, weight_dtype=None, out_dtype=dtype)

    for op in gemms(decode(spec, 1, 4096)):
        r = simulate(chip, op)
        assert r.bound == "memory" and r.traffic_bound == "memory", (chip_name, op.name)
    for op in gemms(prefill(spec, 1, 4096)):
        if op.m < 256:   # the LM head only runs on the last token of a prefill
            continue
        r = simulate(chip, op)
        assert r.arithmetic_intensity == pytest.approx(op.flops / op.min_dram_bytes())
        assert r.dram_intensity <= r.arithmetic_intensity * 1.0001   # traffic >= compulsory
        assert (r.bound == "compute") == (r.arithmetic_intensity >= ridge * 0.999), (chip_name, op.name)
        assert (r.traffic_bound == "compute") == (r.dram_intensity >= ridge * 0.999), (chip_name, op.name)
        assert r.bound == "compute", (chip_name, op.name, r.arithmetic_intensity, ridge)
        if chip_name in COMPUTE_BOUND_PREFILL:
            assert r.traffic_bound == "compute", (chip_name, op.name, r.dram_intensity, ridge)


def test_model_that_does_not_fit_is_refused_with_numbers():
    chip = load_chip("npu_128x128")
    with pytest.raises(WorkloadError, match=r"does not fit .* GB"):
        run_llm(chip, "llama3-70b", phase="decode", batch=1, context_len=1024)
    ok = run_llm(load_chip("h200_sxm"), "llama3-70b", phase="decode", batch=1, context_len=1024,
                 tensor_parallel=2)
    assert ok["fit"]["fits"] and ok["fit"]["chips"] == 2


def test_generation_interpolates_between_sampled_steps():
    chip = load_chip("h200_sxm")
    gen = run_llm(chip, "llama3-8b", phase="generate", batch=4, prompt_len=512, new_tokens=64)
    first = run_llm(chip, "llama3-8b", phase="decode", batch=4, context_len=512)
    last = run_llm(chip, "llama3-8b", phase="decode", batch=4, context_len=512 + 63)
    assert gen["ttft_s"] > 0 and gen["decode_steps_simulated"] <= 9
    assert min(first["tpot_s"], last["tpot_s"]) * 0.999 <= gen["tpot_s"] <= max(first["tpot_s"], last["tpot_s"]) * 1.001


def test_unstructured_sparsity_gives_no_speedup_on_a_dense_array():
    chip = load_chip("npu_128x128")
    dense = run_llm(chip, "tiny", phase="decode", batch=4, context_len=256)
    unstructured = run_llm(chip, "tiny", phase="decode", batch=4, context_len=256, sparsity="unstructured")
    structured = run_llm(chip, "tiny", phase="decode", batch=4, context_len=256, sparsity="2:4")
    assert unstructured["seconds"] == dense["seconds"]
    assert unstructured["precision"]["sparsity"] == "unstructured"
    assert structured["seconds"] < dense["seconds"]


def test_attention_lowering_per_chip_or_by_flag():
    """A chip's attention_lowering is the default; --attention / attention= overrides it.
    Unfused attention writes the scores to DRAM and reads them back."""
    fused_chip = load_chip("npu_128x128")
    unfused_chip = load_chip("npu_128x128", overrides=["attention_lowering=unfused"])
    kw = dict(phase="prefill", batch=1, prompt_len=512)
    a = run_llm(fused_chip, "tiny", **kw)
    b = run_llm(unfused_chip, "tiny", **kw)
    c = run_llm(unfused_chip, "tiny", attention="fused", **kw)
    assert (a["attention"], b["attention"], c["attention"]) == ("fused", "unfused", "fused")
    assert b["dram_bytes"] > a["dram_bytes"] and c["dram_bytes"] == a["dram_bytes"]


def test_energy_split_rebuilds_the_run_with_its_own_formats():
    """A generate run's energy split rebuilds its ops with the formats the run resolved:
    on an int8-only chip that is int8 throughout, not the bf16 default."""
    from sim.apps.energy_report import llm_energy_components_j

    chip = load_chip("tpu_v1")
    res = run_llm(chip, "tiny", phase="generate", batch=2, prompt_len=64, new_tokens=4)
    comps = llm_energy_components_j(chip, "tiny", res, phase="generate", batch=2, prompt_len=64, new_tokens=4)
    assert comps and abs(sum(comps.values()) - res["energy_j"]) < 1e-9 * max(1.0, res["energy_j"])


@pytest.mark.parametrize("collective,algorithm,p", [("all_reduce", "ring", 8), ("all_gather", "ring", 4),
                                                    ("all_reduce", "tree", 8), ("all_gather", "tree", 5),
                                                    ("send", "ring", 2)])
def test_collective_cost_closed_form(collective, algorithm, p):
    """Alpha-beta model on h200_sxm's NVSwitch (18 links x 25 GB/s, 1 us per hop): ring
    all-reduce 2(p-1) steps moving 2(p-1)/p of the data, all-gather half of that; tree
    2*ceil(log2 p) steps (all-reduce) or ceil(log2 p) (all-gather) of the full data; a send
    one hop."""
    import math

    from sim.model.engine.collectives import collective_seconds
    from sim.ir.ops import Collective

    chip = load_chip("h200_sxm")
    b = 64 << 20
    bw, lat = 18 * 25e9, 1e-6
    if collective == "send":
        steps, moved = 1, b
    elif algorithm == "ring":
        f = 2 if collective == "all_reduce" else 1
        steps, moved = f * (p - 1), f * (p - 1) / p * b
    else:
        steps = (2 if collective == "all_reduce" else 1) * math.ceil(math.log2(p))
        moved = steps * b
    sec, info = collective_seconds(chip, Collective("c", collective, b, p, algorithm))
    assert info["steps"] == steps
    assert sec == pytest.approx(steps * lat + moved / bw, rel=1e-12)


def test_tensor_parallel_run_uses_the_chosen_collective():
    chip = load_chip("h200_sxm")
    kw = dict(phase="decode", batch=8, context_len=512, tensor_parallel=8)
    ring = run_llm(chip, "llama3-8b", **kw)
    tree = run_llm(chip, "llama3-8b", collective="tree", **kw)
    algos = {o["op"]: o for o in tree["ops"] if o["kind"] == "collective"}
    assert algos and tree["parallel"]["collective"] == "tree" and ring["parallel"]["collective"] == "ring"
    # small messages: tree's 6 latency-bound steps beat ring's 14
    assert tree["seconds"] < ring["seconds"]


def test_generate_run_reports_traffic_and_energy_per_generated_token():
    """A generate run's totals are the sums of its phases, and its energy per token counts
    the tokens tokens_per_s counts (generated ones); the prompt's share is reported apart."""
    chip = load_chip("npu_128x128")
    pre = run_llm(chip, "tiny", phase="prefill", batch=2, prompt_len=64)
    gen = run_llm(chip, "tiny", phase="generate", batch=2, prompt_len=64, new_tokens=4)
    assert gen["tokens_generated"] == 2 * 4 and gen["tokens_processed"] == 2 * (64 + 4)
    assert gen["tokens_per_s"] == pytest.approx(gen["tokens_generated"] / gen["seconds"], rel=1e-12)
    assert gen["energy_per_token_j"] == pytest.approx(gen["energy_j"] / gen["tokens_generated"], rel=1e-12)
    assert gen["energy_per_processed_token_j"] == pytest.approx(gen["energy_j"] / gen["tokens_processed"], rel=1e-12)
    # the prefill inside the generate run is the prefill run; decode steps add traffic
    assert gen["phases"]["prefill"]["dram_bytes"] == pytest.approx(pre["dram_bytes"], rel=1e-12)
    decode_bytes = gen["dram_bytes"] - pre["dram_bytes"]
    assert 4 * gen["phases"]["decode_first"]["dram_bytes"] * 0.99 <= decode_bytes
    assert decode_bytes <= 4 * gen["phases"]["decode_last"]["dram_bytes"] * 1.01
    assert gen["flops"] > pre["flops"] > 0


def test_runs_report_how_much_of_their_time_was_extrapolated():
    """Every kernel row says whether its time was extrapolated (and whether the samples
    were steady); the run reports the shares, so an extrapolated answer is never silent."""
    chip = load_chip("h200_sxm")
    small = run_llm(chip, "tiny", phase="decode", batch=1, context_len=64)
    assert small["extrapolated_share"] == 0.0 and not any(o["extrapolated"] for o in small["ops"])
    big = run_llm(chip, "llama3-8b", phase="prefill", batch=1, prompt_len=2048)
    rows = big["ops"]
    ex_time = sum(o["total_seconds"] for o in rows if o["extrapolated"])
    assert ex_time > 0, "the big prefill GEMMs are extrapolated"
    assert big["extrapolated_share"] == pytest.approx(ex_time / sum(o["total_seconds"] for o in rows), rel=1e-12)
    assert 0.0 <= big["unsteady_extrapolated_share"] <= big["extrapolated_share"] <= 1.0
    assert all(o["steady"] is None for o in rows if not o["extrapolated"])


def test_generate_rows_say_their_phase_and_progress_counts_the_users_steps(capsys):
    chip = load_chip("npu_128x128")
    gen = run_llm(chip, "tiny", phase="generate", batch=1, prompt_len=32, new_tokens=40, progress=True)
    assert {o["phase"] for o in gen["ops"]} == {"prefill", "decode"}
    err = capsys.readouterr().err
    assert "40/40" in err and "9/9" not in err  # the 40 steps asked for, not the 9 simulated
