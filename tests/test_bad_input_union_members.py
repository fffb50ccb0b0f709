"""A value that may take one of several forms (a kernel entry: a list of 3 to 5 values or a
mapping of keys; a serving length: an integer or a mapping) gets the problems of the form it
was written in, not one per form pydantic tried: a list of six values is one message naming
the lengths taken, a mapping's misspelt key one "did you mean" (session 25 noticed the
alternatives' messages, "Tuple should have at most 3 items" beside the real error)."""
from __future__ import annotations

import re

import pytest

from test_bad_input import ROOT, refused, sim  # noqa: F401

_LIB = ROOT / "kernel_libraries" / "cublas_sm90.yaml"
_SM80 = "    tensor_cores_sm80: [[64, 64, 6], [128, 64, 3]"
_ALIGN2 = "      - {tile_m: 64, tile_n: 64, tile_k_bytes: 64, stages: 6}"


def _library(tmp_path, old: str, new: str):
    text = _LIB.read_text()
    assert old in text
    f = tmp_path / "lib.yaml"
    f.write_text(text.replace(old, new, 1))
    line = next(i for i, ln in enumerate(f.read_text().splitlines(), 1) if ln.startswith(new[:30]))
    return f, line


def _problems(proc) -> list[str]:
    """The problem lines (FILE:LINE: key: message), not the header that counts them."""
    return [ln.strip() for ln in proc.stderr.splitlines() if re.search(r"\.yaml:\d+: ", ln)]


@pytest.mark.parametrize("entries,problem", [
    ("[[64, 64, 6, 1, 2, 3], [128, 64, 3]", "0: takes 3, 4 or 5 values (or a mapping of keys), got 6"),
    ("[[64, -64, 6], [128, 64, 3]", "0.1: Input should be greater than or equal to 1 (got -64)"),
])
def test_a_kernel_entry_list_gets_one_message_for_its_own_form(tmp_path, entries, problem):
    f, line = _library(tmp_path, _SM80, "    tensor_cores_sm80: " + entries)
    proc = sim("check", str(f))
    refused(proc, f"lib.yaml:{line}: mapping.array_kernels.tensor_cores_sm80.{problem}")
    assert len(_problems(proc)) == 1, proc.stderr
    assert "too few values" not in proc.stderr and "KernelSpec" not in proc.stderr


def test_a_kernel_entry_mapping_with_a_misspelt_key_gets_a_suggestion(tmp_path):
    f, line = _library(tmp_path, _ALIGN2, _ALIGN2.replace("stages", "stagez"))
    proc = sim("check", str(f))
    refused(proc, f"lib.yaml:{line}: mapping.array_kernels.tensor_cores_align2.0.stagez: unknown key 'stagez'; "
                  "did you mean 'stages'?")
    assert "Input should be a list" not in proc.stderr and "KernelSpec" not in proc.stderr


def _serving(tmp_path, value: str):
    src = ROOT / "sweeps" / "llama3-8b-serving.yaml"
    old = "    prompt: {kind: lognormal, median: 256, sigma: 0.8, low: 16, high: 1024}"
    text = src.read_text()
    assert old in text
    f = tmp_path / "serving.yaml"
    f.write_text(text.replace(old, f"    prompt: {value}", 1))
    return f, text.splitlines().index(old) + 1


def test_a_length_mapping_is_not_also_told_to_be_an_integer(tmp_path):
    f, line = _serving(tmp_path, "{kind: lognormal, meen: 256}")
    proc = sim("sweep", str(f), "--dry-run")
    refused(proc, f"serving.yaml:{line}: workloads.0.prompt.meen: unknown key 'meen'; did you mean 'median'?")
    assert "valid integer" not in proc.stderr


def test_a_length_of_neither_form_names_both(tmp_path):
    f, line = _serving(tmp_path, "abc")
    proc = sim("sweep", str(f), "--dry-run")
    refused(proc, f"serving.yaml:{line}: workloads.0.prompt: expected a mapping of keys or an integer (got 'abc')")
    assert len(_problems(proc)) == 1, proc.stderr


def test_a_key_with_a_bracket_is_a_key_not_a_union_member(tmp_path):
    # was 'internal error: IndexError' (a key holding '[' was dropped from the path as if it
    # were the name of a union member, leaving no key to suggest a spelling for)
    text = (ROOT / "workloads" / "tiny.yaml").read_text()
    assert "\nschema_version: 1\n" in text
    f = tmp_path / "tiny.yaml"
    f.write_text(text.replace("\nschema_version: 1\n", "\nschem[a_version: 1\n", 1))
    line = f.read_text().splitlines().index("schem[a_version: 1") + 1
    refused(sim("run", "edge_npu", str(f), "--phase", "decode", "-q"),
            f"tiny.yaml:{line}: schem[a_version: unknown key 'schem[a_version'; did you mean 'schema_version'?")
