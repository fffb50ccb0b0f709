"""Energy and area defaults (Horowitz ISSCC 2014 and friends), overrides, and the per-op,
per-token and per-design-point reports."""
from __future__ import annotations

import math

import pytest

import sim.apps.energy_report as ER
import sim.model.cost.energy as E
from sim.spec.registry import load_chip
from sim.apps.inference import run_llm

RUN = dict(phase="decode", batch=2, context_len=64)


@pytest.fixture(scope="module")
def chip():
    return load_chip("npu_128x128")


@pytest.fixture(scope="module")
def run(chip):
    return run_llm(chip, "tiny", **RUN)


def test_horowitz_defaults_at_45nm(chip):
    # ISSCC 2014 Fig. 1.1.9: 8-bit mult 0.2 pJ + 32-bit add 0.1 pJ; fp32 mult 3.7 + add 0.9
    assert E.mac_pj(chip, "int8") == pytest.approx(0.3)
    assert E.mac_pj(chip, "fp32") == pytest.approx(4.6)
    assert E.mac_pj(chip, "fp16") == pytest.approx(1.5)
    # narrower formats cost less, never more
    assert E.mac_pj(chip, "fp8") < E.mac_pj(chip, "bf16") < E.mac_pj(chip, "fp32")
    # SRAM: 10 pJ per 64-bit read of 8 KB, 100 pJ of 1 MB
    assert E.sram_pj_per_byte(8 * 1024) == pytest.approx(10 / 8)
    assert E.sram_pj_per_byte(1024 * 1024) == pytest.approx(100 / 8)
    assert E.sram_pj_per_byte(8 * 1024) < E.sram_pj_per_byte(32 * 1024) < E.sram_pj_per_byte(1024 * 1024)
    # HBM: 3.9 pJ/bit
    assert E.level_pj_per_byte(chip, chip.memory.dram) == pytest.approx(3.9 * 8)
    # beyond 1 MB: banks plus wire - growing with size, continuous, and cheaper than DRAM
    sizes = [2**20, 2**20 + 1, 4 * 2**20, 16 * 2**20, 128 * 2**20, 1024 * 2**20]
    e = [E.sram_pj_per_byte(c) for c in sizes]
    assert e == sorted(e) and e[1] == pytest.approx(e[0], rel=1e-3)
    assert E.sram_pj_per_byte(128 * 2**20) == pytest.approx(12.5 + 0.5 * (16 - 2**0.5) * 0.8, rel=1e-9)
    assert E.sram_pj_per_byte(128 * 2**20) < E.level_pj_per_byte(chip, chip.memory.dram)


def test_node_scaling_and_overrides():
    c7 = load_chip("npu_128x128", overrides=["energy.technology_node_nm=7"])
    c45 = load_chip("npu_128x128")
    assert E.mac_pj(c7, "int8") == pytest.approx(0.3 * 7 / 45)
    vmem7 = E.level_pj_per_byte(c7, c7.memory.core_srams[0])
    vmem45 = E.level_pj_per_byte(c45, c45.memory.core_srams[0])
    assert vmem7 == pytest.approx(vmem45 * 7 / 45)
    # a chip's own number wins and is not scaled
    own = load_chip("npu_128x128", overrides=["energy.technology_node_nm=7", "energy.mac_pj.int8=0.123"])
    assert E.mac_pj(own, "int8") == pytest.approx(0.123)
    lvl = load_chip("npu_128x128", overrides=["memory.levels.vmem.read_energy_pj_per_byte=0.5"])
    assert E.level_pj_per_byte(lvl, lvl.memory.core_srams[0]) == 0.5
    # area scales with the square of the node
    a7, a45 = E.chip_area_mm2(c7), E.chip_area_mm2(c45)
    assert a7["mac_mm2"] == pytest.approx(a45["mac_mm2"] * (7 / 45) ** 2)


