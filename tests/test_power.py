"""Clocks from power (sim/model/cost/power.py): the voltage-frequency relation, energies at a clock's
voltage, the DVFS clock under the board limit, the calibration against the H200's
sustained-matmul microbenchmark, and average power of LLM runs against each GPU's TDP."""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pytest
from script_import import load_script

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


def test_dvfs_skips_the_step_up_only_where_its_power_is_certainly_over(monkeypatch):
    """After a clock that fits, the search tries one grid step up unless the op's energy there
    over the fitting clock's duration (a higher clock is never slower) is already over the
    limit.  The clock and the time are those of simulating the step up."""
    chip = load_chip("h200_sxm")
    tried: list[float] = []
    real = DV.power_at

    def counting(c, op, options, f):
        tried.append(f)
        return real(c, op, options, f)

    monkeypatch.setattr(DV, "power_at", counting)
    saved = 0
    for m, k, n in ((4096, 4096, 4096), (2048, 4096, 28672)):
        op = Gemm("gemm", m=m, k=k, n=n, dtype="bf16")
        tried.clear()
        f, r, p, _ = DV.dvfs_clock(chip, op)
        skipping = list(tried)
        monkeypatch.setattr(DV, "_over_at", lambda *a: False)
        tried.clear()
        f_all, r_all, p_all, _ = DV.dvfs_clock(chip, op)
        monkeypatch.undo()
        monkeypatch.setattr(DV, "power_at", counting)
        assert (f, r.seconds, p) == (f_all, r_all.seconds, p_all), (m, k, n)
        assert set(skipping) <= set(tried) and f + chip.power.clock_step_mhz in tried
        saved += len(tried) - len(skipping)
    assert saved == 1  # 4096^3 fits at 1425 MHz (696.9 W); at 1440 its energy over that duration is 703.0 W


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


def _loops(name: str) -> dict:
    """A ``micro_l2_counters.py`` ``_timed.csv``: each workload run back to back for 0.5 s, its
    second half's median time per call, nvidia-smi clock and board power."""
    return {r["workload"]: r for r in csv.DictReader(open(MEAS / name))}


def _fp32_loop_power(chip, workload: str, row: dict) -> tuple[float, float]:
    """(measured W, modelled W) of an fp32 GEMM loop: the model's energy per FLOP at the loop's
    clock times the measured rate, plus the idle power (as calibrate_array_cycle_pj prices it)."""
    m, k, n = map(int, workload.split("_")[1].split("x"))
    rate = 2.0 * m * k * n / (float(row["ms_per_call_median_second_half"]) * 1e-3)
    r = simulate_op(PW.at_clock(chip, float(row["sm_clock_mhz_median_second_half"])),
                    Gemm("gemm", m=m, k=k, n=n, dtype="fp32"))
    events = sum(v for key, v in r.energy_breakdown_pj.items() if key not in ("total", "static"))
    return float(row["power_w_median_second_half"]), chip.power.idle_w + events * 1e-12 / r.flops * rate


def test_cuda_core_cycle_energy_is_the_fp32_loop_calibration():
    """energy.array_pe_cycle_pj.cuda_cores is recomputed from the H200's fp32 8192^3 loop on the
    CUDA cores (h200_micro_clock_kinds_timed.csv: rate, clock and power) - not a hand-tuned
    number - and h100_sxm carries it.  Held out: the H100's own fp32 8192^3 loops (two leases)
    come out within 6 % of their measured power; the shorter shapes, whose pipe is less busy
    but which drew as much, within 30 % and below it (busy cycles alone pay the energy)."""
    chip = load_chip("h200_sxm")
    row = _loops("h200_micro_clock_kinds_timed.csv")["fp32_8192x8192x8192"]
    rate = 2.0 * 8192 ** 3 / (float(row["ms_per_call_median_second_half"]) * 1e-3)
    e = DV.calibrate_array_cycle_pj(chip, Gemm("gemm", m=8192, k=8192, n=8192, dtype="fp32"), "cuda_cores",
                                    float(row["sm_clock_mhz_median_second_half"]),
                                    float(row["power_w_median_second_half"]), rate)
    assert chip.energy.array_pe_cycle_pj["cuda_cores"] == pytest.approx(e, rel=0.005)
    h100 = load_chip("h100_sxm")
    assert h100.energy.array_pe_cycle_pj["cuda_cores"] == chip.energy.array_pe_cycle_pj["cuda_cores"]
    for name in ("h100_micro_clock_kinds_timed.csv", "h100_micro_clock_kinds_r2_timed.csv"):
        for workload, loop in _loops(name).items():
            if not workload.startswith("fp32"):
                continue
            measured, modelled = _fp32_loop_power(h100, workload, loop)
            if workload == "fp32_8192x8192x8192":
                assert modelled == pytest.approx(measured, rel=0.06), (name, workload, modelled, measured)
            else:
                assert 0.7 * measured < modelled < measured, (name, workload, modelled, measured)


