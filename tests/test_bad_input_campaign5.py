"""Bad input found by the fifth campaign (session 28: ~500 mutated chip, model, trace, case and
sweep inputs and option values run through every command): each case is one clear message and
exit 2 (the Python API: a SimError), never an internal error, a numpy warning or a hang."""
from __future__ import annotations

import re
import warnings

import numpy as np
import pytest

# the CLI runner and the refusal check of the first campaign (tests/ is on the path under pytest)
from test_bad_input import ROOT, refused, sim  # noqa: F401

from sim.apps.serving import workload as W
from sim.apps.validation_cases import read_cases
from sim.errors import SimError, WorkloadError

HEADER = "kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"


def _chip_with(tmp_path, old: str, new: str):
    text = (ROOT / "arch_configs" / "npu_128x128.yaml").read_text()
    assert old in text
    f = tmp_path / "npu_128x128.yaml"
    f.write_text(text.replace(old, new, 1))
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if new.strip() in ln)
    return f, line


def test_a_dram_smaller_than_one_row_per_bank_is_refused_at_its_key(tmp_path):
    # was 'internal error: ValueError: transfers must lie in [0, N)' from inside the DRAM model
    f, line = _chip_with(tmp_path, "capacity_gib: 16 ", "capacity_gib: 0.000001 ")
    refused(sim("check", str(f)), f"npu_128x128.yaml:{line}: memory.levels.2.capacity_gib",
            "smaller than one 1024-byte row in each of the 32 pseudo-channels x 32 banks")


def test_a_number_too_long_to_read_names_its_line(tmp_path):
    # was 'internal error: ValueError: Exceeds the limit (4300 digits) for integer string conversion'
    f, line = _chip_with(tmp_path, "clock_mhz: 1050 ", "clock_mhz: " + "9" * 5000 + " ")
    proc = sim("check", str(f))
    refused(proc, f"npu_128x128.yaml:{line}: clock_mhz: the value 9999", "(5,000 characters) is too long to "
            "read as a number")
    assert len(proc.stderr) < 1000


def test_a_long_bad_value_is_quoted_short():
    # the 5,000-character value was printed whole
    proc = sim("gemm", "npu_128x128", "--m", "8", "--k", "8", "--n", "8", "-q", "--set", "clock_mhz=" + "x" * 5000)
    refused(proc, "clock_mhz: Input should be a valid number", "(5,002 characters)")
    assert len(proc.stderr) < 1000


def test_a_model_with_more_experts_than_can_be_priced_is_refused():
    # 10^9 experts ran out of memory drawing the routed loads (exit -9 after 76 s)
    refused(sim("run", "npu_128x128", "mixtral-8x7b", "--phase", "decode", "--model-set", "num_experts=1000000000",
                "--allow-overflow"), "num_experts", "less than or equal to 4096")


def test_arrivals_that_bring_no_request_say_so():
    # was 'internal error: ValueError: max() arg is an empty sequence'
    with pytest.raises(WorkloadError, match="no request arrives within 2 s"):
        W.generate(rate_per_s=1e-300, duration_s=2.0)


def test_a_coefficient_of_variation_beyond_any_trace_is_refused():
    # cv 1e10 asked numpy for 1 TiB of gaps
    with pytest.raises(WorkloadError, match=r"cv: .* must be in \(0, 100\]"):
        W.generate(rate_per_s=1.0, duration_s=2.0, arrival="gamma", cv=1e10)
    W.generate(rate_per_s=5.0, duration_s=10.0, arrival="gamma", cv=100.0)  # the largest allowed runs
    refused(sim("serve", "npu_128x128", "tiny", "--rate", "1", "--duration", "2", "--arrival", "gamma",
                "--cv", "1e10"), "--cv must be a coefficient of variation in (0, 100]")


def test_more_replicas_than_a_run_can_hold_are_refused():
    # 10^7 replicas never started (20 s and 670 MB at 10^5)
    from sim.apps.serving.simulator import MAX_REPLICAS, serve

    with pytest.raises(WorkloadError, match="replicas: at most 16,384"):
        serve("npu_128x128", "tiny", rate_per_s=1.0, duration_s=2.0, replicas=MAX_REPLICAS + 1)


