"""Bad input, what issue 14 still had open after its two campaigns: each case exits 2 with one
message naming the file, line and key (or the option) - never an internal error, a hang or a
silently accepted value."""
from __future__ import annotations

import pytest

# the CLI runner and the refusal check of the first campaign (tests/ is on the path under pytest)
from test_bad_input import ROOT, refused, sim  # noqa: F401


# --------------------------------------------------------------------------- keys YAML does not read as names


@pytest.mark.parametrize("folder, src, key, what", [
    ("arch_configs", "scalesim_32x32.yaml", "~", "null"), ("workloads", "tiny.yaml", "null", "null"),
    ("stacks", "ideal.yaml", "on", "a boolean"), ("sweeps", "llama3-8b-quick.yaml", "3", "a number")])
def test_a_key_yaml_reads_as_null_a_boolean_or_a_number(tmp_path, folder, src, key, what):
    # was 'FILE:<first line of the mapping>: None: Keys should be strings (got None)'
    text = (ROOT / folder / src).read_text()
    d = tmp_path / folder
    d.mkdir()
    f = d / src
    f.write_text(text + f"{key}: 3\n")
    line = len(f.read_text().splitlines())
    refused(sim("check", str(f)), f"{src}:{line}: {key}: a key must be a name", f"as {what}")


# --------------------------------------------------------------------------- stack profiles


def _stack(tmp_path, old: str, new: str, name: str = "eager_pytorch"):
    """A copy of a shipped profile in a ``stacks`` folder, with one edit; (file, line of the edit)."""
    text = (ROOT / "stacks" / f"{name}.yaml").read_text()
    assert old in text
    d = tmp_path / "stacks"
    d.mkdir(exist_ok=True)
    f = d / f"{name}.yaml"
    f.write_text(text.replace(old, new, 1))
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if new.splitlines()[0] in ln)
    return f, line


@pytest.mark.parametrize("old, new, key, needles", [
    # was accepted: the kernel then matched no stream-kernel rule and ran at the ideal stream rate
    ("op: copy, read: m*k*eb", "op: teleport, read: m*k*eb", "gemm.weight_only.int8.before.0.op",
     ["unknown kernel class 'teleport'", "(valid: add, bcast_mul"]),
    ("- ops: [neg]", "- ops: [negg]", "stream_kernels.9.ops.0", ["unknown kernel class 'negg'; did you mean 'neg'?"]),
    # a profile some chip uses (h100_sxm and h200_sxm name eager_pytorch): checked on each of them
    ("decode_array: tensor_cores_sm80", "decode_array: warp_drive", "attention.decode_array",
     ["unknown array 'warp_drive' on chip 'h200_sxm'", "(valid: cuda_cores, tensor_cores"]),
    ("even_array: tensor_cores_align2", "even_array: tensor_cores_align3", "gemm.misaligned.0.even_array",
     ["unknown array 'tensor_cores_align3' on chip 'h100_sxm'", "did you mean"]),
    ("k_array: tensor_cores_int8_align4", "k_array: tensor_cores_int8_align5", "gemm.misaligned.1.k_array",
     ["unknown array 'tensor_cores_int8_align5' on chip 'h100_sxm'", "did you mean"]),
    # was clamped to 0 bytes
    ("read: m*k*eb, write: m*k*4", "read: -m*k, write: m*k*4", "gemm.weight_only.int8.before.0.read",
     ["'-m*k' negates a term", "write a difference as a - b"]),
    ("rate_class: fp32", "rate_class: fp33", "gemm.weight_only.int4.row_work.rate_class",
     ["unknown rate class 'fp33'; did you mean 'fp32'?"]),
], ids=["op", "stream-ops", "decode-array", "misaligned-array", "misaligned-k-array",
        "unary-minus", "rate-class"])
def test_stack_profile_names_and_signs(tmp_path, old, new, key, needles):
    f, line = _stack(tmp_path, old, new)
    refused(sim("check", str(f)), f"eager_pytorch.yaml:{line}: {key}: ", *needles)


