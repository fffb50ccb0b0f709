"""The op trace of an LLM iteration: :class:`TraceOp` (an op plus its layer, block,
repeat count and pipeline stage) and :class:`Trace` (their ordered list, with views,
totals and a table), plus :func:`op_flops`.

The trace is the data the builder (:mod:`sim.model.workload.llm`) produces and the
stacks, the engine, trace files and captures consume; it is kept apart from how a trace
is built so that readers of traces depend only on this small container (see the module
notes of :mod:`sim.model.workload.llm` for the ``repeat`` convention).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, Iterator, Mapping

from sim.errors import WorkloadError
from sim.ir.ops import Attention, Collective, Conv2d, Gemm, Op, VectorOp, op_min_dram_bytes, op_to_dict

@dataclass(frozen=True)
class TraceOp:
    """One op of a trace: where it sits (layer, block, pipeline stage) and how often.

    ``repeat``: the op occurs in ``repeat`` consecutive identical layers starting at
    ``layer`` (see the module notes); for an op outside the layers (``layer=None``) it
    runs ``repeat`` times back to back.
    """

    op: Op
    layer: int | None = None
    block: str = ""
    repeat: int = 1
    stage: int = 0

    def __post_init__(self) -> None:
        if isinstance(self.repeat, bool) or not isinstance(self.repeat, int) or self.repeat < 1:
            raise WorkloadError(f"TraceOp '{self.op.name}': repeat must be a whole number >= 1, got {self.repeat!r}")
        if isinstance(self.stage, bool) or not isinstance(self.stage, int) or self.stage < 0:
            raise WorkloadError(f"TraceOp '{self.op.name}': stage must be a whole number >= 0, got {self.stage!r}")
        if self.layer is not None and (isinstance(self.layer, bool) or not isinstance(self.layer, int) or self.layer < 0):
            raise WorkloadError(f"TraceOp '{self.op.name}': layer must be None or a whole number >= 0, got {self.layer!r}")

    @property
    def kind(self) -> str:
        return self.op.kind


def op_flops(op: Op) -> float:
    if isinstance(op, Conv2d):
        return 2 * op.macs
    return op.flops


@dataclass(frozen=True)
class Trace:
    """An ordered list of :class:`TraceOp` plus metadata (plain JSON-able values)."""

    ops: tuple[TraceOp, ...]
    meta: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "meta", dict(self.meta))

    def __iter__(self) -> Iterator[TraceOp]:
        return iter(self.ops)

    def __len__(self) -> int:
        return len(self.ops)

    def __getitem__(self, i: int) -> TraceOp:
        return self.ops[i]

    # .......................................................... views

    def expanded(self) -> "Trace":
        """Op-for-op form: every layer's ops listed, ``repeat = 1`` everywhere."""
        out: list[TraceOp] = []
        ops = self.ops
        i = 0
        while i < len(ops):
            t = ops[i]
            if t.repeat == 1:
                out.append(t)
                i += 1
                continue
            if t.layer is None:
                out.extend(replace(t, repeat=1) for _ in range(t.repeat))
                i += 1
                continue
            j = i
            while j < len(ops) and (ops[j].layer, ops[j].repeat, ops[j].stage) == (t.layer, t.repeat, t.stage):
                j += 1
            body = ops[i:j]
            for r in range(t.repeat):
                out.extend(replace(b, layer=t.layer + r, repeat=1) for b in body)
            i = j
        return Trace(tuple(out), self.meta)

    def filter(self, *, kind: str | None = None, block: str | None = None,
               stage: int | None = None, layer: int | None = None) -> list[TraceOp]:
        return [t for t in self.ops
                if (kind is None or t.op.kind == kind) and (block is None or t.block == block)
                and (stage is None or t.stage == stage) and (layer is None or t.layer == layer)]

    def gemms(self) -> list[TraceOp]:
        return self.filter(kind="gemm")

    @property
    def num_stages(self) -> int:
        return max((t.stage for t in self.ops), default=0) + 1

    # .......................................................... totals

    def totals(self, stage: int | None = None) -> dict[str, float]:
        """Sums over the trace (``repeat`` counted): FLOPs by kind, DRAM and network bytes."""
        tot: dict[str, float] = {"ops": 0, "flops": 0, "macs": 0, "gemm_flops": 0, "attention_flops": 0,
                                 "vector_flops": 0, "min_dram_bytes": 0, "weight_bytes": 0,
                                 "collective_bytes": 0}
        for t in self.ops:
            if stage is not None and t.stage != stage:
                continue
            op, r = t.op, t.repeat
            tot["ops"] += r
            f = op_flops(op) * r
            tot["flops"] += f
            tot["macs"] += op.macs * r
            if isinstance(op, (Gemm, Conv2d)):
                tot["gemm_flops"] += f
            elif isinstance(op, Attention):
                tot["attention_flops"] += f
            elif isinstance(op, VectorOp):
                tot["vector_flops"] += f
            if isinstance(op, Gemm) and "weight" in op.tags:
                tot["weight_bytes"] += op.b_bytes() * r
            if isinstance(op, Collective):
                tot["collective_bytes"] += op.bytes * r
            tot["min_dram_bytes"] += op_min_dram_bytes(op) * r
        return tot

    def to_dataframe(self):
        """One row per TraceOp (pandas): placement, op fields, flops and bytes."""
        import pandas as pd

        rows = []
        for t in self.ops:
            row = {"layer": t.layer, "block": t.block, "repeat": t.repeat, "stage": t.stage}
            row.update(op_to_dict(t.op))
            row["flops"] = op_flops(t.op)
            row["min_dram_bytes"] = op_min_dram_bytes(t.op)
            rows.append(row)
        return pd.DataFrame(rows)

    def summary(self) -> str:
        tot = self.totals()
        head = self.meta.get("model", "trace")
        desc = self.meta.get("iteration_text", "")
        return (f"{head} {desc}: {len(self.ops)} entries ({int(tot['ops'])} ops), "
                f"{tot['flops'] / 1e9:.3f} GFLOP, {tot['min_dram_bytes'] / 1e6:.3f} MB min DRAM, "
                f"{tot['collective_bytes'] / 1e6:.3f} MB collectives")
