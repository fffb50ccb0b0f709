"""Trace files: exact CSV / JSONL round trips and errors that name file, line and field."""
from __future__ import annotations

import json

import pytest

from sim.errors import WorkloadError
from sim.model.workload.llm import Parallelism, Precision, Sequence, Trace, TraceOp, build_iteration, decode
from sim.model.workload.models import load_model_spec
from sim.ir.ops import Conv2d, Copy, Gemm, VectorOp
from sim.model.workload.trace_io import read_trace, write_trace


def _traces():
    mix = load_model_spec("mixtral-8x7b")
    l8 = load_model_spec("llama3-8b")
    yield build_iteration(mix, [Sequence(5, 10), Sequence(1, 20), Sequence.verify(3, 40)],
                          precision=Precision(dtype="int8", kv_dtype="fp8"), attention="unfused",
                          parallel=Parallelism(2, 3), moe_skew=0.7)
    yield decode(l8, 4, 100, precision=Precision(weight_dtype="nvfp4", sparsity="2:4")).expanded()
    yield build_iteration(load_model_spec("gpt3-175b"), [Sequence(16, 0)], parallel=Parallelism(4, 1))
    # every op kind, odd floats and optional fields
    yield Trace((
        TraceOp(Conv2d("conv", 56, 56, 64, 128, 3, 3, stride=2, padding=1, batch=2), None, "cnn", 3, 0),
        TraceOp(VectorOp("v", "weird op, with comma", 7, 0.1 + 0.2, 3, 5), 4, "x", 2, 1),
        TraceOp(Copy("c", 9), None, "", 1, 0),
        TraceOp(Gemm("g", 1, 2, 3, tags=("a", "b c")), 0, "blk", 1, 0),
    ), {"note": "hand made", "nested": {"x": [1, 2.5, None]}})


@pytest.mark.parametrize("ext", ["csv", "jsonl"])
def test_round_trip_is_exact(tmp_path, ext):
    for i, t in enumerate(_traces()):
        path = write_trace(t, tmp_path / f"t{i}.{ext}")
        back = read_trace(path)
        assert back == t
        assert back.meta == t.meta
        for a, b in zip(back.ops, t.ops):
            assert type(a.op) is type(b.op)
            assert getattr(a.op, "tags", None) == getattr(b.op, "tags", None)
            assert repr(a.op) == repr(b.op)


def test_csv_layout(tmp_path):
    t = decode(load_model_spec("tiny"), 2, 10)
    p = write_trace(t, tmp_path / "t.csv")
    lines = p.read_text().splitlines()
    assert lines[0].startswith("# sim-trace {")
    header = lines[1].split(",")
    assert header[:5] == ["kind", "layer", "block", "repeat", "stage"]
    assert {"m", "k", "n", "heads", "kv_len", "elements", "bytes", "collective"} <= set(header)
    assert len(lines) == 2 + len(t)


def _csv_with(tmp_path, t, line_no, column, value):
    p = write_trace(t, tmp_path / "bad.csv")
    lines = p.read_text().splitlines()
    header = lines[1].split(",")
    cells = lines[line_no - 1].split(",")
    cells[header.index(column)] = value
    lines[line_no - 1] = ",".join(cells)
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.fixture(scope="module")
def tiny_trace():
    return decode(load_model_spec("tiny"), 2, 10)


def _gemm_line(t):
    idx = [i for i, o in enumerate(t.ops) if isinstance(o.op, Gemm)][0]
    return idx + 3  # metadata line, header line, 1-based


@pytest.mark.parametrize("column, value, expect", [
    ("m", "-3", "m must be positive"),
    ("m", "abc", "column 'm': expected a whole number"),
    ("ops_per_element", "4.0", "column 'ops_per_element': a gemm op has no field"),
    ("kind", "matmul", "column 'kind': unknown op kind"),
    ("repeat", "0", "repeat must be a whole number >= 1"),
    ("layer", "x", "column 'layer'"),
    ("b_shared", "maybe", "column 'b_shared': expected true or false"),
    ("dtype", "int5", "column 'dtype': unknown number format 'int5'"),
])
def test_bad_csv_cell_names_file_line_and_column(tmp_path, tiny_trace, column, value, expect):
    line = _gemm_line(tiny_trace)
    p = _csv_with(tmp_path, tiny_trace, line, column, value)
    with pytest.raises(WorkloadError) as e:
        read_trace(p)
    msg = str(e.value)
    assert f"{p}:{line}:" in msg
    assert expect in msg


def test_bad_csv_header_and_shape(tmp_path, tiny_trace):
    p = write_trace(tiny_trace, tmp_path / "h.csv")
    lines = p.read_text().splitlines()
    p.write_text("\n".join([lines[0], lines[1].replace(",m,", ",mm,")] + lines[2:]) + "\n")
    with pytest.raises(WorkloadError, match=r"h.csv:2: unknown column 'mm'; did you mean 'm'"):
        read_trace(p)
    p.write_text("\n".join(lines[:4] + [lines[4] + ",extra"] + lines[5:]) + "\n")
    with pytest.raises(WorkloadError, match=r"h.csv:5: .*cells"):
        read_trace(p)


def test_required_cell_missing(tmp_path, tiny_trace):
    line = _gemm_line(tiny_trace)
    p = _csv_with(tmp_path, tiny_trace, line, "k", "")
    with pytest.raises(WorkloadError, match=rf"bad.csv:{line}: column 'k': missing value"):
        read_trace(p)


def _jsonl_with(tmp_path, t, line_no, edit):
    p = write_trace(t, tmp_path / "bad.jsonl")
    lines = p.read_text().splitlines()
    obj = json.loads(lines[line_no - 1])
    edit(obj)
    lines[line_no - 1] = json.dumps(obj)
    p.write_text("\n".join(lines) + "\n")
    return p


@pytest.mark.parametrize("edit, expect", [
    (lambda o: o.update(m=0), "m must be positive"),
    (lambda o: o.update(m="8"), "field 'm': expected int"),
    (lambda o: o.update(mm=8), "field 'mm': a gemm op has no such field; did you mean 'm'"),
    (lambda o: o.pop("n"), "field 'n': missing"),
    (lambda o: o.update(kind="conv3d"), "field 'kind': unknown op kind"),
    (lambda o: o.update(tags="weight"), "field 'tags': expected a list of strings"),
    (lambda o: o.update(stage=-1), "stage must be a whole number >= 0"),
    (lambda o: o.update(weight_dtype="int3"), "field 'weight_dtype': unknown number format"),
])
def test_bad_jsonl_field_names_file_line_and_field(tmp_path, tiny_trace, edit, expect):
    line = _gemm_line(tiny_trace) - 1  # JSONL has no header line
    p = _jsonl_with(tmp_path, tiny_trace, line, edit)
    with pytest.raises(WorkloadError) as e:
        read_trace(p)
    assert f"{p}:{line}:" in str(e.value) and expect in str(e.value)


def test_bad_jsonl_syntax_and_file_type(tmp_path, tiny_trace):
    p = write_trace(tiny_trace, tmp_path / "s.jsonl")
    lines = p.read_text().splitlines()
    lines[3] = lines[3][:-5]
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(WorkloadError, match=r"s.jsonl:4: not valid JSON"):
        read_trace(p)
    with pytest.raises(WorkloadError, match="valid: .csv, .jsonl"):
        write_trace(tiny_trace, tmp_path / "t.txt")
    with pytest.raises(WorkloadError, match="file not found"):
        read_trace(tmp_path / "missing.csv")
