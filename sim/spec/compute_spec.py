"""The compute part of a chip file: the MAC arrays, the vector unit and the cores holding them.

A chip is a number of identical cores (:class:`CoresSpec`), each with one or more kinds of
systolic/MAC arrays (:class:`ArraySpec`: shape, per-rate-class MAC rates, dataflows, fold
overlap) and a vector unit (:class:`VectorUnitSpec`).  The dataflow names an array may list
(:data:`DATAFLOWS`) and the accumulator width an output-stationary PE keeps are defined here,
next to the only model that uses them.  Re-exported by :mod:`sim.spec.chip`.
"""
from __future__ import annotations

import difflib
from typing import Annotated, Any, Optional

from pydantic import Field, ValidationInfo, field_validator, model_validator

from sim.errors import MappingError
from sim.spec import catalog
from sim.spec.dtypes import WIDER_RATE_CLASSES, get_format
from sim.spec.spec_base import (Flag, Name, NonEmpty, RateClass, _int, _num, _revalidate_with_rules, _Spec,
                                resolve_rate_class)

#: bytes of the word an output-stationary PE keeps: a 32-bit accumulator (TPU v1's "4 MiB of
#: 32-bit accumulators", Jouppi et al. ISCA 2017; fp32 accumulation on tensor cores, PTX ISA
#: mma/wgmma), whatever the format of the inputs
ACCUMULATOR_BYTES = 4

#: the dataflows an array lists when its file names none (weight-, output-, input-,
#: row-stationary).  An array may list any dataflow of the catalog: a file in dataflows/,
#: ``$SIM_DATAFLOW_DIR`` or the user folder (:func:`sim.spec.catalog.names`), so a new
#: dataflow file is usable by a chip without a code change
DATAFLOWS = ("ws", "os", "is", "rs")

Dataflow = Name


def _known_dataflow(name: str) -> str:
    """``name`` when a dataflow file of that name is in the catalog; else the error lists them."""
    known = catalog.names("dataflows")
    if name not in known:
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        raise ValueError(f"unknown dataflow '{name}'{hint} (valid: {', '.join(known)})")
    return name


# --------------------------------------------------------------------------- cores