def test_area_per_mac_and_per_mib():
    base = E.area_report(load_chip("npu_128x128"))
    big = E.area_report(load_chip("npu_128x128", overrides=["cores.arrays.0.rows=256", "cores.arrays.0.cols=256"]))
    assert big["mac_area_mm2"] == pytest.approx(4 * base["mac_area_mm2"])
    assert big["sram_area_mm2"] == pytest.approx(base["sram_area_mm2"])
    more = E.area_report(load_chip("npu_128x128", overrides=["memory.levels.vmem.capacity_kib=8192"]))
    assert more["sram_mib"] == pytest.approx(base["sram_mib"] + 4 * 4)  # 4 cores x 4 MiB more
    assert more["sram_area_mm2"] - base["sram_area_mm2"] == pytest.approx(16 * E.DEFAULT_SRAM_MM2_PER_MIB)
    own = E.area_report(load_chip("npu_128x128", overrides=["area.sram_mm2_per_mib=0.5", "area.other_mm2=10"]))
    assert own["sram_area_mm2"] == pytest.approx(0.5 * base["sram_mib"])
    assert own["area_mm2"] == pytest.approx(own["mac_area_mm2"] + own["sram_area_mm2"] + 10)
    assert base["pes"] == 4 * 128 * 128


def test_energy_by_component_adds_up(chip, run):
    comps = ER.llm_energy_components_j(chip, "tiny", run, **RUN)
    assert {"mac", "vmem", "hbm", "noc"} <= set(comps)
    assert sum(comps.values()) == pytest.approx(run["energy_j"], rel=1e-12)
    assert all(v >= 0 for v in comps.values())


def test_per_op_per_token_and_per_design_point(chip, run):
    table = E.op_energy_table(run)
    assert table["energy_j"].sum() == pytest.approx(run["energy_j"], rel=1e-9)
    assert table["energy_share"].sum() == pytest.approx(1.0)
    assert list(table["energy_j"]) == sorted(table["energy_j"], reverse=True)
    tokens = E.tokens_of(run)
    assert tokens == pytest.approx(RUN["batch"])  # one new token per sequence
    comps = ER.llm_energy_components_j(chip, "tiny", run, **RUN)
    m = E.design_point_metrics(chip, run, comps)
    assert m["power_w"] == pytest.approx(run["energy_j"] / run["seconds"])
    assert m["tokens_per_s_per_w"] == pytest.approx(run["tokens_per_s"] / m["power_w"])
    assert m["tokens_per_s_per_mm2"] == pytest.approx(run["tokens_per_s"] / m["area_mm2"])
    per_tok = sum(v for k, v in m.items() if k.startswith("energy_per_token_j."))
    assert per_tok == pytest.approx(run["energy_per_token_j"], rel=1e-9)
    assert not math.isnan(m["dram_gb_per_s"])


def test_rebuilt_split_matches_energy_breakdown_rows(chip, run):
    """If run_llm's op rows carry energy_breakdown_pj, they are used as is; the split must
    agree with the one rebuilt from the memoised op results."""
    from sim.model.engine.lower import Options
    from sim.model.engine.simulate import simulate_op
    from sim.model.workload.llm import decode
    from sim.model.workload.models import load_model_spec

    trace = decode(load_model_spec("tiny"), RUN["batch"], RUN["context_len"])
    rows = []
    for t in trace:
        r = simulate_op(chip, t.op, Options())
        rows.append({"repeat": t.repeat, "energy_breakdown_pj": r.energy_breakdown_pj})
    a = ER.llm_energy_components_j(chip, "tiny", run, **RUN)
    b = ER.llm_energy_components_j(chip, "tiny", {**run, "ops": rows}, **RUN)
    assert set(a) == set(b)
    for k in a:
        assert a[k] == pytest.approx(b[k], rel=1e-9)


# --------------------------------------------------------------------------- power blocks


def test_static_power_is_the_power_blocks_idle_power():
    h200 = load_chip("h200_sxm")
    assert E.static_power_w(h200) == h200.power.idle_w == 123
    assert E.static_energy_pj(h200, 2.0) == pytest.approx(123 * 2.0 * 1e12)


