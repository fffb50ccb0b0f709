"""Tests of the chip schema, the shipped chips, the loader's error reporting and the registry."""
from __future__ import annotations

import math
import re
from pathlib import Path

import pydantic
import pytest

from sim.apps.check import check_files
from sim.spec import (
    ChipSpec,
    DramLevel,
    SramLevel,
    chips_dir,
    list_chips,
    load_chip,
    resolve_chip_path,
)
from sim.errors import ConfigError, MappingError, UnknownNameError

SHIPPED = {"scalesim_32x32", "tpu_v1", "eyeriss", "edge_npu", "blackwell_b200", "npu_128x128"}


# --------------------------------------------------------------------------- helpers


def chip_text(name: str) -> str:
    return (chips_dir() / f"{name}.yaml").read_text()


def write(tmp_path: Path, text: str, name: str = "chip.yaml") -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


def edit(text: str, old: str, new: str) -> str:
    assert text.count(old) >= 1, f"test setup: {old!r} not in the file"
    return text.replace(old, new, 1)


def line_of(text: str, fragment: str) -> int:
    """1-based line of the first line containing ``fragment``."""
    for i, line in enumerate(text.splitlines(), start=1):
        if fragment in line:
            return i
    raise AssertionError(f"test setup: {fragment!r} not found")


def problems_of(path: Path, overrides=None) -> list:
    with pytest.raises(ConfigError) as info:
        load_chip(path, overrides)
    return info.value.problems


MINIMAL = """\
schema_version: 1
name: tiny
clock_mhz: 1000
cores:
  count: 2
  arrays:
    - name: a
      rows: 4
      cols: 8
      macs_per_pe_per_cycle: {bf16: 1, fp8: 2}
  vector_unit: {lanes: 16}
memory:
  levels:
    - kind: sram
      name: spad
      scope: core
      capacity_kib: 64
      bytes_per_cycle: 32
    - kind: dram
      name: dram
      technology: DDR4
      capacity_gib: 8
      channels: 1
      bus_width_bits: 64
      data_rate_gbps_per_pin: 3.2
      burst_length: 8
      banks_per_pseudo_channel: 16
      row_buffer_bytes: 8192
      interleave_bytes: 256
      t_rcd_ns: 13.75
      t_rp_ns: 13.75
      t_cl_ns: 13.75
      t_ras_ns: 32.5
      t_rrd_ns: 2.5
      t_faw_ns: 21.25
      t_rfc_ns: 350
      t_refi_ns: 7800
      t_wr_ns: 15
noc:
  bandwidth_bytes_per_cycle: 16
"""


# --------------------------------------------------------------------------- shipped chips


def test_all_shipped_chips_are_listed():
    assert SHIPPED <= set(list_chips())


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_shipped_chip_loads(name):
    chip = load_chip(name)
    assert isinstance(chip, ChipSpec)
    assert chip.name == name
    assert chip.source_path == chips_dir() / f"{name}.yaml"
    assert chip.memory.levels[-1] is chip.dram
    assert chip.core_srams, "every chip needs a per-core SRAM"


@pytest.mark.parametrize("name", sorted(SHIPPED))
def test_every_number_in_shipped_chips_is_commented(name):
    """Every line that sets a number or a flag carries a comment (its source, or why it is assumed)."""
    missing = []
    for i, line in enumerate(chip_text(name).splitlines(), start=1):
        m = re.match(r"^\s*(?:-\s+)?([a-z_0-9]+):\s*(.*)$", line.split("#", 1)[0])
        if not m or m.group(1) == "schema_version":
            continue
        if re.match(r"^[-+.0-9\[{]|^(true|false)$", m.group(2).strip()) and "#" not in line:
            missing.append(f"{i}: {line.strip()}")
    assert not missing, "values without a source comment:\n" + "\n".join(missing)


def test_tpu_v1_peak():
    chip = load_chip("tpu_v1")
    assert chip.peak_macs_per_cycle("int8") == 65536
    assert chip.peak_flops("int8") == pytest.approx(65536 * 2 * 700e6)  # 91.75e12, "92 TOPS"
    assert round(chip.peak_flops("int8") / 1e12) == 92
    assert chip.dram_peak_bytes_per_s == pytest.approx(2 * 8 * 2.133e9)  # 34.1 GB/s
    assert chip.dram_access_bytes == 64
    with pytest.raises(MappingError):
        chip.peak_flops("bf16")  # int8-only array


