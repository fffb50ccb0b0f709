"""The checks of a DRAM parameter record (:class:`~sim.model.memory.dram_parameters.DramParams`):
which attributes a DRAM spec must and may have, and the rules its values keep (positive
counts, known technology and modes, bank groups dividing the banks, an interleave between the
access granularity and the row, refresh shorter than its interval).

Kept apart from the record so that the record reads as its fields and derived timings;
:class:`DramParams` runs :func:`dram_param_problems` when it is built.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from sim.spec.dram_technology import DRAM_TECHNOLOGIES, technology_key

if TYPE_CHECKING:
    from sim.model.memory.dram_parameters import DramParams

__all__ = ["dram_param_problems"]

# Attributes every DRAM spec must have (the chip config's DRAM level).
_REQUIRED = (
    "name", "technology", "capacity_gib",
    "channels", "pseudo_channels_per_channel", "bus_width_bits", "data_rate_gbps_per_pin",
    "burst_length", "banks_per_pseudo_channel", "row_buffer_bytes", "interleave_bytes",
    "t_rcd_ns", "t_rp_ns", "t_cl_ns", "t_ras_ns", "t_rrd_ns", "t_faw_ns", "t_rfc_ns",
    "t_refi_ns", "t_wr_ns", "controller_latency_ns", "max_outstanding_requests_per_core",
)
# Attributes that may be absent or None.  The first four are not in the chip config's
# DRAM level today; their defaults are documented on the fields of DramParams.
_OPTIONAL = (
    "t_ccd_ns", "read_energy_pj_per_byte", "write_energy_pj_per_byte",
    "t_cwl_ns", "t_rtp_ns", "t_wtr_ns", "t_rtw_ns", "write_batch_bursts", "address_hash",
    "refresh_stagger", "refresh_mode", "t_rfc_pb_ns", "scheduler", "scheduler_window_ns",
    "row_hit_cap", "bank_groups", "t_ccd_s_nck", "t_ccd_l_nck", "t_ccd_l_ns", "t_rrd_s_nck",
    "t_rrd_l_nck", "t_rrd_l_ns",
)
_REFRESH_MODES = ("all_bank", "per_bank")
_SCHEDULERS = ("frfcfs", "fcfs")


def _is_pow2(x: int) -> bool:
    return x > 0 and (x & (x - 1)) == 0


def dram_param_problems(p: DramParams) -> list[str]:
    """Every rule ``p`` breaks, as ``"field: message"`` (none when it is valid)."""
    problems: list[str] = []

    def bad(field: str, msg: str) -> None:
        problems.append(f"{field}: {msg}")

    for f in ("channels", "pseudo_channels_per_channel", "bus_width_bits", "burst_length",
              "banks_per_pseudo_channel", "row_buffer_bytes", "interleave_bytes",
              "max_outstanding_requests_per_core", "write_batch_bursts", "row_hit_cap"):
        v = getattr(p, f)
        if isinstance(v, bool) or int(v) != v or v < 1:
            bad(f, f"must be a positive integer, got {v!r}")
    if technology_key(p.technology) not in DRAM_TECHNOLOGIES:
        bad("technology", f"unknown DRAM technology {p.technology!r}; valid: "
            f"{', '.join(DRAM_TECHNOLOGIES)}")
    if p.bank_groups is not None:
        v = p.bank_groups
        if isinstance(v, bool) or int(v) != v or v < 1:
            bad("bank_groups", f"must be a positive integer, got {v!r}")
        elif p.banks_per_pseudo_channel % int(v):
            bad("bank_groups", f"must divide banks_per_pseudo_channel "
                f"({p.banks_per_pseudo_channel}), got {v!r}")
    for f in ("t_ccd_s_nck", "t_ccd_l_nck", "t_rrd_s_nck", "t_rrd_l_nck"):
        v = getattr(p, f)
        if v is not None and not (v > 0 and math.isfinite(v)):
            bad(f, f"must be a finite number > 0, got {v!r}")
    if p.t_ccd_ns is not None and p.t_ccd_s_nck is not None:
        bad("t_ccd_ns", "give either t_ccd_ns (fixed ns, legacy) or t_ccd_s_nck (clock "
            "cycles, scales with the pin rate), not both")
    if p.refresh_mode is not None and p.refresh_mode not in _REFRESH_MODES:
        bad("refresh_mode", f"must be one of {', '.join(_REFRESH_MODES)}, got {p.refresh_mode!r}")
    if p.scheduler not in _SCHEDULERS:
        bad("scheduler", f"must be one of {', '.join(_SCHEDULERS)}, got {p.scheduler!r}")
    if not p.data_rate_gbps_per_pin > 0:
        bad("data_rate_gbps_per_pin", f"must be > 0, got {p.data_rate_gbps_per_pin!r}")
    if not p.capacity_gib > 0:
        bad("capacity_gib", f"must be > 0, got {p.capacity_gib!r}")
    for f in ("t_rcd_ns", "t_rp_ns", "t_cl_ns", "t_ras_ns", "t_rrd_ns", "t_faw_ns",
              "t_rfc_ns", "t_wr_ns", "controller_latency_ns", "t_rtp_ns", "t_wtr_ns",
              "t_ccd_ns", "t_cwl_ns", "t_rtw_ns", "read_energy_pj_per_byte",
              "write_energy_pj_per_byte", "t_rfc_pb_ns", "scheduler_window_ns",
              "t_ccd_l_ns", "t_rrd_l_ns"):
        v = getattr(p, f)
        if v is not None and not (v >= 0 and math.isfinite(v)):
            bad(f, f"must be a finite number >= 0, got {v!r}")
    if not problems:
        bits = p.bus_width_bits * p.burst_length
        if bits % 8:
            bad("burst_length", f"bus_width_bits x burst_length = {bits} bits is not whole bytes")
        g = bits // 8
        il, row = p.interleave_bytes, p.row_buffer_bytes
        if not _is_pow2(il):
            bad("interleave_bytes", f"must be a power of two, got {il}")
        elif not g <= il <= row:
            bad("interleave_bytes", f"must lie between the access granularity ({g} B) "
                f"and row_buffer_bytes ({row} B), got {il}")
        if p.t_refi_ns > 0 and p.t_rfc_ns >= p.t_refi_ns:
            bad("t_rfc_ns", f"must be < t_refi_ns ({p.t_refi_ns}), got {p.t_rfc_ns}")
        if (p.t_refi_ns > 0 and p.refresh_mode_effective == "per_bank"
                and p.t_rfc_pb_effective_ns >= p.t_refi_ns):
            bad("t_rfc_pb_ns", f"must be < t_refi_ns ({p.t_refi_ns}), "
                f"got {p.t_rfc_pb_effective_ns}")
    return problems
