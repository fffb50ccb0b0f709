"""Energy and area defaults, and the energy of one op from its access counts.

Defaults come from published tables; a chip's ``energy:``/``area:`` block and per-level
``*_energy_pj_per_byte`` keys override them.

* Arithmetic and SRAM, 45 nm, 0.9 V: M. Horowitz, "Computing's energy problem (and what
  we can do about it)", ISSCC 2014, Fig. 1.1.9: 8-bit int add 0.03 pJ, mult 0.2 pJ;
  32-bit int add 0.1 pJ, mult 3.1 pJ; fp16 add 0.4 pJ, mult 1.1 pJ; fp32 add 0.9 pJ,
  mult 3.7 pJ; SRAM read of 64 bits: 10 pJ (8 KB), 20 pJ (32 KB), 100 pJ (1 MB).
  A MAC = one multiply + one add into a wide accumulator.  Formats Horowitz does not
  list (fp8, fp4, int4, bf16) scale the multiplier by the square of the significand
  width (array multiplier area and energy grow quadratically: Horowitz, same talk) and
  keep the adder of the accumulator format.
* DRAM: HBM2 ~3.9 pJ/bit at the interface and core (O'Connor et al., "Fine-Grained DRAM",
  MICRO 2017, Table 1); LPDDR4 ~4.5 pJ/bit and DDR4 ~15 pJ/bit (same table, "LPDDR4"
  and "DDR4" rows, I/O + core).
* Register file: Eyeriss measures a PE register-file access at about the energy of a
  16-bit MAC (Chen, Emer, Sze, ISCA 2016, Fig. 7: RF 1x, MAC 1x, buffer 6x, DRAM 200x),
  so a register byte costs about half a 16-bit int MAC (~0.25 pJ/byte at 45 nm).
* On-chip network: ~0.1 pJ/bit/mm of wire at 45 nm (Dally, "GPUs and the future of
  parallel computing", IEEE Micro 2011) over ~2.5 mm from a global buffer to a core:
  ~2 pJ/byte.
* Technology scaling: energies at 45 nm are scaled linearly to the chip's
  ``technology_node_nm`` (a first-order fit of Stillmaker & Baas, "Scaling equations for
  the accurate prediction of CMOS device performance from 180 nm to 7 nm", Integration
  2017, for dynamic energy at nominal voltage); chips that state their own numbers are
  not scaled.
"""
from __future__ import annotations

import math

REFERENCE_NODE_NM = 45.0

#: pJ per MAC at 45 nm (multiply + accumulate), see module docstring
DEFAULT_MAC_PJ = {
    "fp32": 3.7 + 0.9,
    "tf32": 3.7 * (11 / 24) ** 2 + 0.9,
    "fp16": 1.1 + 0.4,
    "bf16": 1.1 * (8 / 11) ** 2 + 0.9,       # bf16 products accumulate in fp32
    "fp8": 1.1 * (4 / 11) ** 2 + 0.4,        # e4m3: 4-bit significand
    "int8": 0.2 + 0.1,                        # int32 accumulator
    "int4": 0.2 * (4 / 8) ** 2 + 0.1,
    "fp4": 1.1 * (2 / 11) ** 2 + 0.4,        # e2m1: 2-bit significand
}
DEFAULT_VECTOR_OP_PJ = 0.9          # one fp32 add-class lane op
DEFAULT_REGISTER_PJ_PER_BYTE = 0.25
DEFAULT_NOC_PJ_PER_BYTE = 2.0
#: pJ per byte by DRAM technology label prefix
DEFAULT_DRAM_PJ_PER_BYTE = {"HBM": 3.9 * 8, "LPDDR": 4.5 * 8, "DDR": 15.0 * 8, "GDDR": 7.5 * 8}
#: area defaults at 45 nm: an 8-bit MAC ~282 um^2 (Horowitz ISSCC 2014, Fig. 1.1.9
#: area column: 8b mult 282 um^2 + add 36 um^2), SRAM ~2 mm^2 per MiB at 45 nm (6T cell
#: 0.35 um^2 with ~60% array efficiency; ITRS 2011)
DEFAULT_MAC_UM2 = {"int8": 282 + 36, "fp16": 1640 + 1360, "bf16": 1640 * (8 / 11) ** 2 + 1360,
                   "fp32": 7700 + 4184, "fp8": 1640 * (4 / 11) ** 2 + 1360, "int4": 282 * 0.25 + 36,
                   "fp4": 1640 * (2 / 11) ** 2 + 1360, "tf32": 7700 * (11 / 24) ** 2 + 4184}
