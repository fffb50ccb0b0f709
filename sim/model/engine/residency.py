"""Activations kept on chip between ops.

A core buffer marked ``holds_activations`` (``SramLevel``; TPU v1's Unified Buffer, which
"holds the intermediate results" between layers while the weights stream in from DRAM:
Jouppi et al., ISCA 2017, Sec. 2) keeps an op's activation operands when they fit its
activation space: the ``input_kib`` of its partition (the space activations share; a
layer's outputs are written back to the same buffer), else the whole level, less what the
mapper's tile buffers need.  Such operands never move through DRAM: the engine neither
loads nor stores them (``TileProblem.resident``), while the array still reads them from the
buffer (its SRAM energy stays).  Which operands are activations: a GEMM's A and C (B is the
weights), an attention's queries and output (its K/V are the KV cache), every operand of
an elementwise op; copies (the KV-cache append) and collectives are left in DRAM.
On a chip of several cores each core's buffer must hold the op's whole activation set
(any core may read any row of it); moving activations between the cores' buffers is not
modelled.  The decision is made op by op: an op whose activations fit is taken to find its
input on chip even when the op before it spilled its output.
"""
from __future__ import annotations

import dataclasses

from sim.ir.ops import Attention, Conv2d, Gemm, VectorOp
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format


def activation_buffer(chip: ChipSpec):
    """The core's tile buffer when it holds activations between ops, else None."""
    srams = chip.memory.core_srams
    if not srams or not srams[-1].holds_activations:
        return None
    return srams[-1]


def activation_operand_bytes(op) -> dict[str, int]:
    """The op's activation operands (tile-problem operand -> bytes), {} for an op whose
    operands all live in DRAM."""
    if isinstance(op, Conv2d):
        return {"a": op.a_bytes(), "c": op.c_bytes()}   # the ifmap, not its im2col copy
    if isinstance(op, Gemm):
        return {"a": op.a_bytes(), "c": op.c_bytes()}
    if isinstance(op, Attention):
        q = get_format(op.dtype).bytes_for(op.q_len * op.head_dim) * op.heads * op.batch
        return {"a": q, "c": q}
    if isinstance(op, VectorOp):
        return {"a": op.read_bytes, "b": 0, "c": op.write_bytes}
    return {}


def resident_operands(chip: ChipSpec, op) -> tuple[tuple[str, ...], int]:
    """(operands held on chip, their bytes): every activation operand of ``op`` when
    together they fit the buffer's activation space, else none."""
    buf = activation_buffer(chip)
    if buf is None:
        return (), 0
    operands = activation_operand_bytes(op)
    total = sum(operands.values())
    space = buf.operand_bytes("input") if buf.partition is not None else buf.capacity_bytes
    if not operands or total > space:
        return (), 0
    return tuple(sorted(operands)), int(total)


def hold_activations(chip: ChipSpec, op, lowered, budget):
    """(lowered op, mapper budget) with ``op``'s activations held in the core's buffer where
    they fit (``TileProblem.resident``): what is left of a unified buffer holds the tiles,
    a partitioned one keeps them in its input space; unchanged otherwise."""
    resident, held_bytes = resident_operands(chip, op)
    if not resident:
        return lowered, budget
    held_budget = budget if budget.partition is not None else dataclasses.replace(
        budget, sram_bytes=budget.sram_bytes - held_bytes)
    if held_budget.sram_bytes <= 0:
        return lowered, budget
    return dataclasses.replace(lowered, problem=dataclasses.replace(lowered.problem, resident=resident)), held_budget
