"""The A100 SXM4 80GB written from public documents only (arch_configs/a100_sxm4_80gb.yaml):
datasheet peaks, the sm80 kernel list (k tiles, stages, shared memory), bytes in flight
from the pipeline's stages, and large GEMMs below peak."""
from __future__ import annotations

import math

import pytest

from sim.apps.single_op import simulate_gemm
from sim.spec.chip import kernel_entry
from sim.spec.registry import load_chip
from sim.model.engine.arrays import kernel_arrays
from sim.model.engine.lower import Options, lower_op
from sim.errors import ConfigError
from sim.model.kernels import engine as K
from sim.model.mapper.search import Mapping

NAME = "a100_sxm4_80gb"


@pytest.fixture(scope="module")
def chip():
    return load_chip(NAME)


@pytest.mark.parametrize("rate_class, tflops", [
    ("bf16", 312), ("fp16", 312), ("tf32", 156), ("int8", 624), ("int4", 1248), ("fp32", 19.5)])
def test_whitepaper_peaks(chip, rate_class, tflops):
    assert chip.peak_flops(rate_class) / 1e12 == pytest.approx(tflops, rel=0.005)


def test_sparse_peaks_memory_and_structure(chip):
    assert chip.peak_flops("bf16", sparse=True) == pytest.approx(2 * chip.peak_flops("bf16"))
    assert chip.cores.count == 108 and chip.clock_mhz == 1410
    assert chip.dram_peak_bytes_per_s / 1e9 == pytest.approx(2039, rel=0.001)
    assert chip.chip_srams[0].capacity_kib == 40 * 1024
    assert chip.dram.channels * chip.dram.bus_width_bits == 5120


def test_every_kernel_fits_shared_memory(chip):
    ms = chip.mapping
    assert ms.shared_memory_bytes == 166912  # 163 KB per block on compute capability 8.0
    n = 0
    for kernels in ms.array_kernels.values():
        for entry in kernels:
            m, nn, stages, _, kb, _ = kernel_entry(entry)
            assert kb, "every sm80 kernel states its k tile"
            assert stages * (m + nn) * kb <= ms.shared_memory_bytes
            n += 1
    assert n >= 20
    # several k tiles in one list
    ks = {kernel_entry(e)[4] for e in ms.array_kernels["tensor_cores"]}
    assert ks == {64, 128}


def test_overflowing_kernel_is_reported_at_its_entry():
    try:
        load_chip(NAME, overrides=["mapping.array_kernels.tensor_cores.8.stages=4"])  # 4 x 384 x 128 = 196,608 B
    except ConfigError as exc:
        msg = str(exc)
        assert "array_kernels.tensor_cores.8" in msg and "196,608" in msg
    else:
        pytest.fail("a 196,608 B pipeline was accepted against 166,912 B of shared memory")


def test_bytes_in_flight_follow_the_kernels_stages(chip):
    from sim.ir.ops import Gemm

    prob = lower_op(chip, Gemm("g", m=4096, k=4096, n=4096, dtype="bf16"), Options(), chip.cores.count).problem
    assert prob.inflight_from_stages
    for tm, tn, tk, st in ((256, 128, 32, 3), (64, 64, 64, 5)):
        mapping = Mapping(distribution="cyclic", cores_used=108, partition=(1, 1, 1), tile_m=tm, tile_n=tn,
                          tile_k=tk, loop_order="mnk", sram_bytes=0, sram_capacity_bytes=0, search_space=1,
                          estimated_cycles=0.0, estimated_dram_bytes=0.0, stages=st)
        geo = kernel_arrays(chip, prob, mapping, False).geo
        stage_bytes = (tm + tn) * tk * 2
        assert geo[K.G_OUTSTANDING] == math.ceil((st - 1) * stage_bytes / chip.dram.access_bytes)


@pytest.mark.slow
@pytest.mark.parametrize("m, k, n", [
    (8192, 8192, 8192), (4096, 8192, 8192),
    (4096, 4096, 4096), (8192, 4096, 14336)])
def test_large_bf16_gemms_land_below_peak(chip, m, k, n):
    r = simulate_gemm(chip, m=m, k=k, n=n, dtype="bf16")
    assert r.seconds > 100e-6
    assert 0.8 < r.utilization < 1.0
    # one of the library's kernels: its tile, k tile and stages
    mp = r.mapping
    listed = {(kernel_entry(e)[0], kernel_entry(e)[1], kernel_entry(e)[4] // 2, kernel_entry(e)[2])
              for e in chip.mapping.array_kernels["tensor_cores"]}
    assert (mp["tile_m"], mp["tile_n"], mp["tile_k"], mp["stages"]) in listed


def test_the_mapper_counts_bytes_in_flight_as_the_engine_does(chip):
    """For a kernel whose bytes in flight follow its stages, the estimate's DRAM window and
    core port are the engine's (kernel_arrays' G_OUTSTANDING), not the DRAM level's
    request limit: (stages - 1) steps of A and B tiles per core, the fill port's rate."""
    import numpy as np

    from sim.ir.ops import Gemm
    from sim.model.engine.lower import memory_budget

    prob = lower_op(chip, Gemm("g", m=8192, k=8192, n=8192, dtype="bf16"), Options(), chip.cores.count).problem
    budget = memory_budget(chip, False)
    d = chip.memory.dram
    for tm, tn, tk, st in ((256, 128, 32, 3), (128, 128, 64, 4)):
        mapping = Mapping(distribution="cyclic", cores_used=108, partition=(1, 1, 1), tile_m=tm, tile_n=tn,
                          tile_k=tk, loop_order="mnk", sram_bytes=0, sram_capacity_bytes=0, search_space=1,
                          estimated_cycles=0.0, estimated_dram_bytes=0.0, stages=st)
        per_core = kernel_arrays(chip, prob, mapping, False).geo[K.G_OUTSTANDING]
        step_bytes = (tm + tn) * tk * 2
        window = budget.window_chunks(prob, 108, np.array([step_bytes]), np.array([st]))
        assert window[0] == 108 * (per_core * d.access_bytes // max(d.interleave_bytes, d.access_bytes))
    assert budget.core_port(prob) == chip.memory.core_srams[-1].bytes_per_cycle
    assert budget.core_port(prob) > budget.port_bytes_per_cycle   # not the 110-request Little's-law cap
