"""Bad input, what issue 14 still had open after its two campaigns: each case exits 2 with one
message naming the file, line and key (or the option) - never an internal error, a hang or a
silently accepted value."""
from __future__ import annotations

import pytest

# the CLI runner and the refusal check of the first campaign (tests/ is on the path under pytest)
from test_bad_input import ROOT, refused, sim  # noqa: F401


# --------------------------------------------------------------------------- keys YAML does not read as names


@pytest.mark.parametrize("folder, src, key, what", [
    ("arch_configs", "scalesim_32x32.yaml", "~", "null"), ("workloads", "tiny.yaml", "null", "null"),
    ("stacks", "ideal.yaml", "on", "a boolean"), ("sweeps", "llama3-8b-quick.yaml", "3", "a number")])
def test_a_key_yaml_reads_as_null_a_boolean_or_a_number(tmp_path, folder, src, key, what):
    # was 'FILE:<first line of the mapping>: None: Keys should be strings (got None)'
    text = (ROOT / folder / src).read_text()
    d = tmp_path / folder
    d.mkdir()
    f = d / src
    f.write_text(text + f"{key}: 3\n")
    line = len(f.read_text().splitlines())
    refused(sim("check", str(f)), f"{src}:{line}: {key}: a key must be a name", f"as {what}")
