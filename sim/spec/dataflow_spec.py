"""Typed, frozen description of a dataflow, read from ``dataflows/*.yaml``.

A dataflow file declares how a GEMM ``C[m×n] = A[m×k]·B[k×n]`` is laid onto an R×C array:
which dimension runs down the array rows (``spatial_rows``), which across the columns
(``spatial_cols``), which streams in time (``temporal``), and which operand stays put in the
PEs (``stationary_operand``).  The cycle and access formulas live in :mod:`sim.model.dataflow`;
this module only checks that a declaration is one those formulas cover, and says which rule
is broken when it is not.

Operands: A is the *input* (ifmap, activations), B the *weight* (filter), C the *output*.
"""
from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Dim = Literal["m", "k", "n"]

#: the GEMM dimensions that index each operand
OPERAND_DIMS: dict[str, frozenset[str]] = {
    "input": frozenset("mk"),
    "weight": frozenset("kn"),
    "output": frozenset("mn"),
    "weight_row": frozenset("kn"),
}


class RegisterFileWords(BaseModel):
    """Per-PE register-file capacity in words, per operand."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    weight: int = Field(ge=1, description="weight words a PE can hold")
    input: int = Field(ge=1, description="input words a PE can hold")
    psum: int = Field(ge=1, description="partial-sum words a PE can hold")


class DataflowSpec(BaseModel):
    """One dataflow, as declared in ``dataflows/<name>.yaml``.

    Fields are validated in the order written here, so the cross-field rules can name the key
    that breaks them (and the loader can point at its line).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    schema_version: Literal[1]
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$", description="short name, equal to the file stem")
    full_name: str = Field(min_length=1)
    stationary_operand: Literal["weight", "input", "output", "weight_row"]
    spatial_cols: Dim
    temporal: Dim
    spatial_rows: Dim
    register_file_words: RegisterFileWords
    row_length: int = Field(default=1, ge=1, description="RS only: weights per PE (k-segment length L)")
    description: str = ""
    references: tuple[str, ...] = ()

    @property
    def is_row_stationary(self) -> bool:
        return self.stationary_operand == "weight_row"

    @property
    def reduction_on_rows(self) -> bool:
        """True when partial sums travel down the columns (everything but output-stationary)."""
        return self.stationary_operand != "output"

    @field_validator("temporal")
    @classmethod
    def _temporal(cls, v: str, info: ValidationInfo) -> str:
        cols = info.data.get("spatial_cols")
        if cols is not None and v == cols:
            raise ValueError("temporal must differ from spatial_cols: m, k and n are each used once")
        return v

    @field_validator("spatial_rows")
    @classmethod
    def _rows(cls, v: str, info: ValidationInfo) -> str:
        cols, temporal, stat = (info.data.get(x) for x in ("spatial_cols", "temporal", "stationary_operand"))
        if cols is None or temporal is None or stat is None:
            return v  # reported on their own keys
        if v in (cols, temporal):
            raise ValueError(
                "spatial_rows, spatial_cols and temporal must be m, k and n in some order, each "
                f"once (got {v}, {cols}, {temporal})")
        want = OPERAND_DIMS[stat]
        if {v, cols} != want:
            raise ValueError(
                f"with stationary_operand '{stat}' the array must hold the dimensions of the "
                f"{'weight' if stat == 'weight_row' else stat} ({' and '.join(sorted(want))}), got "
                f"spatial_rows={v}, spatial_cols={cols}")
        if stat != "output" and v != "k":
            raise ValueError(
                "when the output is not stationary, partial sums are reduced down the array "
                "columns, so spatial_rows must be k")
        if stat == "weight_row" and (v, cols, temporal) != ("k", "n", "m"):
            raise ValueError("row-stationary supports spatial_rows=k, spatial_cols=n, temporal=m only")
        return v

    @field_validator("row_length")
    @classmethod
    def _row_length(cls, v: int, info: ValidationInfo) -> int:
        stat = info.data.get("stationary_operand")
        rf = info.data.get("register_file_words")
        if stat is not None and stat != "weight_row" and v != 1:
            raise ValueError(
                f"row_length applies to the row-stationary dataflow only; with "
                f"stationary_operand '{stat}' it must be 1")
        if stat == "weight_row" and rf is not None and rf.weight < v:
            raise ValueError(
                f"row_length must not exceed the weight register file (register_file_words.weight "
                f"= {rf.weight}): each PE holds row_length weights")
        return v
