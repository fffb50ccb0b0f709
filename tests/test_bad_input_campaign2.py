"""Bad input, campaign 2 of issue 14: what a second round of mutated chips, models, stacks,
sweeps, serving options, traces, case files and plots found, each exiting 2 with one message
naming the file, line and key (or the option) - never an internal error, a hang or a silent
nonsense result."""
from __future__ import annotations

from pathlib import Path

import pytest

# the CLI runner and the refusal check of the first campaign (tests/ is on the path under pytest)
from test_bad_input import ROOT, SECONDS, refused, sim  # noqa: F401


# --------------------------------------------------------------------------- stack profiles

STACK_LINE = "{name: a_fp32, op: copy, read: m*k*eb, write: m*k*4, elements: m*k, source: \"A.to(float)\"}"


@pytest.mark.parametrize("edit, needles", [
    ("read: m*k*, ", ["read:", "'m*k*' is not an arithmetic expression"]),
    ("read: '', ", ["read:", "an empty expression"]),
    ("read: m*k/0, ", ["read:", "divides by zero"]),
    ("read: \"__import__('os').system('true')\", ", ["read:", "is not arithmetic over names"]),
    ("read: m.__class__, ", ["read:", "is not arithmetic over names"]),
    ("read: .nan, ", ["read:", "finite number"]),
], ids=["trailing-op", "empty", "div0", "import", "attribute", "nan"])
def test_bad_kernel_expressions_in_a_stack_are_refused_when_read(tmp_path, edit, needles):
    text = (ROOT / "stacks" / "eager_pytorch.yaml").read_text()
    assert STACK_LINE in text
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if STACK_LINE in ln)
    d = tmp_path / "stacks"
    d.mkdir()
    f = d / "eager_pytorch.yaml"
    f.write_text(text.replace("read: m*k*eb, ", edit, 1))
    refused(sim("check", str(f), "-q"), f"eager_pytorch.yaml:{line}: gemm.weight_only.int8.before.0.read",
            *needles[1:])


# --------------------------------------------------------------------------- sim serve options and traces

SERVE = ["serve", "npu_128x128", "tiny", "--no-progress", "-q", "--prompt", "16", "--output", "4"]
#: a replayed trace brings its own arrivals and lengths (--prompt / --output with --trace are refused)
SERVE_TRACE = SERVE[:5]


@pytest.mark.parametrize("args, needles", [
    (["--num-requests", "1000000000000"], ["--num-requests", "10,000,000"]),  # was MemoryError, exit 3
    (["--duration", "1e300"], ["--duration", "beyond the limit"]),
    (["--drain", "-1"], ["--drain", ">= 0"]),  # was 'ValueError: Negative delay', exit 3
    (["--seed", "-1"], ["--seed", ">= 0"]),  # was 'expected non-negative integer', exit 3
    (["--duration", "nan"], ["--duration", "> 0"]),
    (["--duration", "0"], ["--duration", "> 0"]),
    (["--cv", "nan"], ["--cv"]),
    (["--alpha", "1.5"], ["--alpha", "between 0 and 1"]),
    (["--alpha", "nan"], ["--alpha", "between 0 and 1"]),
    (["--prompt", "lognormal:nan:1"], ["--prompt lognormal:nan:1", "median"]),
    (["--timeout-ms", "-1"], ["--timeout-ms", ">= 0"]),
    (["--prefix-tokens", "-1"], ["--prefix-tokens", ">= 0"]),
    (["--price-per-chip-hour", "nan"], ["--price-per-chip-hour"]),
    (["--speculative-k", "1000"], ["--speculative-k", "at most 64"]),
])
def test_bad_serve_numbers(args, needles):
    refused(sim(*SERVE, "--num-requests", "4", *args) if "--num-requests" not in args and "--duration" not in args
            else sim(*SERVE, *args), *needles)


