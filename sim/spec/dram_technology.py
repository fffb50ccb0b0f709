"""DRAM technologies: the interface clock and the column timings of each JEDEC speed-bin family.

These are data files, like chips: ``dram_technologies/<NAME>.yaml`` (:class:`DramTechnologySpec`),
found like every other kind (:mod:`sim.spec.catalog`: ``$SIM_DRAM_DIR``, then
``~/.config/sim/dram_technologies``, then the shipped folder), so a memory that is not shipped
(an HBM4, a GDDR7) is one file, not a code change.  The chip schema (:mod:`sim.spec.memory_spec`)
validates a DRAM level's ``technology`` against them and derives tCK from the pin rate; the timing
model (:mod:`sim.model.memory.dram`) reads them.

JEDEC tables give the column-to-column timings (tCCD_S/L, tRRD_S/L, tBURST) in clock cycles nCK
of the interface clock, with an analog floor in ns for some of them (tX = max(n nCK, t ns)); tCK
follows from the pin rate: tCK = beats_per_tck / rate, where beats_per_tck is the number of data
beats per clock of the timing tables.  The array-core timings (tRCD, tRP, tRAS, tRFC, tCL, tWR
...) are analog and stay in ns, in the chip file.  So a faster speed bin shortens the column
timings with its clock (a BL8 burst and HBM3 tCCD_S = 2 nCK are both 1.25 ns at 6.4 Gb/s and
0.83 ns at 9.6 Gb/s), while a row miss costs the same nanoseconds.  Each file cites its sources
(JEDEC JESD79-3/-4, JESD209-5, JESD235, JESD238; Ramulator 2 and DRAMsim3 presets).

A technology also says how it refreshes by default (``refresh_mode``: all-bank, or per-bank for
HBM and LPDDR) and how long one bank's refresh takes by device density (``t_rfc_pb_ns``); a chip's
DRAM level may override both.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Literal, Mapping, Optional

from pydantic import model_validator

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import read_yaml, validate
from sim.spec.spec_base import _int, _num, _rule_errors, _Spec

__all__ = ["DramTechnology", "DramTechnologySpec", "DRAM_TECHNOLOGIES", "check_file_name", "dram_technology",
           "technology_key", "T_RFC_PB_FRACTION"]

#: per-bank refresh time as a fraction (numerator, denominator) of the all-bank tRFC, for a
#: technology whose file gives no table: 4/7, the ratio of both cited pairs (HBM3 200/350 ns,
#: JESD238; LPDDR5 8 Gb 120/210 ns, Ramulator2 src/dram/impl/LPDDR5.cpp)
T_RFC_PB_FRACTION = (4.0, 7.0)


def column_timing_problems(spec) -> list:
    """Rule problems of ``spec``'s column-to-column timings (``t_ccd_s_nck`` / ``t_ccd_l_nck``,
    None: not given) that are not whole clock cycles: a technology file's and a chip's alike."""
    return [((key,), "must be a whole number of clock cycles (JEDEC column-to-column timings are in nCK: "
                     "commands issue on clock edges)", v)
            for key in ("t_ccd_s_nck", "t_ccd_l_nck") if (v := getattr(spec, key)) is not None and v != int(v)]


class DramTechnologySpec(_Spec):
    """One ``dram_technologies/*.yaml`` file."""

    schema_version: Literal[1]
    name: str
    beats_per_tck: _int(1, 64)
    speed_bin_gbps: tuple[_num(gt=0, le=1000), _num(gt=0, le=1000)]
    t_ccd_s_nck: _num(gt=0, le=1000)
    t_ccd_l_nck: _num(gt=0, le=1000)
    t_ccd_l_ns: _num(ge=0, le=1000) = 0.0
    t_rrd_s_nck: _num(gt=0, le=1000)
    t_rrd_l_nck: _num(gt=0, le=1000)
    refresh_mode: Literal["all_bank", "per_bank"] = "all_bank"
    # per-bank refresh time by density: [Mbit per (pseudo-)channel at most, ns], ascending, the
    # last bound null (any density); absent: T_RFC_PB_FRACTION of the chip's t_rfc_ns
    t_rfc_pb_ns: tuple[tuple[Optional[_num(gt=0, le=1e9)], _num(gt=0, le=1e6)], ...] = ()
    sources: str = ""

    @model_validator(mode="after")
    def _ranges(self) -> "DramTechnologySpec":
        problems = []
        lo, hi = self.speed_bin_gbps
        if lo > hi:
            problems.append((("speed_bin_gbps",), f"lowest bin {lo:g} above the highest {hi:g}", list(self.speed_bin_gbps)))
        bounds = [b for b, _ in self.t_rfc_pb_ns]
        if bounds and (bounds[-1] is not None or any(b is None for b in bounds[:-1])
                       or any(a >= b for a, b in zip(bounds[:-2], bounds[1:-1]))):
            problems.append((("t_rfc_pb_ns",), "density bounds must ascend and only the last be null (any density)",
                             [list(x) for x in self.t_rfc_pb_ns]))
        problems += column_timing_problems(self)   # 2.5 was taken
        if self.name != technology_key(self.name):
            problems.append((("name",), f"a technology name is upper case without '-', '_' or spaces: "
                                        f"{technology_key(self.name)!r}", self.name))
        if problems:
            raise _rule_errors("DramTechnologySpec", problems)
        return self


@dataclass(frozen=True)
class DramTechnology:
    """Clocking, column timings and refresh defaults of one DRAM technology (see its file)."""
    name: str
    beats_per_tck: int              # data beats per clock of the timing tables
    bin_gbps: tuple                 # (lowest, highest) JEDEC/vendor pin rate, Gb/s
    t_ccd_s_nck: float              # column to column, different bank group
    t_ccd_l_nck: float              # column to column, same bank group (min nCK)
    t_ccd_l_ns: float               # ... and its analog floor (0 = none)
    t_rrd_s_nck: float              # ACT to ACT, different bank group (min nCK)
    t_rrd_l_nck: float              # ACT to ACT, same bank group (min nCK)
    source: str
    refresh_mode: str = "all_bank"  # a DRAM level's default refresh
    t_rfc_pb_ns: tuple = ()         # ((Mbit per channel at most or None, ns), ...)

    def per_bank_refresh_ns(self, mbit_per_channel: float, t_rfc_ns: float) -> float:
        """One bank's refresh time at this density (``T_RFC_PB_FRACTION`` of tRFC without a table)."""
        for bound, ns in self.t_rfc_pb_ns:
            if bound is None or mbit_per_channel <= bound:
                return float(ns)
        return t_rfc_ns * T_RFC_PB_FRACTION[0] / T_RFC_PB_FRACTION[1]

    @classmethod
    def from_spec(cls, s: DramTechnologySpec) -> "DramTechnology":
        return cls(s.name, s.beats_per_tck, tuple(s.speed_bin_gbps), s.t_ccd_s_nck, s.t_ccd_l_nck, s.t_ccd_l_ns,
                   s.t_rrd_s_nck, s.t_rrd_l_nck, s.sources, s.refresh_mode, tuple(tuple(x) for x in s.t_rfc_pb_ns))


def technology_key(technology: Any) -> str:
    """A technology label normalised for lookup (case, "-", "_" and spaces ignored)."""
    return str(technology).upper().replace("-", "").replace(" ", "").replace("_", "")


# ---- the registry: every file of the catalog, read once per process and search path -------------
_table: dict[str, DramTechnology] = {}
_table_sig: tuple | None = None


def _signature() -> tuple:
    """What the search path depends on (cheap: read on every lookup that misses)."""
    data = catalog.KINDS["dram"]
    return (os.environ.get(data.env_var), os.environ.get(catalog.USER_DIR_ENV))


def _load_table() -> dict[str, DramTechnology]:
    out: dict[str, DramTechnology] = {}
    for name in catalog.names("dram"):
        path: Path | None = catalog.find("dram", name)
        if path is None:
            continue
        doc = read_yaml(path)
        spec = validate(DramTechnologySpec, doc)
        check_file_name(path, doc, spec)
        out.setdefault(technology_key(spec.name), DramTechnology.from_spec(spec))
    return out


def check_file_name(path: Path, doc, spec: DramTechnologySpec) -> None:
    """A technology is found by its file's name, so its ``name`` must be that name (case, '-',
    '_' and spaces ignored)."""
    if technology_key(path.stem) != technology_key(spec.name):
        raise ConfigError(ConfigProblem(str(path), doc.line_of(("name",)), "name",
                                        f"name {spec.name!r} must be the file name {path.stem!r}"))


def _technologies(refresh: bool = False) -> dict[str, DramTechnology]:
    global _table, _table_sig
    sig = _signature()
    if refresh or sig != _table_sig:
        _table, _table_sig = _load_table(), sig
    return _table


class _Registry(Mapping):
    """The technologies of the catalog by name (a live view: user files count)."""

    def __getitem__(self, key: str) -> DramTechnology:
        return _technologies()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(_technologies())

    def __len__(self) -> int:
        return len(_technologies())

    def __contains__(self, key: object) -> bool:
        return key in _technologies() or key in _technologies(refresh=True)


#: every DRAM technology of the catalog, by name (``DDR4``, ``HBM3E``, a user's ``HBM4``)
DRAM_TECHNOLOGIES: Mapping[str, DramTechnology] = _Registry()


def dram_technology(technology: Any) -> DramTechnology:
    """The :class:`DramTechnology` of a label (case, '-', '_' and spaces ignored:
    ``hbm3e``, ``HBM-3E``).  Raises :class:`ConfigError` listing the valid ones."""
    key = technology_key(technology)
    t = _technologies().get(key) or _technologies(refresh=True).get(key)
    if t is None:
        raise ConfigError([ConfigProblem(
            file="<dram>", line=0, path="technology",
            message=f"unknown DRAM technology {technology!r}; valid: {', '.join(DRAM_TECHNOLOGIES)}",
            valid_keys=tuple(DRAM_TECHNOLOGIES))])
    return t
