"""`sim gemm` / `sim.simulate_gemm` price a GEMM as the chip's software stack launches it:
the kernels `sim validate` prices for a `gemm` case and `sim run` for a model's GEMM."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

import sim
from sim.apps.validation import case_kernels
from sim.apps.validation_cases import COLUMNS, read_cases
from sim.ir.ops import Gemm
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op, simulate_ops

REPO = Path(__file__).resolve().parents[1]


def _case(tmp_path, dtype: str, m: int, k: int, n: int):
    path = tmp_path / "one.csv"
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        w.writerow([{"kind": "gemm", "dtype": dtype, "m": m, "k": k, "n": n, "measured_ms": 0.01}.get(c, "")
                    for c in COLUMNS])
    return read_cases(path)[0]


@pytest.mark.parametrize("dtype,m,k,n,array", [
    ("bf16", 2048, 491, 163, "tensor_cores_align1"),    # odd strides: cuBLAS's sm75 align1 kernels
    ("bf16", 512, 1026, 2050, "tensor_cores_align2"),   # even, off 16 bytes: sm80 align2
    ("int8", 256, 4096, 4096, "tensor_cores_sm80"),     # torch._int_mm: CUTLASS sm80
    ("bf16", 512, 4096, 4096, "tensor_cores"),          # aligned: the wgmma path, as before
])
def test_sim_gemm_prices_the_kernels_sim_validate_prices(tmp_path, dtype, m, k, n, array):
    chip = sim.load_chip("h200_sxm")
    got = sim.simulate_gemm(chip, m=m, k=k, n=n, dtype=dtype)
    kernels = case_kernels(chip, _case(tmp_path, dtype, m, k, n))
    priced = simulate_ops(chip, kernels)
    assert got.seconds == pytest.approx(sum(r.seconds for r in priced), rel=1e-12)
    assert got.mapping["compute"]["array"] == array


def test_a_padded_2_4_gemm_adds_its_fill_and_copy_kernels(tmp_path):
    chip = sim.load_chip("h200_sxm")
    got = sim.simulate_gemm(chip, m=20, k=4096, n=4096, dtype="bf16", sparsity="2:4")
    names = [k["name"] for k in got.details["stack_kernels"]]
    assert len(names) == 3 and names[0].endswith("pad_fill") and names[1].endswith("pad_copy")
    assert got.seconds == pytest.approx(sum(k["seconds"] for k in got.details["stack_kernels"]), rel=1e-12)
    priced = simulate_ops(chip, case_kernels(chip, _case(tmp_path, "bf16_2:4", 20, 4096, 4096)))
    assert got.seconds == pytest.approx(sum(r.seconds for r in priced), rel=1e-12)


def test_the_ideal_stack_is_the_bare_op_on_the_fastest_array():
    chip = sim.load_chip("h200_sxm")
    op = Gemm("gemm", m=2048, k=491, n=163, dtype="bf16")
    bare = simulate_op(chip, op, Options())
    ideal = sim.simulate_gemm(chip, m=2048, k=491, n=163, dtype="bf16", stack="ideal")
    assert ideal.seconds == bare.seconds
    stacked = sim.simulate_gemm(chip, m=2048, k=491, n=163, dtype="bf16")
    assert stacked.seconds > 1.5 * ideal.seconds, "the align1 kernels run at about a sixth of the wgmma rate"


def test_a_chip_without_a_stack_is_unchanged():
    chip = sim.load_chip("npu_128x128")
    op = Gemm("gemm", m=1024, k=2048, n=512, dtype="int8")
    assert sim.simulate_gemm(chip, m=1024, k=2048, n=512, dtype="int8").seconds == simulate_op(chip, op).seconds


def test_the_cli_takes_a_stack_and_refuses_an_unknown_one():
    run = [sys.executable, "-m", "sim", "gemm", "h200_sxm", "--m", "2048", "--k", "491", "--n", "163",
           "--dtype", "bf16", "--json"]
    stacked = json.loads(subprocess.run(run, capture_output=True, text=True, cwd=REPO, check=True,
                                        timeout=300).stdout.splitlines()[-1])
    ideal = json.loads(subprocess.run(run + ["--stack", "ideal"], capture_output=True, text=True, cwd=REPO,
                                      check=True, timeout=300).stdout.splitlines()[-1])
    assert stacked["seconds"] > ideal["seconds"]
    bad = subprocess.run(run + ["--stack", "no_such_stack"], capture_output=True, text=True, cwd=REPO, timeout=300)
    assert bad.returncode == 2 and "no_such_stack" in bad.stderr and "Traceback" not in bad.stderr