def test_array_cycle_energy_per_pe_cycle_and_shared_units():
    """energy.array_pe_cycle_pj costs the PE-cycles the units need at their own rate: a bf16
    MAC (4 per PE-cycle) a quarter, an fp8 MAC (8) an eighth; an array that is another path
    onto the same units (the sm80 mma.sync path) pays its base units' cycles."""
    h200 = load_chip("h200_sxm")
    e = h200.energy.array_pe_cycle_pj["tensor_cores"]
    n = 1e6
    bf16 = E.mac_energy_pj(h200, "bf16", "tensor_cores", n) - n * E.mac_pj(h200, "bf16")
    fp8 = E.mac_energy_pj(h200, "fp8", "tensor_cores", n) - n * E.mac_pj(h200, "fp8")
    assert bf16 == pytest.approx(n * e / 4)
    assert fp8 == pytest.approx(n * e / 8)
    assert E.array_cycle_pj(h200, "tensor_cores_sm80") == e
    sm80 = E.mac_energy_pj(h200, "int8", "tensor_cores_sm80", n) - n * E.mac_pj(h200, "int8")
    assert sm80 == pytest.approx(n * e / 8)  # the base units' int8 rate, not the path's 4.32
    # the CUDA cores pay their own entry per PE-cycle at their rate (0.92 fp32 MACs per PE-cycle)
    cuda = h200.energy.array_pe_cycle_pj["cuda_cores"]
    rate = next(a for a in h200.cores.arrays if a.name == "cuda_cores").rate_for("fp32")[0]
    assert E.mac_energy_pj(h200, "fp32", "cuda_cores", n) == pytest.approx(n * E.mac_pj(h200, "fp32") + n / rate * cuda)
    # arrays without an entry (the documents-only A100's CUDA cores) pay the arithmetic only
    a100 = load_chip("a100_sxm4_80gb")
    assert "cuda_cores" not in a100.energy.array_pe_cycle_pj
    assert E.mac_energy_pj(a100, "fp32", "cuda_cores", n) == pytest.approx(n * E.mac_pj(a100, "fp32"))


def test_array_cycle_energy_names_an_array():
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="no array named 'tensor_corez'"):
        load_chip("h200_sxm", overrides=["energy.array_pe_cycle_pj.tensor_corez=1"])


def test_gpu_energy_blocks_scale_the_tables_to_their_node():
    """The 5 nm-class GPUs have a power block and node-scaled arithmetic (Horowitz's 1.48 pJ
    bf16 MAC at 45 nm x 5/45 = 0.165 pJ)."""
    for name in ("h200_sxm", "h100_sxm", "blackwell_b200"):
        chip = load_chip(name)
        assert chip.energy.technology_node_nm == 5
        assert chip.power is not None and chip.power.tdp_w in (700, 1000)
        arith = E.mac_pj(chip, "bf16")
        assert 0.1 < arith < 0.2  # Horowitz's 1.48 pJ at 45 nm scaled to 5 nm


def test_the_energy_rebuild_prices_the_edited_model_the_run_priced():
    """A run of an edited model (model_set) and its power and energy split, given the model by
    name and the same edits: the rebuilt ops are those of the edited model, so its seconds are
    the run's (the unedited tiny has twice the layers)."""
    chip = load_chip("npu_128x128")
    kw = dict(phase="decode", batch=2, context_len=64)
    res = run_llm(chip, "tiny", model_set=["num_layers=1"], **kw)
    rep = ER.llm_run_power(chip, "tiny", res, model_set=["num_layers=1"], **kw)
    assert rep["seconds"] == pytest.approx(res["seconds"], rel=1e-6)
    unedited = ER.llm_run_power(chip, "tiny", res, **kw)
    assert unedited["seconds"] > 1.5 * res["seconds"]
    comps = ER.llm_energy_components_j(chip, "tiny", res, model_set=["num_layers=1"], **kw)
    assert sum(comps.values()) == pytest.approx(res["energy_j"], rel=1e-6)