def test_trace_that_is_not_utf8(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_bytes(b"arrival_s,prompt_tokens,output_tokens\n0,1\xff6,4\n")  # was UnicodeDecodeError, exit 3
    refused(sim(*SERVE_TRACE, "--trace", str(trace)), "trace.csv:2: not UTF-8")


def test_trace_values_that_are_no_numbers_and_repeated_columns(tmp_path):
    """A JSONL ``true`` read as 1 token, NaN or infinite fields, a column given twice (the last
    silently won): each refused with the trace's file and line."""
    from sim.apps.serving import load_trace
    from sim.errors import WorkloadError

    cases = {"t.jsonl": ('{"arrival_s": 0.1, "prompt_tokens": true, "output_tokens": 4}\n', "t.jsonl:1", "True"),
             "nan.csv": ("arrival_s,prompt_tokens,output_tokens\n0.1,nan,5\n", "nan.csv:2", "finite"),
             "inf.csv": ("arrival_s,prompt_tokens,output_tokens\ninf,5,5\n", "inf.csv:2", "arrival_s"),
             "dup.csv": ("arrival_s,prompt_tokens,arrival_s,output_tokens\n0.1,5,0.2,5\n", "dup.csv:1", "twice")}
    for name, (text, where, what) in cases.items():
        f = tmp_path / name
        f.write_text(text)
        with pytest.raises(WorkloadError) as e:
            load_trace(f)
        assert where in str(e.value) and what in str(e.value), (name, str(e.value))
    refused(sim(*SERVE_TRACE, "--trace", str(tmp_path / "dup.csv")), "dup.csv:1", "twice")


# --------------------------------------------------------------------------- sweep specs and options

SWEEP = "name: t\nchip: scalesim_32x32\nworkloads: [{name: g, kind: gemm, m: 8, k: 8, n: 8, dtype: int8, memory: ideal}]\n"


def test_a_range_whose_step_overflows(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP + "parameters:\n  clock_mhz: {from: 1, to: 1e300, step: 1e-300}\n")  # was OverflowError, exit 3
    refused(sim("sweep", str(spec), "--dry-run", "--out", str(tmp_path / "o")), "s.yaml:5: parameters.clock_mhz",
            "100,000")


def test_a_sweep_name_that_leads_out_of_the_reports_folder(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP.replace("name: t", "name: ../../x"))  # was accepted: reports/sweeps/../../x
    refused(sim("sweep", str(spec), "--dry-run"), "s.yaml:1: name:", "plain folder name")


@pytest.mark.parametrize("where", ["folder", "no-parent"])
def test_csv_that_cannot_be_written_is_refused_before_the_sweep(tmp_path, where):
    spec = tmp_path / "s.yaml"
    spec.write_text(SWEEP)
    csv = tmp_path if where == "folder" else tmp_path / "missing" / "x.csv"
    proc = sim("sweep", str(spec), "-q", "-j", "1", "--csv", str(csv), "--out", str(tmp_path / "o"))
    refused(proc, f"--csv {csv}", "is a folder" if where == "folder" else "does not exist")
    assert not (tmp_path / "o").exists()  # refused before anything ran


# --------------------------------------------------------------------------- sim plot


@pytest.mark.parametrize("ops, needles", [
    ("5", ["'ops' must be a list of op objects", "got int"]),  # was 'DataFrame constructor not properly called', exit 3
    ("[1]", ["'ops' must be a list of op objects"]),
    ("[{}]", ["ops.0 has no 'op', 'kind', 'seconds'"]),  # was KeyError: 'total_seconds', exit 3
    ('[{"op": "a", "kind": "gemm", "seconds": "x"}]', ["ops.0.seconds must be a finite number"]),
])
@pytest.mark.parametrize("kind", ["breakdown", "roofline"])
def test_a_run_json_whose_ops_are_not_ops(tmp_path, kind, ops, needles):
    f = tmp_path / "run.json"
    f.write_text('{"chip": "npu_128x128", "ops": %s}' % ops)
    refused(sim("plot", kind, str(f), "--out", str(tmp_path / "p.png")), "run.json", *needles)


def test_plot_out_naming_a_folder(tmp_path):
    table = tmp_path / "r.csv"
    table.write_text("area_mm2,tokens_per_s\n1,2\n")
    # was exit 0: "wrote DIR" while the image went to DIR.png
    refused(sim("plot", "pareto", str(table), "--out", str(tmp_path)), f"--out {tmp_path} is a folder")
    assert not Path(str(tmp_path) + ".png").exists()


# --------------------------------------------------------------------------- values no chip or model has


def test_a_chip_clock_of_1e_minus_300_mhz(tmp_path):
    f = tmp_path / "chip.yaml"
    f.write_text((ROOT / "arch_configs" / "scalesim_32x32.yaml").read_text().replace("clock_mhz: 1000",
                                                                                     "clock_mhz: 1e-300"))
    refused(sim("show", str(f)), "chip.yaml:15: clock_mhz", "greater than or equal to 1")  # was exit 0: 2e-303 TFLOPS


def test_a_dram_pin_rate_of_1e_minus_300(tmp_path):
    refused(sim("show", "scalesim_32x32", "--set", "memory.levels.dram.data_rate_gbps_per_pin=1e-300"),
            "memory.levels.1.data_rate_gbps_per_pin", "0.001")


def test_a_model_of_a_hundred_million_layers(tmp_path):
    f = tmp_path / "big.yaml"
    f.write_text((ROOT / "workloads" / "tiny.yaml").read_text().replace("num_layers: 2", "num_layers: 100000000"))
    # was a run past any timeout (the engine walks the layers one by one)
    refused(sim("run", "npu_128x128", str(f), "--phase", "prefill", "--prompt-len", "16"), "big.yaml:7: num_layers",
            "10000")
    refused(sim("run", "npu_128x128", "tiny", "--model-set", "num_layers=100000000"), "num_layers", "10000")


# --------------------------------------------------------------------------- sim run options


@pytest.mark.parametrize("args, needles", [
    (["--phase", "decode", "--context-len", "-1"], ["--context-len must be >= 0"]),  # was 'Sequence: past_tokens ...'
    (["--phase", "decode", "--draft-tokens", "-1"], ["--draft-tokens must be >= 0"]),  # was '... new_tokens >= 1, got 0'
    (["--new-tokens", "0"], ["--new-tokens must be >= 1"]),  # was 'new_tokens must be >= 1', no option named
    (["--top", "0"], ["--top must be >= 1"]),  # was exit 0 with an empty table
])
def test_bad_run_options_name_the_option(args, needles):
    refused(sim("run", "npu_128x128", "tiny", *args), *needles)


# --------------------------------------------------------------------------- sim validate

CASES_HEADER = "kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"


def test_validate_whose_every_case_failed_exits_2_naming_the_rows(tmp_path):
    cases = tmp_path / "cases.csv"
    cases.write_text(CASES_HEADER + "attention,bf16,,,,1,32,7,128,1,128,0,,,,0.1\n")
    # was exit 0 with a NaN table and "see the error column", a column it did not print
    proc = sim("validate", "h200_sxm", str(cases), "-j", "1", "-q", "--out", str(tmp_path / "o"))
    refused(proc, "cases.csv:2: Attention", "multiple of kv_heads (7)", "all 1 case(s) failed")
    assert (tmp_path / "o" / "predictions.csv").is_file()  # what was computed is kept


@pytest.mark.parametrize("old, new, needles", [
    ("dtypes: [bf16, fp16]", "dtypes: [bf17, fp16]", ["gemm.misaligned.0.dtypes.0", "unknown number format 'bf17'"]),
    ("    int8:\n      before:", "    int9:\n      before:", ["gemm.weight_only.int9", "unknown number format 'int9'"]),
    ("tiles: [256, 128, 64]", "tiles: [0, 128, 64]", ["gemm.sparse_2_4.tiles.0", "greater than or equal to 1"]),
    ("64]\n    split_k: [1]", "64]\n    split_k: []", ["gemm.sparse_2_4.split_k", "at least 1 item"]),
    ("64]\n    split_k: [1]", "64]\n    split_k: [-1]", ["gemm.sparse_2_4.split_k.0", "greater than or equal to 1"]),
], ids=["format", "weight-only-format", "tile-0", "split-k-empty", "split-k-negative"])
def test_stack_gemm_rules_that_sim_check_passed(tmp_path, old, new, needles):
    text = (ROOT / "stacks" / "eager_pytorch.yaml").read_text()
    assert old in text
    d = tmp_path / "stacks"
    d.mkdir()
    f = d / "eager_pytorch.yaml"
    f.write_text(text.replace(old, new, 1))
    refused(sim("check", str(f), "-q"), "eager_pytorch.yaml:", *needles)


@pytest.mark.parametrize("args, needles", [
    # these said "max_batch: ..." / "length distribution: ...", naming no option (or not the file)
    (["--max-batch", "0"], ["--max-batch must be >= 1"]),
    (["--kv-link-gb-per-s", "nan"], ["--kv-link-gb-per-s"]),
    (["--slo-ttft-ms", "-1"], ["--slo-ttft-ms"]),
    (["--prompt", "0"], ["--prompt 0: length distribution"]),
    (["--output", "uniform:0:0"], ["--output uniform:0:0:"]),
])
def test_serve_errors_name_the_option(args, needles):
    refused(sim(*SERVE, "--num-requests", "4", *args), *needles)


def test_serve_length_file_errors_name_the_file(tmp_path):
    lens = tmp_path / "lens.txt"
    lens.write_text("16\n-3\n")
    refused(sim(*SERVE, "--num-requests", "4", "--prompt", f"file:{lens}"), f"--prompt file:{lens}:")


@pytest.mark.parametrize("cmd", [
    ["gemm", "scalesim_32x32", "--m", "8", "--k", "8", "--n", "8", "--weight-dtype", "int3"],
    ["run", "npu_128x128", "tiny", "--weight-dtype", "int3"],
    ["serve", "npu_128x128", "tiny", "--weight-dtype", "int3"],
], ids=["gemm", "run", "serve"])
def test_an_unknown_number_format_names_its_option(cmd):
    refused(sim(*cmd), "--weight-dtype: unknown number format 'int3'")


@pytest.mark.parametrize("value", ["0", "-1"])
def test_gemm_row_length_below_one(value):
    # was exit 0: the value was taken silently
    refused(sim("gemm", "scalesim_32x32", "--m", "8", "--k", "8", "--n", "8", "--row-length", value),
            "--row-length must be >= 1")


def test_chip_and_model_names_that_lead_out_of_a_folder(tmp_path):
    """A chip or model name becomes part of result and cache file names (the serving grid's
    cache is <chip>-<model>-<key>.json): ``../../etc/passwd`` and a leading '.' are refused."""
    chip = tmp_path / "chip.yaml"
    chip.write_text((ROOT / "arch_configs" / "scalesim_32x32.yaml").read_text()
                    .replace("name: scalesim_32x32", "name: ../../etc/passwd", 1))
    refused(sim("check", str(chip)), "chip.yaml:", "name: a name is used in file names")
    model = tmp_path / "model.yaml"
    model.write_text((ROOT / "workloads" / "tiny.yaml").read_text().replace("name: tiny", "name: .hidden", 1))
    refused(sim("check", str(model)), "model.yaml:", "name: a name is used in file names")


def test_a_draft_model_that_does_not_exist_is_named_without_drafted_tokens():
    """--draft-model nomodel passed silently with --speculative-k 0 (the default)."""
    refused(sim(*SERVE, "--draft-model", "nomodel"), "--draft-model", "unknown model 'nomodel'")

