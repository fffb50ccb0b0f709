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

The models live in modules of one responsibility each, and this module re-exports them, so
every name in its ``__all__`` can still be imported from here: :mod:`sim.spec.spec_base`
(the ``_Spec`` base and the strict field helpers), :mod:`sim.spec.compute_spec` (arrays,
vector unit, cores), :mod:`sim.spec.memory_spec` (registers, SRAM, DRAM levels),
:mod:`sim.spec.mapping_spec` (kernel-library mapping) and this module (the chip-level blocks
and :class:`ChipSpec`, which checks the rules that span them).
"""
from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal, Optional

from pydantic import Field, PrivateAttr, Strict, model_validator

from sim.errors import MappingError, SimError, UnknownNameError
from sim.spec.compute_spec import DATAFLOWS, ArraySpec, CoresSpec, Dataflow, VectorUnitSpec
from sim.spec.dtypes import RATE_CLASSES, get_format
from sim.spec.mapping_spec import KernelSpec, MappingSpec, kernel_entry
from sim.spec.memory_spec import DramLevel, MemoryLevel, MemorySpec, RegistersLevel, SramLevel, SramPartition
from sim.spec.spec_base import (EnergyPj, FileSafeName, Flag, Name, NodeNm, RateClass, _int, _num, _rule_errors, _Spec,
                                resolve_rate_class)

__all__ = [
    "SCHEMA_VERSION", "DATAFLOWS", "RateClass", "Dataflow",
    "ArraySpec", "VectorUnitSpec", "CoresSpec",
    "RegistersLevel", "SramPartition", "SramLevel", "DramLevel", "MemoryLevel", "MemorySpec",
    "NocSpec", "EnergySpec", "PowerSpec", "KernelSpec", "kernel_entry", "AreaSpec", "RuntimeSpec", "InterconnectSpec", "ChipSpec",
    "resolve_rate_class",
]

SCHEMA_VERSION = 1


# --------------------------------------------------------------------------- chip-level blocks


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
    off-chip links are on their own supplies and do not scale.  With ``dvfs: true`` an op
    runs at the chip's ``clock_mhz`` (at most the boost clock) when its power fits ``tdp_w``,
    else at the highest clock below it (on a ``clock_step_mhz`` grid) that fits
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
    # the time constant of the power controller's moving average: it lowers the clock once
    # the board power averaged so (exponentially, from idle) reaches tdp_w (0: at once, per
    # op).  Steady-state answers do not use it; it tells which repeats of a kernel harness
    # (short bursts from idle, sim.apps.kernel_harness) ran unthrottled, and at what clock
    average_window_s: _num(ge=0, le=3600) = 0.0

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
    # the runtime's device-to-device memcpy: memcpy_overhead_ns more than a kernel launch of
    # the same bytes (its own API path); above memcpy_split_bytes, a size that is not a
    # whole number of memcpy_page_bytes costs memcpy_tail_ns more (its tail is a second
    # operation); 0 = no such cost
    memcpy_overhead_ns: _num(ge=0, le=1e9) = 0.0
    memcpy_split_bytes: _int(0, 1 << 50) = 0
    memcpy_page_bytes: _int(1, 1 << 30) = 4096
    memcpy_tail_ns: _num(ge=0, le=1e9) = 0.0

    def memcpy_extra_ns(self, nbytes: int) -> float:
        """Extra time of one device-to-device memcpy of ``nbytes`` beyond its bytes."""
        extra = float(self.memcpy_overhead_ns)
        split = self.memcpy_split_bytes
        if split and nbytes > split and nbytes % self.memcpy_page_bytes:
            extra += float(self.memcpy_tail_ns)
        return extra


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


class ChipSpec(_Spec):
    """A whole chip, as described by one ``arch_configs/*.yaml`` file."""

    schema_version: Literal[1]
    name: FileSafeName
    description: Annotated[str, Strict()] = ""
    clock_mhz: _num(ge=1, le=100_000)  # 1 MHz .. 100 GHz (1e-300 MHz gave 2e-303 TFLOPS, accepted)
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
    _kernel_library: Optional[str] = PrivateAttr(default=None)

    @model_validator(mode="after")
    def _mapping_names_arrays(self) -> "ChipSpec":
        names = [a.name for a in self.cores.arrays]
        problems = []
        for key in ("cluster_arrays", "pipeline_fill_arrays", "tile_rule_arrays", "array_kernels", "array_split_k",
                    "array_outstanding_requests", "attention_tiles", "array_inflight_from_stages",
                    "array_port_bytes_per_cycle"):
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

    @property
    def kernel_library(self) -> Optional[str]:
        """The kernel library file the chip's ``mapping`` came from (``kernel_library:``; None
        when it is written inline, absent, or the spec was built in Python)."""
        return self._kernel_library

    def _set_provenance(self, path: Optional[Path], overrides: tuple[str, ...],
                        kernel_library: Optional[str] = None) -> "ChipSpec":
        self._source_path = path
        self._overrides = overrides
        self._kernel_library = kernel_library
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

    def dtype_peak_flops(self, dtype: str) -> float:
        """Peak dense FLOP/s for a run whose activations are in ``dtype`` (a number format
        name): the MFU denominator of ``sim run``, sweeps and serving.

        It is :meth:`peak_flops` of the format's rate class; where the format is unknown or
        no array can run its class, it is the chip's highest dense peak over every class its
        arrays have, so that a run still reports an MFU (against the best the chip can do).
        """
        try:
            return self.peak_flops(get_format(dtype).rate_class)
        except SimError:
            return max(self.peak_flops(c) for a in self.cores.arrays for c in a.macs_per_pe_per_cycle)

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
                own = f" at its own {lv.clock_mhz:g} MHz" if lv.clock_mhz is not None else ""
                lines.append(f"  {lv.name}: sram ({lv.scope}), {lv.capacity_kib:g} KiB, {lv.bytes_per_cycle:g} B/cycle{own}")
            else:
                lines.append(f"  {lv.name}: {lv.technology}, {lv.capacity_gib:g} GiB, "
                             f"{lv.peak_bytes_per_s / 1e9:.4g} GB/s peak")
        return "\n".join(lines)