class ArraySpec(_Spec):
    """One kind of MAC array in a core (``count`` identical copies per core).

    ``macs_per_pe_per_cycle`` gives, per rate class, the MACs one PE completes per cycle
    (fractions allowed: 0.5 = one MAC every two cycles).  Rate classes the array lacks
    fall back to wider ones it has (:data:`sim.spec.dtypes.WIDER_RATE_CLASSES`).
    """

    name: Name
    rows: _int(1, 1 << 16)
    cols: _int(1, 1 << 16)
    count: _int(1, 1 << 20) = 1
    # at least one MAC per 1,000 cycles: 1e-300 passed and became "dimension k must be >= 1, got
    # -9223372036854775808" (k / rate overflowed 64 bits); the slowest shipped rate is 0.6
    macs_per_pe_per_cycle: dict[RateClass, _num(ge=0.001, le=1e6)] = Field(min_length=1)  # type: ignore[valid-type]
    sparsity_2_4: Flag = False
    # dense-equivalent speedup of the 2:4 units over dense work: 2 in hardware (half the
    # MACs skipped); what a library's sparse kernels reach may be less (microbenchmarked)
    sparse_2_4_speedup: _num(ge=1, le=2) = 2.0
    # the share of its MAC slots the array keeps busy while it streams back-to-back work
    # (issue gaps, barrier waits between k-steps, an epilogue's share of a tile: what a
    # measured kernel loses below the datasheet rate that the engine does not model as
    # events of its own).  1: the datasheet's rate.  A calibration where a file sets it
    # (its comment names the microbenchmark); the MAC rates and energy per MAC stay the
    # datasheet's, only the time a step streams grows (sim.model.mapper.compute)
    sustained_fraction: _num(gt=0, le=1) = 1.0
    # the name of another array whose units this one is (the same tensor cores driven by
    # another library path, e.g. mma.sync instead of wgmma): it adds no area or PEs
    same_units_as: Optional[Name] = None
    dataflows: Annotated[tuple[Dataflow, ...], NonEmpty] = DATAFLOWS  # type: ignore[valid-type]
    default_dataflow: Optional[Dataflow] = Field(default=None, validate_default=True)  # type: ignore[valid-type]
    register_file_bytes_per_pe: _int(0, 1 << 20) = 0
    # True: the next fold's stationary operand is loaded while the current fold runs (the
    # TPU's double-buffered weight FIFO; GPU tensor cores issuing MMAs back to back), so a
    # tile pays one fill and drain, not one per fold.  False is SCALE-Sim's schedule (every
    # fold pays its own).  Not given: derived from the PE's register file
    # (:meth:`overlaps_folds`) - a PE that holds two stationary words double-buffers; one
    # with no room for a second copy (or no register_file_bytes_per_pe stated) does not.
    fold_overlap: Optional[Flag] = None
    # True: an edge fold (one that covers fewer rows or columns than the array has, e.g. a
    # GEMV's 8 rows on a 128-row array) lasts as long as a full one - SCALE-Sim's schedule,
    # and what a fixed-shape MMA instruction does (Hopper's wgmma always computes 64 rows,
    # PTX ISA 8.x, wgmma.mma_async).  False: an edge fold spans only the rows and columns it
    # uses - its stationary words load into the used rows and its inputs skew across the
    # used columns only; a reduction's sums still travel the column's output path to the
    # bottom edge (the PE reference's hardware, sim/model/reference/pe_array.py,
    # trim_edge_folds).  Unused columns then cost nothing; a taller array still lengthens
    # that output path, as it would in silicon.
    pads_edge_folds: Flag = False

    @field_validator("dataflows")
    @classmethod
    def _unique_dataflows(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        dups = sorted({d for d in v if v.count(d) > 1})
        if dups:
            raise ValueError(f"dataflows lists {', '.join(dups)} more than once")
        return tuple(_known_dataflow(d) for d in v)

    @field_validator("default_dataflow")
    @classmethod
    def _default_in_dataflows(cls, v: Optional[str], info: ValidationInfo) -> Optional[str]:
        flows = info.data.get("dataflows")
        if flows is None:  # dataflows itself is invalid; reported there
            return v
        if v is None:
            return flows[0]
        if v not in flows:
            raise ValueError(f"default_dataflow must be one of this array's dataflows ({', '.join(flows)})")
        return v

    @property
    def pes(self) -> int:
        """PEs in one copy of the array (rows x cols)."""
        return self.rows * self.cols

    def overlaps_folds(self, dataflow: str, rate_class: str, stationary_words: int = 1) -> bool:
        """Whether consecutive folds overlap (the next stationary operand loads during the
        current fold): ``fold_overlap`` when the file says, else whether the PE's register
        file has room for a second copy of what stays in it - ``stationary_words`` weights
        (WS: 1; RS: the row length) or inputs (IS) of the rate class's width, or an
        accumulator (OS, :data:`ACCUMULATOR_BYTES`)."""
        if self.fold_overlap is not None:
            return bool(self.fold_overlap)
        if dataflow == "os":
            word_bytes = ACCUMULATOR_BYTES
        else:
            word_bytes = get_format(resolve_rate_class(rate_class)).bits / 8
        return self.register_file_bytes_per_pe >= 2 * max(1, stationary_words) * word_bytes

    def rate_for(self, rate_class: str) -> tuple[float, str]:
        """(MACs per PE per cycle, rate class actually used) for ops of ``rate_class``.

        Falls back along :data:`sim.spec.dtypes.WIDER_RATE_CLASSES` (an fp4 op on an array with
        only bf16 units runs at the bf16 rate); raises :class:`MappingError` when neither the
        class nor any wider one is available.  Format names (``nvfp4``) are accepted.
        """
        rc = resolve_rate_class(rate_class)
        for cand in (rc, *WIDER_RATE_CLASSES[rc]):
            if cand in self.macs_per_pe_per_cycle:
                return self.macs_per_pe_per_cycle[cand], cand
        raise MappingError(
            f"array '{self.name}' cannot run {rc} ops: it has units for "
            f"{', '.join(self.macs_per_pe_per_cycle)} and {rc} may only widen to "
            f"{', '.join(WIDER_RATE_CLASSES[rc]) or 'nothing'}")

    def macs_per_cycle(self, rate_class: str, sparse: bool = False) -> float:
        """MACs per cycle of all ``count`` copies (dense-equivalent MACs when ``sparse``:
        2:4 units skip the zero half, so they complete up to twice the dense MACs per cycle)."""
        rate, _ = self.rate_for(rate_class)
        factor = self.sparse_2_4_speedup if (sparse and self.sparsity_2_4) else 1.0
        return self.count * self.pes * rate * factor


class VectorUnitSpec(_Spec):
    """Per-core SIMD unit for elementwise ops, reductions, softmax, normalisation."""

    lanes: _int(1, 1 << 24)
    ops_per_lane_per_cycle: _num(gt=0, le=1e6) = 1.0
    special_ops_per_cycle: Optional[_num(gt=0, le=1e9)] = None  # exp/recip per core per cycle

    @property
    def ops_per_cycle(self) -> float:
        """Elementwise ops per cycle per core."""
        return self.lanes * self.ops_per_lane_per_cycle

    @property
    def effective_special_ops_per_cycle(self) -> float:
        """exp / reciprocal / rsqrt per cycle per core (``lanes / 4`` when not given)."""
        return self.special_ops_per_cycle if self.special_ops_per_cycle is not None else self.lanes / 4


class CoresSpec(_Spec):
    count: _int(1, 1 << 20)
    arrays: Annotated[tuple[ArraySpec, ...], NonEmpty]
    vector_unit: VectorUnitSpec

    @model_validator(mode="wrap")
    @classmethod
    def _unique_array_names(cls, data: Any, handler: Any) -> Any:
        def rules(raw: dict) -> list:
            arrays = raw.get("arrays")
            if not isinstance(arrays, list):
                return []
            out, seen = [], {}
            for i, a in enumerate(arrays):
                name = a.get("name") if isinstance(a, dict) else None
                if isinstance(name, str):
                    if name in seen:
                        out.append((("arrays", i, "name"),
                                    f"duplicate array name '{name}' (also cores.arrays.{seen[name]})", name))
                    else:
                        seen[name] = i
            return out
        return _revalidate_with_rules(cls, data, handler, rules)
