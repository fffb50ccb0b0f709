"""Energy and area defaults, and the energy of one op from its access counts.

Defaults come from published tables; a chip's ``energy:``/``area:`` block and per-level
``*_energy_pj_per_byte`` keys override them.

* Arithmetic and SRAM, 45 nm, 0.9 V: M. Horowitz, "Computing's energy problem (and what
  we can do about it)", ISSCC 2014, Fig. 1.1.9: 8-bit int add 0.03 pJ, mult 0.2 pJ;
  32-bit int add 0.1 pJ, mult 3.1 pJ; fp16 add 0.4 pJ, mult 1.1 pJ; fp32 add 0.9 pJ,
  mult 3.7 pJ; SRAM read of 64 bits: 10 pJ (8 KB), 20 pJ (32 KB), 100 pJ (1 MB); larger
  SRAMs are 1 MB banks plus the wire to reach them (:func:`sram_pj_per_byte`).
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
  not scaled.  Areas scale with the square of the node.

Reports (the second half of this module) take results and the chip and give energy per op
(:func:`op_energy_table`), per token and per design point (:func:`design_point_metrics`:
power, tokens/s per W, tokens/s per mm², energy per token by memory level) and the area of
a design point (:func:`area_report`).  The split of a whole LLM run's energy by memory level
and unit needs the trace builder and the engine, so it lives above them, in
:func:`sim.apps.energy_report.llm_energy_components_j`.
"""
from __future__ import annotations

import math
from typing import Iterable

from sim.spec.chip import ChipSpec

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


def node_scale(chip: ChipSpec) -> float:
    node = None
    if chip.energy is not None:
        node = chip.energy.technology_node_nm
    return (node / REFERENCE_NODE_NM) if node else 1.0


#: the largest SRAM Horowitz lists (1 MB); larger SRAMs are modelled as banks of this size
SRAM_BANK_BYTES = 1024 * 1024
#: on-chip wire energy at 45 nm, pJ per bit per mm (Dally, IEEE Micro 2011; see docstring)
WIRE_PJ_PER_BIT_MM = 0.1


def sram_pj_per_byte(capacity_bytes: float) -> float:
    """Energy per byte read from an SRAM array (bank) of ``capacity_bytes``, 45 nm.

    Up to 1 MB: Horowitz's three points (8 KB, 32 KB, 1 MB per 64-bit read), log-log
    interpolated (square-root scaling below 8 KB).  Beyond 1 MB a memory is not one array:
    it is built of 1 MB banks, and an access pays one bank's read plus the wire from the edge
    of the memory to the bank - on average half the side of the extra area (at
    ``DEFAULT_SRAM_MM2_PER_MIB``), at 0.1 pJ/bit/mm.  A 128 MiB buffer thus costs ~18 pJ/B,
    between a 1 MB array (12.5 pJ/B) and HBM (31 pJ/B), where extrapolating Horowitz's
    square-root trend would give 141 pJ/B - more than DRAM.
    """
    pts = [(8 * 1024, 10.0), (32 * 1024, 20.0), (1024 * 1024, 100.0)]
    c = max(1.0, capacity_bytes)
    if c <= pts[0][0]:
        e = pts[0][1] * math.sqrt(c / pts[0][0])
    elif c >= pts[-1][0]:
        side = math.sqrt(c / 2**20 * DEFAULT_SRAM_MM2_PER_MIB)
        side1 = math.sqrt(SRAM_BANK_BYTES / 2**20 * DEFAULT_SRAM_MM2_PER_MIB)
        wire_mm = 0.5 * (side - side1)
        return pts[-1][1] / 8.0 + wire_mm * WIRE_PJ_PER_BIT_MM * 8.0
    else:
        for (c0, e0), (c1, e1) in zip(pts, pts[1:]):
            if c0 <= c <= c1:
                f = math.log(c / c0) / math.log(c1 / c0)
                e = math.exp(math.log(e0) + f * (math.log(e1) - math.log(e0)))
                break
    return e / 8.0


def mac_pj(chip: ChipSpec, rate_class: str) -> float:
    if chip.energy is not None and rate_class in chip.energy.mac_pj:
        return float(chip.energy.mac_pj[rate_class])
    return DEFAULT_MAC_PJ.get(rate_class, DEFAULT_MAC_PJ["fp16"]) * node_scale(chip)


def array_cycle_pj(chip: ChipSpec, array_name) -> float:
    """Energy of one PE-cycle of an array's units beyond the arithmetic
    (``energy.array_pe_cycle_pj``; an array with ``same_units_as`` uses its base's; 0 when
    not given)."""
    if chip.energy is None or not array_name:
        return 0.0
    table = chip.energy.array_pe_cycle_pj
    arr = next((a for a in chip.cores.arrays if a.name == array_name), None)
    base = arr.same_units_as if arr is not None and arr.same_units_as else array_name
    return float(table.get(array_name, table.get(base, 0.0)))


