"""The first hour of a new user: the Python API from a plain script or stdin, commands that
must work as written, discoverable options, readable results (issue 14)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))


def sim(*args: str, check: bool = True, timeout: float = 600, cwd=ROOT) -> subprocess.CompletedProcess:
    proc = subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, env=_env(),
                          cwd=cwd, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"sim {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def python(code: str, *, stdin, tmp_path: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run ``code`` as a user would: piped to ``python -``, as a plain script file or ``python -c``."""
    code = textwrap.dedent(code)
    if stdin == "-c":
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(),
                              cwd=tmp_path, timeout=timeout)
    if stdin:
        return subprocess.run([sys.executable, "-"], input=code, capture_output=True, text=True, env=_env(),
                              cwd=tmp_path, timeout=timeout)
    script = tmp_path / "script.py"
    script.write_text(code)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=_env(), cwd=tmp_path,
                          timeout=timeout)


# --------------------------------------------------------------------------- 1. sweeps from plain scripts

SMALL_SWEEP = """
    import sim
    spec = {"name": "plain", "chip": "scalesim_32x32",
            "workloads": [{"name": "g", "kind": "gemm", "m": 64, "k": 64, "n": 64, "memory": "ideal",
                           "dtype": "%s"}],
            "parameters": {"cores.arrays.0.rows": [16, 32, 64]}, "metrics": ["cycles"]}
    df = sim.sweep(spec, jobs=2, progress=False)   # no `if __name__ == "__main__":` guard
    print("ROWS", len(df), int(df["error"].isna().sum()), list(df["cycles"]))
"""


