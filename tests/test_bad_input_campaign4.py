"""Bad input found by mutating the shipped YAML files at random (session 25: 550 mutated chip and
model files run through `sim gemm` / `sim run`, then every other kind through `sim check`;
session 26: byte-level mutations of every input kind, random option values and a Python API
fuzz): each case exits 2 with one message naming the file, line and key (the Python API: a
SimError) - never an internal error."""
from __future__ import annotations

import re

import pytest

# the CLI runner and the refusal check of the first campaign (tests/ is on the path under pytest)
from test_bad_input import ROOT, refused, sim  # noqa: F401


@pytest.mark.parametrize("value", ["[1, 2]", "{a: 1}", "{}"])
def test_a_memory_level_kind_that_is_a_list_or_a_mapping(tmp_path, value):
    # was 'internal error: TypeError: unhashable type' (the level rules looked the value up as a kind name)
    text = (ROOT / "arch_configs" / "edge_npu.yaml").read_text()
    assert "\n    - kind: dram\n" in text
    d = tmp_path / "arch_configs"
    d.mkdir()
    f = d / "edge_npu.yaml"
    f.write_text(text.replace("\n    - kind: dram\n", f"\n    - kind: {value}\n", 1))
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if ln == f"    - kind: {value}")
    refused(sim("check", str(f)), f"edge_npu.yaml:{line}: memory.levels.1.kind: unknown kind",
            "(valid: registers, sram, dram)")


def test_a_list_with_too_few_values_says_so(tmp_path):
    # was 'missing required key' (a list position read as a key of a mapping)
    proc = sim("gemm", "h200_sxm", "--m", "64", "--k", "64", "--n", "64", "-q",
               "--set", 'mapping.attention_tiles={"tensor_cores": [128]}')
    refused(proc, "mapping.attention_tiles.tensor_cores.1: too few values: nothing at position 1")
    assert "missing required key" not in proc.stderr


def test_a_control_character_in_a_config_file_names_its_line_and_column(tmp_path):
    # was 'internal error: ReaderError' (PyYAML's reader refuses it before parsing starts)
    text = (ROOT / "arch_configs" / "edge_npu.yaml").read_text()
    lines = text.splitlines(keepends=True)
    n = next(i for i, ln in enumerate(lines) if ln.startswith("clock_mhz:"))
    lines[n] = lines[n].rstrip("\n") + "\x07\n"
    f = tmp_path / "edge_npu.yaml"
    f.write_text("".join(lines))
    col = len(lines[n].rstrip("\n"))
    for proc in (sim("check", str(f)), sim("gemm", str(f), "--m", "8", "--k", "8", "--n", "8", "-q")):
        refused(proc, f"edge_npu.yaml:{n + 1}: character U+0007 at column {col} is not allowed in YAML")


def test_a_control_character_in_a_set_value_is_not_an_internal_error():
    proc = sim("gemm", "edge_npu", "--m", "8", "--k", "8", "--n", "8", "-q", "--set", "name=x\x07")
    assert "internal error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def _results_csv(tmp_path, tokens_per_s_of_point_1: str):
    f = tmp_path / "results.csv"
    f.write_text("point,workload,chip,cores.arrays.0.rows,memory.levels.vmem.capacity_kib,tokens_per_s,area_mm2,error\n"
                 "0,decode,npu_128x128,64,1024,100.5,50.0,\n"
                 f"1,decode,npu_128x128,128,1024,{tokens_per_s_of_point_1},80.0,\n"
                 "2,decode,npu_128x128,64,2048,300.25,60.0,\n"
                 "3,decode,npu_128x128,128,2048,310.0,90.0,\n")
    return f


@pytest.mark.parametrize("kind", ["pareto", "heatmap"])
def test_a_results_table_with_a_word_where_a_metric_goes_names_column_and_point(tmp_path, kind):
    # was 'internal error: ValueError: could not convert string to float' (a damaged or hand-edited
    # results file; found by byte-level mutations of a sweep's results.csv)
    refused(sim("plot", kind, str(_results_csv(tmp_path, "2x0")), "--out", str(tmp_path / "f.png")),
            "results.csv: column 'tokens_per_s' holds '2x0' (point 1), not a number")


@pytest.mark.parametrize("axes", [("--x", "tokens_per_s"), ("--x", "cores.arrays.0.rows", "--y", "cores.arrays.0.rows")])
def test_a_heat_map_on_one_column_twice_says_so(tmp_path, axes):
    # was 'internal error: ValueError: Grouper for ... not 1-dimensional' (option-value fuzzing)
    proc = sim("plot", "heatmap", str(_results_csv(tmp_path, "200.0")), "--out", str(tmp_path / "f.png"), *axes)
    refused(proc, "results.csv: a heat map needs three different columns")


def test_a_gemm_larger_than_the_chips_dram_is_simulated_not_an_internal_error():
    # was 'internal error: ValueError: transfers must lie in [0, 4294967296)': the mapper's DRAM
    # pattern probe laid 8 rows of a 1 TB weight tensor out past the end of edge_npu's 4 GiB
    proc = sim("--no-cache", "gemm", "edge_npu", "--m", "64", "--k", "64", "--n", str(1 << 40), "-q")
    assert proc.returncode == 0, proc.stderr
    assert "cycles" in proc.stdout


def test_an_infinite_dimension_is_a_shape_error():
    # was OverflowError from int(inf) in the Python API
    from sim import Gemm
    from sim.errors import ShapeError
    with pytest.raises(ShapeError, match="m must be a whole number, got inf"):
        Gemm("g", float("inf"), 64, 64)


@pytest.mark.parametrize("call,message", [
    (lambda sim_: sim_.simulate_gemm(5, 8, 8, 8), "a chip is a ChipSpec, a name from arch_configs/ or a YAML path, got 5"),
    (lambda sim_: sim_.run_llm(None, "tiny"), "a chip is a ChipSpec, a name from arch_configs/ or a YAML path, got None"),
    (lambda sim_: sim_.run_llm("edge_npu", None), "a model is a name from workloads/, a YAML path or a ModelSpec, got None"),
    (lambda sim_: sim_.load_chip("edge_npu", overrides=5), "chip overrides are 'dotted.path=value' strings or a mapping"),
    (lambda sim_: sim_.run_llm("edge_npu", "tiny", phase="decode", batch=1.5), "batch must be a whole number >= 1, got 1.5"),
    (lambda sim_: sim_.run_network("eyeriss", None), "a network is a name from networks/, a YAML path or a NetworkSpec"),
    (lambda sim_: sim_.serve(None, "tiny"), "a chip is a ChipSpec, a name from arch_configs/ or a YAML path, got None"),
    (lambda sim_: sim_.sweep(str(ROOT / "sweeps" / "llama3-8b-quick.yaml"), jobs=float("inf")),
     "jobs must be a whole number >= 1, got inf"),
])
def test_the_python_api_refuses_arguments_of_the_wrong_type_with_a_sim_error(call, message):
    # were AttributeError / TypeError from deep inside (a Python API fuzz: 300 random calls of
    # simulate_gemm, run_llm, load_chip and simulate, 150 of serve, run_network and sweep, now raise
    # only SimError or succeed)
    import sim as sim_
    from sim.errors import SimError
    with pytest.raises(SimError, match=re.escape(message)):
        call(sim_)