def test_dtype_peak_flops_is_the_format_class_peak_or_the_best_the_chip_has():
    # the MFU denominator of sim run, sweeps and serving: the activation format's class...
    npu = load_chip("npu_128x128")
    assert npu.dtype_peak_flops("bf16") == npu.peak_flops("bf16")
    assert npu.dtype_peak_flops("fp8") == npu.peak_flops("fp8")
    # ...or, where no array runs it (int8-only TPU v1 asked for bf16), the chip's best class
    tpu = load_chip("tpu_v1")
    assert tpu.dtype_peak_flops("bf16") == tpu.peak_flops("int8")


@pytest.mark.parametrize("rate_class, dense_pflops", [
    ("fp4", 9.0), ("fp8", 4.5), ("int8", 4.5), ("bf16", 2.25), ("fp16", 2.25), ("tf32", 1.1),
])
def test_b200_dense_and_sparse_peaks_match_datasheet(rate_class, dense_pflops):
    chip = load_chip("blackwell_b200")
    tol = 0.03 if rate_class == "tf32" else 1e-3  # NVIDIA rounds TF32 1.125 to 1.1
    assert chip.peak_flops(rate_class) / 1e15 == pytest.approx(dense_pflops, rel=tol)
    assert chip.peak_flops(rate_class, sparse=True) == pytest.approx(2 * chip.peak_flops(rate_class))


def test_b200_memory_and_structure():
    chip = load_chip("blackwell_b200")
    assert chip.cores.count == 148
    assert chip.dram_peak_bytes_per_s == pytest.approx(8e12)
    assert chip.dram.capacity_gib == 192
    # the per-SM tile buffer: 228 KiB of shared memory (CUDA C++ Programming Guide, compute
    # capability 10.0) plus 256 KiB of tensor memory, as h200_sxm counts shared memory + registers
    assert chip.core_srams[0].capacity_kib == 228 + 256
    assert [lv.name for lv in chip.chip_srams] == ["l2"]
    assert chip.registers is not None and chip.registers.name == "tmem"
    assert chip.interconnect is not None
    assert chip.interconnect.chip_bytes_per_s == pytest.approx(900e9)  # 1.8 TB/s both directions


def test_other_shipped_peaks():
    assert load_chip("scalesim_32x32").peak_flops("int8") == pytest.approx(32 * 32 * 2 * 1e9)
    assert load_chip("eyeriss").peak_flops("bf16") == pytest.approx(168 * 2 * 200e6)  # 67.2 GOPS
    assert load_chip("edge_npu").peak_flops("int8") == pytest.approx(2048 * 2 * 1e9)
    npu = load_chip("npu_128x128")
    assert npu.peak_flops("bf16") == pytest.approx(4 * 128 * 128 * 2 * 1050e6)  # 137.6 TFLOPS
    assert npu.peak_flops("fp8") == pytest.approx(2 * npu.peak_flops("bf16"))
    assert npu.peak_flops("bf16", sparse=True) == pytest.approx(2 * npu.peak_flops("bf16"))
    assert npu.dram_peak_bytes_per_s == pytest.approx(819.2e9)
    assert npu.dram.access_bytes == 32
    assert load_chip("edge_npu").dram_peak_bytes_per_s == pytest.approx(25.6e9)


def test_rate_fallback_along_wider_classes(tmp_path):
    chip = load_chip(write(tmp_path, MINIMAL))
    arr = chip.array()
    assert arr.rate_for("fp8") == (2, "fp8")
    assert arr.rate_for("fp4") == (2, "fp8")  # fp4 widens to fp8
    assert arr.rate_for("nvfp4") == (2, "fp8")  # a format name resolves to its rate class
    assert arr.rate_for("fp16") == (1, "bf16")  # fp16 widens to bf16
    with pytest.raises(MappingError):
        arr.rate_for("int8")  # int8 never widens to a float class
    with pytest.raises(MappingError):
        chip.peak_flops("int8")
    with pytest.raises(UnknownNameError):
        arr.rate_for("fp7")
    assert chip.peak_macs_per_cycle("fp4") == 2 * 4 * 8 * 2
    assert chip.peak_macs_per_cycle("fp8", sparse=True) == chip.peak_macs_per_cycle("fp8")  # no 2:4 units


