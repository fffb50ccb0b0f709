"""Knob sensitivity (issue 12 item 7): on every shipped chip, doubling a resource moves an op
bound by that resource by close to 2x, never slows anything, and leaves untouched what
physics says it cannot touch.

How an op is made "bound by a resource": the other bandwidth resources are over-provisioned
by overrides (x64: NoC, every SRAM level's port, the per-core request window), so the
resource under test is the only limit; then it is doubled.  With modelled memory, times exclude
the chip's fixed per-op launch overhead (``runtime.op_launch_overhead_ns``: no knob here
touches it); under ideal memory it is not part of an op's cycles anyway.

Tolerances and why:

* "moves ~2x": speedup in [1.7, 2.1] for bandwidth knobs (DRAM pin rate, channels, NoC)
  on a read stream of >= 10 us of DRAM time: the first-access latency (up to ~0.35 us on
  the GPUs), and for the pin rate the DRAM's analog timings (per-bank refresh tRFCpb, row
  cycle tRAS + tRP, the ACT window tFAW: ns, not clocks) do not scale.  A copy is not
  used here: its read/write turnarounds (tWTR + tCL, ns) make it ~1.8x at most with twice
  the pin rate, which is physics, not a lost knob.  Up to 2.1, not 2.0: the DRAM
  controller's look-ahead is a time (``scheduler_window_ns``), so at twice the rate it
  sees twice the bursts and its efficiency can rise a few per cent (H200: 2.07x).
  In [1.6, 2.05] for array
  rows/cols and cores on a compute-bound GEMM under ideal memory: the array's fill and
  drain (rows + cols cycles per fold) and tile quantisation do not scale; clock x2 on that
  GEMM: [1.98, 2.02] (cycles must not change at all under ideal memory).
* "never slows": 1 % for bandwidth, channel, clock, core, array row/col and L2-clock knobs (the known booking
  effect: README > Known limitations, the one-pass FR-FCFS gives mixed read/write streams
  up to ~1 % phase effects for the same mapping); 5 % for SRAM and L2 capacity (more room
  can lead the mapper to a slightly slower mapping, up to ~4 % measured on decode GEMVs).
* Chips whose DVFS is on (``power.dvfs``) run the "moves" tests at their fixed clock
  (``power.dvfs=false``): under DVFS the clock follows the power an op draws, which is the
  power cap's effect, not the resource's (blackwell_b200's clock knob is otherwise inert:
  x1.00).  The "never slows" tests run the shipped configuration, DVFS included.
* "untouched": the pin rate must not change a GEMM under ideal memory at all (1e-9); the
  clock may speed a DRAM-bound copy by at most 10 % (its share of on-chip cycles) and must
  not slow it by more than 1 %.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
from script_import import load_script

import sim
from sim.apps.single_op import simulate
from sim.spec.registry import load_chip
from sim.ir.ops import Copy, Gemm, VectorOp

CHIPS = sim.list_chips()
_CACHE: dict = {}


def _chip(name: str):
    return load_chip(name)


def _dram_key(chip) -> str:
    return f"memory.levels.{chip.memory.dram.name}"


def _isolate(chip, keep: str) -> list[str]:
    """Overrides that make every resource a stream needs but ``keep`` ("dram" or "noc")
    64x larger: the NoC, every SRAM level's port, the per-core DRAM request window, the
    vector unit's lanes (and, to isolate the NoC, the DRAM channels); a buffer that holds
    activations between ops lets the stream through DRAM, the resource under test."""
    d = chip.memory.dram
    ov = [f"{_dram_key(chip)}.max_outstanding_requests_per_core={min(1 << 20, 64 * d.max_outstanding_requests_per_core)}",
          f"cores.vector_unit.lanes={min(1 << 24, 64 * chip.cores.vector_unit.lanes)}"]
    for lv in chip.memory.levels:
        if lv.kind == "sram":
            ov.append(f"memory.levels.{lv.name}.bytes_per_cycle={min(1e9, 64 * lv.bytes_per_cycle):g}")
            if lv.holds_activations:
                ov.append(f"memory.levels.{lv.name}.holds_activations=false")
    if keep != "noc":
        ov.append(f"noc.bandwidth_bytes_per_cycle={min(1e9, 64 * chip.noc.bandwidth_bytes_per_cycle):g}")
    if keep != "dram":
        ov.append(f"{_dram_key(chip)}.channels={16 * d.channels}")
        ov.append(f"{_dram_key(chip)}.capacity_gib={16 * d.capacity_gib:g}")
    return ov


#: validation/knob_monotonicity.py (its ``double_knob`` and ``gemm_dtype`` are the one
#: override per knob and the GEMM format that both this suite and that seeded search over
#: random ops use)
_SCRIPT = load_script(Path(__file__).resolve().parents[1] / "validation" / "knob_monotonicity.py")
_knob = _SCRIPT.double_knob  # (chip, knob) -> the override that doubles knob on chip
_dtype = _SCRIPT.gemm_dtype  # chip -> the format its GEMMs here are in


def _seconds(name: str, op, memory: str = "modeled", overrides: tuple = ()) -> float:
    """Op time (memoised); with modelled memory less the chip's fixed launch overhead (its
    cycles are part of the op's duration there; under ideal memory they are not)."""
    key = (name, repr(op), memory, overrides)
    if key not in _CACHE:
        chip = load_chip(name, list(overrides))
        res = simulate(chip, op, memory=memory)
        t = res.seconds
        if memory == "modeled":
            t -= float(res.details.get("launch_overhead_cycles") or 0.0) / chip.clock_hz
        _CACHE[key] = t
    return _CACHE[key]


