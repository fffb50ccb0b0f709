"""The shared base of the chip-file models: the ``_Spec`` pydantic base and its field helpers.

Every chip-file model (:mod:`sim.spec.compute_spec`, :mod:`sim.spec.memory_spec`,
:mod:`sim.spec.mapping_spec`, :mod:`sim.spec.chip`) derives from :class:`_Spec` (frozen,
unknown keys rejected, finite numbers only, hashed by value) and declares its fields with the
strict, bounded scalar types here (``_int``, ``_num``, ``Name``, ``Flag``...).  The helpers
that report cross-field rules at the key that breaks them (``_rule_errors``,
``_revalidate_with_rules``) and :func:`resolve_rate_class` live here too: each part module
imports this one and none of the others (only :mod:`sim.spec.chip`, on top, imports them all).
"""
from __future__ import annotations

import json
from typing import Annotated, Any, Literal, Optional

from pydantic import (AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, Strict,
                      ValidationError)
from pydantic_core import InitErrorDetails, PydanticCustomError

from sim.errors import UnknownNameError
from sim.spec.dtypes import RATE_CLASSES, get_format

RateClass = Literal[RATE_CLASSES]  # type: ignore[valid-type]


# --------------------------------------------------------------------------- scalar types
# Strict: YAML already yields typed values, and lax coercion would turn ``rows: yes`` into 1.


def _int(ge: int, le: int) -> Any:
    return Annotated[int, Strict(), Field(ge=ge, le=le)]


def _num(*, gt: float | None = None, ge: float | None = None, le: float) -> Any:
    """A float field; integers are accepted (``clock_mhz: 700``), strings and booleans are not."""
    return Annotated[float, Strict(), Field(gt=gt, ge=ge, le=le)]


def _non_empty(value: Any) -> Any:
    # checked on the raw list: a length constraint on a tuple would also fire when items fail
    if isinstance(value, (list, tuple)) and len(value) == 0:
        raise ValueError("must list at least one item")
    return value


NonEmpty = BeforeValidator(_non_empty)
_BIG = 1 << 30
Name = Annotated[str, Strict(), Field(min_length=1, max_length=200)]


def is_file_safe(value: str) -> bool:
    """Whether a name can be part of a file or folder name without leading out of its folder:
    no path separator, no control character, no leading '.'."""
    return not (value.startswith(".") or any(c in value for c in "/\\") or any(ord(c) < 32 for c in value))


def _file_safe(value: str) -> str:
    """A name that becomes part of file names (result and cache files; ``name: ../../x`` wrote
    outside the cache folder)."""
    if not is_file_safe(value):
        raise ValueError("a name is used in file names: no '/', '\\', control characters or leading '.'")
    return value


FileSafeName = Annotated[Name, AfterValidator(_file_safe)]
Flag = Annotated[bool, Strict()]
EnergyPj = _num(ge=0, le=1e6)  # picojoules per byte / per op
NodeNm = _num(gt=0, le=1000)  # process node in nanometres
TimeNs = _num(ge=0, le=1e6)  # DRAM timing parameter in nanoseconds


def _rule_errors(title: str, problems: list[tuple[tuple[Any, ...], str, Any]]) -> ValidationError:
    """A ValidationError whose line errors sit at the given locations (relative to the model)."""
    return ValidationError.from_exception_data(
        title,
        [InitErrorDetails(type=PydanticCustomError("chip_rule", msg), loc=loc, input=value)
         for loc, msg, value in problems],
    )


def _revalidate_with_rules(cls: type[BaseModel], data: Any, handler: Any, rules: Any) -> Any:
    """Run the normal validation and the raw-data ``rules`` and report both sets together.

    ``rules(data)`` returns (loc, message, input) triples checked on the raw mapping, so a
    structural problem (e.g. DRAM not last) is reported even when a field elsewhere in the
    same list is also wrong.
    """
    problems: list[InitErrorDetails] = []
    result = None
    try:
        result = handler(data)
    except ValidationError as exc:
        for err in exc.errors(include_url=False):
            problems.append(InitErrorDetails(type=PydanticCustomError(err["type"], err["msg"], err.get("ctx")),
                                             loc=err["loc"], input=err.get("input")))
    if isinstance(data, dict):
        for loc, msg, value in rules(data):
            problems.append(InitErrorDetails(type=PydanticCustomError("chip_rule", msg), loc=loc, input=value))
    if problems:
        raise ValidationError.from_exception_data(cls.__name__, problems)
    return result


def resolve_rate_class(name: str) -> str:
    """A rate class (``bf16``) or a number-format name (``nvfp4`` -> ``fp4``) -> rate class."""
    key = str(name).strip().lower()
    if key in RATE_CLASSES:
        return key
    try:
        rc = get_format(key).rate_class
    except UnknownNameError:
        rc = None
    if rc not in RATE_CLASSES:  # unknown, or a storage-only format such as int32
        raise UnknownNameError("rate class", name, list(RATE_CLASSES))
    return rc


class _Spec(BaseModel):
    """Base of every chip-file model: frozen, unknown keys rejected, finite numbers only.

    Equality and hashing use the field values only (private attributes such as the source
    path are metadata); dict-valued fields hash through a canonical JSON form.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    _hash: Optional[int] = PrivateAttr(default=None)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return self.__dict__ == other.__dict__  # type: ignore[union-attr]

    def __hash__(self) -> int:
        if self._hash is None:
            canonical = json.dumps(self.model_dump(mode="json"), sort_keys=True)
            self._hash = hash((type(self).__name__, canonical))
        return self._hash

    def model_copy(self, *, update: Optional[dict[str, Any]] = None, deep: bool = False) -> Any:
        new = super().model_copy(update=update, deep=deep)
        new._hash = None  # the value may have changed
        return new

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible data (round-trips through the loader)."""
        return self.model_dump(mode="json")