def mac_energy_pj(chip: ChipSpec, rate_class: str, array_name, macs: float) -> float:
    """Energy of ``macs`` MACs of ``rate_class`` on the array ``array_name``: the arithmetic
    (:func:`mac_pj`) plus :func:`array_cycle_pj` per PE-cycle the units need for them at
    their own rate for the class (the base array's, for another path onto its units)."""
    e = macs * mac_pj(chip, rate_class)
    per_cycle = array_cycle_pj(chip, array_name)
    if per_cycle and macs:
        arr = next(a for a in chip.cores.arrays if a.name == array_name)
        units = next((a for a in chip.cores.arrays if a.name == arr.same_units_as), arr) if arr.same_units_as else arr
        try:
            rate, _ = units.rate_for(rate_class)
        except Exception:  # a class the base units lack: the path's own rate
            rate, _ = arr.rate_for(rate_class)
        e += macs / rate * per_cycle
    return e


def vector_op_pj(chip: ChipSpec) -> float:
    if chip.energy is not None and chip.energy.vector_op_pj is not None:
        return float(chip.energy.vector_op_pj)
    return DEFAULT_VECTOR_OP_PJ * node_scale(chip)


def level_pj_per_byte(chip: ChipSpec, level, write: bool = False) -> float:
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


def noc_pj_per_byte(chip: ChipSpec) -> float:
    v = chip.noc.energy_pj_per_byte
    return float(v) if v is not None else DEFAULT_NOC_PJ_PER_BYTE * node_scale(chip)


def static_power_w(chip: ChipSpec) -> float:
    """Power drawn with no work: the ``power`` block's ``idle_w`` when the chip has one,
    else ``energy.static_power_w`` (0 when neither is given)."""
    if getattr(chip, "power", None) is not None:
        return float(chip.power.idle_w)
    return float(chip.energy.static_power_w) if chip.energy is not None else 0.0


def static_energy_pj(chip: ChipSpec, seconds: float) -> float:
    return static_power_w(chip) * seconds * 1e12


#: energy components on their own supplies: not scaled with the core voltage
FIXED_SUPPLY_COMPONENTS = ("static", "interconnect")


def voltage_energy_factor(chip: ChipSpec, clock_mhz: float | None = None) -> float:
    """(V(f) / V(boost))^2 at ``clock_mhz`` (default: the chip's clock): the factor on the
    dynamic energy of core-rail events, whose tables are at the boost-clock voltage
    (CMOS switching energy is C V^2 per transition).  1 for chips without a ``power`` block."""
    pw = getattr(chip, "power", None)
    if pw is None:
        return 1.0
    v = pw.voltage_ratio(chip.clock_mhz if clock_mhz is None else clock_mhz)
    return v * v


def is_core_rail(chip: ChipSpec, component: str) -> bool:
    """Whether an energy component is switched on the core supply (scaled with its
    voltage): everything but DRAM, off-chip links and static power."""
    return component not in FIXED_SUPPLY_COMPONENTS and component != chip.memory.dram.name and component != "total"


def at_clock_voltage(chip: ChipSpec, breakdown: dict) -> dict:
    """An op's energy breakdown (tables at the boost voltage) at the voltage of the chip's
    clock: core-rail components times :func:`voltage_energy_factor`."""
    k = voltage_energy_factor(chip)
    if k == 1.0:
        return breakdown
    return {c: (v * k if is_core_rail(chip, c) else v) for c, v in breakdown.items()}


def _own_arrays(chip: ChipSpec) -> list:
    """The arrays that are hardware of their own (not another instruction path onto an
    array's units, ``same_units_as``): what area and PE counts add up."""
    return [a for a in chip.cores.arrays if not getattr(a, "same_units_as", None)]


def chip_area_mm2(chip: ChipSpec) -> dict:
    """Area estimate: MAC units per rate class, SRAM, and any stated other area."""
    area = chip.area
    node = (area.technology_node_nm if area is not None and area.technology_node_nm else
            (chip.energy.technology_node_nm if chip.energy is not None and chip.energy.technology_node_nm else None))
    scale = (node / REFERENCE_NODE_NM) ** 2 if node else 1.0
    macs = 0.0
    for arr in _own_arrays(chip):
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


# --------------------------------------------------------------------------- reports
#
# Energy and area reported per op, per token and per design point.  These functions take
# results (mappings such as :func:`sim.apps.inference.run_llm`'s LlmRun, :class:`~sim.ir.results.OpResult`)
# and the chip; the only simulation they trigger is re-reading memoised op results.

#: components of an op's energy other than memory levels
NON_LEVEL_COMPONENTS = ("mac", "vector", "noc", "static")