def test_a_misaligned_rule_that_names_tiles_without_their_kernels(tmp_path):
    """A tile for a path the rule does not take would be silently ignored: refused at the rule."""
    f, _ = _stack(tmp_path, "      n_array: tensor_cores\n      n_tiles", "      n_tiles")
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if ln.startswith("    - align_elements: 16"))
    refused(sim("check", str(f)), f"eager_pytorch.yaml:{line}: gemm.misaligned.1: ", "n_tiles needs n_array")


def test_a_profile_no_chip_names_is_checked_against_every_catalog_chip(tmp_path):
    f, line = _stack(tmp_path, "decode_array: tensor_cores_sm80", "decode_array: warp_drive", "fused_serving")
    refused(sim("check", str(f)), f"fused_serving.yaml:{line}: attention.decode_array: unknown array 'warp_drive'",
            "no chip in the catalog has it")


def test_a_count_that_comes_out_negative_names_the_profile_line(tmp_path, monkeypatch):
    """A difference is allowed; one that is negative for the op being lowered is an error at the
    profile's key (it was clamped to 0 bytes), at run time and from Python."""
    import sim as simlib
    from sim.errors import ConfigError, MappingError

    f, line = _stack(tmp_path, 'read: n*eb + table*eb, write: n*eb, source: "x * cos"',
                     'read: n*eb - 100000000, write: n*eb, source: "x * cos"')
    assert sim("check", str(f)).returncode == 0
    monkeypatch.setenv("SIM_STACK_DIR", str(f.parent))  # sim() passes the environment on
    refused(sim("run", "h200_sxm", "tiny", "--phase", "decode", "-q"),
            f"eager_pytorch.yaml:{line}: unfused.rope.kernels.0.read: 'n*eb - 100000000' is -", "cannot be negative")
    with pytest.raises(ConfigError, match="unfused.rope.kernels.0.read") as e:
        simlib.run_llm("h200_sxm", "tiny", phase="decode", stack=str(f))
    assert isinstance(e.value, MappingError)  # what a bad profile raised before


def test_a_chip_whose_stack_is_missing_or_does_not_fit(tmp_path):
    text = (ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("software_stack:"))
    f = tmp_path / "chip.yaml"
    f.write_text(text.replace("software_stack: eager_pytorch", "software_stack: eager_pytorh"))
    # sim check passed; sim run said "unknown stack 'eager_pytorh'" naming no file
    for cmd in (["check", str(f)], ["run", str(f), "tiny", "-q"]):
        refused(sim(*cmd), f"chip.yaml:{line}: software_stack: unknown stack 'eager_pytorh'; did you mean")
    f.write_text((ROOT / "arch_configs" / "npu_128x128.yaml").read_text() + "software_stack: eager_pytorch\n")
    refused(sim("check", str(f)), "chip.yaml:", "software_stack: stack 'eager_pytorch' does not fit this chip",
            "eager_pytorch.yaml:", "unknown array 'tensor_cores_sm80' on chip 'npu_128x128' (valid: mxu)")
    refused(sim("run", "npu_128x128", "tiny", "-q", "--set", "software_stack=nostack"),
            "--set software_stack=nostack: software_stack: unknown stack 'nostack'")


_BAD_STACK = "--set software_stack=nostack: software_stack: unknown stack 'nostack' (valid: eager_pytorch"