def test_derived_helpers(tmp_path):
    chip = load_chip(write(tmp_path, MINIMAL))
    assert chip.clock_hz == 1e9
    assert chip.cycles_to_seconds(2000) == pytest.approx(2e-6)
    assert chip.array().default_dataflow == "ws"  # first of the default dataflows
    assert chip.array().dataflows == ("ws", "os", "is", "rs")
    assert chip.registers is None
    assert chip.chip_srams == ()
    d = chip.dram
    assert isinstance(d, DramLevel)
    assert d.access_bytes == 64
    assert d.peak_bytes_per_s == pytest.approx(25.6e9)
    assert d.burst_ns == pytest.approx(2.5)
    assert d.effective_t_ccd_ns == pytest.approx(2.5)  # defaults to one burst
    assert isinstance(chip.core_srams[0], SramLevel)
    assert chip.core_srams[0].capacity_bytes == 64 * 1024
    assert chip.cores.vector_unit.effective_special_ops_per_cycle == 4  # lanes / 4
    with pytest.raises(UnknownNameError):
        chip.array("nope")


def test_specs_are_frozen():
    chip = load_chip("tpu_v1")
    with pytest.raises(pydantic.ValidationError):
        chip.clock_mhz = 1.0
    with pytest.raises(pydantic.ValidationError):
        chip.cores.arrays[0].rows = 1
    with pytest.raises(TypeError):
        chip.cores.arrays[0] = None  # tuples, not lists


def test_specs_compare_and_hash_by_value(tmp_path):
    a, b = load_chip("npu_128x128"), load_chip("npu_128x128")
    assert a == b and hash(a) == hash(b)
    assert {a: 1}[b] == 1
    c = load_chip("npu_128x128", ["clock_mhz=1000"])
    assert c != a
    # same values from a different file: equal (provenance is not part of the value)
    copy = write(tmp_path, chip_text("npu_128x128"), "copy.yaml")
    assert load_chip(copy) == a


def test_to_dict_round_trips():
    chip = load_chip("blackwell_b200")
    again = ChipSpec.model_validate(chip.to_dict())
    assert again == chip


def test_scientific_notation_reads_as_number(tmp_path):
    chip = load_chip(write(tmp_path, edit(MINIMAL, "clock_mhz: 1000", "clock_mhz: 1.2e3")))
    assert chip.clock_mhz == 1200.0
    chip = load_chip(write(tmp_path, edit(MINIMAL, "t_refi_ns: 7800", "t_refi_ns: 7.8E3"), "b.yaml"))
    assert chip.dram.t_refi_ns == 7800.0


# --------------------------------------------------------------------------- errors


def test_unknown_key_reports_file_line_path_valid_keys_and_hint(tmp_path):
    text = edit(chip_text("npu_128x128"), "      banks: 1 ", "      bankz: 1 ")
    path = write(tmp_path, text)
    with pytest.raises(ConfigError) as info:
        load_chip(path)
    probs = info.value.problems
    assert len(probs) == 1
    p = probs[0]
    message = str(info.value)
    assert f"{path}:{line_of(text, 'bankz:')}: memory.levels.0.bankz: unknown key 'bankz'" in message
    assert "did you mean 'banks'?" in message and "valid keys: kind, name, scope, capacity_kib" in message
    assert p.file == str(path)
    assert p.line == line_of(text, "bankz:")
    assert p.path == "memory.levels.0.bankz"
    assert "did you mean 'banks'" in p.message
    # the valid keys are those of an sram level (the tagged union's member), not of dram
    assert "capacity_kib" in p.valid_keys and "scope" in p.valid_keys
    assert "t_rcd_ns" not in p.valid_keys
    text_out = p.format()
    assert f"{path}:{p.line}:" in text_out and "valid keys:" in text_out


def test_unknown_key_at_top_level_and_in_dram_level(tmp_path):
    text = edit(MINIMAL, "clock_mhz: 1000\n", "clock_mhz: 1000\nclock_mz: 5\n")
    text = edit(text, "      t_wr_ns: 15\n", "      t_wr_ns: 15\n      t_rcdd_ns: 3\n")
    path = write(tmp_path, text)
    probs = {p.path: p for p in problems_of(path)}
    assert set(probs) == {"clock_mz", "memory.levels.1.t_rcdd_ns"}
    assert probs["clock_mz"].line == line_of(text, "clock_mz")
    assert "did you mean 'clock_mhz'" in probs["clock_mz"].message
    assert "t_rcd_ns" in probs["memory.levels.1.t_rcdd_ns"].valid_keys
    assert probs["memory.levels.1.t_rcdd_ns"].line == line_of(text, "t_rcdd_ns")


