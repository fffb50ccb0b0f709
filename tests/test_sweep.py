"""Sweep specs, point expansion, error rows, the Python entry point and `sim sweep`."""
from __future__ import annotations

import math
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import sim.apps.sweep as sweep_mod
from sim.cli import main
from sim.errors import ConfigError, SimError
from sim.apps.sweep import load_sweep_spec, pareto_front, plan, run_sweep, sweep
from sim.apps.sweep.spec import _expand_range

TINY = """\
name: tiny-sweep
chip: npu_128x128
workloads:
  - model: tiny
    phase: decode
    batch: 2
    context_len: 64
parameters:
  cores.arrays.0.rows: [32, 64]
  memory.levels.hbm.data_rate_gbps_per_pin: [3.2, 6.4]
metrics: [tokens_per_s, tpot_s, energy_per_token_j, area_mm2, tokens_per_s_per_w, "energy_per_token_j.*"]
"""


def write(tmp_path: Path, text: str, name: str = "spec.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


# --------------------------------------------------------------------------- spec format


def test_ranges_lists_product_and_zip(tmp_path):
    p = write(tmp_path, """\
        chip: npu_128x128
        workloads: [{model: tiny}]
        parameters:
          clock_mhz: {from: 800, to: 1000, step: 100}
          zip:
            cores.arrays.0.rows: [32, 64]
            cores.arrays.0.cols: {from: 16, to: 32, num: 2}
          memory.levels.hbm.data_rate_gbps_per_pin: {from: 3.2, to: 6.4, step: 1.6}
        """)
    df = plan(p)
    assert len(df) == 3 * 2 * 3
    # the last axis varies fastest; zipped axes move together
    assert list(df["memory.levels.hbm.data_rate_gbps_per_pin"][:3]) == [3.2, 4.8, 6.4]
    assert list(df["clock_mhz"][::6]) == [800, 900, 1000]
    assert list(zip(df["cores.arrays.0.rows"][:6:3], df["cores.arrays.0.cols"][:6:3])) == [(32, 16), (64, 32)]
    assert df["error"].isna().all()
    assert df["hash"].nunique() == len(df)


def test_range_expansion_rules():
    assert _expand_range({"from": 1024, "to": 16384, "num": 5, "log": True}, "x") == [1024, 2048, 4096, 8192, 16384]
    assert _expand_range({"from": 0.5, "to": 1.0, "step": 0.1}, "x") == [0.5, 0.6, 0.7, 0.8, 0.9, 1.0]
    assert _expand_range({"from": 64, "to": 250, "step": 64}, "x") == [64, 128, 192]
    with pytest.raises(ValueError, match="exactly one of 'step' or 'num'"):
        _expand_range({"from": 1, "to": 2}, "x")
    with pytest.raises(ValueError, match="repeated values"):
        _expand_range({"from": 1, "to": 2, "num": 5}, "x")
    with pytest.raises(ValueError, match="did you mean 'step'"):
        _expand_range({"from": 1, "to": 2, "stp": 1}, "x")


@pytest.mark.parametrize("body, line, needle", [
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparamters: {clock_mhz: [1]}\n", 3, "did you mean 'parameters'"),
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  clock_mhz: {from: 1, to: 2, stp: 1}\n", 4,
     "unknown range key 'stp'"),
    # a bare scalar in a flow mapping is a key ({..., 12} has the key 12): an internal error before, then
    # "unknown range key '12'"; the reader now says what YAML made of it (a number is no key name)
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  clock_mhz: {from: 1, to: 2, 12}\n", 4,
     "clock_mhz.12: a key must be a name; YAML reads '12' as a number"),
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  zip:\n    clock_mhz: [1, 2]\n"
     "    cores.count: [1, 2, 3]\n", 4, "same number of values"),
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  cores.arrays.0.rowz: [32, 64]\n", 4,
     "parameter 'cores.arrays.0.rowz' does not exist"),
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  memory.levels.sram9.capacity_kib: [1]\n", 4,
     "no list item 'sram9'"),
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  workload.batchsize: [1]\n", 4,
     "did you mean 'workload.batch'"),
    ("chip: npu_128x128\nworkloads: [{model: tiny}]\nmetrics: [tokens_per_sec]\n", 3, "did you mean 'tokens_per_s'"),
    ("chip: npu_128x128\nworkloads:\n  - model: no-such-model\n", 3, "unknown model 'no-such-model'"),
    ("chip: npu_128x128\nworkloads:\n  - kind: gemm\n    m: 8\n    k: 8\n", 3, "needs n"),
])
def test_bad_spec_names_file_line_and_key(tmp_path, body, line, needle):
    p = write(tmp_path, body)
    with pytest.raises(ConfigError) as ei:
        plan(p)
    text = str(ei.value)
    assert needle in text
    assert f"{p}:{line}" in text