@pytest.mark.parametrize("cmd", [
    ["gemm", "npu_128x128", "--m", "64", "--k", "64", "--n", "64"],   # was accepted: gemm never lowers through it
    ["show", "npu_128x128"],                                          # was accepted
    ["run", "npu_128x128", "tiny", "-q"],
    ["serve", "npu_128x128", "tiny", "--num-requests", "2", "-q"],
    ["validate", "h200_sxm", "validation/ci_cases.csv", "-q"],
    ["sweep", "sweeps/llama3-8b-quick.yaml", "-q"],                   # was 27 failed points, each "unknown stack"
], ids=lambda c: c[0])
def test_a_set_software_stack_is_checked_on_every_command(tmp_path, cmd):
    """One check (sim.spec.stack_catalog.chip_stack_problems, made by load_chip and the sweep's
    chip resolver): the stack exists and fits the chip, naming the --set edit."""
    out = ["--out", str(tmp_path / "out")] if cmd[0] == "sweep" else []
    refused(sim(*cmd, *out, "--set", "software_stack=nostack"), _BAD_STACK)


def test_a_set_software_stack_must_fit_the_chip():
    refused(sim("gemm", "npu_128x128", "--m", "64", "--k", "64", "--n", "64", "--set", "software_stack=eager_pytorch"),
            "--set software_stack=eager_pytorch: software_stack: stack 'eager_pytorch' does not fit this chip: ",
            "eager_pytorch.yaml:", "unknown array 'tensor_cores_sm80' on chip 'npu_128x128' (valid: mxu)")
    proc = sim("gemm", "h200_sxm", "--m", "64", "--k", "64", "--n", "64", "--set", "software_stack=fused_serving")
    assert proc.returncode == 0, proc.stderr


def test_a_set_software_stack_from_python_and_in_a_sweep_parameter():
    import sim as simlib
    from sim.errors import ConfigError

    with pytest.raises(ConfigError, match="--set software_stack=nostack: software_stack: unknown stack 'nostack'"):
        simlib.load_chip("npu_128x128", overrides={"software_stack": "nostack"})
    spec = {"name": "stacks", "chip": "npu_128x128",
            "workloads": [{"name": "g", "kind": "gemm", "m": 64, "k": 64, "n": 64}],
            "parameters": {"software_stack": ["ideal", "nostack"]}, "metrics": ["seconds"]}
    df = simlib.sweep(spec, jobs=1, progress=False)
    assert df["error"].isna().tolist() == [True, False]
    assert "parameter software_stack = \"nostack\": unknown stack 'nostack'" in df["error"].iloc[1]


def test_every_kernel_class_the_simulator_emits_is_one_a_profile_may_name():
    from sim.model.workload.llm import VECTOR_OPS_PER_ELEMENT
    from sim.spec.stack_spec import KERNEL_CLASSES, TRACE_VECTOR_CLASSES

    assert set(VECTOR_OPS_PER_ELEMENT) <= KERNEL_CLASSES
    assert set(VECTOR_OPS_PER_ELEMENT) == TRACE_VECTOR_CLASSES


@pytest.mark.parametrize("old, new, key, needles", [
    ("  rope:\n", "  ropee:\n", "unfused.ropee", ["unknown op 'ropee'; did you mean 'rope'?"]),
    ("  moe.act:\n", "  moe.acts:\n", "unfused.moe.acts", ["unknown op 'moe.acts'; did you mean 'moe.act'?"]),
    ("  silu_mul:\n", "  mlp.gate:\n", "unfused.mlp.gate", ["unknown op 'mlp.gate'"]),
], ids=["class", "trace-op", "a-gemm"])
def test_an_unfused_key_the_trace_never_emits_is_refused(tmp_path, monkeypatch, old, new, key, needles):
    """A misspelt ``unfused:`` key passed `sim check` and was never applied (the op ran fused,
    without a word); now FILE:LINE: unfused.KEY: unknown op at check and at read time."""
    import sim as simlib
    from sim.errors import ConfigError

    f, line = _stack(tmp_path, old, new)
    valid = "(valid: a model op of the LLM trace or its VectorOp class: add, attn.kv_append"
    refused(sim("check", str(f)), f"eager_pytorch.yaml:{line}: {key}: ", *needles, valid)
    monkeypatch.setenv("SIM_STACK_DIR", str(f.parent))
    refused(sim("run", "h200_sxm", "tiny", "--phase", "decode", "-q"), f"eager_pytorch.yaml:{line}: {key}: ")
    with pytest.raises(ConfigError, match=f"eager_pytorch.yaml:{line}: {key}: unknown op"):
        simlib.run_llm("h200_sxm", "tiny", phase="decode", stack=str(f))