DEFAULT_SRAM_MM2_PER_MIB = 2.0


def node_scale(chip) -> float:
    node = None
    if chip.energy is not None:
        node = chip.energy.technology_node_nm
    return (node / REFERENCE_NODE_NM) if node else 1.0


def sram_pj_per_byte(capacity_bytes: float) -> float:
    """Horowitz's three SRAM points (8 KB, 32 KB, 1 MB per 64-bit read), log-log interpolated."""
    pts = [(8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0)]
    c = max(1.0, capacity_bytes)
    if c <= pts[0][0]:
        e = pts[0][1] * math.sqrt(c / pts[0][0])
    elif c >= pts[-1][0]:
        e = pts[-1][1] * math.sqrt(c / pts[-1][0])
    else:
        for (c0, e0), (c1, e1) in zip(pts, pts[1:]):
            if c0 <= c <= c1:
                f = math.log(c / c0) / math.log(c1 / c0)
                e = math.exp(math.log(e0) + f * (math.log(e1) - math.log(e0)))
                break
    return e / 8.0


def mac_pj(chip, rate_class: str) -> float:
    if chip.energy is not None and rate_class in chip.energy.mac_pj:
        return float(chip.energy.mac_pj[rate_class])
    return DEFAULT_MAC_PJ.get(rate_class, DEFAULT_MAC_PJ["fp16"]) * node_scale(chip)


def vector_op_pj(chip) -> float:
    if chip.energy is not None and chip.energy.vector_op_pj is not None:
        return float(chip.energy.vector_op_pj)
    return DEFAULT_VECTOR_OP_PJ * node_scale(chip)


def level_pj_per_byte(chip, level, write: bool = False) -> float:
    v = getattr(level, "write_energy_pj_per_byte" if write else "read_energy_pj_per_byte", None)
    if v is not None:
        return float(v)
    kind = level.kind
    if kind == "registers":
        return DEFAULT_REGISTER_PJ_PER_BYTE * node_scale(chip)
    if kind == "sram":
        per_bank = level.capacity_bytes / max(1, level.banks)
        return sram_pj_per_byte(per_bank) * node_scale(chip)
    tech = str(level.technology).upper()
    for prefix in ("LPDDR", "GDDR", "HBM", "DDR"):
        if tech.startswith(prefix):
            return DEFAULT_DRAM_PJ_PER_BYTE[prefix]
    return DEFAULT_DRAM_PJ_PER_BYTE["DDR"]


def noc_pj_per_byte(chip) -> float:
    v = chip.noc.energy_pj_per_byte
    return float(v) if v is not None else DEFAULT_NOC_PJ_PER_BYTE * node_scale(chip)


def static_energy_pj(chip, seconds: float) -> float:
    if chip.energy is None:
        return 0.0
    return chip.energy.static_power_w * seconds * 1e12


def chip_area_mm2(chip) -> dict:
    """Area estimate: MAC units per rate class, SRAM, and any stated other area."""
    area = chip.area
    node = (area.technology_node_nm if area is not None and area.technology_node_nm else
            (chip.energy.technology_node_nm if chip.energy is not None and chip.energy.technology_node_nm else None))
    scale = (node / REFERENCE_NODE_NM) ** 2 if node else 1.0
    macs = 0.0
    for arr in chip.cores.arrays:
        pes = arr.rows * arr.cols * arr.count * chip.cores.count
        per_pe = 0.0
        for cls, rate in arr.macs_per_pe_per_cycle.items():
            um2 = (area.mac_um2.get(cls) if area is not None and cls in area.mac_um2 else
                   DEFAULT_MAC_UM2.get(cls, DEFAULT_MAC_UM2["fp16"]) * scale)
            per_pe = max(per_pe, um2 * rate)
        macs += pes * per_pe / 1e6
    mib = 0.0
    for lvl in chip.memory.core_srams:
        mib += lvl.capacity_bytes * chip.cores.count / 2**20
    for lvl in chip.memory.chip_srams:
        mib += lvl.capacity_bytes / 2**20
    per_mib = (area.sram_mm2_per_mib if area is not None and area.sram_mm2_per_mib is not None
               else DEFAULT_SRAM_MM2_PER_MIB * scale)
    other = area.other_mm2 if area is not None else 0.0
    return {"mac_mm2": macs, "sram_mm2": mib * per_mib, "other_mm2": other,
            "total_mm2": macs + mib * per_mib + other}
