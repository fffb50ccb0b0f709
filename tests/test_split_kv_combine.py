"""cuDNN's decode SDPA on the H200, kernel by kernel (validation/measurements/
h200_micro_cudnn_decode_kernels.csv, CUPTI durations from validation/gpu/
micro_cudnn_decode_kernels.py): where cuDNN splits the keys it runs a combine kernel
(lean_reduction_kernel) after the attention kernel, and the eager stack prices that kernel
at its measured floor (stacks/eager_pytorch.yaml, split_kv_reduce; fit_split_kv_combine.py)."""
from __future__ import annotations

import csv
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "validation"))

from fit_split_kv_combine import decode_op, model_combine_us  # noqa: E402

from sim.ir.ops import Attention  # noqa: E402
from sim.model.engine.lower import Options  # noqa: E402
from sim.model.engine.simulate import simulate_op  # noqa: E402
from sim.model.stacks import chip_stack, launched  # noqa: E402
from sim.spec.registry import load_chip  # noqa: E402

CSV = ROOT / "validation" / "measurements" / "h200_micro_cudnn_decode_kernels.csv"


def _calls() -> list[dict]:
    with open(CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        c = {k: int(r[k]) for k in ("batch", "heads", "kv_heads", "head_dim", "kv_len")}
        c["split"] = int(r["combined_calls"] or 0) > 0
        c["attention_us"] = float(r["attention_us_median"])
        c["combine_us"] = float(r["combine_us_median"]) if c["split"] else 0.0
        c["gap_us"] = float(r["gap_us_median"]) if c["split"] else 0.0
        out.append(c)
    return out


CALLS = _calls()
# one shape per (layout, kv length): the file measures four shapes twice
UNIQUE = list({(c["batch"], c["heads"], c["kv_heads"], c["kv_len"]): c for c in CALLS}.values())


@pytest.fixture(scope="module")
def h200():
    return load_chip("h200_sxm")


def test_the_measurement_covers_split_and_unsplit_calls():
    assert len(CALLS) == 63 and sum(c["split"] for c in CALLS) == 35
    assert all(c["attention_us"] > 0 for c in CALLS)


def test_the_model_splits_the_keys_exactly_where_cudnn_runs_its_combine_kernel(h200):
    for c in UNIQUE:
        assert (model_combine_us(h200, decode_op(c)) > 0) == c["split"], c


def test_the_combine_kernel_is_priced_as_measured(h200):
    """gap + kernel per split call against the model's second kernel (launch included): every
    call within 20 %; without the stack's floor the model gave about half."""
    errors, before = [], []
    for c in UNIQUE:
        if not c["split"]:
            continue
        measured = c["combine_us"] + c["gap_us"]
        errors.append(model_combine_us(h200, decode_op(c)) / measured - 1.0)
        before.append(model_combine_us(h200, decode_op(c), with_rule=False) / measured - 1.0)
    assert max(abs(e) for e in errors) < 0.20, errors
    assert abs(float(np.median(errors))) < 0.05
    assert float(np.median(before)) < -0.35  # the ideal stream alone: what the floor corrects


def test_split_calls_in_full_follow_the_kernels(h200):
    """The whole split call on the device (attention kernel + gap + combine, CUPTI) against the
    model's two kernels less the first one's launch (the CUPTI span starts at the kernel):
    median |error| under 10 %, none over 25 %."""
    launch_us = h200.runtime.op_launch_overhead_ns / 1e3
    errs = []
    stack = chip_stack(h200, "eager_pytorch")
    for c in UNIQUE:
        if not c["split"]:
            continue
        ((kop, opts),) = launched(decode_op(c), stack, Options())
        model = simulate_op(h200, kop, opts).seconds * 1e6 - launch_us
        measured = c["attention_us"] + c["gap_us"] + c["combine_us"]
        errs.append(model / measured - 1.0)
    assert float(np.median(np.abs(errs))) < 0.10, errs
    assert max(abs(e) for e in errs) < 0.25, errs


def test_a_stack_without_the_rule_keeps_the_ideal_combine(h200):
    op = Attention("sdpa", batch=1, heads=32, kv_heads=8, head_dim=128, q_len=1, kv_len=8192, causal=False,
                   dtype="bf16", fused=True)
    with_rule = model_combine_us(h200, op)
    without = model_combine_us(h200, op, with_rule=False)
    floor_us = chip_stack(h200, "eager_pytorch").stream_rule("split_kv_reduce").floor_ns / 1e3
    assert with_rule == pytest.approx(h200.runtime.op_launch_overhead_ns / 1e3 + floor_us, rel=1e-3)
    assert 0 < without < with_rule


def test_a_stacks_split_k_rule_prices_the_gemms_reduction_kernel(h200):
    """The same mechanism for cuBLAS's splitKreduce_kernel: a stack with a ``split_k_reduce``
    stream rule hands it to its GEMM kernels, and the engine prices a split-K GEMM's second
    pass at that rule's floor (the eager profile has no such rule yet: its microbenchmark,
    validation/gpu/micro_splitk_reduce_kernels.py, has not run)."""
    from sim.ir.ops import Gemm
    from sim.spec.stack_spec import StreamKernelRule

    stack = chip_stack(h200, "eager_pytorch")
    assert stack.stream_rule("split_k_reduce") is None
    rule = StreamKernelRule(ops=("split_k_reduce",), floor_ns=6000.0, source="test")
    with_rule = stack.model_copy(update={"stream_kernels": tuple(stack.stream_kernels) + (rule,)})
    op = Gemm("g", 1, 18944, 3584, dtype="bf16")   # split 16 ways by the engine
    ((kop, plain),) = launched(op, stack, Options())
    ((kop2, opts),) = launched(op, with_rule, Options())
    assert plain.combine_stream is None and opts.combine_stream is not None
    before = simulate_op(h200, kop, plain)
    assert before.mapping["compute"]["split_k"] > 1
    launch_us = h200.runtime.op_launch_overhead_ns / 1e3
    assert before.details["second_kernel"]["seconds"] * 1e6 < launch_us + 6.0
    after = simulate_op(h200, kop2, opts)
    second = after.details.get("second_kernel")
    if second is not None:  # still split: its reduction costs at least the rule's floor
        assert second["seconds"] * 1e6 >= launch_us + 6.0 - 1e-3
    assert after.seconds >= before.seconds - 1e-12  # a floor only lengthens the reduction
