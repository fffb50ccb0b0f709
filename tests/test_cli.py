"""The command line, end to end (as a user types it): outputs, exit codes, error messages."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"


def sim(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run([sys.executable, "-m", "sim.cli", *args], capture_output=True, text=True, env=env,
                          cwd=ROOT, timeout=600)
    if check and proc.returncode != 0:
        raise AssertionError(f"sim {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}")
    return proc


def test_gemm_json_has_the_documented_keys():
    out = json.loads(sim("gemm", "npu_128x128", "--m", "256", "--k", "512", "--n", "384", "--json").stdout)
    for key in ("cycles", "compute_cycles", "stall_cycles", "seconds", "utilization", "macs", "dram_read_bytes",
                "dram_write_bytes", "energy_pj", "mapping"):
        assert key in out, key
    assert out["macs"] == 256 * 512 * 384
    assert out["cycles"] >= out["compute_cycles"] > 0
    assert out["mapping"]["tile_m"] >= 1 and out["mapping"]["search_space"] >= 1


def test_gemm_ideal_equals_scalesim_formula_and_array_override():
    out = json.loads(sim("gemm", "scalesim_32x32", "--m", "100", "--k", "70", "--n", "300", "--array", "16x8",
                         "--dataflow", "ws", "--dtype", "int8", "--memory", "ideal", "--json").stdout)
    # WS: rows <- k, cols <- n, time <- m; folds x (2R + C + T - 2) - 1
    expected = math.ceil(70 / 16) * math.ceil(300 / 8) * (2 * 16 + 8 + 100 - 2) - 1
    assert out["cycles"] == expected
    assert out["stall_cycles"] == 0


def test_gemm_text_output_and_sparsity():
    text = sim("gemm", "npu_128x128", "--m", "64", "--k", "4096", "--n", "4096", "--dtype", "fp8",
               "--sparsity", "2:4").stdout
    assert "cycles" in text and "mapping" in text


def test_check_reports_file_line_key_and_exit_2(tmp_path):
    bad = tmp_path / "bad.yaml"
    good = (ROOT / "arch_configs" / "scalesim_32x32.yaml").read_text()
    bad.write_text(good.replace("      rows: 32 ", "      rowz: 32 "))
    proc = sim("check", str(bad), check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert f"{bad}:" in proc.stderr and "rowz" in proc.stderr and "did you mean 'rows'" in proc.stderr
    assert sim("check", str(ROOT / "arch_configs" / "h200_sxm.yaml")).returncode == 0


@pytest.mark.parametrize("args,needle", [
    (("gemm", "npu_128x128", "--m", "0", "--k", "4", "--n", "4"), "must be positive"),
    (("gemm", "no_such_chip", "--m", "4", "--k", "4", "--n", "4"), "unknown chip"),
    (("gemm", "npu_128x128", "--m", "4", "--k", "4", "--n", "4", "--dataflow", "rs"), "dataflow"),
    (("gemm", "tpu_v1", "--m", "4", "--k", "4", "--n", "4", "--dtype", "bf16"), "cannot compute in bf16"),
    (("gemm", "npu_128x128", "--m", "4", "--k", "4", "--n", "4", "--set", "cores.count=-1"), "cores.count"),
    (("run", "npu_128x128", "llama3-70b", "--phase", "decode"), "does not fit"),
    (("run", "npu_128x128", "nonexistent-model"), "unknown"),
])
def test_bad_input_is_one_clear_error(args, needle):
    proc = sim(*args, check=False)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert needle in proc.stderr


def test_list():
    assert "h200_sxm" in sim("list", "chips").stdout.split()
    assert set(sim("list", "dataflows").stdout.split()) >= {"ws", "os", "is", "rs"}
    assert "llama3-8b" in sim("list", "workloads").stdout.split()
    assert "nvfp4" in sim("list", "formats").stdout.split()


def test_python_dash_m_sim_is_the_same_front_end():
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    ok = subprocess.run([sys.executable, "-m", "sim", "list", "chips"], capture_output=True, text=True, env=env,
                        cwd=ROOT, timeout=300)
    assert ok.returncode == 0 and ok.stdout == sim("list", "chips").stdout
    bad = subprocess.run([sys.executable, "-m", "sim", "gemm", "npu_128x128", "--m", "0", "--k", "4", "--n", "4"],
                         capture_output=True, text=True, env=env, cwd=ROOT, timeout=300)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr


def test_scalesim_front_end_json_per_layer():
    lines = sim("scalesim", str(DATA / "scalesim" / "scale.cfg"), str(DATA / "scalesim" / "gemm_small.csv"),
                "--json").stdout.strip().splitlines()
    rows = [json.loads(x) for x in lines]
    assert [r["layer"] for r in rows] == ["qkv", "proj"]
    qkv = rows[0]  # M=128 N=384 K=128 on 32x32 OS: 4*12 folds x (32+32+128-2) - 1
    assert qkv["scalesim_total_cycles"] == 4 * 12 * (32 + 32 + 128 - 2) - 1
    for key in ("overall_util_pct", "mapping_efficiency_pct", "compute_util_pct", "scalesim_stall_cycles",
                "cycles", "stall_cycles"):
        assert key in qkv
    conv = sim("scalesim", str(DATA / "scalesim" / "scale.cfg"), str(DATA / "scalesim" / "conv_small.csv"),
               "--json").stdout.strip().splitlines()
    names = [json.loads(x)["layer"] for x in conv]
    assert names[:2] == ["Conv1", "Conv2"] and "DP3Channel_3" in names


def test_run_json_and_textbook_memory_wall():
    out = json.loads(sim("run", "h200_sxm", "tiny", "--phase", "decode", "--batch", "2", "--context-len", "128",
                         "--json").stdout)
    for key in ("seconds", "tokens_per_s", "tpot_s", "mfu", "mbu", "energy_j", "kv_cache_bytes", "ops"):
        assert key in out, key
    assert out["kv_cache_bytes"] == 2 * 2 * 2 * 64 * 129 * 2 * 2  # 2 x layers x kv heads x head dim x tokens x batch x 2 B


def test_validate_json_summary(tmp_path):
    cases = tmp_path / "cases.csv"
    src = (ROOT / "validation" / "measurements" / "h200_holdout.csv").read_text().splitlines()
    keep = [src[0]] + [l for l in src[1:] if l.startswith(("copy", "gemm,bf16,1,", "gemm,fp8,2,"))][:6]
    cases.write_text("\n".join(keep) + "\n")
    proc = sim("validate", "h200_sxm", str(cases), "--out", str(tmp_path / "out"), "--json")
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("cases", "median_abs_error_pct", "p90_abs_error_pct", "max_abs_error_pct", "by_kind"):
        assert key in summary
    assert summary["cases"] == len(keep) - 1
    assert (tmp_path / "out" / "scatter.png").stat().st_size > 1000
    assert (tmp_path / "out" / "predictions.csv").exists()


def test_validate_bad_case_file(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms\n"
                   "gemm,bf16,0,4,4,,,,,,,,,,,0.01\nwarp,bf16,,,,,,,,,,,,,,1\n")
    proc = sim("validate", "h200_sxm", str(bad), check=False)
    assert proc.returncode == 2
    assert f"{bad}:2: column m" in proc.stderr and f"{bad}:3: column kind" in proc.stderr


def test_binary_or_oversized_inputs_are_clear_errors(tmp_path):
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(128, 256)) * 4)
    for args in (("validate", "h200_sxm", str(junk)), ("scalesim", str(junk), str(junk)),
                 ("gemm", "npu_128x128", "--m", str(10 ** 7), "--k", str(10 ** 7), "--n", str(10 ** 7))):
        proc = sim(*args, check=False)
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and "internal error" not in proc.stderr
    assert "too large to simulate" in proc.stderr