def test_missing_key_lists_valid_keys(tmp_path):
    text = edit(MINIMAL, "      bytes_per_cycle: 32\n", "")
    probs = problems_of(write(tmp_path, text))
    assert [p.path for p in probs] == ["memory.levels.0.bytes_per_cycle"]
    assert "missing" in probs[0].message
    assert "bytes_per_cycle" in probs[0].valid_keys


def test_several_problems_reported_at_once(tmp_path):
    text = MINIMAL
    text = edit(text, "      rows: 4\n", "      rows: abc\n")
    text = edit(text, "capacity_kib: 64", "capacity_kib: -1")
    text = edit(text, "  vector_unit: {lanes: 16}", "  vector_unit: {lanes: 16, lane: 2}")
    text = edit(text, "- kind: dram\n      name: dram", "- kind: dram\n      name: spad")  # duplicate name
    probs = problems_of(write(tmp_path, text))
    paths = {p.path for p in probs}
    assert {"cores.arrays.0.rows", "memory.levels.0.capacity_kib", "cores.vector_unit.lane",
            "memory.levels.1.name"} <= paths
    assert len(probs) == 4


def test_wrong_type_names_key_and_value(tmp_path):
    text = edit(MINIMAL, "      rows: 4\n", '      rows: "abc"\n')
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "cores.arrays.0.rows"
    assert "'abc'" in p.message and "integer" in p.message
    assert p.line == line_of(text, "rows:")


def test_boolean_is_not_a_number(tmp_path):
    (p,) = problems_of(write(tmp_path, edit(MINIMAL, "      rows: 4\n", "      rows: yes\n")))
    assert p.path == "cores.arrays.0.rows"


def test_negative_value(tmp_path):
    text = edit(MINIMAL, "t_rcd_ns: 13.75", "t_rcd_ns: -2")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "memory.levels.1.t_rcd_ns"
    assert "greater than or equal to 0" in p.message and "-2" in p.message
    assert p.line == line_of(text, "t_rcd_ns")


def test_partition_over_capacity(tmp_path):
    text = edit(MINIMAL, "      capacity_kib: 64\n",
                "      capacity_kib: 64\n      partition: {input_kib: 32, weight_kib: 32, output_kib: 8}\n")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "memory.levels.0.partition"
    assert "capacity_kib" in p.message and "72" in p.message
    assert p.line == line_of(text, "partition:")


def test_partition_within_capacity_is_accepted(tmp_path):
    text = edit(MINIMAL, "      capacity_kib: 64\n",
                "      capacity_kib: 64\n      partition: {input_kib: 32, weight_kib: 16, output_kib: 16}\n")
    sram = load_chip(write(tmp_path, text)).core_srams[0]
    assert sram.operand_bytes("weight") == 16 * 1024


def _swap_levels(text: str) -> str:
    """Move the sram level after the dram level."""
    start = text.index("    - kind: sram")
    mid = text.index("    - kind: dram")
    end = text.index("noc:")
    return text[:start] + text[mid:end] + text[start:mid] + text[end:]


def test_dram_not_last(tmp_path):
    text = _swap_levels(MINIMAL)
    probs = problems_of(write(tmp_path, text))
    assert [p.path for p in probs] == ["memory.levels.0.kind"]
    assert "last" in probs[0].message
    assert probs[0].line == line_of(text, "- kind: dram")


def test_dram_missing_and_no_core_sram(tmp_path):
    text = MINIMAL[: MINIMAL.index("    - kind: dram")] + MINIMAL[MINIMAL.index("noc:"):]
    text = edit(text, "scope: core", "scope: chip")
    msgs = " | ".join(p.message for p in problems_of(write(tmp_path, text)))
    assert "kind: dram is required" in msgs
    assert "scope: core is required" in msgs


def test_duplicate_level_names(tmp_path):
    text = edit(MINIMAL, "- kind: dram\n      name: dram", "- kind: dram\n      name: spad")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "memory.levels.1.name"
    assert "duplicate level name 'spad'" in p.message


