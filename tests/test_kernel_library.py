"""Kernel libraries (kernel_libraries/*.yaml, sim.spec.kernel_library): a chip names the library whose
kernel menu it takes, and gets exactly the mapping an inline block of the same keys would give;
its own keys and --set override the library's one by one; bad input names file, line and key."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from sim.errors import ConfigError
from sim.spec.kernel_library import list_kernel_libraries, load_kernel_library
from sim.spec.registry import list_chips, load_chip
from test_bad_input import ROOT, refused, sim

LIBRARIES = ROOT / "kernel_libraries"


def _inline(chip: str, tmp_path: Path) -> Path:
    """The chip's file with its library's mapping block written inline instead of named."""
    text = (ROOT / "arch_configs" / f"{chip}.yaml").read_text()
    name = re.search(r"^kernel_library: (\S+)$", text, re.M).group(1)
    lib = (LIBRARIES / f"{name}.yaml").read_text()
    block = lib[lib.index("\nmapping:\n") + 1:]
    out = tmp_path / f"{chip}.yaml"
    out.write_text(re.sub(r"^kernel_library: \S+\n", lambda _: block, text, flags=re.M))
    return out


def test_every_shipped_library_is_named_by_a_shipped_chip_and_loads():
    named = set()
    for chip in list_chips():
        m = re.search(r"^kernel_library: (\S+)$", (ROOT / "arch_configs" / f"{chip}.yaml").read_text(), re.M)
        if m:
            named.add(m.group(1))
    assert named == {p.stem for p in LIBRARIES.glob("*.yaml")} == set(list_kernel_libraries())
    for name in named:
        spec, _ = load_kernel_library(name)
        assert spec.name == name and spec.mapping.distribution == "cyclic"


@pytest.mark.parametrize("chip", ["h200_sxm", "h100_sxm", "a100_sxm4_80gb", "blackwell_b200"])
def test_a_named_library_gives_the_chip_the_same_spec_as_the_inline_block(chip, tmp_path):
    named = load_chip(chip)
    inline = load_chip(_inline(chip, tmp_path))
    assert named.mapping is not None and named.mapping == inline.mapping
    assert named.to_dict() == inline.to_dict()


def test_the_chips_own_keys_and_set_override_the_librarys_one_by_one(tmp_path):
    base = load_chip("h200_sxm")
    text = (ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
    f = tmp_path / "mine.yaml"
    f.write_text(text.replace("kernel_library: cublas_sm90\n", "kernel_library: cublas_sm90\nmapping:\n  split_k: [1]\n"))
    mine = load_chip(f)
    assert mine.mapping.split_k == (1,) and base.mapping.split_k != (1,)
    assert mine.mapping.tile_m == base.mapping.tile_m and mine.mapping.array_kernels == base.mapping.array_kernels
    via_set = load_chip("h200_sxm", ["mapping.split_k=[1]"])
    assert via_set.mapping == mine.mapping
    # and a library can be given to a chip that has none
    npu = load_chip("npu_128x128", ["kernel_library=cutlass_sm100"])
    assert npu.mapping == load_kernel_library("cutlass_sm100")[0].mapping


def test_a_library_path_is_read_relative_to_the_chip_file(tmp_path):
    (tmp_path / "libs").mkdir()
    lib = (LIBRARIES / "cublas_sm90.yaml").read_text().replace("  split_k: [1, 2, 3, 4, 6, 8, 12, 16]", "  split_k: [1, 2]")
    (tmp_path / "libs" / "my_sm90.yaml").write_text(lib.replace("name: cublas_sm90", "name: my_sm90"))
    chip = tmp_path / "chip.yaml"
    chip.write_text((ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
                    .replace("kernel_library: cublas_sm90", "kernel_library: libs/my_sm90.yaml"))
    assert load_chip(chip).mapping.split_k == (1, 2)


def test_an_unknown_library_names_the_chip_line_and_the_valid_ones(tmp_path):
    text = (ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
    line = text[:text.index("kernel_library:")].count("\n") + 1
    f = tmp_path / "chip.yaml"
    f.write_text(text.replace("kernel_library: cublas_sm90", "kernel_library: cublas_sm09"))
    refused(sim("gemm", str(f), "--m", "64", "--k", "64", "--n", "64"),
            f"chip.yaml:{line}: kernel_library", "did you mean 'cublas_sm90'", "cutlass_sm80")
    refused(sim("check", str(f)), f"chip.yaml:{line}", "cublas_sm09")


def test_a_bad_key_in_a_library_names_the_library_file_and_line(tmp_path):
    lib = (LIBRARIES / "cublas_sm90.yaml").read_text()
    line = lib[:lib.index("  split_k:")].count("\n") + 1
    (tmp_path / "bad_lib.yaml").write_text(lib.replace("  split_k:", "  split_kk:").replace("name: cublas_sm90",
                                                                                            "name: bad_lib"))
    chip = tmp_path / "chip.yaml"
    chip.write_text((ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
                    .replace("kernel_library: cublas_sm90", "kernel_library: ./bad_lib.yaml"))
    with pytest.raises(ConfigError) as exc:
        load_chip(chip)
    assert f"bad_lib.yaml:{line}" in str(exc.value) and "did you mean 'split_k'" in str(exc.value)
    refused(sim("run", str(chip), "llama3-8b", "--phase", "decode"), f"bad_lib.yaml:{line}", "split_kk")


def test_a_library_naming_arrays_the_chip_lacks_is_refused_at_both_lines(tmp_path):
    # the library's line that names the array, and the chip's line that names the library
    text = (ROOT / "arch_configs" / "npu_128x128.yaml").read_text()
    f = tmp_path / "npu.yaml"
    f.write_text(text + "kernel_library: cublas_sm90\n")
    line = f.read_text().count("\n")
    lib = ROOT / "kernel_libraries" / "cublas_sm90.yaml"
    lib_line = next(i for i, ln in enumerate(lib.read_text().splitlines(), 1) if ln.strip().startswith("tensor_cores_sm80:"))
    refused(sim("check", str(f)), f"cublas_sm90.yaml:{lib_line}: mapping.array_kernels.tensor_cores_sm80",
            "no array named", f"(merged in by {f}:{line})")


def test_sim_check_and_list_know_the_kind():
    proc = sim("check", "kernel_libraries", "-v")
    assert proc.returncode == 0, proc.stderr
    assert "cublas_sm90.yaml: kernel library" in proc.stdout
    listed = sim("list", "libraries")
    assert listed.returncode == 0 and listed.stdout.split() == list_kernel_libraries()
    stacks = sim("list", "stacks")
    assert stacks.returncode == 0 and "eager_pytorch" in stacks.stdout.split()


def test_a_library_file_whose_name_is_not_its_file_name_is_refused(tmp_path):
    d = tmp_path / "kernel_libraries"
    d.mkdir()
    f = d / "cublas_sm90.yaml"
    f.write_text((LIBRARIES / "cublas_sm90.yaml").read_text().replace("name: cublas_sm90", "name: other"))
    refused(sim("check", str(f)), "must equal the file name")


def test_the_chip_and_sim_show_say_which_library_it_took(tmp_path):
    from sim.apps.single_op import chip_summary

    assert load_chip("h200_sxm").kernel_library == "cublas_sm90"
    assert load_chip("h200_sxm", ["kernel_library=cutlass_sm100"]).kernel_library == "cutlass_sm100"
    inline = load_chip(_inline("h200_sxm", tmp_path))
    assert inline.kernel_library is None and chip_summary(inline)["kernel_library"] == "inline"
    assert chip_summary("npu_128x128")["kernel_library"] is None
    shown = sim("show", "h200_sxm")
    assert shown.returncode == 0 and "software stack eager_pytorch, kernel library cublas_sm90" in shown.stdout