@pytest.mark.parametrize("stdin", [True, False, "-c"], ids=["stdin", "script", "python-c"])
def test_sweep_from_a_plain_script_without_main_guard(tmp_path, stdin):
    proc = python(SMALL_SWEEP % "int8", stdin=stdin, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    line = next(ln for ln in proc.stdout.splitlines() if ln.startswith("ROWS"))
    assert line.startswith("ROWS 3 3 "), line
    cycles = json.loads(line.split(" ", 3)[3])
    assert all(c > 0 for c in cycles) and cycles[0] > cycles[2]  # a smaller array takes longer


def test_sweep_whose_every_point_failed_is_an_error(tmp_path):
    code = SMALL_SWEEP % "bf16"  # scalesim_32x32 has int8 units only: every point fails
    code = code.replace("df = sim.sweep", "try:\n        df = sim.sweep").replace(
        '    print("ROWS"', '''    except sim.SimError as exc:
        print("SIMERROR", type(exc).__name__, len(exc.df), str(exc).splitlines()[0])
        raise SystemExit(0)
    print("ROWS"''')
    proc = python(code, stdin=True, tmp_path=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "SIMERROR SweepFailedError 3 sweep plain: all 3 point(s) failed" in proc.stdout, proc.stdout


def test_cli_sweep_whose_every_point_failed_exits_2(tmp_path):
    spec = tmp_path / "fail.yaml"
    spec.write_text("name: allfail\nchip: scalesim_32x32\n"
                    "workloads: [{name: g, kind: gemm, m: 64, k: 64, n: 64, memory: ideal, dtype: bf16}]\n"
                    "parameters:\n  cores.arrays.0.rows: [16, 32]\n")
    for quiet in ([], ["-q"]):
        proc = sim("sweep", str(spec), "--out", str(tmp_path / f"out{len(quiet)}"), "-j", "1", *quiet, check=False)
        assert proc.returncode == 2, (proc.stdout, proc.stderr)
        assert "all 2 point(s) failed" in proc.stderr and "cannot compute in bf16" in proc.stderr
        assert "Traceback" not in proc.stderr


# --------------------------------------------------------------------------- 2. sim gemm's format


def test_gemm_falls_back_to_the_chips_format_and_says_so():
    proc = sim("gemm", "scalesim_32x32", "--m", "64", "--k", "128", "--n", "96", "--dataflow", "os", "--memory",
               "ideal", "--json")
    out = json.loads(proc.stdout)
    assert out["dtype"] == "int8" and out["cycles"] > 0 and out["stall_cycles"] == 0
    assert "--dtype not given: using int8" in proc.stderr
    text = sim("gemm", "scalesim_32x32", "--m", "64", "--k", "128", "--n", "96", "--memory", "ideal", "-q")
    assert "(int8)" in text.stdout and text.stderr == ""
    # an explicit format the chip lacks is still a clear error
    bad = sim("gemm", "scalesim_32x32", "--m", "64", "--k", "64", "--n", "64", "--dtype", "bf16", check=False)
    assert bad.returncode == 2 and "cannot compute in bf16" in bad.stderr


def test_simulate_gemm_default_dtype_matches_sim_run():
    import sim as simpkg

    r = simpkg.simulate_gemm("scalesim_32x32", m=64, k=128, n=96, dataflow="os", memory="ideal")
    assert r.cycles == simpkg.simulate_gemm("scalesim_32x32", m=64, k=128, n=96, dataflow="os", memory="ideal",
                                            dtype="int8").cycles


# --------------------------------------------------------------------------- 3. sim check


def test_check_accepts_every_shipped_config_of_all_four_kinds():
    proc = sim("check", "arch_configs", "dataflows", "workloads", "sweeps", "stacks", "kernel_libraries",
               "dram_technologies", "networks", "-v")
    kinds = {}
    for line in proc.stdout.splitlines():
        if line.startswith("  ") and line.rstrip().endswith(("chip", "dataflow", "model", "sweep", "stack",
                                                             "kernel library", "DRAM technology", "network")):
            path, kind = line.strip().rsplit(": ", 1)
            kinds[Path(path).parent.name + "/" + Path(path).name] = kind
    for folder, kind in (("arch_configs", "chip"), ("dataflows", "dataflow"), ("workloads", "model"),
                         ("sweeps", "sweep"), ("stacks", "stack"), ("kernel_libraries", "kernel library"),
                         ("dram_technologies", "DRAM technology"), ("networks", "network")):
        shipped = sorted(p.name for p in (ROOT / folder).glob("*.yaml"))
        assert shipped, folder
        for name in shipped:
            assert kinds.get(f"{folder}/{name}") == kind, (folder, name, proc.stdout)
    assert proc.stdout.strip().splitlines()[-1].startswith(f"ok: {len(kinds)} file(s) valid")


def test_check_reports_problems_in_each_kind(tmp_path):
    (tmp_path / "model.yaml").write_text((ROOT / "workloads" / "tiny.yaml").read_text()
                                         .replace("num_layers:", "num_hidden_layers:"))
    (tmp_path / "sweep.yaml").write_text("chip: npu_128x128\nworkloads: [{model: tiny}]\nmetrics: [tokens_per_sec]\n")
    (tmp_path / "df.yaml").write_text((ROOT / "dataflows" / "ws.yaml").read_text()
                                      .replace("stationary_operand: weight", "stationary_operand: wieght"))
    proc = sim("check", str(tmp_path / "model.yaml"), str(tmp_path / "sweep.yaml"), str(tmp_path / "df.yaml"),
               check=False)
    assert proc.returncode == 2
    err = proc.stderr
    assert "model.yaml:" in err and "'num_hidden_layers' is the Hugging Face name; this file calls it 'num_layers'" in err
    assert "sweep.yaml:3: metrics" in err and "tokens_per_sec" in err
    assert "df.yaml:" in err and "stationary_operand" in err
    assert "Traceback" not in err


# --------------------------------------------------------------------------- 4. discoverability


def _subparsers():
    import argparse

    from sim.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return parser, sub.choices


def test_every_option_of_every_subcommand_has_help():
    import argparse

    _, choices = _subparsers()
    missing = [f"sim {name} {a.option_strings or a.dest}" for name, sp in choices.items() for a in sp._actions
               if not isinstance(a, argparse._HelpAction) and not (a.help and a.help.strip()
                                                                   and a.help != argparse.SUPPRESS)]
    assert not missing, missing


def test_every_subcommand_takes_quiet_and_verbose_and_sim_has_version():
    _, choices = _subparsers()
    for name, sp in choices.items():
        opts = {o for a in sp._actions for o in a.option_strings}
        assert {"-q", "--quiet", "-v", "--verbose"} <= opts, name
    import sim as simpkg

    assert sim("--version").stdout.strip() == f"sim {simpkg.__version__}"


def test_show_prints_peaks_memories_and_ridge_points():
    out = json.loads(sim("show", "npu_128x128", "--json").stdout)
    import sim as simpkg

    chip = simpkg.load_chip("npu_128x128")
    bf16 = next(r for r in out["peaks"] if r["format"] == "bf16")
    assert bf16["peak_tflops"] == pytest.approx(chip.peak_flops("bf16") / 1e12)
    assert bf16["ridge_flop_per_byte"] == pytest.approx(chip.peak_flops("bf16") / chip.dram_peak_bytes_per_s)
    assert [m["level"] for m in out["memories"]] == [lv.name for lv in chip.memory.levels]
    text = sim("show", "scalesim_32x32").stdout
    assert "ridge" in text and "int8" in text and "bf16" not in text.split("peaks")[1]


# --------------------------------------------------------------------------- 5. results


def test_results_dataframe_takes_run_llm_ops_and_op_results():
    import sim as simpkg

    res = simpkg.run_llm("npu_128x128", "tiny", phase="decode", batch=2, context_len=64)
    df = simpkg.results_dataframe(res["ops"])
    assert len(df) == len(res["ops"]) and {"op", "kind", "total_seconds"} <= set(df.columns)
    assert len(simpkg.results_dataframe(res)) == len(df)
    r = simpkg.simulate_gemm("scalesim_32x32", m=64, k=64, n=64, memory="ideal")
    assert list(simpkg.results_dataframe([r])["cycles"]) == [r.cycles]
    assert "np." not in repr(r) and repr(r).startswith("OpResult(name='gemm'")
    assert "utilization" in (simpkg.OpResult.__doc__ or "") and "traffic_bound" in simpkg.OpResult.__doc__
    assert all(type(v) in (int, float, str, bool, dict, list, tuple, type(None)) for v in r.to_dict().values())


def test_one_number_format_in_tables():
    from sim.ir.results import format_number

    assert format_number(97_500_000.0) == "97,500,000"
    assert format_number(642747) == "642,747"
    assert format_number(2_147_483_648, "kv_cache_bytes") == "2.15 GB"
    assert format_number(8.192e11, "bandwidth_bytes_per_s") == "819 GB/s"
    assert format_number(0.0912) == "0.0912"
    text = sim("run", "npu_128x128", "tiny", "--phase", "decode", "--batch", "4", "--context-len", "512").stdout
    assert "e+" not in text, text


# --------------------------------------------------------------------------- 7. models from the command line


HF_CONFIG = {
    "architectures": ["LlamaForCausalLM"], "attention_bias": False, "hidden_act": "silu", "hidden_size": 4096,
    "intermediate_size": 14336, "max_position_embeddings": 131072, "model_type": "llama",
    "num_attention_heads": 32, "num_hidden_layers": 32, "num_key_value_heads": 8, "rms_norm_eps": 1e-05,
    "rope_theta": 500000.0, "tie_word_embeddings": False, "torch_dtype": "bfloat16", "vocab_size": 128256,
}


def test_import_model_from_a_hugging_face_config(tmp_path):
    cfg = tmp_path / "Llama-3.1-8B" / "config.json"
    cfg.parent.mkdir()
    cfg.write_text(json.dumps(HF_CONFIG))
    out = tmp_path / "llama31.yaml"
    sim("import-model", str(cfg), "--out", str(out), "--source", "https://huggingface.co/meta-llama/Llama-3.1-8B")
    import yaml

    data = yaml.safe_load(out.read_text())
    assert data["source"] == "https://huggingface.co/meta-llama/Llama-3.1-8B" and data["name"] == "Llama-3.1-8B"
    shipped = yaml.safe_load((ROOT / "workloads" / "llama3-8b.yaml").read_text())
    for key in ("hidden_size", "num_layers", "num_heads", "num_kv_heads", "ffn_size", "activation", "norm",
                "positional", "vocab_size", "tied_embeddings"):
        assert data[key] == shipped[key], key
    assert data["max_context"] == 131072
    assert sim("check", str(out)).returncode == 0
    again = sim("import-model", str(cfg), "--out", str(out), check=False)
    assert again.returncode == 2 and "--force" in again.stderr
    cfg.write_text(json.dumps({k: v for k, v in HF_CONFIG.items() if k != "num_hidden_layers"}))
    bad = sim("import-model", str(cfg), check=False)
    assert bad.returncode == 2 and "num_layers (Hugging Face: num_hidden_layers" in bad.stderr


def test_model_set_on_sim_run():
    base = ["run", "npu_128x128", "tiny", "--phase", "decode", "--context-len", "4000", "--json"]
    refused = sim(*base, check=False)
    assert refused.returncode == 2 and "max_context" in refused.stderr
    res = json.loads(sim(*base, "--model-set", "max_context=8192").stdout)
    assert res["tpot_s"] > 0
    more = json.loads(sim(*base, "--model-set", "max_context=8192", "--model-set", "num_layers=4").stdout)
    assert more["tpot_s"] > res["tpot_s"]
    chip_key = sim("run", "npu_128x128", "tiny", "--set", "max_context=8192", check=False)
    assert chip_key.returncode == 2 and "--model-set max_context" in chip_key.stderr


# --------------------------------------------------------------------------- 9. progress and compiling


def test_compiling_notice_before_the_first_compile_only(tmp_path):
    code = ("import sys\nfrom sim.cli import build_parser, _compile_notice\n"
            "_compile_notice(build_parser().parse_args(sys.argv[1:]))\n")

    def notice(*argv, cache):
        env = dict(_env(), SIM_NUMBA_CACHE_DIR=str(cache))
        return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env,
                              timeout=120).stderr

    gemm = ["gemm", "scalesim_32x32", "--m", "8", "--k", "8", "--n", "8"]
    cold = tmp_path / "cold"
    assert "compiling kernels (first run only" in notice(*gemm, cache=cold)
    assert notice(*gemm, "-q", cache=cold) == ""
    assert notice("list", "chips", cache=cold) == ""  # nothing to compile
    # a cache folder holding compiled kernels: silent
    from sim.model.kernels.jit import kernel_source_hash

    warm = tmp_path / "warm"
    (warm / kernel_source_hash() / "x").mkdir(parents=True)
    (warm / kernel_source_hash() / "x" / "engine.run-1.py311.nbi").write_bytes(b"")
    assert "compiling" not in notice(*gemm, cache=warm)


def test_model_set_in_a_sweep_workload(tmp_path):
    from sim.errors import ConfigError
    from sim.apps.sweep.plan import expand
    from sim.apps.sweep.run import load_spec

    spec = {"name": "ms", "chip": "npu_128x128",
            "workloads": [{"name": "long", "model": "tiny", "phase": "decode", "context_len": 4000,
                           "model_set": {"max_context": 8192}},
                          {"name": "plain", "model": "tiny", "phase": "decode", "context_len": 1000}]}
    long_, plain = expand(load_spec(spec))
    assert long_.task["model"]["max_context"] == 8192 and plain.task["model"]["max_context"] == 2048
    assert long_.hash != plain.hash
    # the hash of a workload without model_set is what it was before the field existed
    assert "model_set" not in plain.task["workload"]
    bad = dict(spec, workloads=[dict(spec["workloads"][0], model_set={"max_contxt": 8192})])
    with pytest.raises(ConfigError, match="did you mean 'max_context'"):
        expand(load_spec(bad))


def test_check_a_sweep_resolves_its_chip_models_and_parameter_paths(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("chip: npu_128x128\nworkloads: [{model: tinyy}]\nparameters:\n  cores.arrays.0.rowz: [1, 2]\n")
    proc = sim("check", str(spec), check=False)
    assert proc.returncode == 2
    assert "s.yaml:4: parameters.cores.arrays.0.rowz" in proc.stderr and "did you mean 'rows'" in proc.stderr
    assert "s.yaml:2: workloads.0.model: unknown model 'tinyy'; did you mean 'tiny'" in proc.stderr


# ------------------------------------------------------------------ defaults that fit the model
def test_the_smallest_model_runs_with_every_default():
    """`sim run CHIP tiny` used to fail: the 2,048-token default prompt plus 128 new tokens is
    past tiny's 2,048-token context.  A run that names no prompt takes the longest the model's
    context leaves room for, and the header says what ran; a prompt the user names is kept,
    and one too long is still the clear error it was."""
    from sim.apps.inference import run_llm
    from sim.model.workload.models import default_prompt_len, load_model_spec

    out = sim("run", "npu_128x128", "tiny", "-q")
    assert "prompt 1,920 + 128 new tokens" in out.stdout
    out = sim("run", "npu_128x128", "tiny", "--phase", "decode", "--batch", "3", "-q")
    assert "context 2,047" in out.stdout
    bad = sim("run", "npu_128x128", "tiny", "--prompt-len", "2048", check=False)
    assert bad.returncode == 2 and "max_context 2048" in bad.stderr and "Traceback" not in bad.stderr
    res = run_llm("npu_128x128", "tiny", new_tokens=8)
    assert res.prompt_len == 2048 - 8
    spec = load_model_spec("llama3-8b")
    assert default_prompt_len(spec, "generate") == 2048            # room to spare: the documented 2,048
    assert default_prompt_len(spec, "prefill", context_len=spec.max_context - 100) == 100
    assert default_prompt_len(load_model_spec("tiny"), "decode", draft_tokens=3) == 2048 - 4


def test_a_sweep_of_the_smallest_model_runs_with_the_default_prompt(tmp_path):
    """A sweep workload that names no prompt takes the same default as `sim run`, resolved
    per point before hashing: tiny's generate points with 4 new tokens are the points of an
    explicit 2,044-token prompt (same hashes, same numbers), and a model with room keeps the
    2,048 it always had (the hashes of an explicit 2,048, so stored sweeps are reused)."""
    from sim.apps.sweep import run_sweep

    def run(workload: str, name: str):
        p = tmp_path / f"{name}.yaml"
        p.write_text(textwrap.dedent(f"""\
            name: {name}
            chip: npu_128x128
            workloads:
              - {workload}
            parameters:
              workload.batch: [1, 2]
            metrics: [tokens_per_s, ttft_s]
            """))
        df, _ = run_sweep(p, out=tmp_path / name, jobs=1, progress=False)
        assert df["error"].isna().all(), df["error"].tolist()
        return df

    implicit = run("{model: tiny, phase: generate, new_tokens: 4}", "implicit")
    explicit = run("{model: tiny, phase: generate, new_tokens: 4, prompt_len: 2044}", "explicit")
    assert list(implicit["hash"]) == list(explicit["hash"])
    assert list(implicit["ttft_s"]) == list(explicit["ttft_s"])
    big = run("{model: llama3-8b, phase: decode, context_len: 64}", "big")
    big_explicit = run("{model: llama3-8b, phase: decode, context_len: 64, prompt_len: 2048}", "big-explicit")
    assert list(big["hash"]) == list(big_explicit["hash"])


@pytest.mark.parametrize("kind", ["validate", "run", "serve"])
def test_long_commands_report_progress_when_stderr_is_not_a_terminal(tmp_path, kind):
    """Issue 14: `sim validate` printed nothing for 7 min 50 s into a log; every long command
    reports progress on stderr whether or not it is a terminal (a line every 10 s in a log,
    the start and the end always), counting what the user asked for. Here stderr is a pipe."""
    if kind == "validate":
        cases = tmp_path / "cases.csv"
        cases.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,"
                         "measured_ms\ncopy,bf16,,,,,,,,,,,,,1048576,0.01\ncopy,bf16,,,,,,,,,,,,,2097152,0.02\n")
        proc = sim("validate", "h200_sxm", str(cases), "--out", str(tmp_path / "v"), "-j", "1")
        assert "validate" in proc.stderr and "2/2" in proc.stderr, proc.stderr[-800:]
    elif kind == "run":
        proc = sim("run", "npu_128x128", "tiny", "--phase", "generate", "--prompt-len", "16", "--new-tokens", "40")
        assert "decode steps" in proc.stderr and "/40" in proc.stderr, proc.stderr[-800:]
    else:
        proc = sim("serve", "npu_128x128", "tiny", "--num-requests", "8", "--prompt", "16", "--output", "4")
        assert "serve" in proc.stderr and "sim s" in proc.stderr, proc.stderr[-800:]
    # -q: results and errors only
    quiet = {"validate": ["validate", "h200_sxm", str(tmp_path / "cases.csv"), "--out", str(tmp_path / "q"), "-j", "1"],
             "run": ["run", "npu_128x128", "tiny", "--phase", "generate", "--prompt-len", "16", "--new-tokens", "40"],
             "serve": ["serve", "npu_128x128", "tiny", "--num-requests", "8", "--prompt", "16", "--output", "4"]}[kind]
    err = sim(*quiet, "-q").stderr
    assert "sim s" not in err and "decode steps" not in err and "validate:" not in err, err[-800:]
