"""Bad input left over from the fifth campaign's report (session 29): each is one clear message
and exit 2 naming the file, line and key where the mistake is."""
from __future__ import annotations

# the CLI runner and the refusal check of the first campaign (tests/ is on the path under pytest)
from test_bad_input import ROOT, refused, sim  # noqa: F401


def _library_and_chip(tmp_path, old: str, new: str):
    """A copy of cublas_sm90 with ``old`` replaced by ``new`` and an h200_sxm naming it."""
    lib = tmp_path / "mylib.yaml"
    text = (ROOT / "kernel_libraries" / "cublas_sm90.yaml").read_text()
    assert old in text
    lib.write_text(text.replace(old, new, 1))
    lib_line = next(i for i, ln in enumerate(lib.read_text().splitlines(), 1) if new.strip() in ln)
    chip = tmp_path / "chip.yaml"
    chip_text = (ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
    assert "kernel_library: cublas_sm90" in chip_text
    chip.write_text(chip_text.replace("kernel_library: cublas_sm90", f"kernel_library: {lib}", 1))
    return chip, lib, lib_line


def test_a_kernel_library_naming_an_array_the_chip_lacks_is_reported_in_the_library(tmp_path):
    # was reported at the chip file's `kernel_library:` line, where nothing is wrong
    chip, lib, line = _library_and_chip(tmp_path, "tile_rule_arrays: [tensor_cores]",
                                        "tile_rule_arrays: [tensor_corez]")
    proc = sim("check", str(chip))
    chip_line = next(i for i, ln in enumerate(chip.read_text().splitlines(), 1) if ln.startswith("kernel_library:"))
    refused(proc, f"{lib}:{line}: mapping.tile_rule_arrays.0: no array named 'tensor_corez'",
            f"(merged in by {chip}:{chip_line})")


def test_a_chip_key_over_a_library_key_is_still_the_chips():
    # the same mistake made by the chip's own --set stays the chip's (with its overrides)
    proc = sim("gemm", "h200_sxm", "--m", "8", "--k", "8", "--n", "8", "-q", "--set", "mapping.tile_rule_arrays=[foo]")
    refused(proc, "mapping.tile_rule_arrays.0: no array named 'foo'", "(with --set overrides)")
    assert "cublas_sm90.yaml" not in proc.stderr


def test_a_tile_buffer_too_small_for_any_tile_names_its_key():
    # was "no tile fits the per-core SRAM (0.0 KiB)": neither the key nor the size it had
    proc = sim("gemm", "npu_128x128", "--m", "64", "--k", "64", "--n", "64", "-q",
               "--set", "memory.levels.0.capacity_kib=0.05")
    refused(proc, "no tile fits the per-core SRAM (51 B, memory.levels.0.capacity_kib)",
            "the smallest candidate needs")