def test_the_shipped_profiles_unfused_keys_pass():
    assert sim("check", *map(str, sorted((ROOT / "stacks").glob("*.yaml")))).returncode == 0


def test_the_unfused_keys_are_the_vector_op_names_the_trace_builder_emits():
    """stack_spec.TRACE_VECTOR_OP_NAMES (the spec layer cannot import the trace builder) is
    exactly the set of VectorOp names the builder emits over every kind of model and precision."""
    from sim.ir.ops import VectorOp
    from sim.model.workload.llm import Precision, Sequence, build_iteration
    from sim.model.workload.models import load_model_spec
    from sim.spec.stack_spec import TRACE_VECTOR_CLASSES, TRACE_VECTOR_OP_NAMES, UNFUSED_KEYS

    models = [load_model_spec(name) for name in ("llama3-8b", "falcon-7b", "gpt3-175b", "mixtral-8x7b")]
    models += [load_model_spec("mixtral-8x7b", overrides=[f"activation={a}"]) for a in ("gelu", "gelu_glu", "relu")]
    models += [load_model_spec("llama3-8b", overrides=["activation=relu", "parallel_attention=true"])]
    precisions = [Precision(), Precision(dtype="fp8", weight_dtype="fp8", kv_dtype="fp8", quantised_lm_head=True),
                  Precision(dtype="bf16", weight_dtype="int4", quantised_lm_head=True),
                  Precision(dtype="mxfp8", quantised_lm_head=True)]
    names, classes = set(), set()
    for model in models:
        for precision in precisions:
            for attention in ("fused", "unfused"):
                trace = build_iteration(model, [Sequence(4, 8)] * 2, precision=precision, attention=attention)
                for t in trace.ops:
                    if isinstance(t.op, VectorOp):
                        names.add(t.op.name)
                        classes.add(t.op.op)
    assert names == TRACE_VECTOR_OP_NAMES, (sorted(names - TRACE_VECTOR_OP_NAMES), sorted(TRACE_VECTOR_OP_NAMES - names))
    assert classes == TRACE_VECTOR_CLASSES
    assert UNFUSED_KEYS == TRACE_VECTOR_OP_NAMES | TRACE_VECTOR_CLASSES


# --------------------------------------------------------------------------- sim plot


@pytest.mark.parametrize("kind, extra, needles", [
    ("pareto", [], ["r.csv: no column 'area_mm2' in the results (columns: a, b)", "--x / --y"]),
    ("heatmap", ["--x", "a", "--y", "b", "--z", "c"], ["r.csv: no column 'c'", "--z"]),
    ("heatmap", [], ["r.csv: a heatmap needs two parameters"]),
    ("pareto", ["--where", "zz=5"], ["r.csv: --where: no column 'zz'"]),
])
def test_plot_errors_name_the_results_file(tmp_path, kind, extra, needles):
    table = tmp_path / "r.csv"
    table.write_text("a,b\n1,2\n")
    refused(sim("plot", kind, str(table), "--out", str(tmp_path / "p.png"), *extra), *needles)  # named no file


