"""DRAM technologies: the interface clock and the column timings of each JEDEC speed-bin family.

These are data, like a chip file: the chip schema (:mod:`sim.spec.memory_spec`) validates a DRAM
level's ``technology`` against them and derives tCK from the pin rate; the timing model
(:mod:`sim.model.memory.dram`) reads them.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Mapping

from sim.errors import ConfigError, ConfigProblem

__all__ = ["DramTechnology", "DRAM_TECHNOLOGIES", "dram_technology", "technology_key"]


# ======================================================================================
# Speed bins: the interface clock tCK of each technology and its column timings in tCK.
#
# JEDEC tables give the column-to-column timings (tCCD_S/L, tRRD_S/L, tBURST) in clock
# cycles nCK of the interface clock, with an analog floor in ns for some of them
# (tX = max(n nCK, t ns)); tCK follows from the pin rate: tCK = beats_per_tck / rate,
# where beats_per_tck is the number of data beats per clock of the timing tables.  The
# array-core timings (tRCD, tRP, tRAS, tRFC, tCL, tWR ...) are analog and stay in ns.
# So a faster speed bin shortens the column timings with its clock (a BL8 burst and
# HBM3 tCCD_S = 2 nCK are both 1.25 ns at 6.4 Gb/s and 0.83 ns at 9.6 Gb/s), while a
# row miss costs the same nanoseconds.
#
#   [R2-HBM3]  Ramulator2 python/ramulator/dram/hbm3.py (commit 0aba1928): timing presets
#              HBM3_4800/5600/6400Mbps, tCK_ps 833/714/625 -> 4 beats per tCK; nBL 2,
#              nCCDS 2, nCCDL 4 in every bin; nRRDS = nRRDL = max(4 nCK, 5 ns)
#   [JESD238]  JEDEC JESD238 HBM3: 6.4 Gb/s top bin (announcement, Jan 2022)
#   [HBM3E]    vendor HBM3E announcements (SK hynix 2023-24: 9.2-9.6 Gb/s; Micron 2024:
#              > 9.2 Gb/s); HBM3E is HBM3 (JESD238A) timing at higher bins
#   [D3-HBM2]  DRAMsim3 configs/HBM2_8Gb_x128.ini (commit 0eb63609): tCK 1 ns at 2 Gb/s
#              (2 beats per tCK), BL4 = 2 nCK, tCCD_S 1, tCCD_L 2, tRRD_S 4, tRRD_L 6
#   [JESD235]  JEDEC JESD235A/B HBM2: 1.0-2.4 Gb/s; JESD235C/D HBM2E: up to 3.2 Gb/s,
#              vendor HBM2E bins to 3.6 Gb/s (SK hynix 2020)
#   [R2-LP5]   Ramulator2 python/ramulator/dram/lpddr5.py (commit 0aba1928): preset
#              LPDDR5_6400, tCK 1250 ps (CK:WCK 1:4, 8 beats per tCK), nBL 2 (BL16),
#              nCCDS 2, nCCDL 4 (bank-group mode), nRRDS = nRRDL = max(4 nCK, 5 ns)
#   [JESD209-5] JEDEC JESD209-5 LPDDR5: bank-group mode above 3200 MT/s, top bin
#              6400 MT/s; JESD209-5B LPDDR5X: up to 8533 MT/s
#   [JESD79-4] JEDEC JESD79-4 DDR4 speed bins 1600-3200 MT/s (DDR clock: 2 beats per
#              tCK, BL8 = 4 nCK): tCCD_S 4 nCK, tCCD_L max(5 nCK, 5 ns), tRRD_S/L
#              max(4 nCK, x ns); as tabulated in Ramulator2 python/ramulator/dram/ddr4.py
#              (preset DDR4_3200AA: nCCDS 4, nCCDL 8) and DRAMsim3 DDR4_8Gb_x8_3200.ini
#   [JESD79-3] JEDEC JESD79-3F DDR3 speed bins 800-2133 MT/s (2 beats per tCK, BL8 =
#              4 nCK): tCCD 4 nCK, no bank groups, tRRD max(4 nCK, x ns); Ramulator2
#              python/ramulator/dram/ddr3.py presets DDR3_800D ... DDR3_2133N
# ======================================================================================
@dataclass(frozen=True)
class DramTechnology:
    """Clocking and column timings of one DRAM technology (see the table's sources)."""
    name: str
    beats_per_tck: int              # data beats per clock of the timing tables
    bin_gbps: tuple                 # (lowest, highest) JEDEC/vendor pin rate, Gb/s
    t_ccd_s_nck: float              # column to column, different bank group
    t_ccd_l_nck: float              # column to column, same bank group (min nCK)
    t_ccd_l_ns: float               # ... and its analog floor (0 = none)
    t_rrd_s_nck: float              # ACT to ACT, different bank group (min nCK)
    t_rrd_l_nck: float              # ACT to ACT, same bank group (min nCK)
    source: str


DRAM_TECHNOLOGIES: Mapping[str, DramTechnology] = MappingProxyType({t.name: t for t in (
    DramTechnology("DDR3", 2, (0.8, 2.133), 4, 4, 0.0, 4, 4, "JESD79-3"),
    DramTechnology("DDR4", 2, (1.6, 3.2), 4, 5, 5.0, 4, 4, "JESD79-4"),
    DramTechnology("LPDDR5", 8, (3.2, 6.4), 2, 4, 0.0, 4, 4, "R2-LP5, JESD209-5"),
    DramTechnology("LPDDR5X", 8, (6.4, 8.533), 2, 4, 0.0, 4, 4, "R2-LP5, JESD209-5B"),
    DramTechnology("HBM2", 2, (1.0, 2.4), 1, 2, 0.0, 4, 6, "D3-HBM2, JESD235"),
    DramTechnology("HBM2E", 2, (2.4, 3.6), 1, 2, 0.0, 4, 6, "D3-HBM2, JESD235"),
    DramTechnology("HBM3", 4, (4.8, 6.4), 2, 4, 0.0, 4, 4, "R2-HBM3, JESD238"),
    DramTechnology("HBM3E", 4, (6.4, 9.6), 2, 4, 0.0, 4, 4, "R2-HBM3, HBM3E"),
)})


def technology_key(technology: Any) -> str:
    """A technology label normalised for lookup (case, "-", "_" and spaces ignored)."""
    return str(technology).upper().replace("-", "").replace(" ", "").replace("_", "")


def dram_technology(technology: Any) -> DramTechnology:
    """The :class:`DramTechnology` of a label (case, '-', '_' and spaces ignored:
    ``hbm3e``, ``HBM-3E``).  Raises :class:`ConfigError` listing the valid ones."""
    t = DRAM_TECHNOLOGIES.get(technology_key(technology))
    if t is None:
        raise ConfigError([ConfigProblem(
            file="<dram>", line=0, path="technology",
            message=f"unknown DRAM technology {technology!r}; valid: {', '.join(DRAM_TECHNOLOGIES)}",
            valid_keys=tuple(DRAM_TECHNOLOGIES))])
    return t
