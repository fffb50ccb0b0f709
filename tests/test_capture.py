"""Capture from PyTorch modules on the meta device, checked op for op against the builder."""
from __future__ import annotations

import subprocess
import sys

import pytest

from sim.model.workload.llm import Sequence, build_iteration, compare_traces
from sim.model.workload.models import load_model_spec
from sim.ir.ops import Attention, Copy, Gemm, VectorOp

torch = pytest.importorskip("torch")

from sim.model.workload.capture import capture_module  # noqa: E402
from sim.model.workload.torch_reference import build_reference_model, reference_trace  # noqa: E402

CASES = [  # batch, new, past, logits
    (2, 16, 0, "last"),   # prefill
    (3, 1, 20, "last"),   # decode
    (2, 8, 24, "last"),   # prefill behind a cached prefix / chunked prefill
    (2, 5, 7, "all"),     # speculative verification
]


def _builder_trace(spec, batch, new, past, logits):
    seq = Sequence(new, past, logits=new if logits == "all" else None)
    return build_iteration(spec, [seq] * batch)


@pytest.mark.parametrize("batch, new, past, logits", CASES)
def test_tiny_reference_matches_builder(batch, new, past, logits):
    spec = load_model_spec("tiny")
    captured = reference_trace(spec, batch, new, past, logits=logits)
    built = _builder_trace(spec, batch, new, past, logits)
    assert compare_traces(built, captured) == []
    gemms = [t.op for t in captured.ops if isinstance(t.op, Gemm)]
    assert len(gemms) == 4 * spec.num_layers + 1


@pytest.mark.parametrize("batch, new, past", [(4, 1, 100), (1, 64, 32)])
def test_llama3_8b_shapes_match_builder(batch, new, past):
    spec = load_model_spec("llama3-8b")
    captured = reference_trace(spec, batch, new, past)
    built = _builder_trace(spec, batch, new, past, "last")
    assert compare_traces(built, captured) == []
    qkv = [t for t in captured.ops if t.op.name == "attn.qkv"]
    assert [t.layer for t in qkv] == list(range(32))
    assert (qkv[0].op.m, qkv[0].op.k, qkv[0].op.n) == (batch * new, 4096, 6144)
    att = [t.op for t in captured.ops if isinstance(t.op, Attention)][0]
    assert (att.heads, att.kv_heads, att.q_len, att.kv_len) == (32, 8, new, past + new)


@pytest.mark.parametrize("name", ["falcon-7b", "gpt3-175b"])
def test_other_dense_families_match(name):
    spec = load_model_spec(name, {"num_layers": 2})
    for batch, new, past, logits in CASES[:2]:
        captured = reference_trace(spec, batch, new, past, logits=logits)
        assert compare_traces(_builder_trace(spec, batch, new, past, logits), captured) == []


def test_compare_reports_differences():
    spec = load_model_spec("tiny")
    captured = reference_trace(spec, 2, 16, 0)
    wrong_batch = _builder_trace(spec, 3, 16, 0, "last")
    diffs = compare_traces(wrong_batch, captured)
    assert diffs and any("m 48 vs 32" in d for d in diffs)
    assert any("batch 3 vs 2" in d for d in diffs)
    no_head = build_iteration(spec, [Sequence(16, 0)] * 2, include_lm_head=False)
    diffs = compare_traces(no_head, captured)
    assert any(d.startswith("only in second") and "lm_head" in d for d in diffs)
    # VectorOps are compared by op name and element count unless ignored
    from dataclasses import replace

    built = _builder_trace(spec, 2, 16, 0, "last").expanded()
    i = next(i for i, t in enumerate(built.ops) if t.op.name == "attn.rope")
    ops = list(built.ops)
    ops[i] = replace(ops[i], op=replace(ops[i].op, elements=ops[i].op.elements + 1))
    changed = type(built)(tuple(ops), built.meta)
    diffs = compare_traces(changed, captured)
    assert len(diffs) == 1 and "elements" in diffs[0] and "rope" in diffs[0]
    assert compare_traces(changed, captured, vector="ignore") == []


def test_generic_module_capture():
    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = torch.nn.Linear(64, 256)
            self.act = torch.nn.GELU()
            self.w = torch.nn.Parameter(torch.empty(64, 256))

        def forward(self, x):
            h = self.act(self.fc(x))
            y = h @ self.w.t()                       # weight via a view of a parameter
            s = torch.softmax(y @ y.transpose(-1, -2), dim=-1)  # activation x activation
            return s @ y

    with torch.device("meta"):
        mod = Block()
    t = capture_module(mod, [(3, 10, 64)], dtype="bf16")
    kinds = [(type(o.op).__name__, getattr(o.op, "op", None)) for o in t.ops]
    gemms = [o.op for o in t.ops if isinstance(o.op, Gemm)]
    assert (gemms[0].m, gemms[0].k, gemms[0].n) == (30, 64, 256) and "weight" in gemms[0].tags
    assert (gemms[1].m, gemms[1].k, gemms[1].n) == (30, 256, 64) and "weight" in gemms[1].tags
    assert (gemms[2].count, gemms[2].m, gemms[2].k, gemms[2].n) == (3, 10, 64, 10)
    assert "activations" in gemms[2].tags
    assert ("VectorOp", "gelu") in kinds and ("VectorOp", "softmax") in kinds
    assert all(g.dtype == "bf16" for g in gemms)


def test_capture_leaves_a_real_module_untouched():
    mod = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    t = capture_module(mod, [torch.zeros(5, 8)])
    assert next(mod.parameters()).device.type == "cpu"
    gemms = [o.op for o in t.ops if isinstance(o.op, Gemm)]
    assert [(g.m, g.k, g.n, g.dtype) for g in gemms] == [(5, 8, 16, "fp32"), (5, 16, 4, "fp32")]
    assert [o.op.op for o in t.ops if isinstance(o.op, VectorOp)] == ["relu"]


def test_reference_model_runs_for_real_on_cpu():
    spec = load_model_spec("tiny")
    model = build_reference_model(spec, 2, 12, dtype=torch.float32, device="cpu")
    ids = torch.randint(0, spec.vocab_size, (2, 8))
    out = model(ids, start=0)
    assert out.shape == (2, 1, spec.vocab_size) and torch.isfinite(out).all()
    out2 = model(ids[:, :4], start=8, logits="all")
    assert out2.shape == (2, 4, spec.vocab_size)


def test_embedding_is_a_copy_of_gathered_rows():
    spec = load_model_spec("tiny")
    t = reference_trace(spec, 2, 16, 0)
    assert isinstance(t.ops[0].op, Copy) and t.ops[0].op.bytes == 32 * 256 * 2


def test_core_imports_without_torch():
    code = ("import sys; sys.modules['torch'] = None\n"
            "import sim.model.workload.llm, sim.model.workload.trace_io, sim.model.workload.capture, sim.model.workload.models, sim.model.numerics\n"
            "from sim.model.workload.models import load_model_spec\n"
            "from sim.model.workload.llm import decode\n"
            "decode(load_model_spec('tiny'), 1, 10)\n"
            "try:\n"
            "    sim.model.numerics.format_error([1.0, 2.0], 'int8')\n"
            "except ImportError:\n"
            "    print('lazy')\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "lazy" in out.stdout