def test_plot_of_a_run_result_without_ops_or_chip(tmp_path):
    f = tmp_path / "run.json"
    f.write_text('{"ops": [{"op": "a", "kind": "gemm", "seconds": 1}]}')
    # was 'internal error: TypeError: expected str, bytes or os.PathLike object, not NoneType', exit 3
    refused(sim("plot", "roofline", str(f), "--out", str(tmp_path / "p.png")), "run.json: the result names no chip",
            "--chip")
    f.write_text('{"chip": "npu_128x128", "ops": []}')  # was an empty figure, exit 0
    for kind in ("roofline", "breakdown"):
        refused(sim("plot", kind, str(f), "--out", str(tmp_path / "p.png")), "run.json: the result has no ops")
    f.write_text('{"chip": "npu_128x128", "ops": [{"op": "a", "kind": "gemm", "seconds": NaN}]}')
    # issue 14's NaN-filled JSON: an internal error once, then a figure without the op, exit 0
    refused(sim("plot", "breakdown", str(f), "--out", str(tmp_path / "p.png")),
            "run.json: ops.0.seconds must be a finite number >= 0, got nan")


# --------------------------------------------------------------------------- chip values no JEDEC part has


@pytest.mark.parametrize("old, new, key, needles", [
    # each was accepted; the partition then failed every GEMM with "no tile fits", naming no file
    ("input_kib: 64 ", "input_kib: 0 ", "memory.levels.0.partition.input_kib", ["greater than 0"]),
    ("bus_width_bits: 64 ", "bus_width_bits: 7 ", "memory.levels.1.bus_width_bits", ["power of two from 8 to 4096"]),
    ("bus_width_bits: 64 ", "bus_width_bits: 96 ", "memory.levels.1.bus_width_bits", ["power of two"]),
    ("burst_length: 8 ", "burst_length: 3 ", "memory.levels.1.burst_length", ["one of 2, 4, 8, 16, 32"]),
    ("t_ccd_s_nck: 4 ", "t_ccd_s_nck: 4.5 ", "memory.levels.1.t_ccd_s_nck", ["whole number of clock cycles"]),
    ("t_ccd_l_nck: 5 ", "t_ccd_l_nck: 5.5 ", "memory.levels.1.t_ccd_l_nck", ["whole number of clock cycles"]),
], ids=["partition-0", "bus-7", "bus-96", "burst-3", "tccd-s", "tccd-l"])
def test_dram_and_sram_values_no_part_has(tmp_path, old, new, key, needles):
    text = (ROOT / "arch_configs" / "scalesim_32x32.yaml").read_text()
    assert old in text
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if old in ln)
    f = tmp_path / "chip.yaml"
    f.write_text(text.replace(old, new, 1))
    refused(sim("check", str(f)), f"chip.yaml:{line}: {key}: ", *needles)


@pytest.mark.parametrize("edit, needles", [
    # was "dimension k must be >= 1, got -9223372036854775808 at index (0, 0)"
    ("cores.arrays.0.macs_per_pe_per_cycle.bf16=1e-300", ["cores.arrays.0.macs_per_pe_per_cycle.bf16",
                                                          "greater than or equal to 0.001"]),
    # passed sim check, then every run failed with "<dram>: channels: 2**17 pseudo-channels ... not supported"
    ("memory.levels.hbm.channels=65536", ["memory.levels.2.channels", "131,072 pseudo-channels; at most 65,536"]),
], ids=["mac-rate", "channels"])
def test_in_bound_extremes_the_model_cannot_price(edit, needles):
    for cmd in (["show", "npu_128x128"], ["gemm", "npu_128x128", "--m", "64", "--k", "64", "--n", "64"]):
        refused(sim(*cmd, "--set", edit), "npu_128x128.yaml (with --set overrides):", *needles)


def test_every_shipped_chip_has_jedec_dram_values():
    from sim.apps.check import check_files

    assert check_files([ROOT / "arch_configs"]) == []


# --------------------------------------------------------------------------- sim.serve from Python


@pytest.mark.parametrize("k", [0, 2])
@pytest.mark.parametrize("draft, needle", [("nomodel", "draft_model: unknown model 'nomodel'"),
                                           ("", "draft_model: empty")])
def test_serve_checks_its_draft_model_as_the_cli_does(k, draft, needle):
    """sim.serve(draft_model="nomodel", speculative_k=0) was silent while `sim serve --draft-model
    nomodel` was refused; both now check it in one place (serving.simulator.load_draft_model)."""
    import sim as simlib
    from sim.errors import WorkloadError

    with pytest.raises(WorkloadError, match=needle):
        simlib.serve("npu_128x128", "tiny", num_requests=2, draft_model=draft, speculative_k=k)


