"""The chip description: frozen pydantic models for ``arch_configs/*.yaml``.

A chip is a number of identical **cores**, each with one or more kinds of systolic/MAC
**arrays** and a **vector unit**; a **memory** hierarchy ordered innermost -> outermost
(optional per-PE registers, one or more SRAM levels, exactly one DRAM level, last); a
**noc** joining chip-level memory to the cores; and optional **energy**, **area**,
**runtime** and **interconnect** blocks.

Units live in the key names (``clock_mhz``, ``capacity_kib``, ``t_rcd_ns``...).  Every
numeric field has bounds; integers must be written as integers and numbers as numbers
(``rows: yes`` or ``rows: "32"`` are errors, not 1 or 32).  Cross-field rules (partition
sum, level order, default dataflow, DRAM geometry) are checked in the models and reported
at the key that breaks them; :func:`sim.spec.loader.validate` turns all problems into
one :class:`~sim.errors.ConfigError` with file, line and dotted path.

Derived helpers (``peak_flops``, ``dram_peak_bytes_per_s``...) are pure functions of the
spec.  Specs are frozen, compare by value and are hashable (so results can be memoised
per (chip, op)); ``source_path`` and ``overrides`` record where a spec came from and are
not part of its value.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import (BaseModel, BeforeValidator, ConfigDict, Field, PrivateAttr, Strict, ValidationError,
                      ValidationInfo, field_validator, model_validator)
from pydantic_core import InitErrorDetails, PydanticCustomError

from sim.errors import MappingError, UnknownNameError
from sim.spec.dram_technology import DRAM_TECHNOLOGIES, dram_technology, technology_key
from sim.spec.dtypes import RATE_CLASSES, WIDER_RATE_CLASSES, get_format

__all__ = [
    "SCHEMA_VERSION", "DATAFLOWS", "RateClass", "Dataflow",
    "ArraySpec", "VectorUnitSpec", "CoresSpec",
    "RegistersLevel", "SramPartition", "SramLevel", "DramLevel", "MemoryLevel", "MemorySpec",
    "NocSpec", "EnergySpec", "PowerSpec", "KernelSpec", "kernel_entry", "AreaSpec", "RuntimeSpec", "InterconnectSpec", "ChipSpec",
    "resolve_rate_class",
]

#: bytes of the word an output-stationary PE keeps: a 32-bit accumulator (TPU v1's "4 MiB of
#: 32-bit accumulators", Jouppi et al. ISCA 2017; fp32 accumulation on tensor cores, PTX ISA
#: mma/wgmma), whatever the format of the inputs
ACCUMULATOR_BYTES = 4

SCHEMA_VERSION = 1
#: dataflow names an array may list (weight-, output-, input-, row-stationary)
DATAFLOWS = ("ws", "os", "is", "rs")

RateClass = Literal[RATE_CLASSES]  # type: ignore[valid-type]
Dataflow = Literal[DATAFLOWS]  # type: ignore[valid-type]


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
    macs_per_pe_per_cycle: dict[RateClass, _num(gt=0, le=1e6)] = Field(min_length=1)  # type: ignore[valid-type]
    sparsity_2_4: Flag = False
    # dense-equivalent speedup of the 2:4 units over dense work: 2 in hardware (half the
    # MACs skipped); what a library's sparse kernels reach may be less (microbenchmarked)
    sparse_2_4_speedup: _num(ge=1, le=2) = 2.0
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

    @field_validator("dataflows")
    @classmethod
    def _unique_dataflows(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        dups = sorted({d for d in v if v.count(d) > 1})
        if dups:
            raise ValueError(f"dataflows lists {', '.join(dups)} more than once")
        return v

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


# --------------------------------------------------------------------------- memory


class RegistersLevel(_Spec):
    """Per-PE register storage (operand registers, accumulators) next to the array."""

    kind: Literal["registers"]
    name: Name
    bytes_per_pe: _int(1, 1 << 20)
    read_energy_pj_per_byte: Optional[EnergyPj] = None
    write_energy_pj_per_byte: Optional[EnergyPj] = None


class SramPartition(_Spec):
    """A split of an SRAM level between operands (KiB each)."""

    input_kib: _num(ge=0, le=_BIG)
    weight_kib: _num(ge=0, le=_BIG)
    output_kib: _num(ge=0, le=_BIG)

    @property
    def total_kib(self) -> float:
        return self.input_kib + self.weight_kib + self.output_kib


class SramLevel(_Spec):
    """A scratchpad (``scope: core``, one per core) or a shared buffer/L2 (``scope: chip``).

    ``capacity_kib`` and ``bytes_per_cycle`` are per core for ``scope: core`` and for the
    whole chip for ``scope: chip``.  ``partition`` reserves space per operand (``None`` =
    one unified buffer); ``double_buffered`` means half of each buffer is filled while the
    other half is used.  ``latency_cycles`` is the access latency: for the per-core tile
    buffer, the read-to-use latency a step pays when its operands have just landed (the
    engine hides it when they landed earlier; 0 under ideal memory); for a chip-level
    level, the hit latency of the shared cache.
    """

    kind: Literal["sram"]
    name: Name
    scope: Literal["core", "chip"]
    capacity_kib: _num(gt=0, le=_BIG)
    partition: Optional[SramPartition] = None
    banks: _int(1, 1 << 16) = 1
    bytes_per_cycle: _num(gt=0, le=1e9)
    latency_cycles: _int(0, 1 << 30) = 1
    double_buffered: Flag = True
    # tile buffers per operand for multi-stage prefetch (GPU kernels keep 3-6 stages in
    # flight); None = 2 when double_buffered, else 1
    pipeline_stages: Optional[_int(1, 64)] = None
    read_energy_pj_per_byte: Optional[EnergyPj] = None
    write_energy_pj_per_byte: Optional[EnergyPj] = None

    @property
    def buffers(self) -> int:
        """Tile buffers per operand (prefetch depth + 1)."""
        if self.pipeline_stages is not None:
            return self.pipeline_stages
        return 2 if self.double_buffered else 1

    @model_validator(mode="after")
    def _partition_fits(self) -> "SramLevel":
        p = self.partition
        if p is not None and p.total_kib > self.capacity_kib * (1 + 1e-12):
            raise _rule_errors("SramLevel", [(
                ("partition",),
                f"partition needs {p.total_kib:g} KiB (input_kib {p.input_kib:g} + weight_kib "
                f"{p.weight_kib:g} + output_kib {p.output_kib:g}), more than capacity_kib {self.capacity_kib:g}",
                p.model_dump())])
        return self

    @property
    def capacity_bytes(self) -> int:
        """Capacity in bytes (per core for ``scope: core``)."""
        return int(round(self.capacity_kib * 1024))

    def operand_bytes(self, operand: str) -> int:
        """Bytes reserved for ``operand`` (input/weight/output); the whole level when unified."""
        if self.partition is None:
            return self.capacity_bytes
        if operand not in ("input", "weight", "output"):
            raise UnknownNameError("operand", operand, ["input", "weight", "output"])
        return int(round(getattr(self.partition, f"{operand}_kib") * 1024))


class DramLevel(_Spec):
    """Off-chip DRAM (DDR, LPDDR, HBM), the last memory level.

    Geometry: ``channels`` independent channels over the whole device (all stacks), each
    split into ``pseudo_channels_per_channel`` pseudo-channels whose data bus is
    ``bus_width_bits`` wide.  One access moves ``bus_width_bits * burst_length / 8``
    bytes.  ``technology`` names a speed-bin family (``sim.spec.dram_technology.DRAM_TECHNOLOGIES``:
    DDR3, DDR4, LPDDR5, LPDDR5X, HBM2, HBM2E, HBM3, HBM3E); its interface clock tCK
    follows from the pin rate.  Column-to-column timings are in clock cycles of that
    clock (``t_ccd_s_nck`` ...; None = the technology's JEDEC value), so they scale with
    ``data_rate_gbps_per_pin``; array-core timings (tRCD, tRP, tRAS, tRFC ...) are in ns.
    """

    kind: Literal["dram"]
    name: Name
    technology: Name
    capacity_gib: _num(gt=0, le=1 << 20)
    channels: _int(1, 1 << 16)
    pseudo_channels_per_channel: _int(1, 64) = 1
    bus_width_bits: _int(1, 4096)
    data_rate_gbps_per_pin: _num(gt=0, le=100)
    burst_length: _int(1, 256)
    banks_per_pseudo_channel: _int(1, 1 << 12)
    row_buffer_bytes: _int(1, 1 << 24)
    interleave_bytes: _int(1, 1 << 30)
    t_rcd_ns: TimeNs
    t_rp_ns: TimeNs
    t_cl_ns: TimeNs
    t_ras_ns: TimeNs
    t_rrd_ns: TimeNs
    t_faw_ns: TimeNs
    t_rfc_ns: TimeNs
    t_refi_ns: TimeNs
    t_wr_ns: TimeNs
    # legacy: a fixed tCCD in ns does not scale with the pin rate; prefer t_ccd_s_nck
    t_ccd_ns: Optional[TimeNs] = None
    # bank groups per pseudo-channel (None: no bank-group timing) and the column/ACT
    # spacings in interface clocks tCK (None: the technology's JEDEC value); the ns
    # fields are analog floors: tCCD_L = max(t_ccd_l_nck tCK, t_ccd_l_ns), tRRD_S =
    # max(t_rrd_s_nck tCK, t_rrd_ns), tRRD_L = max(t_rrd_l_nck tCK, t_rrd_l_ns)
    bank_groups: Optional[_int(1, 1 << 12)] = None
    t_ccd_s_nck: Optional[_num(gt=0, le=1024)] = None
    t_ccd_l_nck: Optional[_num(gt=0, le=1024)] = None
    t_ccd_l_ns: Optional[TimeNs] = None
    t_rrd_s_nck: Optional[_num(gt=0, le=1024)] = None
    t_rrd_l_nck: Optional[_num(gt=0, le=1024)] = None
    t_rrd_l_ns: Optional[TimeNs] = None
    controller_latency_ns: TimeNs = 0.0
    max_outstanding_requests_per_core: _int(1, 1 << 20) = 64
    # refresh: "per_bank" (HBM/LPDDR REFpb: one bank at a time for t_rfc_pb_ns) or
    # "all_bank"; None = by technology (per_bank for HBM*/LPDDR*, all_bank otherwise)
    refresh_mode: Optional[Literal["per_bank", "all_bank"]] = None
    t_rfc_pb_ns: Optional[_num(ge=0, le=1e6)] = None
    read_energy_pj_per_byte: Optional[EnergyPj] = None
    write_energy_pj_per_byte: Optional[EnergyPj] = None

    @model_validator(mode="after")
    def _geometry(self) -> "DramLevel":
        problems: list[tuple[tuple[Any, ...], str, Any]] = []
        bits = self.bus_width_bits * self.burst_length
        if bits % 8:
            problems.append((("burst_length",), f"bus_width_bits x burst_length = {bits} bits is not a whole "
                             "number of bytes", self.burst_length))
        access = bits // 8
        if self.row_buffer_bytes < access:
            problems.append((("row_buffer_bytes",), f"row_buffer_bytes must be at least one access "
                             f"(bus_width_bits x burst_length / 8 = {access} bytes)", self.row_buffer_bytes))
        il = self.interleave_bytes
        if il & (il - 1):
            problems.append((("interleave_bytes",), "interleave_bytes must be a power of two", il))
        elif il < access:
            problems.append((("interleave_bytes",), f"interleave_bytes must be at least one access "
                             f"({access} bytes)", il))
        elif il > self.row_buffer_bytes:
            problems.append((("interleave_bytes",), f"interleave_bytes must not exceed row_buffer_bytes "
                             f"({self.row_buffer_bytes})", il))
        if self.t_refi_ns <= self.t_rfc_ns:
            problems.append((("t_refi_ns",), f"t_refi_ns must be larger than t_rfc_ns ({self.t_rfc_ns:g})",
                             self.t_refi_ns))
        if technology_key(self.technology) not in DRAM_TECHNOLOGIES:
            problems.append((("technology",), f"unknown DRAM technology {self.technology!r}; valid: "
                             f"{', '.join(DRAM_TECHNOLOGIES)}", self.technology))
        if self.bank_groups is not None and self.banks_per_pseudo_channel % self.bank_groups:
            problems.append((("bank_groups",), f"bank_groups must divide banks_per_pseudo_channel "
                             f"({self.banks_per_pseudo_channel})", self.bank_groups))
        if self.t_ccd_ns is not None and self.t_ccd_s_nck is not None:
            problems.append((("t_ccd_ns",), "give either t_ccd_ns (fixed ns, legacy) or t_ccd_s_nck "
                             "(clock cycles, scales with the pin rate), not both", self.t_ccd_ns))
        if problems:
            raise _rule_errors("DramLevel", problems)
        return self

    @property
    def pseudo_channels(self) -> int:
        """Independently scheduled pseudo-channels in the whole device."""
        return self.channels * self.pseudo_channels_per_channel

    @property
    def access_bytes(self) -> int:
        """Bytes moved by one burst (the access granularity)."""
        return self.bus_width_bits * self.burst_length // 8

    @property
    def pseudo_channel_bytes_per_s(self) -> float:
        """Peak data bandwidth of one pseudo-channel, bytes/s."""
        return self.bus_width_bits / 8 * self.data_rate_gbps_per_pin * 1e9

    @property
    def peak_bytes_per_s(self) -> float:
        """Peak data bandwidth of the whole device, bytes/s (no refresh or turnaround losses)."""
        return self.pseudo_channels * self.pseudo_channel_bytes_per_s

    @property
    def burst_ns(self) -> float:
        """Time one burst occupies a pseudo-channel's data bus, ns."""
        return self.burst_length / self.data_rate_gbps_per_pin

    @property
    def tck_ns(self) -> float:
        """Interface clock period of the technology's timing tables, ns (from the pin rate)."""
        return dram_technology(self.technology).beats_per_tck / self.data_rate_gbps_per_pin

    @property
    def effective_t_ccd_ns(self) -> float:
        """Minimum spacing of column commands on one pseudo-channel (tCCD_S): ``t_ccd_ns``
        (legacy, fixed) or ``t_ccd_s_nck`` (default: the technology's) x tCK."""
        if self.t_ccd_ns is not None:
            return self.t_ccd_ns
        n = self.t_ccd_s_nck if self.t_ccd_s_nck is not None else dram_technology(self.technology).t_ccd_s_nck
        return n * self.tck_ns

    @property
    def bus_peak_bytes_per_s(self) -> float:
        """Highest bandwidth the data buses can carry, one burst per max(burst, tCCD_S) on
        every pseudo-channel: the peak the DRAM model can reach.  Equals
        :attr:`peak_bytes_per_s` unless a column timing is longer than a burst."""
        return self.pseudo_channels * self.access_bytes / max(self.burst_ns, self.effective_t_ccd_ns) * 1e9

    @property
    def t_rc_ns(self) -> float:
        """Row cycle time (activate to activate, same bank) = t_ras + t_rp, ns."""
        return self.t_ras_ns + self.t_rp_ns

    @property
    def capacity_bytes(self) -> int:
        return int(round(self.capacity_gib * (1 << 30)))


MemoryLevel = Annotated[Union[RegistersLevel, SramLevel, DramLevel], Field(discriminator="kind")]
_LEVEL_KINDS = ("registers", "sram", "dram")


class MemorySpec(_Spec):
    """Memory levels, innermost first.

    Rules: level names unique; at most one ``registers`` level, first; at least one
    ``sram`` level with ``scope: core``; ``scope: core`` SRAMs before ``scope: chip`` ones;
    exactly one ``dram`` level, last.
    """

    levels: Annotated[tuple[MemoryLevel, ...], NonEmpty]

    @model_validator(mode="wrap")
    @classmethod
    def _level_rules(cls, data: Any, handler: Any) -> Any:
        return _revalidate_with_rules(cls, data, handler, _level_rules)

    # -- helpers
    @property
    def dram(self) -> DramLevel:
        return next(lv for lv in self.levels if isinstance(lv, DramLevel))

    @property
    def registers(self) -> Optional[RegistersLevel]:
        return next((lv for lv in self.levels if isinstance(lv, RegistersLevel)), None)

    @property
    def core_srams(self) -> tuple[SramLevel, ...]:
        return tuple(lv for lv in self.levels if isinstance(lv, SramLevel) and lv.scope == "core")

    @property
    def chip_srams(self) -> tuple[SramLevel, ...]:
        return tuple(lv for lv in self.levels if isinstance(lv, SramLevel) and lv.scope == "chip")

    def level(self, name: str) -> Union[RegistersLevel, SramLevel, DramLevel]:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise UnknownNameError("memory level", name, [lv.name for lv in self.levels])


def _level_rules(raw: dict) -> list[tuple[tuple[Any, ...], str, Any]]:
    levels = raw.get("levels")
    if not isinstance(levels, list) or not levels:
        return []
    out: list[tuple[tuple[Any, ...], str, Any]] = []
    n = len(levels)
    kinds = [lv.get("kind") if isinstance(lv, dict) else None for lv in levels]
    seen: dict[str, int] = {}
    for i, lv in enumerate(levels):
        name = lv.get("name") if isinstance(lv, dict) else None
        if isinstance(name, str):
            if name in seen:
                out.append((("levels", i, "name"), f"duplicate level name '{name}' (also memory.levels.{seen[name]})", name))
            else:
                seen[name] = i
    regs = [i for i, k in enumerate(kinds) if k == "registers"]
    for i in regs:
        if i != 0:
            out.append((("levels", i, "kind"), "a registers level must be the first (innermost) level", "registers"))
    drams = [i for i, k in enumerate(kinds) if k == "dram"]
    if not drams and all(k in _LEVEL_KINDS for k in kinds):
        out.append((("levels",), "exactly one level with kind: dram is required, as the last level", levels))
    for i in drams:
        if i != n - 1:
            out.append((("levels", i, "kind"), f"the dram level must be the last (outermost) level; it is "
                        f"memory.levels.{i} of {n}", "dram"))
    for i in drams[1:]:
        out.append((("levels", i, "kind"), f"only one dram level is allowed (first one is memory.levels.{drams[0]})", "dram"))
    srams = [(i, lv.get("scope")) for i, lv in enumerate(levels) if isinstance(lv, dict) and lv.get("kind") == "sram"]
    if not any(scope == "core" for _, scope in srams) and all(k in _LEVEL_KINDS for k in kinds):
        out.append((("levels",), "at least one level with kind: sram and scope: core is required "
                    "(the per-core scratchpad the arrays read)", levels))
    first_chip = next((i for i, s in srams if s == "chip"), None)
    if first_chip is not None:
        for i, s in srams:
            if s == "core" and i > first_chip:
                out.append((("levels", i, "scope"), f"a scope: core sram must come before scope: chip srams "
                            f"(memory.levels.{first_chip} is scope: chip)", "core"))
    return out


# --------------------------------------------------------------------------- the rest


class NocSpec(_Spec):
    """On-chip network between chip-level memory (chip SRAM or DRAM) and the cores."""

    bandwidth_bytes_per_cycle: _num(gt=0, le=1e9)  # aggregate over all cores
    latency_cycles: _int(0, 1 << 30) = 0
    energy_pj_per_byte: Optional[EnergyPj] = None


class EnergySpec(_Spec):
    """Energy per event; ``None`` means the library default (decided by the energy model)."""

    mac_pj: dict[RateClass, EnergyPj] = Field(default_factory=dict)  # type: ignore[valid-type]
    # energy of one PE-cycle of an array's units beyond its arithmetic (instruction issue,
    # operand delivery, accumulator traffic, clocking of the datapath), by array name; an
    # array that is another path onto the same units (same_units_as) uses its base's.  An
    # op's MACs cost mac_pj[class] each plus this per PE-cycle the units need at their own
    # rate for the class (MACs / the base array's macs_per_pe_per_cycle)
    array_pe_cycle_pj: dict[str, EnergyPj] = Field(default_factory=dict)
    vector_op_pj: Optional[EnergyPj] = None
    static_power_w: _num(ge=0, le=1e5) = 0.0
    technology_node_nm: Optional[NodeNm] = None


class PowerSpec(_Spec):
    """Board power limit and the clock/voltage range the chip's DVFS moves in.

    The power of an op at clock f is ``idle_w`` plus its dynamic energy over its duration;
    the energy tables are at the voltage of ``boost_clock_mhz`` and the core-rail events
    (MACs, vector ops, registers, SRAMs, L2, on-chip network) scale with the square of the
    voltage (CMOS dynamic energy C V^2 per switched capacitance), the voltage linear in f
    between ``(min_clock_mhz, voltage_at_min_clock)`` and ``(boost_clock_mhz, 1)``; DRAM and
    off-chip links are on their own supplies and do not scale.  With ``dvfs: true`` every
    op runs at the highest clock (on a ``clock_step_mhz`` grid) whose power fits ``tdp_w``
    (:mod:`sim.model.cost.power`); otherwise every op runs at ``clock_mhz``.
    """

    tdp_w: _num(gt=0, le=1e6)
    # power drawn with no work (leakage, clocks, HBM refresh, board): the floor of every op
    idle_w: _num(ge=0, le=1e6) = 0.0
    boost_clock_mhz: _num(gt=0, le=100_000)
    min_clock_mhz: _num(gt=0, le=100_000)
    # V(min_clock_mhz) / V(boost_clock_mhz)
    voltage_at_min_clock: _num(gt=0, le=1) = 1.0
    clock_step_mhz: _num(gt=0, le=10_000) = 1.0
    dvfs: Flag = False

    @model_validator(mode="after")
    def _clock_range(self) -> "PowerSpec":
        problems = []
        if self.min_clock_mhz >= self.boost_clock_mhz:
            problems.append((("min_clock_mhz",), f"min_clock_mhz {self.min_clock_mhz:g} must be below "
                             f"boost_clock_mhz {self.boost_clock_mhz:g}", self.min_clock_mhz))
        if self.idle_w >= self.tdp_w:
            problems.append((("idle_w",), f"idle_w {self.idle_w:g} must be below tdp_w {self.tdp_w:g}", self.idle_w))
        if problems:
            raise _rule_errors("PowerSpec", problems)
        return self

    def voltage_ratio(self, clock_mhz: float) -> float:
        """V(clock) / V(boost): linear between the min and boost clocks, held beyond them."""
        f = min(max(float(clock_mhz), self.min_clock_mhz), self.boost_clock_mhz)
        x = (f - self.min_clock_mhz) / (self.boost_clock_mhz - self.min_clock_mhz)
        return self.voltage_at_min_clock + (1.0 - self.voltage_at_min_clock) * x


class AreaSpec(_Spec):
    mac_um2: dict[RateClass, _num(ge=0, le=1e9)] = Field(default_factory=dict)  # type: ignore[valid-type]
    sram_mm2_per_mib: Optional[_num(ge=0, le=1e6)] = None
    other_mm2: _num(ge=0, le=1e6) = 0.0
    technology_node_nm: Optional[NodeNm] = None


class RuntimeSpec(_Spec):
    """Fixed software/launch costs.  ``op_launch_overhead_ns`` is added to every op (one
    kernel launch each, back to back on the device); ``event_timing_overhead_ns`` is what
    an event-timed measurement adds once around a timed region (the event pair and the
    first launch), used by ``sim validate`` to compare with such measurements."""

    op_launch_overhead_ns: _num(ge=0, le=1e9) = 0.0
    event_timing_overhead_ns: _num(ge=0, le=1e9) = 0.0
    # the runtime's device-to-device memcpy: above memcpy_split_bytes, a size that is not a
    # whole number of memcpy_page_bytes costs memcpy_tail_ns more (its tail is a second
    # operation); 0 = no such cost
    memcpy_split_bytes: _int(0, 1 << 50) = 0
    memcpy_page_bytes: _int(1, 1 << 30) = 4096
    memcpy_tail_ns: _num(ge=0, le=1e9) = 0.0

    def memcpy_extra_ns(self, nbytes: int) -> float:
        """Extra time of one device-to-device memcpy of ``nbytes`` beyond its bytes."""
        split = self.memcpy_split_bytes
        if split and nbytes > split and nbytes % self.memcpy_page_bytes:
            return float(self.memcpy_tail_ns)
        return 0.0


class InterconnectSpec(_Spec):
    """Chip-to-chip links for multi-chip runs."""

    link_bandwidth_gb_per_s: _num(gt=0, le=1e6)  # per direction per link
    links_per_chip: _int(1, 1 << 12) = 1
    link_latency_ns: _num(ge=0, le=1e9) = 0.0
    topology: Literal["ring", "switch", "torus2d", "fully_connected"] = "ring"
    energy_pj_per_byte: Optional[EnergyPj] = None

    @property
    def chip_bytes_per_s(self) -> float:
        """Injection bandwidth of one chip, per direction, bytes/s."""
        return self.link_bandwidth_gb_per_s * 1e9 * self.links_per_chip


class KernelSpec(_Spec):
    """One GEMM kernel of a library path's fixed list (``mapping.array_kernels``), as its
    name spells it (CUTLASS ``..._128x256_32x3_...``: tile_m x tile_n, k tile, stages)."""

    tile_m: _int(1, 1 << 20)
    tile_n: _int(1, 1 << 20)
    # the k tile in bytes of the narrower operand (32 bf16 or 64 int8 elements = 64 B);
    # None: the mapping's tile_k_bytes
    tile_k_bytes: Optional[_int(1, 1 << 20)] = None
    stages: _int(1, 64)
    # threads per block on an array of one lane per PE (SIMT), as the list's fourth value
    threads: Optional[_int(1, 1 << 20)] = None

    def as_tuple(self) -> tuple:
        """(tile_m, tile_n, stages, threads or 0, tile_k_bytes or 0)."""
        return (self.tile_m, self.tile_n, self.stages, self.threads or 0, self.tile_k_bytes or 0)


def kernel_entry(entry) -> tuple:
    """An ``array_kernels`` entry as (tile_m, tile_n, stages, threads or 0, tile_k_bytes or 0)."""
    if isinstance(entry, KernelSpec):
        return entry.as_tuple()
    t = tuple(entry)
    return (t[0], t[1], t[2], t[3] if len(t) > 3 else 0, 0)


class MappingSpec(_Spec):
    """Constraints on how ops are mapped, for chips whose kernels come from a library
    (a GPU's cuBLAS/CUTLASS offers a fixed menu of tile shapes); None = free search.

    ``tile_m``/``tile_n``: allowed tile sizes along m and n; ``tile_k_bytes``: the k tile
    in bytes of the A operand (128 -> 64 bf16 or 128 fp8 elements); ``split_k``: allowed
    split-K factors (partial sums reduced by a second pass); ``distribution``: how work is
    spread over cores (``cyclic`` deals output tiles like thread blocks: each core that finishes takes the next).
    """

    distribution: Literal["any", "block", "cyclic"] = "any"
    tile_m: Optional[tuple[_int(1, 1 << 20), ...]] = None
    tile_n: Optional[tuple[_int(1, 1 << 20), ...]] = None
    tile_k_bytes: Optional[_int(1, 1 << 20)] = None
    split_k: tuple[_int(1, 1024), ...] = (1,)
    # cores whose loads of the same tile are multicast (a GPU thread-block cluster with
    # TMA multicast): one trip over the chip-level cache's bus serves them all
    cluster_size: _int(1, 64) = 1
    # arrays whose library kernels run in such clusters (None: all of them); kernels of the
    # other arrays load tiles one core at a time
    cluster_arrays: Optional[tuple[str, ...]] = None
    # tile shapes a GEMM kernel of the library can have, on the arrays of tile_rule_arrays
    # (None: all): at least one of tile_m, tile_n (rounded up to 8) is a multiple of
    # tile_one_side_multiple (a Hopper warpgroup MMA is 64 rows on one operand's side), and
    # tile_m x tile_n is at most tile_max_elements (the fp32 accumulators live in registers)
    tile_one_side_multiple: Optional[_int(1, 1 << 20)] = None
    tile_max_elements: Optional[_int(1, 1 << 40)] = None
    tile_rule_arrays: Optional[tuple[str, ...]] = None
    # GEMM kernels of a library path bound to one array, by array name: the only
    # (tile_m, tile_n, smem stages) it offers, and its split-K factors (default split_k).
    # An optional fourth value is the kernel's threads per block on an array of one lane
    # per PE (SIMT): a block of fewer threads than the array has PEs uses only that share
    # of it, and as many such blocks as fit share the core at once
    array_kernels: dict[str, tuple[Union[tuple[_int(1, 1 << 20), _int(1, 1 << 20), _int(1, 64)],
                                         tuple[_int(1, 1 << 20), _int(1, 1 << 20), _int(1, 64), _int(1, 1 << 20)],
                                         KernelSpec],
                                   ...]] = {}
    array_split_k: dict[str, tuple[_int(1, 1024), ...]] = {}
    # DRAM requests one core keeps in flight in that path's kernels, by array name (default:
    # the DRAM level's max_outstanding_requests_per_core; e.g. cp.async loads vs TMA)
    array_outstanding_requests: dict[str, _int(1, 1 << 20)] = {}
    # arrays whose library kernels keep their smem pipeline full with asynchronous copies
    # (cp.async multistage, CUTLASS sm80): one core has (stages - 1) k-steps of A and B
    # tiles in flight, so its DRAM requests in flight follow the kernel's tile and stages
    # instead of a fixed count (array_outstanding_requests / the DRAM level's)
    array_inflight_from_stages: tuple[str, ...] = ()
    # shared memory one thread block's pipeline may use (e.g. 163 KB = 166,912 B on sm80):
    # every array_kernels entry with a k tile (its own or tile_k_bytes) must fit stages x
    # (tile_m + tile_n) x k-tile bytes in it; None = not checked
    shared_memory_bytes: Optional[_int(1, 1 << 40)] = None
    # a library whose GEMM kernels size their smem pipeline to what fits (CUTLASS's
    # automatic stage count): stages = floor(pipeline_fill_bytes / (A + B tile bytes)),
    # between 2 and pipeline_max_stages, for the kernels of pipeline_fill_arrays (None: all
    # arrays); without it every kernel uses the tile buffer's pipeline_stages
    pipeline_fill_bytes: Optional[_int(1, 1 << 40)] = None
    pipeline_max_stages: _int(2, 16) = 16
    pipeline_fill_arrays: Optional[tuple[str, ...]] = None
    # the mapper's best few candidates (by its analytic estimate) are simulated and the
    # fastest kept, as a kernel library's autotuner picks among its kernels
    refine_candidates: _int(1, 16) = 1
    # when the library's fused attention splits the keys over cores (split-KV /
    # flash-decoding, partial results combined by a second pass): "always" when cores
    # would otherwise idle, or "decode" - only for single-query steps
    attention_split_kv: Literal["always", "decode"] = "always"
    # tile buffers per operand of the library's fused attention kernel (None: the SRAM's)
    attention_pipeline_stages: Optional[_int(1, 64)] = None
    # the fused attention kernel's (query rows, key rows) per tile, by array name: the only
    # tile that library path runs (default: the mapper searches tile_m x tile_n)
    attention_tiles: dict[str, tuple[_int(1, 1 << 20), _int(1, 1 << 20)]] = {}
    # whether a fused attention tile holds the query rows of all heads that share a KV head
    # (grouped-query packing: K/V read once per group): "always", "decode" (single-query
    # steps only; longer queries run one query head per thread block, the heads of a group
    # reading the same K/V through the chip-level cache) or "never"
    attention_gqa_packing: Literal["always", "decode", "never"] = "always"
    # cores per multicast cluster of the library's attention kernel (None: cluster_size)
    attention_cluster_size: Optional[_int(1, 64)] = None
    # a kernel computes every tile at its full shape, however few of its rows, columns or
    # k elements are valid (GPU kernels issue MMA instructions of the tile's shape, the
    # missing operand elements zero-filled): edge tiles cost a full tile's compute, and a
    # library kernel whose tile is larger than the problem computes the padded tile
    pad_edge_tiles: Flag = False
    # fixed time a library GEMM or attention kernel spends outside its tile loop (kernel
    # parameters and TMA descriptors fetched, barriers set up, the epilogue's stores
    # drained before exit), on top of a minimal kernel's launch; microbenchmarked
    kernel_prologue_ns: _num(ge=0, le=1e9) = 0.0

    @model_validator(mode="after")
    def _stages_fit_shared_memory(self) -> "MappingSpec":
        limit = self.shared_memory_bytes
        if limit is None:
            return self
        problems = []
        for name, kernels in self.array_kernels.items():
            for i, entry in enumerate(kernels):
                m, n, stages, _, k_bytes = kernel_entry(entry)
                k_bytes = k_bytes or self.tile_k_bytes
                if not k_bytes:
                    continue
                need = stages * (m + n) * k_bytes
                if need > limit:
                    problems.append((("array_kernels", name, i),
                                     f"kernel {m}x{n}, k tile {k_bytes} B, {stages} stages needs {need:,} B of shared "
                                     f"memory ({stages} x ({m} + {n}) x {k_bytes}), more than shared_memory_bytes "
                                     f"{limit:,}", entry if not isinstance(entry, KernelSpec) else entry.model_dump()))
        if problems:
            raise _rule_errors("MappingSpec", problems)
        return self


class ChipSpec(_Spec):
    """A whole chip, as described by one ``arch_configs/*.yaml`` file."""

    schema_version: Literal[1]
    name: Name
    description: Annotated[str, Strict()] = ""
    clock_mhz: _num(gt=0, le=100_000)
    cores: CoresSpec
    memory: MemorySpec
    noc: NocSpec
    energy: Optional[EnergySpec] = None
    power: Optional[PowerSpec] = None
    area: Optional[AreaSpec] = None
    runtime: Optional[RuntimeSpec] = None
    interconnect: Optional[InterconnectSpec] = None
    mapping: Optional[MappingSpec] = None
    # how LLM attention is lowered on this chip unless a run says otherwise: "fused"
    # (FlashAttention-style, scores stay on chip) or "unfused" (scores written to and read
    # back from DRAM, as on a software stack without fused attention kernels)
    attention_lowering: Literal["fused", "unfused"] = "fused"
    # the software stack (stacks/<name>.yaml, sim.model.stacks) that turns model ops into the
    # kernels this chip runs, unless a run says otherwise; None: "ideal", one kernel per op
    software_stack: Optional[str] = Field(default=None, pattern=r"^[a-z][a-z0-9_]*$")

    _source_path: Optional[Path] = PrivateAttr(default=None)
    _overrides: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="after")
    def _mapping_names_arrays(self) -> "ChipSpec":
        names = [a.name for a in self.cores.arrays]
        problems = []
        for key in ("cluster_arrays", "pipeline_fill_arrays", "tile_rule_arrays", "array_kernels", "array_split_k",
                    "array_outstanding_requests", "attention_tiles", "array_inflight_from_stages"):
            listed = getattr(self.mapping, key) if self.mapping is not None else None
            problems += [(("mapping", key, n if isinstance(listed, dict) else i),
                          f"no array named '{n}' (arrays: {', '.join(names)})", n)
                         for i, n in enumerate(listed or ()) if n not in names]
        problems += [(("cores", "arrays", i, "same_units_as"), f"no array named '{a.same_units_as}' "
                      f"(arrays: {', '.join(names)})", a.same_units_as)
                     for i, a in enumerate(self.cores.arrays)
                     if a.same_units_as is not None and (a.same_units_as not in names or a.same_units_as == a.name)]
        if problems:
            raise _rule_errors("ChipSpec", problems)
        return self

    @model_validator(mode="after")
    def _energy_names_arrays(self) -> "ChipSpec":
        names = [a.name for a in self.cores.arrays]
        listed = self.energy.array_pe_cycle_pj if self.energy is not None else {}
        problems = [(("energy", "array_pe_cycle_pj", n), f"no array named '{n}' (arrays: {', '.join(names)})", n)
                    for n in listed if n not in names]
        if problems:
            raise _rule_errors("ChipSpec", problems)
        return self

    # -- provenance (not part of the value)
    @property
    def source_path(self) -> Optional[Path]:
        """The YAML file this spec was loaded from (None when built in Python)."""
        return self._source_path

    @property
    def overrides(self) -> tuple[str, ...]:
        """The ``dotted.path=value`` overrides applied on top of the file, in order."""
        return self._overrides

    def _set_provenance(self, path: Optional[Path], overrides: tuple[str, ...]) -> "ChipSpec":
        self._source_path = path
        self._overrides = overrides
        return self

    # -- time
    @property
    def clock_hz(self) -> float:
        """Core clock in Hz."""
        return self.clock_mhz * 1e6

    def cycles_to_seconds(self, cycles: float) -> float:
        """Core cycles -> seconds."""
        return cycles / self.clock_hz

    def seconds_to_cycles(self, seconds: float) -> float:
        """Seconds -> core cycles (not rounded)."""
        return seconds * self.clock_hz

    # -- structure
    @property
    def dram(self) -> DramLevel:
        return self.memory.dram

    @property
    def registers(self) -> Optional[RegistersLevel]:
        return self.memory.registers

    @property
    def core_srams(self) -> tuple[SramLevel, ...]:
        """Per-core SRAM levels, innermost first."""
        return self.memory.core_srams

    @property
    def chip_srams(self) -> tuple[SramLevel, ...]:
        """Chip-wide SRAM levels (global buffer, L2), innermost first."""
        return self.memory.chip_srams

    def array(self, name: Optional[str] = None) -> ArraySpec:
        """The array called ``name`` (default: the first one listed)."""
        arrays = self.cores.arrays
        if name is None:
            return arrays[0]
        for a in arrays:
            if a.name == name:
                return a
        raise UnknownNameError("array", name, [a.name for a in arrays])

    # -- peaks
    def peak_macs_per_cycle(self, rate_class: str, sparse: bool = False) -> float:
        """Chip-wide MACs per cycle for ``rate_class`` ops (a rate class or format name).

        An op runs on one kind of array at a time (the engine picks the fastest), so this
        is cores x the best array's count x rows x cols x rate; arrays lacking the class use
        the next wider class they have; ``sparse=True`` doubles arrays with 2:4 support
        (counting dense-equivalent MACs).  Raises :class:`MappingError` when no array can
        run the class.
        """
        rc = resolve_rate_class(rate_class)
        total, usable = 0.0, False
        for a in self.cores.arrays:
            try:
                total = max(total, a.macs_per_cycle(rc, sparse))
                usable = True
            except MappingError:
                continue
        if not usable:
            raise MappingError(f"no array of chip '{self.name}' can run {rc} ops (arrays: "
                               + "; ".join(f"{a.name}: {', '.join(a.macs_per_pe_per_cycle)}" for a in self.cores.arrays)
                               + ")")
        return total * self.cores.count

    def peak_flops(self, rate_class: str, sparse: bool = False) -> float:
        """Peak FLOP/s (2 per MAC) for ``rate_class``; see :meth:`peak_macs_per_cycle`."""
        return 2.0 * self.peak_macs_per_cycle(rate_class, sparse) * self.clock_hz

    @property
    def dram_peak_bytes_per_s(self) -> float:
        """DRAM peak bandwidth, bytes/s."""
        return self.dram.peak_bytes_per_s

    @property
    def dram_access_bytes(self) -> int:
        """DRAM access granularity, bytes."""
        return self.dram.access_bytes

    def summary(self) -> str:
        """A few lines describing the chip and its peaks (for CLIs and notebooks)."""
        lines = [f"{self.name}: {self.cores.count} core(s) at {self.clock_mhz:g} MHz"]
        for a in self.cores.arrays:
            rates = ", ".join(f"{k} x{v:g}" for k, v in a.macs_per_pe_per_cycle.items())
            lines.append(f"  array {a.name}: {a.count} x {a.rows}x{a.cols} PEs ({rates})"
                         + (", 2:4 sparse" if a.sparsity_2_4 else "") + f", dataflows {'/'.join(a.dataflows)}")
        classes = []
        for rc in RATE_CLASSES:
            try:
                classes.append(f"{rc} {self.peak_flops(rc) / 1e12:.4g}")
            except MappingError:
                pass
        lines.append("  dense peak TFLOP/s: " + ", ".join(classes))
        for lv in self.memory.levels:
            if isinstance(lv, RegistersLevel):
                lines.append(f"  {lv.name}: registers, {lv.bytes_per_pe} B/PE")
            elif isinstance(lv, SramLevel):
                lines.append(f"  {lv.name}: sram ({lv.scope}), {lv.capacity_kib:g} KiB, {lv.bytes_per_cycle:g} B/cycle")
            else:
                lines.append(f"  {lv.name}: {lv.technology}, {lv.capacity_gib:g} GiB, "
                             f"{lv.peak_bytes_per_s / 1e9:.4g} GB/s peak")
        return "\n".join(lines)