def test_fp32_gemms_keep_their_clock_with_the_cuda_core_energy():
    """With the CUDA cores' energy an fp32 GEMM draws far more than before, still under the
    700 W limit at clock_mhz, so DVFS leaves it there - as the GPU ran these loops unthrottled
    at 1,980 MHz."""
    chip = load_chip("h200_sxm")
    for m, k, n in ((8192, 8192, 8192), (3615, 192, 7568)):
        r = simulate_op(chip, Gemm("gemm", m=m, k=k, n=n, dtype="fp32"))
        assert r.details["clock_mhz"] == chip.clock_mhz
        assert 450 < r.details["power_w"] <= chip.power.tdp_w


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


def test_power_window_is_the_sustained_matmul_calibration():
    """h200_sxm's power.average_window_s is recomputed from h200_sustained_matmul.csv (from
    idle, the first chunk of 8192^3 matmuls ran unthrottled for 58.5 ms, the next one
    throttled) and the model's power of that loop at clock_mhz - not a hand-tuned number."""
    from sim.model.engine.dvfs import top_clock_mhz

    rows = list(csv.DictReader(open(MEAS / "h200_sustained_matmul.csv")))
    chunks = [r for r in rows if r["row_type"] == "chunk"]
    first = chunks[0]
    unthrottled_s = float(first["t_end_s"]) - float(first["t_start_s"])
    assert float(first["tflops"]) > 1.1 * float(chunks[1]["tflops"])   # the second chunk is throttled
    idle = [float(r["power_instant_w"]) for r in rows if r["row_type"] == "smi_idle-before-sustained"][-3:]
    chip = load_chip("h200_sxm")
    pw = chip.power
    assert max(idle) < pw.idle_w * 1.05                           # the loop started from idle
    top = PW.at_clock(chip, top_clock_mhz(chip))
    p = PW.op_power_w(simulate_op(top, Gemm("gemm", m=8192, k=8192, n=8192, dtype="bf16")))
    tau = unthrottled_s / math.log((p - pw.idle_w) / (p - pw.tdp_w))
    assert pw.average_window_s == pytest.approx(tau, rel=0.01)


def test_h100_power_window_is_the_h200s_and_agrees_with_the_h100s_own_loops():
    """h100_sxm keeps the H200's controller window (the same GH100 board under the same 700 W
    limit; nothing fitted to an H100).  Checked against the H100's own sustained loops from
    idle (h100_micro_sustained_dtypes*.csv): the time at which this file's bf16 8192^3 loop
    reaches the limit lies between the earliest and the latest chunk start at which a measured
    bf16 loop first ran more than 3 % below its starting rate.  (fp8 is not held to it: the
    model reaches the limit after 45 ms, the two measured fp8 loops slowed after 63 and 113 ms;
    fp8 power is the energy tables' weak part, README "Power and clocks".)"""
    from sim.model.engine.dvfs import top_clock_mhz

    h100, h200 = load_chip("h100_sxm"), load_chip("h200_sxm")
    assert h100.power.average_window_s == h200.power.average_window_s > 0
    first_slow = {"bf16": []}
    for name in ("h100_micro_sustained_dtypes.csv", "h100_micro_sustained_dtypes_r2.csv"):
        runs = {}
        for row in csv.DictReader(open(MEAS / name)):
            runs.setdefault((row["run"], row["dtype"]), []).append((float(row["t_s"]), float(row["tflops"])))
        for (_, dtype), chunks in runs.items():
            if dtype not in first_slow:
                continue
            start = chunks[0][1]
            first_slow[dtype].append(next(t for t, rate in chunks if rate < 0.97 * start))
    pw = h100.power
    top = PW.at_clock(h100, top_clock_mhz(h100))
    for dtype, seen in first_slow.items():
        assert len(seen) >= 2, dtype
        p = PW.op_power_w(simulate_op(top, Gemm("gemm", m=8192, k=8192, n=8192, dtype=dtype)))
        reach_s = pw.average_window_s * math.log((p - pw.idle_w) / (p - pw.tdp_w))
        assert min(seen) <= reach_s <= max(seen), (dtype, reach_s, seen)


