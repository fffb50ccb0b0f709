"""The model layer's entry point: one op on one chip -> :class:`~sim.ir.results.OpResult`.

A chip whose ``power:`` block turns DVFS on runs each op at the clock its power allows
(:mod:`sim.model.engine.dvfs`); every other op runs at the chip's clock
(:func:`sim.model.engine.run.simulate_op_at_clock`).  Results are memoised either way.
"""
from __future__ import annotations

from sim.ir.ops import Collective
from sim.ir.results import OpResult
from sim.model.engine.dvfs import simulate_op_dvfs
from sim.model.engine.lower import Options
from sim.model.engine.run import memoised, simulate_op_at_clock
from sim.spec.chip import ChipSpec

__all__ = ["simulate_op"]


def simulate_op(chip: ChipSpec, op, options: Options | None = None) -> OpResult:
    """Simulate ``op`` on ``chip``; identical (chip, op, options) return the memoised result."""
    options = options or Options()
    if not isinstance(op, Collective) and getattr(chip, "power", None) is not None and chip.power.dvfs:
        return memoised(chip, op, options, lambda: simulate_op_dvfs(chip, op, options))
    return simulate_op_at_clock(chip, op, options)