def area_report(chip: ChipSpec) -> dict:
    """Area of a design point in mm² (MACs, SRAM, other, total) plus what it is built of:
    PEs, on-chip SRAM (MiB) and the per-unit areas used (µm² per MAC, mm² per MiB)."""
    a = chip_area_mm2(chip)
    pes = sum(arr.rows * arr.cols * arr.count for arr in _own_arrays(chip)) * chip.cores.count
    sram_mib = (sum(lvl.capacity_bytes for lvl in chip.memory.core_srams) * chip.cores.count
                + sum(lvl.capacity_bytes for lvl in chip.memory.chip_srams)) / 2**20
    return {"area_mm2": a["total_mm2"], "mac_area_mm2": a["mac_mm2"], "sram_area_mm2": a["sram_mm2"],
            "other_area_mm2": a["other_mm2"], "pes": float(pes), "sram_mib": sram_mib,
            "sram_mm2_per_mib": a["sram_mm2"] / sram_mib if sram_mib else float("nan"),
            "mac_um2_per_pe": a["mac_mm2"] * 1e6 / pes if pes else float("nan")}


def op_energy_components_pj(results: Iterable) -> dict:
    """Sum of ``energy_breakdown_pj`` over op results (times their ``repeat``), without 'total'."""
    out: dict[str, float] = {}
    for r in results:
        bd = r.energy_breakdown_pj if hasattr(r, "energy_breakdown_pj") else r.get("energy_breakdown_pj", {})
        rep = getattr(r, "repeat", None) if not isinstance(r, dict) else r.get("repeat", 1)
        rep = rep or 1
        for k, v in bd.items():
            if k == "total":
                continue
            out[k] = out.get(k, 0.0) + float(v) * rep
    return out


def op_energy_table(result: dict):
    """Per-op energy of an LLM run: one row per distinct op (summed over layers) with its
    energy per iteration (J), per generated token (J) and share, largest first."""
    import pandas as pd

    df = pd.DataFrame(result.get("ops") or [])
    if df.empty:
        return df
    df = df.assign(energy_j=df["energy_pj"] * df["repeat"] * 1e-12)
    g = df.groupby(["op", "kind"], as_index=False, sort=False)[["energy_j", "total_seconds"]].sum()
    tokens = tokens_of(result)
    g["energy_per_token_j"] = g["energy_j"] / tokens if tokens else float("nan")
    tot = g["energy_j"].sum()
    g["energy_share"] = g["energy_j"] / tot if tot else 0.0
    return g.sort_values("energy_j", ascending=False, kind="stable").reset_index(drop=True)


def tokens_of(result: dict) -> float:
    """Tokens produced (or, for a prefill, processed) by an LLM run."""
    e, ept = result.get("energy_j"), result.get("energy_per_token_j")
    if e and ept:
        return float(e) / float(ept)
    s, tps = result.get("seconds"), result.get("tokens_per_s")
    return float(s) * float(tps) if s and tps else 0.0


def design_point_metrics(chip: ChipSpec, result: dict, components_j: dict | None = None) -> dict:
    """Energy and area of one design point from an LLM run's result: power (W), tokens/s
    per W, tokens/s per mm², area, achieved TFLOP/s and (given ``components_j``) energy per
    token by component (``energy_per_token_j.<component>``) and per iteration
    (``energy_j.<component>``)."""
    out = area_report(chip)
    seconds = float(result.get("seconds") or 0.0)
    energy = float(result.get("energy_j") or 0.0)
    tps = float(result.get("tokens_per_s") or 0.0)
    power = energy / seconds if seconds > 0 else float("nan")
    out["power_w"] = power
    out["tokens_per_j"] = tps / power if power and power == power and power > 0 else float("nan")
    out["tokens_per_s_per_w"] = out["tokens_per_j"]
    out["tokens_per_s_per_mm2"] = tps / out["area_mm2"] if out["area_mm2"] > 0 else float("nan")
    out["dram_gb_per_s"] = chip.memory.dram.peak_bytes_per_s / 1e9
    if components_j:
        tokens = tokens_of(result)
        for k, v in components_j.items():
            out[f"energy_j.{k}"] = v
            out[f"energy_per_token_j.{k}"] = v / tokens if tokens else float("nan")
    return out


def op_design_metrics(chip: ChipSpec, r) -> dict:
    """Energy and area of one design point from a single op result (a GEMM sweep)."""
    out = area_report(chip)
    e = r.energy_pj * 1e-12
    out["power_w"] = e / r.seconds if r.seconds > 0 else float("nan")
    tflops = r.flops / r.seconds / 1e12 if r.seconds > 0 else float("nan")
    out["tflops"] = tflops
    out["tflops_per_w"] = tflops / out["power_w"] if out["power_w"] and out["power_w"] > 0 else float("nan")
    out["tflops_per_mm2"] = tflops / out["area_mm2"] if out["area_mm2"] > 0 else float("nan")
    out["dram_gb_per_s"] = chip.memory.dram.peak_bytes_per_s / 1e9
    for k, v in r.energy_breakdown_pj.items():
        if k != "total":
            out[f"energy_j.{k}"] = v * 1e-12
    return out
