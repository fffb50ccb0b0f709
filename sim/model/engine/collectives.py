"""Collective ops (all-reduce, all-gather, reduce-scatter, send) over the chip's interconnect:
an alpha-beta model, no tile problem."""
from __future__ import annotations

import math

from sim.errors import MappingError
from sim.ir.ops import Collective
from sim.ir.results import OpResult
from sim.model.engine.lower import Options
from sim.spec.chip import ChipSpec


def collective_seconds(chip: ChipSpec, op: Collective) -> tuple[float, dict]:
    """Ring or tree collective over the chip's interconnect (alpha-beta model).

    Ring all-reduce moves 2(p-1)/p of the data through each link in 2(p-1) steps
    (Patarasuk & Yuan, JPDC 2009); all-gather and reduce-scatter half of that; tree
    all-reduce 2·log2(p) steps of the full data; a send is one hop.
    """
    ic = chip.interconnect
    if ic is None:
        raise MappingError(f"chip '{chip.name}' has no interconnect block: multi-chip runs need "
                           "interconnect.link_bandwidth_gb_per_s (and latency/topology)")
    p = op.participants
    bw = ic.link_bandwidth_gb_per_s * 1e9 * (ic.links_per_chip if ic.topology != "ring" else min(2, ic.links_per_chip))
    lat = ic.link_latency_ns * 1e-9
    b = float(op.bytes)
    if p <= 1:
        return 0.0, {"steps": 0, "bytes_per_chip": 0.0}
    if op.collective == "send":
        steps, moved = 1, b
    elif op.algorithm == "tree":
        steps = 2 * math.ceil(math.log2(p)) if op.collective == "all_reduce" else math.ceil(math.log2(p))
        moved = b * steps / 1.0
    else:
        factor = 2.0 if op.collective == "all_reduce" else 1.0
        steps = int(factor * (p - 1))
        moved = factor * (p - 1) / p * b
    return steps * lat + moved / bw, {"steps": steps, "bytes_per_chip": moved}


def collective_result(chip: ChipSpec, op: Collective, options: Options) -> OpResult:
    """``op``'s result: its time from :func:`collective_seconds`, its energy per byte moved."""
    seconds, info = collective_seconds(chip, op)
    cycles = float(math.ceil(seconds * chip.clock_hz))
    e_pj = (chip.interconnect.energy_pj_per_byte or 10.0) * info["bytes_per_chip"]
    return OpResult(
        name=op.name, kind="collective", cycles=cycles, compute_cycles=0.0, stall_cycles=cycles, seconds=seconds,
        macs=0, flops=0.0, utilization=0.0, dram_read_bytes=0.0, dram_write_bytes=0.0, l2_hit_bytes=0.0,
        sram_read_bytes=0.0, sram_write_bytes=0.0, energy_pj=e_pj, energy_breakdown_pj={"interconnect": e_pj,
                                                                                         "total": e_pj},
        roofline_cycles=cycles, bound="network", arithmetic_intensity=0.0, achieved_dram_bytes_per_s=0.0,
        mapping={"collective": op.collective, "algorithm": op.algorithm, "participants": op.participants, **info},
        memory=options.memory, details=info)