def test_a_wide_lognormal_draws_clipped_lengths_without_a_numpy_warning():
    # lognormal:100:1000 cast inf to int64 ('invalid value encountered in cast')
    dist = W.LengthDist("lognormal", mean_log=100.0, sigma_log=1000.0, low=8, high=4096)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        x = dist.sample(np.random.default_rng(0), 1000)
    assert x.min() >= 8 and x.max() <= 4096
    # within the clip, the same lengths as rounding before clipping gave
    usual = W.LengthDist("lognormal", mean_log=6.0, sigma_log=0.8, low=8, high=4096)
    rng = np.random.default_rng(1)
    want = np.clip(np.rint(np.random.default_rng(1).lognormal(6.0, 0.8, size=500)).astype(np.int64), 8, 4096)
    assert np.array_equal(usual.sample(rng, 500), want)


@pytest.mark.parametrize("value", ["1" + "0" * 20, "1e20"])
def test_lengths_beyond_any_context_are_refused(value):
    # 10^20 tokens failed inside numpy ('Python int too large to convert to C long')
    with pytest.raises(WorkloadError, match="beyond the 1,073,741,824"):
        W.LengthDist("fixed", value=int(float(value)))
    with pytest.raises(WorkloadError, match="prompt_tokens must be a whole number in 1..1,073,741,824"):
        W.Request(0, 0.0, int(float(value)), 8)


@pytest.mark.parametrize("name, text, needle", [
    ("big.csv", "arrival_s,prompt_tokens,output_tokens\n0.1," + "1" * 140_000 + ",8\n",
     "big.csv:2: not a CSV row (field larger than field limit"),
    ("digits.jsonl", '{"arrival_s": 0, "prompt_tokens": ' + "9" * 5000 + ', "output_tokens": 8}\n',
     "digits.jsonl:1: not a trace line (a number too long to read)"),
    ("huge.jsonl", '{"arrival_s": 0, "prompt_tokens": ' + "9" * 400 + ', "output_tokens": 8}\n',
     "huge.jsonl:1: field 'prompt_tokens' is beyond any time or token count"),
    ("late.csv", "arrival_s,prompt_tokens,output_tokens\n1e300,8,8\n",
     "arrival_s must be a number of seconds in 0..3.2e+08"),
])
def test_a_trace_with_values_no_run_can_hold_names_its_line(tmp_path, name, text, needle):
    # were internal errors (csv.Error, ValueError, OverflowError) or numpy overflow warnings
    f = tmp_path / name
    f.write_text(text)
    with pytest.raises(WorkloadError) as err:
        W.load_trace(f)
    assert needle in str(err.value) and len(str(err.value)) < 400, str(err.value)[:400]


def test_a_case_file_with_an_unreadable_cell_names_its_line(tmp_path):
    f = tmp_path / "cases.csv"
    f.write_text(HEADER + "gemm,bf16,64,64,64,,,,,,,,,,,0.1\n" + "gemm,bf16," + "1" * 140_000 + ",64,64,,,,,,,,,,,0.1\n")
    with pytest.raises(WorkloadError, match=r"cases.csv:3: not a case CSV row \(field larger than field limit"):
        read_cases(f)


def test_attention_layer_and_copy_cases_name_a_dtype_they_cannot_take(tmp_path):
    # 'fp99' was accepted and priced as bf16
    f = tmp_path / "cases.csv"
    f.write_text(HEADER + "attention,fp99,,,,1,4,4,64,16,16,1,,,,0.1\n"
                 "layer,zz,,,,1,4,4,64,16,16,1,256,512,,0.1\ncopy,qq,,,,,,,,,,,,,1024,0.1\n"
                 "copy,uint8,,,,,,,,,,,,,1024,0.1\n")
    with pytest.raises(WorkloadError) as err:
        read_cases(f)
    msg = str(err.value)
    assert "cases.csv:2: column dtype: 'fp99' is not a dtype of attention cases (valid: bf16)" in msg
    assert "cases.csv:3: column dtype: 'zz' is not a dtype of layer cases" in msg
    assert "cases.csv:4: column dtype: 'qq' is not a dtype of copy cases (valid: uint8" in msg
    assert "cases.csv:5" not in msg


