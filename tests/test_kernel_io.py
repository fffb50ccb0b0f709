"""The typed kernel seam (sim/model/kernels/io.py): kernel_arrays builds a KernelInputs whose
fields have the documented dtypes and shapes, the compiled entry point takes it and a
KernelOutputs, and a run's memo key is the digest of the same arrays, in the same order, as
before the seam was typed (stored runs keep their keys)."""
from __future__ import annotations

import hashlib

import numpy as np

import sim.model.engine.kernel_run as kernel_run
import sim.model.kernels.engine as K
from sim.ir.ops import Gemm
from sim.model.engine.arrays import kernel_arrays
from sim.model.engine.lower import Options, lower_op
from sim.model.kernels.io import KernelInputs, KernelOutputs
from sim.model.mapper.search import Mapping
from sim.spec.registry import load_chip


def _case(distribution: str):
    chip = load_chip("npu_128x128")
    prob = lower_op(chip, Gemm("g", m=512, k=256, n=384, dtype="bf16"), Options(), chip.cores.count).problem
    cores = 4
    mapping = Mapping(distribution=distribution, cores_used=cores, partition=(2, 2, 1), tile_m=128, tile_n=128,
                      tile_k=128, loop_order="mnk", sram_bytes=0, sram_capacity_bytes=0, search_space=1,
                      estimated_cycles=0.0, estimated_dram_bytes=0.0)
    return chip, prob, mapping


def test_kernel_arrays_is_a_typed_kernel_inputs():
    for distribution in ("cyclic", "block"):
        chip, prob, mapping = _case(distribution)
        inputs = kernel_arrays(chip, prob, mapping, False)
        assert isinstance(inputs, KernelInputs)
        assert inputs._fields == ("geo", "desc", "ranges", "ctab", "fp")
        assert inputs.geo.dtype == np.int64 and inputs.geo.shape == (K.G_LEN,)
        assert inputs.desc.dtype == np.int64 and inputs.desc.shape == (3, K.D_LEN)
        assert inputs.ranges.dtype == np.int64 and inputs.ranges.shape == (inputs.P, 6)
        assert inputs.ctab.dtype == np.float64 and inputs.ctab.shape[1] == 16
        assert inputs.ctab.shape[0] in (1, inputs.P)
        assert inputs.fp.dtype == np.float64 and inputs.fp.shape == (K.F_LEN,)
        assert inputs.P == int(inputs.geo[K.G_P]) >= 1


def test_the_memo_key_digests_the_same_bytes_as_the_positional_arrays():
    chip, prob, mapping = _case("cyclic")
    inputs = kernel_arrays(chip, prob, mapping, False)
    _, p = kernel_run._dram_params(chip.memory.dram)
    h = hashlib.blake2b(digest_size=20)
    for a in (inputs.geo, inputs.desc, inputs.ranges, inputs.ctab, inputs.fp, p):
        h.update(str((a.dtype.str, a.shape)).encode())
        h.update(np.ascontiguousarray(a).tobytes())
    assert kernel_run._digest((*inputs, p)) == h.digest()


def test_run_tiled_takes_the_named_tuples(monkeypatch):
    monkeypatch.setenv("SIM_NO_CACHE", "1")
    kernel_run.clear()
    chip, prob, mapping = _case("cyclic")
    inputs = kernel_arrays(chip, prob, mapping, False)
    params, p = kernel_run._dram_params(chip.memory.dram)
    out = KernelOutputs.zeros(inputs.P)
    makespan = K.run_tiled(inputs, p, params.new_state(), out)
    assert makespan == out.out_time[0] > 0
    assert out.hist.sum() == out.stats[:, K.S_STEPS].sum() > 0
    run = kernel_run.run_kernel(chip, prob, mapping, False)
    assert run.makespan == makespan
    assert np.array_equal(run.stats, out.stats) and np.array_equal(run.hist, out.hist)
