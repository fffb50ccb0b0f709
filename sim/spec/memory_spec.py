"""The memory part of a chip file: the hierarchy of levels, innermost -> outermost.

Optional per-PE registers (:class:`RegistersLevel`), one or more SRAM levels
(:class:`SramLevel`, per core or chip-wide, optionally split per operand by
:class:`SramPartition`), exactly one DRAM level, last (:class:`DramLevel`, whose
``technology`` is checked against :mod:`sim.spec.dram_technology`).  The kinds are registered
in :data:`LEVEL_KINDS` (:class:`LevelKind`: schema, placement, how many); :class:`MemorySpec`
holds the levels as a tagged union of them (:data:`MemoryLevel`, on ``kind``) and checks each
kind's placement and count on the raw data (``_level_rules``).  Re-exported by :mod:`sim.spec.chip`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, model_validator

from sim.errors import UnknownNameError
from sim.spec.dram_technology import DRAM_TECHNOLOGIES, column_timing_problems, dram_technology, technology_key
from sim.spec.spec_base import (_BIG, EnergyPj, Flag, Name, NonEmpty, TimeNs, _int, _num, _revalidate_with_rules,
                                _rule_errors, _Spec)

# --------------------------------------------------------------------------- memory


class RegistersLevel(_Spec):
    """Per-PE register storage (operand registers, accumulators) next to the array."""

    kind: Literal["registers"]
    name: Name
    bytes_per_pe: _int(1, 1 << 20)
    read_energy_pj_per_byte: Optional[EnergyPj] = None
    write_energy_pj_per_byte: Optional[EnergyPj] = None


class SramPartition(_Spec):
    """A split of an SRAM level between operands (KiB each).  Every operand needs room for
    one tile: a 0 KiB share (``input_kib: 0``) passed and then no GEMM mapped at all ("no tile
    fits the per-core SRAM (192.0 KiB, partitioned)"), naming no file; a chip without a buffer
    for an operand leaves ``partition`` out (one unified buffer)."""

    input_kib: _num(gt=0, le=_BIG)
    weight_kib: _num(gt=0, le=_BIG)
    output_kib: _num(gt=0, le=_BIG)

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
    level, the hit latency of the shared cache.  ``clock_mhz`` puts a chip-level level on
    its own clock (a GPU's L2 keeps its clock while the SMs' moves under DVFS): its
    ``bytes_per_cycle`` are then cycles of that clock; unset, of the core clock
    (``latency_cycles`` stays in core cycles either way).  ``holds_activations`` marks a
    software-managed buffer that keeps activations between ops (TPU v1's Unified Buffer):
    an op's activation operands that fit its activation space (``input_kib`` of a
    partition, else the whole level) never move through DRAM (:mod:`sim.model.engine.residency`).
    """

    kind: Literal["sram"]
    name: Name
    scope: Literal["core", "chip"]
    capacity_kib: _num(gt=0, le=_BIG)
    partition: Optional[SramPartition] = None
    banks: _int(1, 1 << 16) = 1
    bytes_per_cycle: _num(gt=0, le=1e9)
    clock_mhz: Optional[_num(gt=0, le=100_000)] = None
    latency_cycles: _int(0, 1 << 30) = 1
    double_buffered: Flag = True
    holds_activations: Flag = False
    # tile buffers per operand for multi-stage prefetch (GPU kernels keep 3-6 stages in
    # flight); None = 2 when double_buffered, else 1
    pipeline_stages: Optional[_int(1, 64)] = None
    read_energy_pj_per_byte: Optional[EnergyPj] = None
    write_energy_pj_per_byte: Optional[EnergyPj] = None

    def bytes_per_core_cycle(self, core_clock_mhz: float) -> float:
        """``bytes_per_cycle`` in cycles of a core clock of ``core_clock_mhz``."""
        if self.clock_mhz is None:
            return float(self.bytes_per_cycle)
        return float(self.bytes_per_cycle) * float(self.clock_mhz) / float(core_clock_mhz)

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
        if self.holds_activations and self.scope != "core":
            raise _rule_errors("SramLevel", [(
                ("holds_activations",), "holds_activations is for a scope: core buffer the compiler manages "
                "(a chip-level cache keeps what its replacement policy keeps)", self.holds_activations)])
        if self.clock_mhz is not None and self.scope != "chip":
            raise _rule_errors("SramLevel", [(
                ("clock_mhz",), "clock_mhz (a clock of its own) is for a scope: chip level; a core's tile "
                "buffer runs at the core clock", self.clock_mhz)])
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


#: pseudo-channels of one DRAM level the address hash spreads (sim.model.memory.dram_hash)
_MAX_PSEUDO_CHANNELS = 1 << 16
#: the burst lengths JEDEC DRAM standards define (see DramLevel._geometry)
_JEDEC_BURST_LENGTHS = (2, 4, 8, 16, 32)


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
    data_rate_gbps_per_pin: _num(ge=0.001, le=100)  # 1 Mb/s .. 100 Gb/s per pin
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
        # What a JEDEC part can be (values the timing model computed with, though no device has
        # them):
        # * the data bus of a channel / pseudo-channel is a power of two of bits, built from x4 /
        #   x8 / x16 devices: DDR3/DDR4 64 (JESD79-3F, JESD79-4: x64 channel; ECC bits carry no
        #   data), LPDDR5/5X 16 (JESD209-5: x16 channel), HBM2/2E 128 or 64 per pseudo-channel
        #   (JESD235), HBM3/3E 64 or 32 per pseudo-channel (JESD238);
        # * the burst length is a power of two of beats: BL2/BL4 (HBM2, JESD235), BL8 (DDR3,
        #   DDR4, HBM3), BL16/BL32 (LPDDR5 JESD209-5, DDR5 JESD79-5);
        # * commands are issued on clock edges, so the column-to-column spacings tCCD_S / tCCD_L
        #   are whole clocks nCK (every JEDEC table gives them so).  t_rrd_*_nck stay free: a
        #   chip whose DRAM sits behind a slower link (eyeriss.yaml) gives the device's tRRD in
        #   link clocks.
        bw = self.bus_width_bits
        if bw < 8 or bw & (bw - 1):
            problems.append((("bus_width_bits",), "must be a power of two from 8 to 4096 bits (JEDEC data buses: "
                             "DDR3/DDR4 64, LPDDR5 16, HBM2 128 or 64, HBM3 64 or 32 per pseudo-channel)", bw))
        if self.burst_length not in _JEDEC_BURST_LENGTHS:
            problems.append((("burst_length",), f"must be one of {', '.join(map(str, _JEDEC_BURST_LENGTHS))} "
                             "(JEDEC bursts: BL2/BL4 HBM2, BL8 DDR3/DDR4/HBM3, BL16/BL32 LPDDR5/DDR5)",
                             self.burst_length))
        problems += column_timing_problems(self)
        if self.pseudo_channels > _MAX_PSEUDO_CHANNELS:
            # the address hash has polynomials up to 2**16 ways: 65,536 HBM3 channels x 2 passed
            # sim check and failed every run with "<dram>: channels: 2**17 pseudo-channels or banks
            # are not supported", no file or line
            problems.append((("channels",), f"channels x pseudo_channels_per_channel = {self.pseudo_channels:,} "
                             f"pseudo-channels; at most {_MAX_PSEUDO_CHANNELS:,}", self.channels))
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
        one_row_each = self.pseudo_channels * self.banks_per_pseudo_channel * self.row_buffer_bytes
        if not problems and self.capacity_bytes < max(one_row_each, 16 * il):
            # a device smaller than one row in each of its banks has no address map (capacity_gib
            # 1e-9 passed the schema and failed every run inside the DRAM model)
            problems.append((("capacity_gib",), f"capacity_gib {self.capacity_gib:g} is smaller than one "
                             f"{self.row_buffer_bytes}-byte row in each of the {self.pseudo_channels:,} "
                             f"pseudo-channels x {self.banks_per_pseudo_channel} banks "
                             f"({max(one_row_each, 16 * il) / (1 << 30):.3g} GiB)", self.capacity_gib))
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


@dataclass(frozen=True)
class LevelKind:
    """One kind of memory level: its schema and where a hierarchy may hold it.

    ``placement``: ``innermost`` (it must be the first level), ``outermost`` (the last) or
    ``any``; ``at_least`` / ``at_most``: how many levels of the kind a chip has (None: any
    number); ``timing``: the engine's model of the kind, in one line.  A kind is a schema here
    and a timing model in the engine (``sim/model/kernels``: the core buffer's and chip cache's
    transfers, the DRAM controller), so a new kind needs both; a new memory *technology* of an
    existing kind (a DRAM family, an SRAM of another size or speed) is data: a
    ``dram_technologies/`` file, a level's keys."""

    name: str
    model: type
    placement: Literal["innermost", "any", "outermost"]
    at_least: int = 0
    at_most: Optional[int] = None
    timing: str = ""


#: the memory level kinds, by their ``kind:`` tag, in hierarchy order
LEVEL_KINDS: dict[str, LevelKind] = {k.name: k for k in (
    LevelKind("registers", RegistersLevel, "innermost", 0, 1,
              "per-PE storage of the stationary operand (fold overlap, row-stationary rows)"),
    # (at least one with scope: core, the scratchpad the arrays read: a rule of its own below)
    LevelKind("sram", SramLevel, "any", 0, None,
              "a scratchpad or cache of bytes per cycle and a latency, per core or chip-wide"),
    LevelKind("dram", DramLevel, "outermost", 1, 1,
              "cycle-level JEDEC timing per channel and bank (sim.model.kernels.dram)"),
)}

MemoryLevel = Annotated[Union[tuple(k.model for k in LEVEL_KINDS.values())], Field(discriminator="kind")]


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

    def chip_sram_bytes_per_core_cycle(self, core_clock_mhz: float) -> float:
        """The chip-level SRAMs' bandwidth together, in bytes per core cycle (0 without any)."""
        return sum(lv.bytes_per_core_cycle(core_clock_mhz) for lv in self.chip_srams)

    @property
    def chip_srams(self) -> tuple[SramLevel, ...]:
        return tuple(lv for lv in self.levels if isinstance(lv, SramLevel) and lv.scope == "chip")

    def level(self, name: str) -> Union[RegistersLevel, SramLevel, DramLevel]:
        for lv in self.levels:
            if lv.name == name:
                return lv
        raise UnknownNameError("memory level", name, [lv.name for lv in self.levels])


def _placement_problems(kind: LevelKind, at: list[int], n: int, levels: list, known: bool) -> list:
    """Where the levels of ``kind`` (indices ``at`` of ``n``) break its placement and count."""
    out: list[tuple[tuple[Any, ...], str, Any]] = []
    tag = kind.name
    if kind.placement == "innermost":
        out += [(("levels", i, "kind"), f"a {tag} level must be the first (innermost) level", tag) for i in at if i != 0]
    if kind.at_least and not at and known:
        where = ", as the last level" if kind.placement == "outermost" else ""
        count = "exactly one" if kind.at_most == 1 else f"at least {kind.at_least}"
        out.append((("levels",), f"{count} level with kind: {tag} is required{where}", levels))
    if kind.placement == "outermost":
        out += [(("levels", i, "kind"), f"the {tag} level must be the last (outermost) level; it is "
                 f"memory.levels.{i} of {n}", tag) for i in at if i != n - 1]
    if kind.at_most == 1 and kind.placement != "innermost":   # an innermost one is alone already
        out += [(("levels", i, "kind"), f"only one {tag} level is allowed (first one is memory.levels.{at[0]})", tag)
                for i in at[1:]]
    return out


def _level_rules(raw: dict) -> list[tuple[tuple[Any, ...], str, Any]]:
    levels = raw.get("levels")
    if not isinstance(levels, list) or not levels:
        return []
    out: list[tuple[tuple[Any, ...], str, Any]] = []
    n = len(levels)
    # (a kind that is not a string - a list, a mapping - is not a kind: its own error says so)
    kinds = [lv.get("kind") if isinstance(lv, dict) and isinstance(lv.get("kind"), str) else None for lv in levels]
    seen: dict[str, int] = {}
    for i, lv in enumerate(levels):
        name = lv.get("name") if isinstance(lv, dict) else None
        if isinstance(name, str):
            if name in seen:
                out.append((("levels", i, "name"), f"duplicate level name '{name}' (also memory.levels.{seen[name]})", name))
            else:
                seen[name] = i
    known = all(k in LEVEL_KINDS for k in kinds)
    for kind in LEVEL_KINDS.values():
        at = [i for i, k in enumerate(kinds) if k == kind.name]
        out += _placement_problems(kind, at, n, levels, known)
    srams = [(i, lv.get("scope")) for i, lv in enumerate(levels) if isinstance(lv, dict) and lv.get("kind") == "sram"]
    if not any(scope == "core" for _, scope in srams) and known:
        out.append((("levels",), "at least one level with kind: sram and scope: core is required "
                    "(the per-core scratchpad the arrays read)", levels))
    first_chip = next((i for i, s in srams if s == "chip"), None)
    if first_chip is not None:
        for i, s in srams:
            if s == "core" and i > first_chip:
                out.append((("levels", i, "scope"), f"a scope: core sram must come before scope: chip srams "
                            f"(memory.levels.{first_chip} is scope: chip)", "core"))
    return out