def _copy(chip) -> Copy:
    """A copy of >= 10 us of DRAM time at the chip's pin peak (2 MiB at least)."""
    nb = max(2 << 20, int(chip.memory.dram.peak_bytes_per_s * 10e-6 / 2))
    return Copy("copy", 1 << math.ceil(math.log2(nb)))


def _stream(chip) -> VectorOp:
    """A read stream (a sum over >= 10 us of DRAM time at the pin peak, 2 MiB at least)."""
    nb = 1 << max(21, (int(chip.memory.dram.peak_bytes_per_s * 10e-6) - 1).bit_length())
    return VectorOp("sum", "sum", nb // 2, 1.0, nb, max(64, nb // 4096))


def _gemm(chip) -> Gemm:
    """A compute-bound GEMM with tiles for several waves on twice the cores (at least 24
    array edges on a side, so tiles divide evenly on the small chips), k 16x the array."""
    a = chip.cores.arrays[0]
    edge = max(a.rows, a.cols)
    mn = max(2 * edge * math.ceil(math.sqrt(12 * chip.cores.count)), 24 * edge)
    return Gemm("gemm", mn, max(512, 16 * edge), mn, dtype=_dtype(chip))


def _gemv(chip) -> Gemm:
    """A small decode GEMV (memory-bound on every chip)."""
    return Gemm("gemv", 8, 2048, 2048, dtype=_dtype(chip))


def _fixed_clock(name: str) -> tuple:
    """``power.dvfs=false`` for a chip whose DVFS is on (see the module docstring)."""
    power = getattr(_chip(name), "power", None)
    return ("power.dvfs=false",) if power is not None and getattr(power, "dvfs", False) else ()


#: knobs found inert or wrong, measured (strict: the test fails once they are fixed)
_XFAIL = {
    # copies on the GPUs: which one loses depends on the phase of the request stream - with the
    # SRAM read-to-use latency at 0, 10, 20, 23, 30 cycles cores x2 gives x0.991, 1.000, 0.991,
    # 0.979, 0.973 on a100_sxm4_80gb and x0.966, 1.004, 1.075, 1.075, 1.022 on blackwell_b200
    ("never-cores", "a100_sxm4_80gb"): "cores x2 makes a 16 MiB copy 2.1 % slower (x0.979)",
    # a fixed-shape MMA (pads_edge_folds: true on the GPUs) computes all its rows, so the
    # GEMV's 8 rows pay a 256-row MMA's fill and drain (README, Every knob moves what it
    # bounds; the knob search, validation/knob_monotonicity.py, finds 11 such rows
    # inversions on the GPUs; the systolic chips trim their edge folds and have none)
    ("never-rows", "blackwell_b200"): "rows x2 makes the 8x2048x2048 GEMV 3.8 % slower (x0.962)",
}


def _params(names, knobs=(None,), prefix=""):
    out = []
    for n in names:
        for k in knobs:
            reason = _XFAIL.get((prefix + (k or ""), n))
            ids = n if k is None else f"{n}-{k}"
            args = (n,) if k is None else (n, k)
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            out.append(pytest.param(*args, marks=marks, id=ids))
    return out


def _speedup(name: str, op, knob: str, memory: str = "modeled", base: tuple = ()) -> float:
    chip = load_chip(name, list(base)) if base else _chip(name)
    t0 = _seconds(name, op, memory, tuple(base))
    t1 = _seconds(name, op, memory, tuple(base) + (_knob(chip, knob),))
    return t0 / t1


# ----------------------------------------------------------------------- moves ~2x
@pytest.mark.parametrize("name,knob", _params(CHIPS, ["pin", "channels"]))
def test_dram_knob_moves_a_dram_bound_stream_by_about_2x(name, knob):
    chip = _chip(name)
    s = _speedup(name, _stream(chip), knob, base=_fixed_clock(name) + tuple(_isolate(chip, "dram")))
    assert 1.7 <= s <= 2.1, s


@pytest.mark.parametrize("name,knob", _params(CHIPS, ["noc"]))
def test_noc_moves_a_noc_bound_stream_by_about_2x(name, knob):
    chip = _chip(name)
    s = _speedup(name, _stream(chip), knob, base=_fixed_clock(name) + tuple(_isolate(chip, "noc")))
    assert 1.7 <= s <= 2.1, s


@pytest.mark.parametrize("name", _params(CHIPS))
def test_clock_moves_a_compute_bound_gemm_by_2x(name):
    s = _speedup(name, _gemm(_chip(name)), "clock", memory="ideal", base=_fixed_clock(name))
    assert 1.98 <= s <= 2.02, s


@pytest.mark.parametrize("name,knob", _params(CHIPS, ["rows", "cols", "cores"]))
def test_array_and_core_knobs_move_a_compute_bound_gemm_by_about_2x(name, knob):
    s = _speedup(name, _gemm(_chip(name)), knob, memory="ideal", base=_fixed_clock(name))
    assert 1.6 <= s <= 2.05, s


@pytest.mark.parametrize("name", _params(CHIPS))
def test_halving_the_sustained_fraction_halves_a_compute_bound_gemm(name):
    """``sustained_fraction`` (the share of MAC slots an array keeps busy) stretches the steps
    an array streams: half the fraction, twice the time of a compute-bound GEMM (a little
    less where folds overlap: a tile's one fill and drain keeps its cycles)."""
    chip = _chip(name)
    a = chip.cores.arrays[0]
    op = _gemm(chip)
    base = _fixed_clock(name)
    t0 = _seconds(name, op, "ideal", base)
    t1 = _seconds(name, op, "ideal", base + (f"cores.arrays.{a.name}.sustained_fraction={a.sustained_fraction / 2!r}",))
    assert 1.8 <= t1 / t0 <= 2.0 * 1.001, t1 / t0


def test_shipped_chips_keep_their_datasheet_mac_rates():
    """No shipped file sets ``sustained_fraction`` (validation/fit_tensor_sustained.py derives
    the H200's from its counters, not used yet: README, Known limitations): every array keeps
    its datasheet's MAC rate."""
    for name in CHIPS:
        for a in _chip(name).cores.arrays:
            assert a.sustained_fraction == 1.0, (name, a.name)


# ----------------------------------------------------------------------- untouched
@pytest.mark.parametrize("name", _params(CHIPS))
def test_pin_rate_does_not_touch_a_gemm_under_ideal_memory(name):
    assert _speedup(name, _gemm(_chip(name)), "pin", memory="ideal") == pytest.approx(1.0, rel=1e-9)


@pytest.mark.parametrize("name", _params(CHIPS))
def test_clock_moves_a_dram_bound_stream_only_by_its_on_chip_share(name):
    chip = _chip(name)
    s = _speedup(name, _stream(chip), "clock", base=_fixed_clock(name) + tuple(_isolate(chip, "dram")))
    assert 0.99 <= s <= 1.10, s


# ----------------------------------------------------------------------- never slower
_TOL = {"pin": 0.01, "channels": 0.01, "clock": 0.01, "noc": 0.01, "cores": 0.01, "sram": 0.05, "l2": 0.05,
        "l2_clock": 0.01, "rows": 0.01, "cols": 0.01}


@pytest.mark.parametrize("name,knob", _params(CHIPS, list(_TOL), prefix="never-"))
def test_doubling_a_resource_never_slows_the_shipped_chip(name, knob):
    chip = _chip(name)
    if knob in ("l2", "l2_clock") and not chip.memory.chip_srams:
        pytest.skip("no chip-level SRAM")
    for op in (_gemv(chip), _copy(chip)):
        s = _speedup(name, op, knob)
        assert s >= 1.0 - _TOL[knob], (op.name, s)


def test_a_second_core_never_forces_a_split_that_reads_the_weights_twice():
    """TPU v1 has no shared cache: with two matrix units, splitting a 512x1024x256 int8
    GEMM's m between them makes each read all of B from DRAM (its 256-wide array leaves no
    n split).  The mapper offers the splits of fewer cores too (the halvings:
    sim.model.mapper.tiling.partitions_with_fewer_cores), so the two-unit chip runs it on
    one unit: B crosses DRAM once (its bytes exactly; A and C stay in the Unified Buffer)
    and the op is no slower than on the one-unit chip (it was 0.57x before)."""
    op = Gemm("g", 512, 1024, 256, dtype="int8")
    one, two = (simulate(load_chip("tpu_v1", ov), op) for ov in ([], ["cores.count=2"]))
    assert one.dram_read_bytes == two.dram_read_bytes == 1024 * 256
    assert two.seconds <= one.seconds * 1.001, (two.seconds, one.seconds)


@pytest.mark.parametrize("knob", ["channels", "pin", "l2_clock"])
def test_more_bandwidth_does_not_buy_a_split_that_runs_slower(knob):
    """A split-K GEMM's reduction is a second kernel: it waits a memory round trip for its
    first partial sums, which the first pass cannot hide.  Estimated without it, a
    128x2048x512 bf16 GEMM on h200_sxm with twice the HBM channels, pin rate or L2 clock
    ranked 6- and 8-way splits ahead of its unsplit tile and ran 13-15 % slower than on the
    shipped chip (0.85-0.87x); with it, at least as fast (1.00-1.04x measured)."""
    op = Gemm("g", 128, 2048, 512, dtype="bf16")
    assert _speedup("h200_sxm", op, knob) >= 0.99