def test_sim_serve_refuses_an_empty_draft_model():
    refused(sim("serve", "npu_128x128", "tiny", "--num-requests", "2", "-q", "--draft-model", ""),
            "--draft-model: empty")


# --------------------------------------------------------------------------- empty and unknown names in a sweep


@pytest.mark.parametrize("field, needle", [
    ("dtype: ''", "workloads.0.dtype: unknown number format ''"),        # failed every point, no file
    ("dtype: bf17", "workloads.0.dtype: unknown number format 'bf17'; did you mean 'bf16'?"),
    ("kv_dtype: int3", "workloads.0.kv_dtype: unknown number format 'int3'"),
    ("weight_dtype: ''", "workloads.0.weight_dtype: unknown number format ''"),
    ("dataflow: ''", "workloads.0.dataflow: empty"),                     # ran the chip's default
    ("name: ''", "workloads.0.name: empty"),                             # labelled the point by its model
])
def test_sweep_workload_names_that_are_empty_or_unknown(tmp_path, field, needle):
    spec = tmp_path / "s.yaml"
    spec.write_text(f"name: t\nchip: npu_128x128\nworkloads: [{{kind: llm, model: tiny, phase: decode, {field}}}]\n")
    refused(sim("sweep", str(spec), "--dry-run", "--out", str(tmp_path / "o")), f"s.yaml:3: {needle}")


@pytest.mark.parametrize("edit", ["--model-set", "--set"])
def test_an_empty_required_string_from_the_command_line(edit):
    """Issue 14's `--model-set name=` was accepted; it (and `--set name=`) is now refused as the file would be."""
    args = ["run", "npu_128x128", "tiny", "-q", edit, "name="]
    refused(sim(*args), "name: String should have at least 1 character")


# --------------------------------------------------------------------------- a full disk


def test_a_full_disk_names_where_the_command_writes(tmp_path, monkeypatch, capsys):
    """A write that fails part-way (ENOSPC) carries no file name: the error said only
    'OSError: [Errno 28] No space left on device' (issue 14: "a full disk (no path named)").
    Checked in-process (filling a real disk needs a mount): the plot writer raises it."""
    import errno

    import sim.apps.plotting as plotting
    from sim.cli import main

    def full(*a, **kw):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(plotting, "pareto", full)
    table = tmp_path / "r.csv"
    table.write_text("a,b\n1,2\n")
    out = tmp_path / "p.png"
    assert main(["plot", "pareto", str(table), "--x", "a", "--y", "b", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert f"error: No space left on device while writing its output (--out {out})" in err, err


# --------------------------------------------------------------------------- a Dask address that never answers


def test_a_dask_address_that_accepts_but_never_answers(tmp_path):
    """Issue 14: > 90 s despite the 5 s connect timeout (Dask's timeout does not cover its handshake)."""
    import socket
    import threading

    pytest.importorskip("distributed")
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held = []
    threading.Thread(target=lambda: [held.append(srv.accept()) for _ in range(16)], daemon=True).start()
    spec = tmp_path / "s.yaml"
    spec.write_text("name: t\nchip: scalesim_32x32\n"
                    "workloads: [{name: g, kind: gemm, m: 8, k: 8, n: 8, dtype: int8, memory: ideal}]\n")
    addr = f"tcp://127.0.0.1:{srv.getsockname()[1]}"
    proc = sim("sweep", str(spec), "-q", "--out", str(tmp_path / "o"), "--scheduler", addr, "--connect-timeout", "1",
               isolated=True)
    refused(proc, f"the Dask scheduler at {addr} accepted the connection but did not answer within 6 s")
    assert proc.seconds < 30, proc.seconds
    srv.close()