def test_a_layer_case_whose_heads_cannot_group_is_reported_per_case(tmp_path):
    # leaked pydantic's ValidationError and its URL (exit 3)
    f = tmp_path / "cases.csv"
    f.write_text(HEADER + "layer,bf16,,,,1,4,3,64,16,16,1,256,512,,0.1\ncopy,uint8,,,,,,,,,,,,,1024,0.01\n")
    proc = sim("validate", "npu_128x128", str(f), "--out", str(tmp_path / "out"), "-q")
    assert proc.returncode == 0 and "Traceback" not in proc.stderr and "pydantic" not in proc.stderr, proc.stderr
    assert "cases.csv:2: num_heads (4) must be a multiple of num_kv_heads (3)" in proc.stderr


def test_a_sweep_value_beyond_what_its_table_stores_is_an_invalid_point(tmp_path):
    # the invalid point's m = 10^20 then stopped the store ('internal error: OverflowError'), every rerun too
    spec = tmp_path / "sweep.yaml"
    spec.write_text("name: big-m\nchip: npu_128x128\nworkloads:\n  - name: g\n    kind: gemm\n    m: 64\n    k: 64\n"
                    "    n: 64\nparameters:\n  workload.m: [64, 100000000000000000000]\nmetrics: [seconds]\n")
    for _ in range(2):
        proc = sim("sweep", str(spec), "--out", str(tmp_path / "out"), "-q")
        assert proc.returncode == 0 and "internal error" not in proc.stderr, proc.stderr
    table = (tmp_path / "out" / "results.csv").read_text()
    assert "invalid point: parameter workload.m = 100000000000000000000: Input should be less than or equal to" in table


def test_a_stack_count_that_divides_by_zero_for_an_op_names_its_key(tmp_path):
    # 'n/(eb-2)' passed sim check and was 'internal error: ZeroDivisionError' for a 2-byte op
    import sim as S

    text = (ROOT / "stacks" / "eager_pytorch.yaml").read_text()
    old = 'read: 2*n*eb, write: n*eb, source: "x*cos + rotate_half(x)*sin"'
    assert old in text
    f = tmp_path / "eager_pytorch.yaml"
    f.write_text(text.replace(old, old.replace("read: 2*n*eb", "read: n/(eb-2)"), 1))
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if "n/(eb-2)" in ln)
    with pytest.raises(Exception) as err:
        S.run_llm("h200_sxm", "tiny", phase="decode", batch=1, context_len=16, stack=str(f))
    assert f"eager_pytorch.yaml:{line}: unfused.rope.kernels.4.read: 'n/(eb-2)' divides by zero for this op" \
        in str(err.value), str(err.value)


@pytest.mark.parametrize("op, needle", [
    ({"op": "a", "kind": "gemm", "seconds": int("1" * 400)}, "ops.0.seconds must be a finite number >= 0"),
    ({"op": "a", "kind": "gemm", "seconds": 1e-3, "flops": "x"}, "ops.0.flops must be a finite number >= 0, got 'x'"),
    ({"op": "a", "kind": "gemm", "seconds": 1e-3, "flops": float("inf")}, "ops.0.flops must be a finite number"),
    ({"op": "a", "kind": ["gemm"], "seconds": 1e-3}, "ops.0.kind must be a name, got ['gemm']"),
    ({"op": "a", "kind": "gemm", "seconds": 1e-320, "flops": 1e9}, "is no rate (seconds too small)"),
])
def test_a_run_json_with_values_no_figure_can_draw_is_refused(tmp_path, op, needle):
    # were TypeError / OverflowError from numpy, grouping or division, or a numpy warning (exit 0)
    import json

    from sim.apps.plotting.tables import read_run_json

    f = tmp_path / "run.json"
    f.write_text(json.dumps({"ops": [op]}))
    with pytest.raises(SimError, match=re.escape(needle)):
        read_run_json(str(f))
    f.write_text('{"ops": [{"op": "a", "kind": "gemm", "seconds": ' + "9" * 5000 + "}]}")
    with pytest.raises(SimError, match="a number too long to read"):
        read_run_json(str(f))


