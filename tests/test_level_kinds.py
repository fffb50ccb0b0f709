"""Memory level kinds as a registry (sim.spec.memory_spec.LEVEL_KINDS): the tagged union a chip's
``memory.levels`` accepts is built from it, each kind's placement and count rules come from its
entry, and an unknown kind lists the registered ones."""
from __future__ import annotations

import typing

from sim.spec.memory_spec import LEVEL_KINDS, MemoryLevel, MemorySpec, _level_rules
from test_bad_input import ROOT, refused, sim


def test_the_union_is_the_registry():
    union = typing.get_args(typing.get_args(MemoryLevel)[0])
    assert tuple(k.model for k in LEVEL_KINDS.values()) == union
    for name, kind in LEVEL_KINDS.items():
        assert typing.get_args(kind.model.model_fields["kind"].annotation) == (name,)
    assert [k.placement for k in LEVEL_KINDS.values()] == ["innermost", "any", "outermost"]


def _levels(*kinds):
    out = []
    for i, k in enumerate(kinds):
        lv = {"kind": k, "name": f"l{i}"}
        if k == "sram":
            lv["scope"] = "core"
        out.append(lv)
    return {"levels": out}


def test_placement_and_count_come_from_each_entry():
    msgs = lambda *k: [m for _, m, _ in _level_rules(_levels(*k))]  # noqa: E731
    assert msgs("registers", "sram", "dram") == []
    assert msgs("sram", "registers", "dram") == ["a registers level must be the first (innermost) level"]
    assert msgs("registers", "sram") == ["exactly one level with kind: dram is required, as the last level"]
    assert msgs("dram", "sram") == ["the dram level must be the last (outermost) level; it is memory.levels.0 of 2"]
    assert msgs("sram", "dram", "dram") == [
        "the dram level must be the last (outermost) level; it is memory.levels.1 of 3",
        "only one dram level is allowed (first one is memory.levels.1)"]
    assert MemorySpec.__doc__ and all(k in MemorySpec.__doc__ for k in LEVEL_KINDS)


def test_an_unknown_kind_lists_the_registered_ones(tmp_path):
    text = (ROOT / "arch_configs" / "npu_128x128.yaml").read_text()
    f = tmp_path / "chip.yaml"
    f.write_text(text.replace("kind: dram", "kind: hbm", 1))
    refused(sim("check", str(f)), "memory.levels.2.kind: unknown kind 'hbm'", f"(valid: {', '.join(LEVEL_KINDS)})")