def test_unknown_chip_in_spec(tmp_path):
    p = write(tmp_path, "chip: npu_128x12\nworkloads: [{model: tiny}]\n")
    with pytest.raises(SimError, match="did you mean 'npu_128x128'"):
        plan(p)


# --------------------------------------------------------------------------- running


def test_invalid_and_failing_points_become_rows(tmp_path):
    p = write(tmp_path, """\
        chip: npu_128x128
        workloads:
          - {model: tiny, phase: decode, batch: 2, context_len: 64}
        parameters:
          cores.arrays.0.rows: [32, -8]
          workload.batch: [2, 100000000]
        metrics: [tokens_per_s]
        """)
    df = sweep(p, jobs=1, progress=False)
    assert len(df) == 4
    ok = df[df["error"].isna()]
    assert list(ok["point"]) == [0]
    assert ok["tokens_per_s"].iloc[0] > 0
    # an invalid value names the parameter and the value
    bad = df.loc[df["cores.arrays.0.rows"] == -8, "error"]
    assert all("parameter cores.arrays.0.rows = -8" in e for e in bad)
    # a point that cannot run (does not fit the chip's DRAM) keeps its message; the sweep went on
    nofit = df.loc[(df["cores.arrays.0.rows"] == 32) & (df["workload.batch"] == 100000000), "error"].iloc[0]
    assert "does not fit" in nofit
    assert math.isnan(df.loc[1, "tokens_per_s"])


def test_invalid_workload_value_names_parameter(tmp_path):
    p = write(tmp_path, """\
        chip: npu_128x128
        workloads: [{model: tiny, batch: 2, context_len: 64}]
        parameters:
          workload.batch: [0]
        """)
    df = plan(p)
    assert "parameter workload.batch = 0" in df["error"].iloc[0]


def test_sweep_python_api_columns_and_facade_call(tmp_path):
    p = write(tmp_path, TINY)
    import sim

    assert not callable(sweep_mod), "the sweep package and the facade's sim.sweep() no longer share a name"
    df = sim.sweep(p, jobs=1, progress=False)
    assert list(df["point"]) == [0, 1, 2, 3]
    cols = list(df.columns)
    assert cols[:5] == ["point", "workload", "chip", "cores.arrays.0.rows", "memory.levels.hbm.data_rate_gbps_per_pin"]
    for m in ("tokens_per_s", "tpot_s", "energy_per_token_j", "area_mm2", "tokens_per_s_per_w", "error", "hash"):
        assert m in cols
    comps = [c for c in cols if c.startswith("energy_per_token_j.")]
    assert {"energy_per_token_j.mac", "energy_per_token_j.hbm", "energy_per_token_j.vmem"} <= set(comps)
    # the components add up to the total energy per token
    total = df[comps].sum(axis=1)
    assert ((total - df["energy_per_token_j"]).abs() <= 1e-9 * df["energy_per_token_j"]).all()
    assert df["error"].isna().all()
    assert df.attrs["parameters"] == ["cores.arrays.0.rows", "memory.levels.hbm.data_rate_gbps_per_pin"]
    # a bigger array costs area
    a = df.groupby("cores.arrays.0.rows")["area_mm2"].first()
    assert a[64] > a[32]
    assert (df["tokens_per_s_per_w"] > 0).all()


def test_gemm_workload_and_workload_axis(tmp_path):
    p = write(tmp_path, """\
        chip: npu_128x128
        workloads:
          - {kind: gemm, m: 64, k: 128, n: 128}
        parameters:
          workload.dtype: [bf16, fp8]
        metrics: [seconds, tflops, utilization, tflops_per_w, area_mm2]
        """)
    df = sweep(p, jobs=1, progress=False)
    assert df["error"].isna().all(), df["error"].tolist()
    assert list(df["workload"]) == ["gemm-64x128x128"] * 2
    assert (df["tflops"] > 0).all()