def test_a_figure_format_matplotlib_cannot_write_names_out(tmp_path):
    # was matplotlib's "Format 'xyz' is not supported" as an internal error
    res = tmp_path / "results.csv"
    res.write_text("point,workload,chip,clock_mhz,seconds,error\n0,w,c,1000,1.0,\n1,w,c,2000,0.5,\n")
    refused(sim("plot", "pareto", str(res), "--x", "clock_mhz", "--y", "seconds", "--out", str(tmp_path / "x.xyz")),
            "x.xyz: cannot write a .xyz figure (formats:", "png")


def test_scalesim_inputs_beyond_its_readers_name_the_line(tmp_path):
    from sim.apps.scalesim_compat import read_topology

    f = tmp_path / "topo.csv"
    f.write_text("Layer name, M, N, K,\nL0, " + "1" * 140_000 + ", 8, 8,\n")
    with pytest.raises(WorkloadError, match=r"topo.csv:2: not a topology row \(field larger than field limit"):
        read_topology(f)
    # numpy overflowed (warnings) in the dataflow report before the op refused the size
    f.write_text("Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, Num Filter, Strides,\n"
                 "Conv1, 100000000, 100000000, 3, 3, 3000, 16000, 1,\n")
    with pytest.raises(WorkloadError, match=r"topo.csv:2: layer 'Conv1': M x N x K = .* is beyond what one op may be"):
        read_topology(f)


def test_a_length_file_beyond_its_reader_names_the_line(tmp_path):
    f = tmp_path / "lengths.csv"
    f.write_text("output_tokens\n" + "1" * 140_000 + "\n")
    with pytest.raises(WorkloadError, match=r"lengths.csv:2: not a CSV row"):
        W.LengthDist.from_file(f, "output_tokens")
    g = tmp_path / "lengths.txt"
    g.write_text("1e400\n5\n")  # was 'internal error: OverflowError: cannot convert float infinity to integer'
    with pytest.raises(WorkloadError, match=r"lengths.txt:1: not a number: '1e400'"):
        W.LengthDist.from_file(g)


def test_an_empty_array_size_is_refused():
    # was ignored (the chip's own array simulated)
    refused(sim("gemm", "npu_128x128", "--m", "8", "--k", "8", "--n", "8", "--array", ""),
            "--array must look like ROWSxCOLS (e.g. 128x128), got ''")


def test_an_op_no_array_computes_is_named_in_a_whole_run():
    # 'chip 'edge_npu' cannot compute in bf16' did not say which op of the run asked for bf16
    import sim as S
    from sim.errors import MappingError

    # (the ops run on several threads: whichever fails first is named)
    with pytest.raises(MappingError, match=r"^op '[\w.]+': chip 'edge_npu' cannot compute in (bf16|fp8)"):
        S.run_llm("edge_npu", "tiny", phase="decode", batch=1, context_len=16, dtype="fp8")


def test_generated_arrival_options_with_a_trace_are_refused(tmp_path):
    # were ignored without a word (the trace's own arrivals and lengths ran)
    f = tmp_path / "trace.csv"
    f.write_text("arrival_s,prompt_tokens,output_tokens\n0.1,64,8\n")
    refused(sim("serve", "npu_128x128", "tiny", "-q", "--no-progress", "--trace", str(f), "--rate", "4", "--prompt", "100"),
            "--rate, --prompt describe generated arrivals; --trace replays the trace's own")


def test_a_case_file_with_a_column_twice_is_refused(tmp_path):
    # the first 'm' was read, the second ignored
    f = tmp_path / "cases.csv"
    f.write_text(HEADER.replace("m,k,n", "m,k,n,m", 1) + "gemm,bf16,64,64,64,,,,,,,,,,,,0.1\n")
    with pytest.raises(WorkloadError, match=r"cases.csv:1: column 'm' appears twice in the header"):
        read_cases(f)


def test_an_activation_the_import_does_not_know_is_refused(tmp_path):
    # hidden_act 'foo' became silu_glu without a word
    import json

    from sim.apps.single_op import import_hf_config

    cfg = {"model_type": "llama", "hidden_size": 256, "num_hidden_layers": 2, "num_attention_heads": 4,
           "vocab_size": 1000, "max_position_embeddings": 512, "intermediate_size": 512, "hidden_act": "foo"}
    f = tmp_path / "config.json"
    f.write_text(json.dumps(cfg))
    with pytest.raises(WorkloadError, match="hidden_act 'foo' is no activation this import knows"):
        import_hf_config(f)
    f.write_text(json.dumps(dict(cfg, hidden_act="silu")))
    assert import_hf_config(f)[1].activation == "silu_glu"