def test_registers_must_be_first(tmp_path):
    text = edit(MINIMAL, "    - kind: dram\n", "    - kind: registers\n      name: rf\n      bytes_per_pe: 4\n    - kind: dram\n")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "memory.levels.1.kind" and "first" in p.message


def test_unknown_level_kind_suggests(tmp_path):
    text = edit(MINIMAL, "- kind: sram", "- kind: sramm")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "memory.levels.0.kind"
    assert "did you mean 'sram'" in p.message and "registers, sram, dram" in p.message
    assert p.line == line_of(text, "kind: sramm")


def test_default_dataflow_must_be_listed(tmp_path):
    text = edit(MINIMAL, "      macs_per_pe_per_cycle: {bf16: 1, fp8: 2}\n",
                "      macs_per_pe_per_cycle: {bf16: 1, fp8: 2}\n      dataflows: [ws, os]\n      default_dataflow: rs\n")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "cores.arrays.0.default_dataflow" and "ws, os" in p.message


def test_unknown_rate_class_lists_valid_ones(tmp_path):
    text = edit(MINIMAL, "{bf16: 1, fp8: 2}", "{bf61: 1, fp8: 2}")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "cores.arrays.0.macs_per_pe_per_cycle.bf61"
    assert "'fp4'" in p.message and "did you mean 'bf16'" in p.message


def test_dram_geometry_rules(tmp_path):
    text = edit(MINIMAL, "interleave_bytes: 256", "interleave_bytes: 96")
    text = edit(text, "t_refi_ns: 7800", "t_refi_ns: 300")
    probs = {p.path: p.message for p in problems_of(write(tmp_path, text))}
    assert set(probs) == {"memory.levels.1.interleave_bytes", "memory.levels.1.t_refi_ns"}
    assert "power of two" in probs["memory.levels.1.interleave_bytes"]


def test_wrong_schema_version(tmp_path):
    (p,) = problems_of(write(tmp_path, edit(MINIMAL, "schema_version: 1", "schema_version: 2")))
    assert p.path == "schema_version" and p.line == 1


def test_yaml_syntax_error_reports_line(tmp_path):
    text = edit(MINIMAL, "  count: 2\n", "  count: [2\n")
    probs = problems_of(write(tmp_path, text))
    assert len(probs) == 1
    assert "YAML syntax error" in probs[0].message
    assert probs[0].line >= line_of(text, "count: [2")


def test_duplicate_key(tmp_path):
    text = edit(MINIMAL, "clock_mhz: 1000\n", "clock_mhz: 1000\nclock_mhz: 900\n")
    (p,) = problems_of(write(tmp_path, text))
    assert p.path == "clock_mhz" and "duplicate" in p.message
    assert p.line == 4


def test_empty_file(tmp_path):
    (p,) = problems_of(write(tmp_path, ""))
    assert "empty" in p.message


def test_file_not_found(tmp_path):
    (p,) = problems_of(tmp_path / "missing.yaml")
    assert "not found" in p.message and p.file.endswith("missing.yaml")


def test_top_level_not_a_mapping(tmp_path):
    (p,) = problems_of(write(tmp_path, "- 1\n- 2\n"))
    assert "mapping" in p.message


# --------------------------------------------------------------------------- overrides


def test_override_dotted_path():
    chip = load_chip("tpu_v1", ["clock_mhz=1400"])
    assert chip.clock_mhz == 1400
    assert chip.peak_flops("int8") == pytest.approx(2 * load_chip("tpu_v1").peak_flops("int8"))
    assert chip.overrides == ("clock_mhz=1400",)


def test_override_list_item_by_name():
    base = load_chip("npu_128x128")
    chip = load_chip("npu_128x128", ["memory.levels.hbm.data_rate_gbps_per_pin=8"])
    assert chip.dram.data_rate_gbps_per_pin == 8
    assert chip.dram_peak_bytes_per_s == pytest.approx(base.dram_peak_bytes_per_s * 8 / 6.4)


def test_override_list_item_by_index_and_mapping_form():
    chip = load_chip("npu_128x128", {"cores.arrays.0.rows": 64, "memory.levels.1.capacity_kib": 1024})
    assert chip.array().rows == 64
    assert chip.chip_srams[0].capacity_kib == 1024
    assert chip.peak_flops("bf16") == pytest.approx(load_chip("npu_128x128").peak_flops("bf16") / 2)
    assert set(chip.overrides) == {"cores.arrays.0.rows=64", "memory.levels.1.capacity_kib=1024"}