def test_pool_equals_inline_and_resume_reuses(tmp_path):
    p = write(tmp_path, TINY)
    inline = sweep(p, jobs=1, progress=False)
    df, st = run_sweep(p, out=tmp_path / "store", jobs=2, progress=False)
    pd.testing.assert_frame_equal(inline, df)
    assert (st.new, st.reused) == (4, 0)
    df2, st2 = run_sweep(p, out=tmp_path / "store", jobs=2, progress=False)
    assert (st2.new, st2.reused) == (0, 4)
    pd.testing.assert_frame_equal(df, df2)
    assert (tmp_path / "store" / "results.csv").is_file()


def test_pareto_front():
    df = pd.DataFrame({"area_mm2": [1, 2, 3, 2, 4, 1], "tokens_per_s": [1, 3, 2, 3, 5, 0.5],
                       "error": [None, None, None, None, None, "boom"]})
    front = pareto_front(df, x="area_mm2", y="tokens_per_s")
    assert list(front) == [True, True, False, True, True, False]


def test_cli_sweep_dry_run_run_and_csv(tmp_path, capsys):
    p = write(tmp_path, TINY)
    assert main(["sweep", str(p), "--dry-run"]) == 0
    assert "4 point(s)" in capsys.readouterr().out
    out = tmp_path / "res"
    assert main(["sweep", str(p), "--out", str(out), "-j", "1", "--csv", str(tmp_path / "x.csv"), "-q"]) == 0
    csv = pd.read_csv(tmp_path / "x.csv")
    assert len(csv) == 4 and "tokens_per_s" in csv
    assert main(["sweep", str(p), "--out", str(out), "-j", "1"]) == 0
    text = capsys.readouterr().out
    assert "0 simulated, 4 reused" in text and "Pareto front" in text


def test_cli_bad_spec_exit_2(tmp_path, capsys):
    p = write(tmp_path, "chip: npu_128x128\nworkloads: [{model: tiny}]\nparameters:\n  cores.arrays.0.rowz: [1]\n")
    assert main(["sweep", str(p), "--dry-run"]) == 2
    assert f"{p}:4" in capsys.readouterr().err


def test_shipped_sweep_spec_is_valid():
    root = Path(__file__).resolve().parents[1]
    for spec in sorted((root / "sweeps").glob("*.yaml")):
        loaded = load_sweep_spec(spec)
        df = plan(loaded)
        assert df["error"].isna().all(), spec
    big = plan(root / "sweeps" / "llama3-8b-decode.yaml")
    assert len(big) == 1000


def test_chip_axis_and_base_set(tmp_path):
    p = write(tmp_path, """\
        chip: npu_128x128
        set: {clock_mhz: 900}
        workloads: [{kind: gemm, m: 64, k: 128, n: 128, dtype: int8}]
        parameters:
          chip: [npu_128x128, edge_npu]
        metrics: [seconds, area_mm2]
        """)
    df = sweep(p, jobs=1, progress=False)
    assert list(df["chip"]) == ["npu_128x128", "edge_npu"]
    assert df["error"].isna().all(), df["error"].tolist()
    assert df["area_mm2"].iloc[0] != df["area_mm2"].iloc[1]
    # the base set applies to every chip: the clock is part of each point's key
    df2 = sweep(p.parent / p.name, jobs=1, progress=False, overrides=["clock_mhz=1000"])
    assert (df2["hash"] != df["hash"]).all()
    assert (df2["seconds"] < df["seconds"]).all()


def test_progress_bar_has_rate_and_eta(tmp_path, capsys):
    p = write(tmp_path, TINY)
    sweep(p, jobs=1, progress=True)
    err = capsys.readouterr().err
    assert "sweep tiny-sweep" in err and "4/4" in err
    assert "pt/s" in err or "s/pt" in err   # rate
    assert "<" in err                        # elapsed<remaining (ETA)


def test_spec_from_dict_and_model():
    from sim.apps.sweep import SweepSpec

    d = {"chip": "npu_128x128", "set": ["clock_mhz=900"], "workloads": [{"kind": "gemm", "m": 32, "k": 64, "n": 64}],
         "parameters": {"cores.count": [1, 2]}}
    a = sweep(d, jobs=1, progress=False)
    b = sweep(SweepSpec.model_validate(d), jobs=1, progress=False)
    pd.testing.assert_frame_equal(a, b)
    assert a["seconds"].iloc[1] < a["seconds"].iloc[0]
    with pytest.raises(ConfigError, match="<sweep spec>"):
        sweep({**d, "paramters": {}}, jobs=1, progress=False)