def test_a_dram_technology_with_a_fractional_column_timing_is_refused(tmp_path):
    # a chip's own t_ccd_s_nck had to be whole clocks; a technology file's 2.5 was taken
    text = (ROOT / "dram_technologies" / "HBM3.yaml").read_text()
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if ln.startswith("t_ccd_s_nck:"))
    lines = text.splitlines(keepends=True)
    lines[line - 1] = "t_ccd_s_nck: 2.5\n"
    f = tmp_path / "HBM3.yaml"
    f.write_text("".join(lines))
    refused(sim("check", str(f)), f"HBM3.yaml:{line}: t_ccd_s_nck: must be a whole number of clock cycles")


def test_a_pareto_colour_column_that_is_not_there_is_refused(tmp_path):
    # the points were drawn uncoloured without a word
    res = tmp_path / "results.csv"
    res.write_text("point,workload,chip,clock_mhz,seconds,error\n0,w,c,1000,1.0,\n1,w,c,2000,0.5,\n")
    refused(sim("plot", "pareto", str(res), "--x", "clock_mhz", "--y", "seconds", "--color", "nope",
                "--out", str(tmp_path / "p.png")), "no column 'nope' in the results", "--color")


def test_a_stack_count_that_is_a_flag_is_refused(tmp_path):
    # YAML's true was read as 1 byte
    text = (ROOT / "stacks" / "eager_pytorch.yaml").read_text()
    old = 'read: 2*n*eb, write: n*eb, source: "x*cos + rotate_half(x)*sin"'
    f = tmp_path / "eager_pytorch.yaml"
    f.write_text(text.replace(old, old.replace("read: 2*n*eb", "read: true"), 1))
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if "read: true" in ln)
    refused(sim("check", str(f)), f"eager_pytorch.yaml:{line}: unfused.rope.kernels.4.read: must be a number or an "
            "expression, not a flag")


def test_a_json_nested_too_deeply_names_its_file(tmp_path):
    # was "the input is nested too deeply to process", no file named
    from sim.apps.single_op import import_hf_config

    f = tmp_path / "config.json"
    f.write_text('{"a":' * 100_000 + "1" + "}" * 100_000)
    with pytest.raises(WorkloadError, match=r"config.json: not a Hugging Face config.json \(objects nested too deeply\)"):
        import_hf_config(f)
    t = tmp_path / "trace.jsonl"
    t.write_text('{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    with pytest.raises(WorkloadError, match=r"trace.jsonl:1: not a trace line \(nested too deeply\)"):
        W.load_trace(t)


def test_a_damaged_validation_checkpoint_is_not_called_another_chips(tmp_path):
    # a file whose first line is no checkpoint header was reported as "written for another chip"
    from sim.apps.validation import _read_checkpoint

    ck = tmp_path / "predictions.partial.jsonl"
    for text in ("garbage\n", '{"a": 1}\n', "[1, 2]\n"):
        ck.write_text(text)
        with pytest.raises(WorkloadError, match=r"predictions.partial.jsonl:1: not a checkpoint of `sim validate`"):
            _read_checkpoint(ck, {"checkpoint_of": {"chip": "x"}}, [])
    ck.write_text('{"checkpoint_of": {"chip": "y"}}\n')
    with pytest.raises(WorkloadError, match="written for another chip"):
        _read_checkpoint(ck, {"checkpoint_of": {"chip": "x"}}, [])


@pytest.mark.parametrize("key", ["split_k", "tile_m"])
def test_an_empty_mapping_menu_is_refused_at_its_key(key):
    # left no candidate: "op 'gemm': no mapping found", the key unnamed
    refused(sim("gemm", "h200_sxm", "--m", "64", "--k", "64", "--n", "64", "-q", "--set", f"mapping.{key}=[]"),
            f"mapping.{key}: must list at least one item")