def test_override_adds_optional_block():
    chip = load_chip("tpu_v1", ["runtime.op_launch_overhead_ns=2000"])
    assert chip.runtime is not None and chip.runtime.op_launch_overhead_ns == 2000


def test_invalid_override_is_a_config_error():
    with pytest.raises(ConfigError) as info:
        load_chip("tpu_v1", ["clock_mhz=-1"])
    assert info.value.problems[0].path == "clock_mhz"
    with pytest.raises(ConfigError) as info:
        load_chip("npu_128x128", ["memory.levels.nope.capacity_kib=1"])
    assert "hbm" in str(info.value)  # lists the level names that exist


# --------------------------------------------------------------------------- registry


def test_unknown_chip_name_lists_valid_names():
    with pytest.raises(UnknownNameError) as info:
        load_chip("tpu_v2")
    msg = str(info.value)
    assert "tpu_v1" in msg and "npu_128x128" in msg
    assert "did you mean 'tpu_v1'" in msg


def test_resolve_accepts_paths_and_names(tmp_path):
    assert resolve_chip_path("tpu_v1") == chips_dir() / "tpu_v1.yaml"
    path = write(tmp_path, MINIMAL)
    assert resolve_chip_path(path) == path
    assert resolve_chip_path(str(tmp_path / "nope.yaml")) == tmp_path / "nope.yaml"


def test_arch_dir_env_adds_a_search_path_searched_first(tmp_path, monkeypatch):
    """$SIM_ARCH_DIR is an extra search path: its chips and the shipped ones both load; a file of
    a shipped name overrides it; an unknown name lists every chip registered."""
    shipped = chips_dir()
    (tmp_path / "my_npu.yaml").write_text((shipped / "npu_128x128.yaml").read_text())
    write(tmp_path, MINIMAL, "tpu_v1.yaml")  # same name as a shipped chip: the user's wins
    monkeypatch.setenv("SIM_ARCH_DIR", str(tmp_path))
    assert chips_dir() == shipped
    assert load_chip("my_npu").source_path == tmp_path / "my_npu.yaml"
    assert load_chip("my_npu").peak_flops("bf16") == load_chip("npu_128x128").peak_flops("bf16")
    assert load_chip("npu_128x128").source_path == shipped / "npu_128x128.yaml"
    assert load_chip("tpu_v1").name == "tiny"
    assert {"my_npu", "npu_128x128", "h200_sxm", "tpu_v1"} <= set(list_chips())
    with pytest.raises(UnknownNameError) as e:
        load_chip("no_such_chip")
    assert "my_npu" in str(e.value) and "h200_sxm" in str(e.value)


def test_arch_dir_env_takes_several_folders_and_refuses_a_missing_one(tmp_path, monkeypatch):
    import os

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    write(tmp_path / "a", MINIMAL, "first.yaml")
    write(tmp_path / "b", MINIMAL, "second.yaml")
    write(tmp_path / "b", edit(MINIMAL, "name: tiny", "name: shadowed"), "first.yaml")
    monkeypatch.setenv("SIM_ARCH_DIR", os.pathsep.join([str(tmp_path / "a"), str(tmp_path / "b")]))
    assert load_chip("first").source_path == tmp_path / "a" / "first.yaml"  # in order: the first folder wins
    assert load_chip("second").name == "tiny"
    monkeypatch.setenv("SIM_ARCH_DIR", str(tmp_path / "nowhere"))
    with pytest.raises(ConfigError, match=r"nowhere: chip folder not found \(named by SIM_ARCH_DIR\)"):
        load_chip("tpu_v1")


def test_check_files_returns_problems_instead_of_raising(tmp_path):
    good = write(tmp_path, MINIMAL, "good.yaml")
    bad = write(tmp_path, edit(MINIMAL, "      rows: 4\n", "      rows: -4\n"), "bad.yaml")
    broken = write(tmp_path, "name: [unclosed\n", "broken.yaml")
    other = write(tmp_path, "foo: 1\n", "other.yaml")
    assert check_files([good]) == []
    assert check_files(str(good)) == []
    out = check_files([good, bad, broken, other, tmp_path / "missing.yaml", "no_such_chip"])
    text = "\n".join(out)
    assert f"{bad}:{line_of(bad.read_text(), 'rows:')}: cores.arrays.0.rows:" in text
    assert str(broken) in text and "YAML syntax error" in text
    assert str(other) in text and "not a recognised config file" in text
    assert "missing.yaml" in text and "not found" in text
    assert "unknown chip 'no_such_chip'" in text
    assert len(out) == 5


