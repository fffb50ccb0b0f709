"""Clocks from power (sim/model/cost/power.py): the voltage-frequency relation, energies at a clock's
voltage, the DVFS clock under the board limit, the calibration against the H200's
sustained-matmul microbenchmark, and average power of LLM runs against each GPU's TDP."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest

import sim.apps.energy_report as ER
import sim.model.cost.power as PW
import sim.model.engine.dvfs as DV
from sim.spec.registry import load_chip
from sim.model.engine.simulate import simulate_op
from sim.errors import ConfigError
from sim.apps.inference import run_llm
from sim.ir.ops import Gemm

ROOT = Path(__file__).resolve().parents[1]
MEAS = ROOT / "validation" / "measurements"
GPUS = ("h200_sxm", "h100_sxm", "blackwell_b200")


def _micro(name: str) -> dict:
    with open(MEAS / "h200_micro.csv") as fh:
        for row in csv.DictReader(fh):
            if row["name"] == name:
                return row
    raise KeyError(name)


def dvfs_chip(name: str):
    return load_chip(name, overrides=["power.dvfs=true"])


def test_voltage_linear_in_clock_between_min_and_boost():
    pw = load_chip("h200_sxm").power
    assert pw.voltage_ratio(pw.boost_clock_mhz) == pytest.approx(1.0)
    assert pw.voltage_ratio(pw.min_clock_mhz) == pytest.approx(pw.voltage_at_min_clock)
    mid = 0.5 * (pw.min_clock_mhz + pw.boost_clock_mhz)
    assert pw.voltage_ratio(mid) == pytest.approx(0.5 * (1 + pw.voltage_at_min_clock))
    # held outside the range
    assert pw.voltage_ratio(3000) == pytest.approx(1.0)
    assert pw.voltage_ratio(100) == pytest.approx(pw.voltage_at_min_clock)


def test_power_block_is_checked():
    chip = load_chip("h200_sxm")
    with pytest.raises(ConfigError, match="min_clock_mhz"):
        load_chip("h200_sxm", overrides=[f"power.min_clock_mhz={chip.power.boost_clock_mhz}"])
    with pytest.raises(ConfigError, match="idle_w"):
        load_chip("h200_sxm", overrides=["power.idle_w=800"])


def test_core_energy_scales_with_voltage_squared_dram_does_not():
    op = Gemm("g", m=1024, k=1024, n=1024, dtype="bf16")
    chip = load_chip("h200_sxm")
    lo, hi = PW.at_clock(chip, 1200), PW.at_clock(chip, 1980)
    a, b = simulate_op(lo, op), simulate_op(hi, op)
    k = (chip.power.voltage_ratio(1200) / chip.power.voltage_ratio(1980)) ** 2
    assert k < 0.85
    assert a.energy_breakdown_pj["mac"] == pytest.approx(b.energy_breakdown_pj["mac"] * k, rel=1e-9)
    dram = chip.memory.dram.name
    assert a.energy_breakdown_pj[dram] / a.dram_bytes == pytest.approx(b.energy_breakdown_pj[dram] / b.dram_bytes)
    # static power is the idle power over the op's duration
    assert a.energy_breakdown_pj["static"] == pytest.approx(chip.power.idle_w * a.seconds * 1e12)


def test_dvfs_runs_a_compute_bound_gemm_at_the_highest_clock_that_fits():
    chip = dvfs_chip("h200_sxm")
    pw = chip.power
    op = Gemm("g", m=4096, k=4096, n=4096, dtype="bf16")
    top = DV.top_clock_mhz(chip)
    f, r, p, limited = DV.dvfs_clock(chip, op)
    assert not limited
    assert pw.min_clock_mhz < f < top
    assert p <= pw.tdp_w * (1 + PW.POWER_TOLERANCE)
    # at the chip's clock, and one grid step higher, it is above the limit
    assert DV.power_at(chip, op, None, top)[1] > pw.tdp_w * (1 + PW.POWER_TOLERANCE)
    _, p_up = DV.power_at(chip, op, None, f + pw.clock_step_mhz)
    assert p_up > pw.tdp_w * (1 + PW.POWER_TOLERANCE)
    # the result reports the clock, and its cycles are at the chip's nominal clock
    res = simulate_op(chip, op)
    assert res.details["clock_mhz"] == f and res.details["power_limited"]
    assert res.seconds == pytest.approx(res.cycles / chip.clock_hz, rel=1e-6)


def test_a_throttled_op_keeps_the_mapping_chosen_at_the_chips_clock():
    """The library's kernel choice does not know the clock the power controller sets: DVFS
    lowers the clock of a throttled GEMM and keeps the tiles picked at clock_mhz."""
    chip = dvfs_chip("h200_sxm")
    op = Gemm("g", m=4096, k=4096, n=4096, dtype="bf16")
    res = simulate_op(chip, op)
    assert res.details["power_limited"]
    at_top = simulate_op(load_chip("h200_sxm", overrides=["power.dvfs=false"]), op)
    keys = ("tile_m", "tile_n", "tile_k", "distribution", "loop_order", "partition")
    assert {k: res.mapping[k] for k in keys} == {k: at_top.mapping[k] for k in keys}
    assert res.mapping["compute"]["split_k"] == at_top.mapping["compute"]["split_k"]
    assert res.mapping["compute"]["candidates_simulated"] == 1  # only that mapping, below the top clock
    assert at_top.mapping["compute"]["candidates_simulated"] > 1


def test_top_clock_is_the_chips_clock_capped_at_boost():
    h200, b200 = dvfs_chip("h200_sxm"), dvfs_chip("blackwell_b200")
    assert DV.top_clock_mhz(h200) == h200.clock_mhz < h200.power.boost_clock_mhz  # the calibrated 1650 MHz
    assert DV.top_clock_mhz(b200) == b200.power.boost_clock_mhz == b200.clock_mhz
    fast = load_chip("h200_sxm", overrides=["power.dvfs=true", "clock_mhz=2500"])
    assert DV.top_clock_mhz(fast) == fast.power.boost_clock_mhz


def test_memory_bound_decode_gemv_runs_at_the_chips_clock_unchanged():
    """An op whose power fits the limit runs at clock_mhz: the same result as with DVFS off."""
    chip = dvfs_chip("h200_sxm")
    op = Gemm("gemv", m=1, k=4096, n=14336, dtype="bf16")
    res = simulate_op(chip, op)
    assert res.details["clock_mhz"] == chip.clock_mhz and not res.details["power_limited"]
    assert res.details["power_w"] < chip.power.tdp_w
    off = simulate_op(load_chip("h200_sxm", overrides=["power.dvfs=false"]), op)
    assert res.cycles == off.cycles and res.dram_bytes == off.dram_bytes and res.energy_pj == off.energy_pj


@pytest.mark.slow
def test_calibration_is_what_the_sustained_microbenchmark_gives():
    """energy.array_pe_cycle_pj of h200_sxm is recomputed from [MB] sustained_matmul_bf16
    (rate), sm_clock_load and power_load - not a hand-tuned number."""
    chip = load_chip("h200_sxm")
    rate = float(_micro("sustained_matmul_bf16")["value"]) * 1e12
    clock = float(_micro("sm_clock_load")["value"])
    power = float(_micro("power_load")["value"])
    e = DV.calibrate_array_cycle_pj(chip, Gemm("gemm", m=8192, k=8192, n=8192, dtype="bf16"), "tensor_cores",
                                    clock, power, rate)
    assert chip.energy.array_pe_cycle_pj["tensor_cores"] == pytest.approx(e, rel=0.005)


@pytest.mark.slow
def test_derived_clock_reproduces_the_20s_sustained_matmul():
    """The 20 s back-to-back 8192^3 bf16 loop (validation/measurements/h200_sustained_matmul.csv,
    not used by the calibration): steady-state rate and SM clock under the 700 W cap."""
    rows = list(csv.DictReader(open(MEAS / "h200_sustained_matmul.csv")))
    chunks = [r for r in rows if r["row_type"] == "chunk"]
    t0 = float(chunks[0]["t_start_s"])
    steady = [r for r in chunks if float(r["t_start_s"]) - t0 >= 5.0]  # after the clock has settled
    dur = [float(r["t_end_s"]) - float(r["t_start_s"]) for r in steady]
    tflops = sum(float(r["tflops"]) * d for r, d in zip(steady, dur)) / sum(dur)
    smi = sorted(float(r["sm_clock_mhz"]) for r in rows
                 if r["row_type"] == "smi" and float(r["t_start_s"]) - t0 >= 5.0)
    clock = smi[len(smi) // 2]
    chip = dvfs_chip("h200_sxm")
    f, r, p, _ = DV.dvfs_clock(chip, Gemm("gemm", m=8192, k=8192, n=8192, dtype="bf16"))
    assert abs(f / clock - 1) < 0.05, (f, clock)
    assert abs(r.flops / r.seconds / 1e12 / tflops - 1) < 0.05, (r.flops / r.seconds / 1e12, tflops)
    assert p <= chip.power.tdp_w * (1 + PW.POWER_TOLERANCE)


@pytest.mark.slow
@pytest.mark.parametrize("name", GPUS)
@pytest.mark.parametrize("phase", ["prefill", "decode"])
def test_no_gpu_run_averages_above_its_tdp(name, phase):
    """Llama-3-8B prefill (1,024 tokens: compute-bound on every GPU here, ~700 FLOP per DRAM
    byte in its GEMMs against ridge points of 200-300) and a batch-16 decode step over 2,048
    tokens with the DVFS model on: average power at or under the board limit, energy per
    token given with the clock it ran at.  The shipped files as they are: DVFS is on in each."""
    chip = load_chip(name)
    assert chip.power.dvfs
    kw = dict(phase=phase, batch=1, prompt_len=1024) if phase == "prefill" else dict(
        phase=phase, batch=16, context_len=2048)
    res = run_llm(chip, "llama3-8b", **kw)
    rep = ER.llm_run_power(chip, "llama3-8b", res, **kw)
    assert rep["seconds"] == pytest.approx(res["seconds"], rel=1e-6)
    assert rep["energy_j"] == pytest.approx(res["energy_j"], rel=1e-6)
    assert rep["power_w"] <= chip.power.tdp_w * (1 + PW.POWER_TOLERANCE)
    assert chip.power.idle_w < rep["power_w"]
    assert chip.power.min_clock_mhz <= rep["clock_mhz"] <= chip.power.boost_clock_mhz
    assert math.isfinite(rep["energy_per_token_j"]) and rep["energy_per_token_j"] > 0


def test_kernel_harness_bursts_run_unthrottled_until_the_controller_reacts(tmp_path):
    """sim validate prices a kernel case as the harness ran it: repeats from idle, the median
    one inside h200_sxm's measured throttle delay (58 ms) runs at clock_mhz without the power
    limit; a case whose burst is longer runs at its DVFS clock, as every steady-state answer.
    (4096^3 bf16: ~0.2 ms x 200 repeats with the 256 MiB flush, median repeat at ~25 ms;
    8192^3: ~1.6 ms x 188 repeats, ~0.3 s.)"""
    from sim.apps.validation import harness_chip, harness_repeats, predict, read_cases

    chip = load_chip("h200_sxm")
    assert chip.power.dvfs and chip.power.throttle_delay_s == pytest.approx(0.058)
    assert harness_repeats(0.0002) == 200 and harness_repeats(0.0016) == 188 and harness_repeats(1.0) == 5
    f = tmp_path / "cases.csv"
    f.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
                 "gemm,bf16,4096,4096,4096,,,,,,,,,,,0.174\ngemm,bf16,8192,8192,8192,,,,,,,,,,,1.4\n")
    short, long = read_cases(f)
    off = load_chip("h200_sxm", overrides=["power.dvfs=false"])
    assert not harness_chip(chip, short).power.dvfs
    assert predict(chip, short)["predicted_ms"] == pytest.approx(predict(off, short)["predicted_ms"], rel=1e-9)
    assert harness_chip(chip, long) is chip
    throttled = predict(chip, long)["predicted_ms"]
    assert throttled > predict(off, long)["predicted_ms"] * 1.1
    g = Gemm("gemm", m=8192, k=8192, n=8192, dtype="bf16")
    assert throttled == pytest.approx(simulate_op(chip, g).seconds * 1e3 + chip.runtime.event_timing_overhead_ns * 1e-6,
                                      rel=1e-6)


def test_harness_repeats_mirror_the_harness_it_models():
    """sim.apps.validation.harness_repeats restates validation/gpu/cases.py's repeats_for (the
    package cannot import the GPU scripts): the two agree at every op length."""
    import importlib.util
    from pathlib import Path

    from sim.apps.validation import harness_repeats

    path = Path(__file__).resolve().parents[1] / "validation" / "gpu" / "cases.py"
    spec = importlib.util.spec_from_file_location("gpu_cases", path)
    cases = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cases)
    for t_ms in (1e-6, 0.001, 0.0149, 0.015, 0.3, 1.5, 14.9, 15.0, 15.1, 30.0, 100.0, 1e4):
        assert harness_repeats(t_ms * 1e-3) == cases.repeats_for(t_ms), t_ms