def test_moving_average_crosses_the_limit_when_the_closed_form_says():
    """From idle at a constant power P the exponential average reaches the limit at
    tau * ln((P - idle) / (P - limit)); a repeat counts as unthrottled when it starts before."""
    from sim.apps.kernel_harness import _Phase, unthrottled_repeats

    idle, limit, tau, p, op_s = 100.0, 700.0, 0.05, 1000.0, 1e-3
    cross_s = tau * math.log((p - idle) / (p - limit))
    phases = [_Phase(op_s, p, timed_repeat=True)] * 200
    assert unthrottled_repeats(phases, idle, limit, tau) == math.floor(cross_s / op_s)
    # below the limit it never crosses; idle gaps between repeats delay the crossing
    assert unthrottled_repeats([_Phase(op_s, 690.0, timed_repeat=True)] * 200, idle, limit, tau) == 200
    gaps = [_Phase(op_s / 2, idle), _Phase(op_s, p, timed_repeat=True)] * 200
    assert unthrottled_repeats(gaps, idle, limit, tau) > math.floor(cross_s / op_s)


def test_kernel_harness_prices_a_case_at_the_clock_its_median_repeat_ran(tmp_path):
    """sim validate prices a kernel case as the harness ran it (sim.apps.kernel_harness): a
    4096^3 bf16 GEMM's repeat period (sleep share, 256 MiB flush, ~0.2 ms GEMM) averages under
    700 W at clock_mhz, so it runs unthrottled, exactly as with DVFS off; 8192^3 (~1.4 ms)
    averages above it and its median repeat comes after the average crossed the limit, so it
    runs at the highest 15 MHz step whose repeat period fits - above the clock that GEMM alone
    gets (the flush and the sleeps draw less than the limit), below clock_mhz."""
    from sim.apps.kernel_harness import HARNESS_FLUSH_BYTES, _repeat, harness_clock
    from sim.apps.validation import case_kernels, predict, read_cases

    chip = load_chip("h200_sxm")
    assert chip.power.dvfs
    f = tmp_path / "cases.csv"
    f.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
                 "gemm,bf16,4096,4096,4096,,,,,,,,,,,0.174\ngemm,bf16,8192,8192,8192,,,,,,,,,,,1.4\n")
    short, long = read_cases(f)
    off = load_chip("h200_sxm", overrides=["power.dvfs=false"])
    at, _ = harness_clock(chip, lambda c: case_kernels(c, short))
    assert at.clock_mhz == chip.clock_mhz and not at.power.dvfs
    assert predict(chip, short)["predicted_ms"] == pytest.approx(predict(off, short)["predicted_ms"], rel=1e-9)
    at, kernels = harness_clock(chip, lambda c: case_kernels(c, long))
    step = chip.power.clock_step_mhz
    g = Gemm("gemm", m=8192, k=8192, n=8192, dtype="bf16")
    per_op_mhz = simulate_op(chip, g).details["clock_mhz"]
    assert per_op_mhz < at.clock_mhz < chip.clock_mhz, (per_op_mhz, at.clock_mhz)
    limit = chip.power.tdp_w * (1 + PW.POWER_TOLERANCE)
    assert _repeat(at, kernels).period_w <= limit < _repeat(PW.at_clock(chip, at.clock_mhz + step), kernels).period_w
    assert HARNESS_FLUSH_BYTES == 256 << 20
    throttled = predict(chip, long)["predicted_ms"]
    per_op = simulate_op(chip, g).seconds * 1e3 + chip.runtime.event_timing_overhead_ns * 1e-6
    assert predict(off, long)["predicted_ms"] < throttled < per_op
    # against every repeat of both, traced in the harness (h200_micro_harness_trace.csv, not
    # used by any calibration): 8192^3's first chunk of 25 repeats ran at the unthrottled
    # rate, its median repeat >5 % slower, and the harness price is within 3 % of that median
    # where each op at its own DVFS clock is >8 % slow; 4096^3 never slowed down
    rows = list(csv.DictReader(open(MEAS / "h200_micro_harness_trace.csv")))

    def reps(size, p):
        return [float(r["ms"]) for r in rows if r["pass"] == p and r["dtype"] == "bf16"
                and (int(r["m"]), int(r["k"]), int(r["n"])) == (size, size, size)]

    unthrottled = predict(off, long)["predicted_ms"]
    for p in ("1", "2"):
        big, small = reps(8192, p), reps(4096, p)
        med = sorted(big)[len(big) // 2]
        first = sorted(big[:25])[12]
        assert abs(first / unthrottled - 1) < 0.02 and med > 1.05 * first, (first, med, unthrottled)
        assert abs(throttled / med - 1) < 0.03 and per_op > 1.08 * med, (throttled, per_op, med)
        chunks = [sorted(small[i:i + 25])[12] for i in range(0, len(small), 25)]
        assert max(chunks) < 1.02 * min(chunks), chunks


def test_harness_constants_mirror_the_harness_script():
    """sim.apps.kernel_harness restates validation/gpu/measure.py's time_fn (the package
    cannot import the GPU scripts): chunk size, sleep lengths and warm-up calls."""
    import re

    from sim.apps import kernel_harness as KH

    src = (ROOT / "validation" / "gpu" / "measure.py").read_text()
    assert re.search(rf"^CHUNK = {KH.HARNESS_CHUNK}\b", src, re.M)
    m = re.search(r"gpu_sleep\(min\(1\.0, ([0-9.]+) \* \(c1 - c0\) \* host_s \+ ([0-9.e-]+)\)\)", src)
    assert m and float(m[1]) == KH.HARNESS_SLEEP_PER_REP_FACTOR and float(m[2]) == KH.HARNESS_SLEEP_EXTRA_S
    assert f"gpu_sleep({KH.HARNESS_PROBE_SLEEP_S:.3f})" in src
    assert f"n < {KH.HARNESS_WARMUP_CALLS - 1})" in src
    assert f"timed_reps(ctx, fn, {KH.HARNESS_ROUGH_REPS}, flush, host_s)" in src
    assert f"def host_seconds_per_rep(ctx, fn, flush=True, n={KH.HARNESS_PROBE_REPS}):" in src


def test_harness_repeats_mirror_the_harness_it_models():
    """sim.apps.kernel_harness.harness_repeats restates validation/gpu/cases.py's repeats_for (the
    package cannot import the GPU scripts): the two agree at every op length."""
    from pathlib import Path

    from sim.apps.kernel_harness import harness_repeats

    assert harness_repeats(0.0002) == 200 and harness_repeats(0.0016) == 188 and harness_repeats(1.0) == 5
    path = Path(__file__).resolve().parents[1] / "validation" / "gpu" / "cases.py"
    cases = load_script(path)
    for t_ms in (1e-6, 0.001, 0.0149, 0.015, 0.3, 1.5, 14.9, 15.0, 15.1, 30.0, 100.0, 1e4):
        assert harness_repeats(t_ms * 1e-3) == cases.repeats_for(t_ms), t_ms


@pytest.mark.slow
def test_fp8_mac_energy_is_the_in_kernel_clock_fit():
    """energy.mac_pj.fp8 of h200_sxm is validation/fit_fp8_energy.py's fit on the stored Nsight
    Compute runs (each heavy GEMM at the clock the GPU chose for it): the bf16 and fp16 kernels,
    priced at their own clocks over their measured durations, draw one level within 8 % (what a
    power limiter holding each kernel gives); the fp8 kernels, at the table's MAC energy, fall
    more than 12 % under it although they ran at the lowest clocks; the value each fp8 kernel
    alone asks for is within 20 % of their median (0.26-0.33 pJ when recorded).  h100_sxm (the
    same die) carries the value over."""
    mod = load_script(MEAS.parent / "fit_fp8_energy.py")
    table = mod.stored()   # validation/fit_fp8_energy.py --write: the 20 kernels take ~1 minute
    # the stored table is the model's today: the three fp8 rows and the two cheapest others re-priced
    chip = load_chip(mod.CHIP, mod.OVERRIDES)
    rows = {r["workload"]: r for r in mod.counters.measured()}
    assert sorted(rows) == sorted(w for w, *_ in table["rows"])
    cheap = sorted((w for w, dt, *_ in table["rows"] if dt != "fp8"), key=lambda w: rows[w]["m"] * rows[w]["k"]
                   * rows[w]["n"])[:2]
    for w, dt, _, p, _ in table["rows"]:
        if dt == "fp8" or w in cheap:
            assert mod.power_at_measured(rows[w], chip) == pytest.approx(p, rel=0.005), (w, "re-run --write")
    lo, hi = table["spread"]
    assert -0.08 < lo < 0 < hi < 0.08
    fp8 = [p for _, dt, _, p, _ in table["rows"] if dt == "fp8"]
    assert len(fp8) == 3 and all(p / table["level_w"] - 1 < -0.12 for p in fp8)
    assert load_chip("h200_sxm").energy.mac_pj["fp8"] == pytest.approx(table["mac_pj"], abs=0.0015)
    assert load_chip("h100_sxm").energy.mac_pj["fp8"] == load_chip("h200_sxm").energy.mac_pj["fp8"]
    solved = [x for *_, x in table["rows"] if x is not None]
    assert all(abs(x / table["mac_pj"] - 1) < 0.2 for x in solved), solved


#: datasheet dense tensor peaks (FLOP/s) and board limits: the H200's ([WP-H100] in
#: arch_configs/blackwell_b200.yaml, the H200 datasheet's same 989.4 / 1,979 TFLOPS; 700 W) and the
#: B200's ([NV-HGX]: half the "with sparsity" 4.5 / 9 PFLOPS; 1,000 W)
DATASHEET = {"h200_sxm": {"bf16": 0.9894e15, "fp8": 1.979e15, "tdp_w": 700.0},
             "blackwell_b200": {"bf16": 2.25e15, "fp8": 4.5e15, "tdp_w": 1000.0}}


def _energy_per_mac_pj(chip, rate_class: str) -> float:
    """A tensor-core MAC's energy at the boost voltage: the arithmetic and its share of a PE-cycle."""
    import sim.model.cost.energy as E

    return E.mac_energy_pj(chip, rate_class, "tensor_cores", 1.0)


def test_b200_tensor_energy_is_the_h200_calibration_scaled_by_the_datasheets():
    """blackwell_b200's energy per bf16 and fp8 MAC is h200_sxm's (both calibrations on H200
    measurements) times the ratio of the two datasheets' watts per dense tensor FLOP/s - the
    same 0.628 at both widths, so nothing in the file is fitted to a B200 outcome."""
    h200, b200 = load_chip("h200_sxm"), load_chip("blackwell_b200")
    for cls in ("bf16", "fp8"):
        ratio = (DATASHEET["blackwell_b200"]["tdp_w"] / DATASHEET["blackwell_b200"][cls]) / (
            DATASHEET["h200_sxm"]["tdp_w"] / DATASHEET["h200_sxm"][cls])
        assert ratio == pytest.approx(0.628, abs=0.001)
        assert _energy_per_mac_pj(b200, cls) == pytest.approx(ratio * _energy_per_mac_pj(h200, cls), rel=0.002), cls
    assert b200.power.tdp_w == DATASHEET["blackwell_b200"]["tdp_w"] and h200.power.tdp_w == DATASHEET["h200_sxm"]["tdp_w"]


def test_b200_large_gemm_reaches_a_share_of_its_peak_in_line_with_the_h200():
    """Issue 12: the B200's large GEMMs under its 1,000 W limit reach a share of its dense peak
    in line with what the H200 reaches under 700 W (here at least 0.85 of it; the rest is the
    B200 file's assumed L2 bandwidth).  With the H200's own energy per MAC the B200 reached 0.72
    of the H200's share (4096^3 bf16: 0.489 of peak at 1,316 MHz against 0.679)."""
    share = {}
    for name in ("h200_sxm", "blackwell_b200"):
        r = simulate_op(load_chip(name), Gemm("gemm", m=4096, k=4096, n=4096, dtype="bf16"))
        assert r.details["power_limited"], name
        assert PW.op_power_w(r) <= DATASHEET[name]["tdp_w"] * (1 + PW.POWER_TOLERANCE)
        share[name] = 2.0 * 4096 ** 3 / r.seconds / DATASHEET[name]["bf16"]
    assert 0.85 <= share["blackwell_b200"] / share["h200_sxm"] <= 1.1, share


@pytest.mark.slow
def test_sim_run_notes_a_chip_without_dvfs_averaging_above_its_board_limit():
    """a100_sxm4_80gb keeps DVFS off (its energy is an assumption carried from the H200): a
    Llama-3-8B prefill then averages above its 400 W, and `sim run` says so instead of printing
    a power the part cannot sustain as if it could; with DVFS on the note goes away."""
    from test_bad_input import sim

    args = ("run", "a100_sxm4_80gb", "llama3-8b", "--phase", "prefill", "--prompt-len", "1024")
    off = sim(*args)
    assert off.returncode == 0, off.stderr
    assert "above this chip's 400 W board limit: its power.dvfs is off" in off.stdout
    res = run_llm(load_chip("a100_sxm4_80gb"), "llama3-8b", phase="prefill", prompt_len=1024)
    assert res.energy_j / res.seconds > 400          # the note's premise, from the API
    on = sim(*args, "--set", "power.dvfs=true", timeout=300)
    assert on.returncode == 0, on.stderr
    assert "board limit" not in on.stdout
    assert "board limit" not in sim("run", "a100_sxm4_80gb", "llama3-8b", "--phase", "decode", "--batch", "16",
                                    "--context-len", "2048").stdout