def test_check_files_on_shipped_folder_is_clean():
    assert check_files([chips_dir()]) == []
    assert check_files(sorted(SHIPPED)) == []


def test_summary_mentions_peaks():
    text = load_chip("tpu_v1").summary()
    assert "91.75" in text and "unified_buffer" in text and math.isfinite(load_chip("tpu_v1").clock_hz)


def test_cluster_arrays_must_name_arrays_of_the_chip():
    with pytest.raises(ConfigError) as exc:
        load_chip("h200_sxm", overrides=["mapping.cluster_arrays=[tensor_cores, tensor_corez]"])
    assert "mapping.cluster_arrays.1" in str(exc.value) and "tensor_corez" in str(exc.value)


@pytest.mark.parametrize("key,value,path", [
    ("pipeline_fill_arrays", "[tensor_corez]", "mapping.pipeline_fill_arrays.0"),
    ("tile_rule_arrays", "[tensor_corez]", "mapping.tile_rule_arrays.0"),
    ("array_kernels", '{"tensor_corez": [[64, 64, 6]]}', "mapping.array_kernels.tensor_corez"),
    ("array_split_k", '{"tensor_corez": [1]}', "mapping.array_split_k.tensor_corez"),
    ("array_outstanding_requests", '{"tensor_corez": 1024}', "mapping.array_outstanding_requests.tensor_corez"),
    ("attention_tiles", '{"tensor_corez": [128, 128]}', "mapping.attention_tiles.tensor_corez"),
])
def test_library_array_lists_must_name_arrays_of_the_chip(key, value, path):
    with pytest.raises(ConfigError) as exc:
        load_chip("h200_sxm", overrides=[f"mapping.{key}={value}"])
    assert path in str(exc.value) and "tensor_corez" in str(exc.value)


@pytest.mark.parametrize("override,key", [
    ('mapping.array_kernels={"tensor_cores_sm80": [[64, 0, 6]]}', "mapping.array_kernels"),
    ("mapping.attention_split_kv=never", "mapping.attention_split_kv"),
    ('mapping.array_kernels={"cuda_cores": [[64, 64, 3, 64, 0.8, 1]]}', "mapping.array_kernels.cuda_cores.0"),
    # a kernel's rate share is a share of the array's rate: above 1 or at 0 it is refused
    ('mapping.array_kernels={"cuda_cores": [[64, 64, 3, 64, 1.5]]}', "mapping.array_kernels.cuda_cores.0"),
    ('mapping.array_kernels={"cuda_cores": [[64, 64, 3, 64, 0]]}', "mapping.array_kernels.cuda_cores.0"),
    ("mapping.attention_gqa_packing=sometimes", "mapping.attention_gqa_packing"),
    ('mapping.attention_tiles={"tensor_cores": [128]}', "mapping.attention_tiles"),
    ("cores.arrays.tensor_cores.sparse_2_4_speedup=3", "sparse_2_4_speedup"),
])
def test_library_kernel_entries_are_checked(override, key):
    with pytest.raises(ConfigError, match=key):
        load_chip("h200_sxm", overrides=[override])


def test_arrays_that_are_another_path_onto_the_same_units_add_no_area():
    from sim.model.cost.energy import area_report

    chip = load_chip("h200_sxm")
    shared = [a for a in chip.cores.arrays if a.same_units_as]
    assert {a.same_units_as for a in shared} == {"tensor_cores"}
    own = [a for a in chip.cores.arrays if not a.same_units_as]
    assert area_report(chip)["pes"] == sum(a.rows * a.cols * a.count for a in own) * chip.cores.count
    with pytest.raises(ConfigError) as exc:
        load_chip("h200_sxm", overrides=["cores.arrays.tensor_cores_sm80.same_units_as=tensor_corez"])
    assert "same_units_as" in str(exc.value) and "tensor_corez" in str(exc.value)
