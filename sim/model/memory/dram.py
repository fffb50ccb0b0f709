"""DRAM timing model, Python side: parameters, state, presets and a convenience API.

* :class:`DramParams` - a frozen, validated copy of a DRAM spec (any object with the
  attributes of the chip config's DRAM level; read with ``getattr``), with
  :meth:`~DramParams.to_array` (the kernels' parameter vector) and
  :meth:`~DramParams.new_state` (fresh state arrays).
* :class:`DramModel` - runs request streams through the kernels and reports achieved
  bandwidth, efficiency, row-buffer statistics and latency.
* :data:`EXAMPLE_DEVICES` / :func:`example_spec` - cited example parameter sets (HBM2,
  HBM3, DDR4-3200, LPDDR5-6400).

The timing model itself is described in :mod:`sim.model.kernels.dram` and docs/dram_model.md.
"""
from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from types import MappingProxyType, SimpleNamespace
from typing import Any, Mapping

import numpy as np

import sim.model.kernels.dram as K
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.spec.dram_technology import DRAM_TECHNOLOGIES, DramTechnology, dram_technology, technology_key

__all__ = ["DramParams", "DramModel", "EXAMPLE_DEVICES", "example_spec", "DRAM_TECHNOLOGIES", "little_window",
           "long_read_stream", "stream_efficiency", "dram_params",
           "DramTechnology", "dram_technology"]

# Attributes every DRAM spec must have (the chip config's DRAM level).
_REQUIRED = (
    "name", "technology", "capacity_gib",
    "channels", "pseudo_channels_per_channel", "bus_width_bits", "data_rate_gbps_per_pin",
    "burst_length", "banks_per_pseudo_channel", "row_buffer_bytes", "interleave_bytes",
    "t_rcd_ns", "t_rp_ns", "t_cl_ns", "t_ras_ns", "t_rrd_ns", "t_faw_ns", "t_rfc_ns",
    "t_refi_ns", "t_wr_ns", "controller_latency_ns", "max_outstanding_requests_per_core",
)
# Attributes that may be absent or None.  The first four are not in the chip config's
# DRAM level today; their defaults are documented on the fields below.
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


def _log2_or_minus1(x: int) -> int:
    return int(x).bit_length() - 1 if _is_pow2(int(x)) else -1


# The speed-bin tables (tCK per technology, column timings in nCK) are JEDEC data, kept with the
# chip schema that validates against them: sim/spec/dram_technology.py.


@dataclass(frozen=True)
class DramParams:
    """Validated DRAM parameters (times in ns, sizes in bytes unless the name says so)."""

    name: str
    technology: str
    capacity_gib: float
    channels: int
    pseudo_channels_per_channel: int
    bus_width_bits: int
    data_rate_gbps_per_pin: float
    burst_length: int
    banks_per_pseudo_channel: int
    row_buffer_bytes: int
    interleave_bytes: int
    t_rcd_ns: float
    t_rp_ns: float
    t_cl_ns: float
    t_ras_ns: float
    t_rrd_ns: float
    t_faw_ns: float
    t_rfc_ns: float
    t_refi_ns: float            # <= 0 disables refresh
    t_wr_ns: float
    controller_latency_ns: float
    max_outstanding_requests_per_core: int
    #: legacy fixed column-to-column spacing in ns.  It does NOT scale with the pin rate;
    #: None (default): tCCD_S = ``t_ccd_s_nck`` x tCK.  Not allowed with ``t_ccd_s_nck``.
    t_ccd_ns: float | None = None
    read_energy_pj_per_byte: float | None = None
    write_energy_pj_per_byte: float | None = None
    #: write latency (CAS to first write beat). None: same as t_cl_ns (as gem5 does for LPDDR5).
    t_cwl_ns: float | None = None
    #: read CAS to precharge. Default 7.5 ns = JEDEC DDR4 tRTP (max(4 nCK, 7.5 ns)).
    t_rtp_ns: float = 7.5
    #: end of write data to read CAS. Default 7.5 ns = JEDEC DDR4 tWTR_L (max(4 nCK, 7.5 ns)).
    t_wtr_ns: float = 7.5
    #: read->write data-bus bubble. None: 2 clocks of the DDR data clock (2 * 2/data rate),
    #: the RD->WR gap left by tRTW = CL + BL/2 + 2 - CWL.
    t_rtw_ns: float | None = None
    #: write bursts drained per read/write turnaround pair: 64 = gem5 MemCtrl
    #: write_buffer_size, a controller that drains its whole write queue per switch.
    #: (gem5's min_writes_per_switch, 16, the old default, left an H200 device-to-device
    #: copy at ~63 % of peak in this model; 64 gives ~83 %, measured: 89 %.)
    write_batch_bursts: int = 64
    #: hash pseudo-channel and bank bits (see sim.model.kernels.dram); False = plain RoBaCoCh.
    address_hash: bool = True
    #: spread the pseudo-channels' refreshes evenly over tREFI (True) or refresh them all
    #: at the same instants (False).  See docs/dram_model.md for the effect on one stream.
    refresh_stagger: bool = True
    #: "all_bank" (REFab: the whole pseudo-channel for tRFC every tREFI) or "per_bank"
    #: (REFpb/REFsb: one bank for tRFCpb every tREFI/banks).  None: per_bank for HBM* and
    #: LPDDR* technologies, all_bank otherwise (DDR4 has no per-bank refresh).
    refresh_mode: str | None = None
    #: per-bank refresh time.  None: a cited per-technology value, see
    #: :attr:`t_rfc_pb_effective_ns`.
    t_rfc_pb_ns: float | None = None
    #: "frfcfs" (row hits and ready banks first, approximated; see sim.model.kernels.dram) or
    #: "fcfs" (arrival order on each data bus and ACT calendar, no row batching).
    scheduler: str = "frfcfs"
    #: how far ahead of the data bus the controller sees requests, per pseudo-channel, in
    #: ns of queued data-bus work (its queue depth in time).  None: 2 x (tRP + tRCD + tCL),
    #: enough to see a request one row-miss latency before its bus slot with another
    #: miss latency of work queued; 33-77 bursts on the example devices, within the 32
    #: (read) to 64 (write) burst entries of gem5's MemCtrl queues.  In time rather than
    #: entries, so faster pins never shorten the look-ahead.
    scheduler_window_ns: float | None = None
    #: most hits a row batch may take past an older conflicting request: gem5
    #: DRAMInterface max_accesses_per_row = 16.
    row_hit_cap: int = 16
    #: bank groups per pseudo-channel (banks ``b`` with equal ``b % bank_groups`` share
    #: one).  None or 1: no bank-group timing (tCCD_L and tRRD_L unused).
    bank_groups: int | None = None
    #: column-to-column (CAS to CAS) spacing, different / same bank group, in clock cycles
    #: tCK of the interface.  None: the technology's JEDEC value (``DRAM_TECHNOLOGIES``).
    t_ccd_s_nck: float | None = None
    t_ccd_l_nck: float | None = None
    #: analog floor of tCCD_L in ns (tCCD_L = max(n nCK, t ns), DDR4).  None: the technology's.
    t_ccd_l_ns: float | None = None
    #: ACT to ACT, different / same bank group, minimum in nCK; the ns floors are
    #: ``t_rrd_ns`` (tRRD_S) and ``t_rrd_l_ns`` (None: ``t_rrd_ns``).  None: the technology's.
    t_rrd_s_nck: float | None = None
    t_rrd_l_nck: float | None = None
    t_rrd_l_ns: float | None = None

    # ---------------------------------------------------------------- construction
    def __post_init__(self) -> None:
        problems: list[str] = []

        def bad(field: str, msg: str) -> None:
            problems.append(f"{field}: {msg}")

        for f in ("channels", "pseudo_channels_per_channel", "bus_width_bits", "burst_length",
                  "banks_per_pseudo_channel", "row_buffer_bytes", "interleave_bytes",
                  "max_outstanding_requests_per_core", "write_batch_bursts", "row_hit_cap"):
            v = getattr(self, f)
            if isinstance(v, bool) or int(v) != v or v < 1:
                bad(f, f"must be a positive integer, got {v!r}")
        if technology_key(self.technology) not in DRAM_TECHNOLOGIES:
            bad("technology", f"unknown DRAM technology {self.technology!r}; valid: "
                f"{', '.join(DRAM_TECHNOLOGIES)}")
        if self.bank_groups is not None:
            v = self.bank_groups
            if isinstance(v, bool) or int(v) != v or v < 1:
                bad("bank_groups", f"must be a positive integer, got {v!r}")
            elif self.banks_per_pseudo_channel % int(v):
                bad("bank_groups", f"must divide banks_per_pseudo_channel "
                    f"({self.banks_per_pseudo_channel}), got {v!r}")
        for f in ("t_ccd_s_nck", "t_ccd_l_nck", "t_rrd_s_nck", "t_rrd_l_nck"):
            v = getattr(self, f)
            if v is not None and not (v > 0 and math.isfinite(v)):
                bad(f, f"must be a finite number > 0, got {v!r}")
        if self.t_ccd_ns is not None and self.t_ccd_s_nck is not None:
            bad("t_ccd_ns", "give either t_ccd_ns (fixed ns, legacy) or t_ccd_s_nck (clock "
                "cycles, scales with the pin rate), not both")
        if self.refresh_mode is not None and self.refresh_mode not in _REFRESH_MODES:
            bad("refresh_mode", f"must be one of {', '.join(_REFRESH_MODES)}, got {self.refresh_mode!r}")
        if self.scheduler not in _SCHEDULERS:
            bad("scheduler", f"must be one of {', '.join(_SCHEDULERS)}, got {self.scheduler!r}")
        if not self.data_rate_gbps_per_pin > 0:
            bad("data_rate_gbps_per_pin", f"must be > 0, got {self.data_rate_gbps_per_pin!r}")
        if not self.capacity_gib > 0:
            bad("capacity_gib", f"must be > 0, got {self.capacity_gib!r}")
        for f in ("t_rcd_ns", "t_rp_ns", "t_cl_ns", "t_ras_ns", "t_rrd_ns", "t_faw_ns",
                  "t_rfc_ns", "t_wr_ns", "controller_latency_ns", "t_rtp_ns", "t_wtr_ns",
                  "t_ccd_ns", "t_cwl_ns", "t_rtw_ns", "read_energy_pj_per_byte",
                  "write_energy_pj_per_byte", "t_rfc_pb_ns", "scheduler_window_ns",
                  "t_ccd_l_ns", "t_rrd_l_ns"):
            v = getattr(self, f)
            if v is not None and not (v >= 0 and math.isfinite(v)):
                bad(f, f"must be a finite number >= 0, got {v!r}")
        if not problems:
            bits = self.bus_width_bits * self.burst_length
            if bits % 8:
                bad("burst_length", f"bus_width_bits x burst_length = {bits} bits is not whole bytes")
            g = bits // 8
            il, row = self.interleave_bytes, self.row_buffer_bytes
            if not _is_pow2(il):
                bad("interleave_bytes", f"must be a power of two, got {il}")
            elif not g <= il <= row:
                bad("interleave_bytes", f"must lie between the access granularity ({g} B) "
                    f"and row_buffer_bytes ({row} B), got {il}")
            if self.t_refi_ns > 0 and self.t_rfc_ns >= self.t_refi_ns:
                bad("t_rfc_ns", f"must be < t_refi_ns ({self.t_refi_ns}), got {self.t_rfc_ns}")
            if (self.t_refi_ns > 0 and self.refresh_mode_effective == "per_bank"
                    and self.t_rfc_pb_effective_ns >= self.t_refi_ns):
                bad("t_rfc_pb_ns", f"must be < t_refi_ns ({self.t_refi_ns}), "
                    f"got {self.t_rfc_pb_effective_ns}")
        if problems:
            raise ConfigError(
                [ConfigProblem(file=f"<dram '{self.name}'>", line=0, path=p.split(":")[0],
                               message=p.split(": ", 1)[1]) for p in problems])

    @classmethod
    def from_spec(cls, spec: Any, **overrides: Any) -> "DramParams":
        """Build from any object with the DRAM-level attributes (pydantic model,
        SimpleNamespace, ...) or a mapping.  ``overrides`` replace individual fields."""
        get = (lambda k, d=None: spec.get(k, d)) if isinstance(spec, Mapping) else \
              (lambda k, d=None: getattr(spec, k, d))
        missing = [k for k in _REQUIRED if get(k) is None and k not in overrides]
        if missing:
            name = get("name", "?")
            raise ConfigError([ConfigProblem(file=f"<dram '{name}'>", line=0, path=k,
                                             message="missing required DRAM attribute",
                                             valid_keys=_REQUIRED + _OPTIONAL)
                               for k in missing])
        kw: dict[str, Any] = {k: get(k) for k in _REQUIRED}
        for k in _OPTIONAL:
            v = get(k)
            if v is not None:
                kw[k] = v
        kw.update(overrides)
        ints = ("channels", "pseudo_channels_per_channel", "bus_width_bits", "burst_length",
                "banks_per_pseudo_channel", "row_buffer_bytes", "interleave_bytes",
                "max_outstanding_requests_per_core", "write_batch_bursts", "row_hit_cap",
                "bank_groups")
        for k in ints:
            if k in kw and isinstance(kw[k], float) and kw[k].is_integer():
                kw[k] = int(kw[k])
        if kw.get("t_refi_ns") is None:
            kw["t_refi_ns"] = 0.0
        return cls(**kw)

    def replace(self, **changes: Any) -> "DramParams":
        """A copy with some fields changed (validated again)."""
        return dataclasses.replace(self, **changes)

    # ---------------------------------------------------------------- derived values
    @property
    def num_pseudo_channels(self) -> int:
        return self.channels * self.pseudo_channels_per_channel

    @property
    def access_bytes(self) -> int:
        """Access granularity: one burst of one pseudo-channel."""
        return self.bus_width_bits * self.burst_length // 8

    @property
    def burst_ns(self) -> float:
        """Time one burst occupies the data bus: burst_length beats at the data rate."""
        return self.burst_length / self.data_rate_gbps_per_pin

    @property
    def tech(self) -> DramTechnology:
        return dram_technology(self.technology)

    @property
    def tck_ns(self) -> float:
        """Clock period of the interface's timing tables: beats per tCK / pin rate."""
        return self.tech.beats_per_tck / self.data_rate_gbps_per_pin

    def _nck(self, field: str) -> float:
        v = getattr(self, field)
        return float(getattr(self.tech, field) if v is None else v)

    @property
    def t_ccd_effective_ns(self) -> float:
        """tCCD_S: ``t_ccd_ns`` if given (legacy, fixed), else ``t_ccd_s_nck`` x tCK."""
        if self.t_ccd_ns is not None:
            return float(self.t_ccd_ns)
        return self._nck("t_ccd_s_nck") * self.tck_ns

    @property
    def bank_groups_effective(self) -> int:
        return 1 if self.bank_groups is None else int(self.bank_groups)

    @property
    def t_ccd_l_effective_ns(self) -> float:
        """tCCD_L = max(t_ccd_l_nck x tCK, t_ccd_l_ns, tCCD_S) (same bank group)."""
        floor = self.tech.t_ccd_l_ns if self.t_ccd_l_ns is None else float(self.t_ccd_l_ns)
        return max(self._nck("t_ccd_l_nck") * self.tck_ns, floor, self.t_ccd_effective_ns)

    @property
    def t_rrd_s_effective_ns(self) -> float:
        """tRRD_S = max(t_rrd_s_nck x tCK, t_rrd_ns)."""
        return max(self._nck("t_rrd_s_nck") * self.tck_ns, float(self.t_rrd_ns))

    @property
    def t_rrd_l_effective_ns(self) -> float:
        """tRRD_L = max(t_rrd_l_nck x tCK, t_rrd_l_ns or t_rrd_ns, tRRD_S) (same bank group)."""
        floor = float(self.t_rrd_ns if self.t_rrd_l_ns is None else self.t_rrd_l_ns)
        return max(self._nck("t_rrd_l_nck") * self.tck_ns, floor, self.t_rrd_s_effective_ns)

    @property
    def slot_ns(self) -> float:
        """Bus time per burst in a back-to-back stream: max(burst time, tCCD_S)."""
        return max(self.burst_ns, self.t_ccd_effective_ns)

    @property
    def bus_peak_bytes_per_s(self) -> float:
        """The highest bandwidth the data buses can carry: one burst per ``slot_ns`` on
        every pseudo-channel.  Equals :attr:`peak_bytes_per_s` (the pins) unless a
        column timing (a legacy fixed ``t_ccd_ns``) is longer than a burst."""
        return self.num_pseudo_channels * self.access_bytes / self.slot_ns * 1e9

    @property
    def speed_bin_gbps(self) -> tuple:
        """(lowest, highest) pin rate of the technology's JEDEC/vendor speed bins."""
        return tuple(self.tech.bin_gbps)

    @property
    def peak_bytes_per_s(self) -> float:
        return (self.num_pseudo_channels * self.bus_width_bits / 8
                * self.data_rate_gbps_per_pin * 1e9)

    @property
    def capacity_bytes(self) -> int:
        return int(round(self.capacity_gib * 2**30))

    @property
    def refresh_overhead(self) -> float:
        """Fraction of time a pseudo-channel (all-bank) or a bank (per-bank) spends
        refreshing: tRFC / tREFI or tRFCpb / tREFI."""
        if self.t_refi_ns <= 0:
            return 0.0
        if self.refresh_mode_effective == "per_bank":
            return self.t_rfc_pb_effective_ns / self.t_refi_ns
        return self.t_rfc_ns / self.t_refi_ns

    @property
    def refresh_mode_effective(self) -> str:
        """``refresh_mode``, or the technology's default: per_bank for HBM* and LPDDR*
        (REFSB in JESD235 HBM2, REFPB in JESD238 HBM3, REFpb in LPDDR4/5), else all_bank."""
        if self.refresh_mode is not None:
            return self.refresh_mode
        tech = str(self.technology).upper().replace("-", "").replace(" ", "")
        return "per_bank" if tech.startswith(("HBM", "LPDDR")) else "all_bank"

    @property
    def t_rfc_pb_effective_ns(self) -> float:
        """``t_rfc_pb_ns``, or a cited default by technology and density:

        * HBM3/HBM3E: 200 ns up to 8 Gb per pseudo-channel, 250 ns above (Ramulator2
          python/ramulator/dram/hbm3.py, ``_resolve_nRFCpb``, JEDEC JESD238 table);
        * HBM2/HBM2E and first-generation HBM: 160 ns (Ramulator2 src/dram/impl/HBM2.cpp,
          preset HBM2_2Gbps, nRFCSB = 160 at tCK = 1 ns);
        * LPDDR5/5X: 60/90/120/140 ns for 2/4/8/16 Gb per channel (Ramulator2
          src/dram/impl/LPDDR5.cpp, tRFCpb_TABLE);
        * anything else: 4/7 of tRFC, the ratio of both cited HBM3 (200/350 ns) and
          LPDDR5 8 Gb (120/210 ns) pairs.
        """
        if self.t_rfc_pb_ns is not None:
            return float(self.t_rfc_pb_ns)
        tech = str(self.technology).upper().replace("-", "").replace(" ", "")
        if tech.startswith("HBM3"):
            mbit_per_pc = self.capacity_gib * 8192.0 / self.num_pseudo_channels
            return 200.0 if mbit_per_pc <= 8192.0 else 250.0
        if tech.startswith("HBM"):
            return 160.0
        if tech.startswith("LPDDR5"):
            mbit_per_ch = self.capacity_gib * 8192.0 / self.num_pseudo_channels
            for limit, t in ((2048.0, 60.0), (4096.0, 90.0), (8192.0, 120.0)):
                if mbit_per_ch <= limit:
                    return t
            return 140.0
        return self.t_rfc_ns * 4.0 / 7.0

    @property
    def scheduler_window_effective_ns(self) -> float:
        """``scheduler_window_ns`` or its default 2 x (tRP + tRCD + tCL)."""
        if self.scheduler_window_ns is not None:
            return float(self.scheduler_window_ns)
        return 2.0 * (self.t_rp_ns + self.t_rcd_ns + self.t_cl_ns)

    @property
    def act_slot_ns(self) -> float:
        """ACT calendar slot: max(tRRD, tFAW / 4) (see sim.model.kernels.dram)."""
        return max(self.t_rrd_s_effective_ns, self.t_faw_ns / 4.0)

    def closed_form_read_latency_ns(self, kind: str, nbytes: int | None = None) -> float:
        """Unloaded latency of one read of ``nbytes`` (default: one burst), aligned.

        ``kind``: ``"hit"`` (tCL + data), ``"empty"`` (tRCD + tCL + data) or
        ``"conflict"`` (tRP + tRCD + tCL + data, assuming tRAS/tRTP already met),
        each plus the controller latency.
        """
        n = self.access_bytes if nbytes is None else nbytes
        data = math.ceil(n / self.access_bytes) * self.slot_ns
        base = self.t_cl_ns + data + self.controller_latency_ns
        extra = {"hit": 0.0, "empty": self.t_rcd_ns, "conflict": self.t_rp_ns + self.t_rcd_ns}
        if kind not in extra:
            raise UnknownNameError("row-buffer case", kind, list(extra))
        return base + extra[kind]

    # ---------------------------------------------------------------- kernel arrays
    def to_array(self) -> np.ndarray:
        """The float64 parameter vector the kernels read (``P_*`` indices)."""
        p = np.zeros(K.N_PARAMS, dtype=np.float64)
        npc = self.num_pseudo_channels
        bpr = self.row_buffer_bytes // self.interleave_bytes
        p[K.P_CHANNELS] = self.channels
        p[K.P_PCS_PER_CHANNEL] = self.pseudo_channels_per_channel
        p[K.P_NUM_PC] = npc
        p[K.P_BANKS] = self.banks_per_pseudo_channel
        p[K.P_ACCESS_BYTES] = self.access_bytes
        p[K.P_INTERLEAVE_BYTES] = self.interleave_bytes
        p[K.P_ROW_BYTES] = self.row_buffer_bytes
        p[K.P_BLOCKS_PER_ROW] = bpr
        p[K.P_ACCESS_SHIFT] = _log2_or_minus1(self.access_bytes)
        p[K.P_IL_SHIFT] = _log2_or_minus1(self.interleave_bytes)
        p[K.P_PC_SHIFT] = _log2_or_minus1(npc)
        p[K.P_BPR_SHIFT] = _log2_or_minus1(bpr)
        p[K.P_BANK_SHIFT] = _log2_or_minus1(self.banks_per_pseudo_channel)
        p[K.P_ADDRESS_HASH] = 1.0 if self.address_hash else 0.0
        p[K.P_T_BURST] = self.burst_ns
        p[K.P_T_CCD] = self.t_ccd_effective_ns
        p[K.P_T_SLOT] = self.slot_ns
        p[K.P_T_RCD] = self.t_rcd_ns
        p[K.P_T_RP] = self.t_rp_ns
        p[K.P_T_CL] = self.t_cl_ns
        p[K.P_T_CWL] = self.t_cl_ns if self.t_cwl_ns is None else self.t_cwl_ns
        p[K.P_T_RAS] = self.t_ras_ns
        p[K.P_T_RRD] = self.t_rrd_s_effective_ns
        p[K.P_T_FAW] = self.t_faw_ns
        p[K.P_T_RFC] = self.t_rfc_ns
        p[K.P_T_REFI] = max(0.0, self.t_refi_ns)
        p[K.P_T_WR] = self.t_wr_ns
        p[K.P_T_RTP] = self.t_rtp_ns
        p[K.P_T_WTR] = self.t_wtr_ns
        p[K.P_T_RTW] = (4.0 / self.data_rate_gbps_per_pin) if self.t_rtw_ns is None else self.t_rtw_ns
        p[K.P_CTRL_LATENCY] = self.controller_latency_ns
        p[K.P_WRITE_BATCH] = self.write_batch_bursts
        p[K.P_READ_PJ_PER_BYTE] = self.read_energy_pj_per_byte or 0.0
        p[K.P_WRITE_PJ_PER_BYTE] = self.write_energy_pj_per_byte or 0.0
        p[K.P_PEAK_BYTES_PER_NS] = self.peak_bytes_per_s * 1e-9
        p[K.P_MAX_OUTSTANDING] = self.max_outstanding_requests_per_core
        per_bank = self.refresh_mode_effective == "per_bank"
        p[K.P_REFRESH_PER_BANK] = 1.0 if per_bank else 0.0
        p[K.P_T_RFC_PB] = self.t_rfc_pb_effective_ns
        p[K.P_T_REFI_PB] = max(0.0, self.t_refi_ns) / self.banks_per_pseudo_channel
        p[K.P_T_ACT_SLOT] = self.act_slot_ns
        p[K.P_FRFCFS] = 1.0 if self.scheduler == "frfcfs" else 0.0
        p[K.P_WINDOW_NS] = self.scheduler_window_effective_ns
        p[K.P_ROW_HIT_CAP] = self.row_hit_cap
        turn = p[K.P_T_RTW] + self.t_wtr_ns + self.t_cl_ns
        p[K.P_T_TURN_PER_WRITE] = turn / self.write_batch_bursts
        p[K.P_RW_HORIZON] = 2 * self.write_batch_bursts * self.slot_ns + turn
        p[K.P_BANK_GROUPS] = self.bank_groups_effective
        p[K.P_T_CCD_L] = self.t_ccd_l_effective_ns
        p[K.P_T_RRD_L] = self.t_rrd_l_effective_ns
        addr_bits = max(1, (self.capacity_bytes - 1).bit_length())
        pc_bits = max(0, int(p[K.P_PC_SHIFT]))
        rest_bits = addr_bits - int(p[K.P_IL_SHIFT]) - pc_bits
        row_bits = rest_bits - max(0, int(p[K.P_BPR_SHIFT])) - max(0, int(p[K.P_BANK_SHIFT]))
        p[K.P_PC_POLY:K.P_PC_POLY + 6] = _hash_poly(int(p[K.P_PC_SHIFT]), rest_bits)
        p[K.P_BANK_POLY:K.P_BANK_POLY + 6] = _hash_poly(int(p[K.P_BANK_SHIFT]), row_bits)
        return p

    def new_state(self) -> tuple[np.ndarray, ...]:
        """Fresh state: all banks closed, buses idle, refreshes staggered.

        ``(bank_row, bank_t, pc_t, pc_i, bank_i, stats)``; stats is always last.

        The refresh interval is tREFI (all-bank) or tREFI / banks (per-bank).  With
        ``refresh_stagger`` pseudo-channel ``i`` first refreshes at
        ``(slot(i) + 1) * interval / n_pc`` where ``slot`` is the permutation
        ``i -> i * a mod n_pc`` with ``a`` the integer nearest ``0.618 n_pc`` that is
        coprime with ``n_pc``: the pseudo-channels take turns, and neighbours in the
        address interleave refresh far apart in time, so a sweep across the channels
        cannot ride along the refresh wave.  Without it they all first refresh at
        ``interval``.
        """
        npc = self.num_pseudo_channels
        nbanks = npc * self.banks_per_pseudo_channel
        bank_row = np.full(nbanks, -1, dtype=np.int64)
        bank_t = np.zeros((nbanks, K.N_BANK_T), dtype=np.float64)
        bank_t[:, K.B_ACT] = K._NEG
        bank_t[:, K.B_CLOSE0:K.B_CLOSE0 + K.N_RECENT] = K._NEG
        bank_t[:, K.B_BG_DATA] = K._NEG
        bank_t[:, K.B_BG_ACT] = K._NEG
        bank_i = np.zeros((nbanks, K.N_BANK_I), dtype=np.int64)
        bank_i[:, K.BI_ROW0:K.BI_ROW0 + K.N_RECENT] = -1
        pc_t = np.zeros((npc, K.N_PC_T), dtype=np.float64)
        pc_t[:, K.C_ACT_FREE] = K._NEG
        pc_t[:, K.C_BUS_HOLES:K.C_BUS_HOLES + 2 * K.N_HOLES] = K._NEG
        pc_t[:, K.C_ACT_HOLES:K.C_ACT_HOLES + 2 * K.N_HOLES] = K._NEG
        pc_t[:, K.C_LAST_WRITE_END] = K._NEG
        pc_t[:, K.C_LAST_READ_END] = K._NEG
        interval = self.t_refi_ns
        if self.refresh_mode_effective == "per_bank":
            interval = self.t_refi_ns / self.banks_per_pseudo_channel
        if self.t_refi_ns > 0 and self.refresh_stagger:
            slot = (np.arange(npc, dtype=np.int64) * _stagger_multiplier(npc)) % npc
            pc_t[:, K.C_NEXT_REFRESH] = (slot.astype(np.float64) + 1.0) * (interval / npc)
        elif self.t_refi_ns > 0:
            pc_t[:, K.C_NEXT_REFRESH] = interval
        else:
            pc_t[:, K.C_NEXT_REFRESH] = np.inf
        pc_i = np.zeros((npc, K.N_PC_I), dtype=np.int64)
        stats = np.zeros(K.N_STATS, dtype=np.float64)
        stats[K.S_FIRST_ARRIVAL_NS] = np.inf
        stats[K.S_LAST_DONE_NS] = 0.0
        return (bank_row, bank_t, pc_t, pc_i, bank_i, stats)


# Primitive polynomials over GF(2), x**s + ... + 1, by degree s: the middle terms' exponents
# (at most three, so that a hash step is a few shifts and XORs).  Standard table entries
# (e.g. W. Stahnke, "Primitive binary polynomials", Math. Comp. 27 (1973)).
_PRIMITIVE_POLY_TERMS = {
    1: (), 2: (1,), 3: (1,), 4: (1,), 5: (2,), 6: (1,), 7: (1,), 8: (2, 3, 4), 9: (4,),
    10: (3,), 11: (2,), 12: (1, 4, 6), 13: (1, 3, 4), 14: (1, 6, 10), 15: (1,),
    16: (1, 3, 12),
}


def _hash_poly(shift: int, in_bits: int) -> list[int]:
    """Parameters of :func:`sim.model.kernels.dram._gf2_hash` for a ``shift``-bit index of an
    ``in_bits``-bit value: [k1, k2, k3, fold period, fold rounds, reduction steps]."""
    if shift <= 0:
        return [0, 0, 0, 0, 0, 0]
    if shift not in _PRIMITIVE_POLY_TERMS:
        raise ConfigError([ConfigProblem(file="<dram>", line=0, path="channels",
                                         message=f"2**{shift} pseudo-channels or banks are not supported")])
    terms = list(_PRIMITIVE_POLY_TERMS[shift]) + [0, 0, 0]
    period = 0
    rounds = 0
    if shift <= 3:                       # x**(2**s - 1) = 1: fold with that period first
        period = (1 << shift) - 1
        while period << rounds < 63:
            rounds += 1
    bits = period if period else max(in_bits, shift)
    drop = shift - max(terms[:3])        # each step shortens the value by this many bits
    steps = 0 if shift == 1 else max(0, -(-(bits - shift) // drop))
    if shift == 1:                       # x + 1: the parity of all bits
        terms = [0, 0, 0]
    return terms[:3] + [period, rounds, steps]


def _stagger_multiplier(n: int) -> int:
    """Integer nearest 0.618 n that is coprime with n (1 for n <= 2)."""
    if n <= 2:
        return 1
    base = int(round(0.6180339887498949 * n))
    for d in range(n):
        for a in (base + d, base - d):
            if 0 < a < n and math.gcd(a, n) == 1:
                return a
    return 1


def _stats_dict(stats: np.ndarray) -> dict[str, float]:
    names = {v: k[2:].lower() for k, v in vars(K).items() if k.startswith("S_") and isinstance(v, int)}
    return {names[i]: float(stats[i]) for i in sorted(names)}


class DramModel:
    """A DRAM device with state: run request streams and read back statistics.

    ``DramModel(spec_or_params)`` accepts a :class:`DramParams`, a preset name from
    :data:`EXAMPLE_DEVICES`, or any object/mapping with the DRAM-level attributes.
    Successive calls continue in simulated time (each stream starts when the previous
    one finished); :meth:`reset` returns to an idle device at time 0.
    """

    def __init__(self, spec_or_params: Any):
        if isinstance(spec_or_params, DramParams):
            self.params = spec_or_params
        elif isinstance(spec_or_params, str):
            self.params = DramParams.from_spec(example_spec(spec_or_params))
        else:
            self.params = DramParams.from_spec(spec_or_params)
        self.p = self.params.to_array()
        self.reset()

    # ------------------------------------------------------------------ basics
    def reset(self) -> None:
        self.state = self.params.new_state()

    @property
    def peak_bytes_per_s(self) -> float:
        return self.params.peak_bytes_per_s

    @property
    def now_ns(self) -> float:
        """Completion time of the last request served so far (0 for a fresh model)."""
        return float(self.state[K.ST_STATS][K.S_LAST_DONE_NS])

    @property
    def stats(self) -> dict[str, float]:
        """Cumulative counters since the last :meth:`reset` (``S_*`` names, lower case)."""
        return _stats_dict(self.state[K.ST_STATS])

    def access(self, addr: int, nbytes: int | None = None, t_ns: float | None = None,
               is_write: bool = False) -> float:
        """Serve one chunk (must stay in one interleave block); return its completion (ns)."""
        n = self.params.access_bytes if nbytes is None else int(nbytes)
        if n <= 0:
            raise ValueError(f"nbytes must be positive, got {n}")
        if K.dram_chunk_bytes(self.p, np.int64(addr), np.int64(n)) != n:
            raise ValueError(f"{n} bytes at {addr:#x} cross an interleave block "
                             f"({self.params.interleave_bytes} B); split the transfer")
        t = self.now_ns if t_ns is None else float(t_ns)
        return float(K.dram_access(self.p, self.state, np.int64(addr), np.int64(n), t, bool(is_write)))

    # ------------------------------------------------------------------ streams
    def _arrays(self, addresses, sizes, is_write, t_issue):
        addrs = np.atleast_1d(np.asarray(addresses, dtype=np.int64))
        n = addrs.shape[0]
        sz = np.broadcast_to(np.asarray(sizes, dtype=np.int64), (n,)).copy()
        wr = np.broadcast_to(np.asarray(is_write, dtype=np.bool_), (n,)).copy()
        if t_issue is None:
            ti = np.zeros(n, dtype=np.float64)
        else:
            ti = np.broadcast_to(np.asarray(t_issue, dtype=np.float64), (n,)).copy()
        if n and (addrs.min() < 0 or (addrs + sz).max() > self.params.capacity_bytes):
            raise ValueError(f"transfers must lie in [0, {self.params.capacity_bytes}) "
                             f"(capacity {self.params.capacity_gib} GiB)")
        if n and sz.min() < 0:
            raise ValueError("sizes must be >= 0")
        return addrs, sz, wr, ti

    def _report(self, before: np.ndarray, t0: float, t_end: float, nbytes: int,
                done: np.ndarray) -> dict[str, Any]:
        s = self.state[K.ST_STATS] - before
        seconds = max(t_end - t0, 0.0) * 1e-9
        achieved = nbytes / seconds if seconds > 0 else 0.0
        rows = s[K.S_ROW_HITS] + s[K.S_ROW_EMPTY] + s[K.S_ROW_CONFLICTS]
        out: dict[str, Any] = {
            "seconds": seconds,
            "bytes": int(nbytes),
            "achieved_bytes_per_s": achieved,
            "efficiency": achieved / self.peak_bytes_per_s,
            "row_hit_rate": float(s[K.S_ROW_HITS] / rows) if rows else 0.0,
            "mean_latency_ns": float(s[K.S_LATENCY_SUM_NS] / s[K.S_REQUESTS]) if s[K.S_REQUESTS] else 0.0,
            "start_ns": t0,
            "end_ns": t_end,
            "done_ns": done,
        }
        delta = _stats_dict(s)
        delta.pop("first_arrival_ns")
        delta.pop("last_done_ns")
        out.update(delta)
        return out

    def stream(self, addresses, sizes, is_write=False, max_outstanding: int | None = None,
               t_issue=None, in_order: bool = True) -> dict[str, Any]:
        """Serve transfers from one requester; return what it achieved.

        ``addresses``/``sizes``: byte address and length of each transfer (sizes and
        ``is_write`` broadcast).  ``max_outstanding``: access-granularity requests in
        flight (default: ``max_outstanding_requests_per_core``).  ``t_issue``: earliest
        issue time of each transfer, ns after the stream's start (default 0).
        ``in_order``: request slots retire in issue order (default) or as soon as any
        request completes (``False``, a pure count limit: the engine's rule).

        Returns ``seconds`` (first issue to last completion), ``bytes``,
        ``achieved_bytes_per_s``, ``efficiency`` (of peak), ``row_hit_rate``,
        ``mean_latency_ns`` (per chunk), ``done_ns`` (per transfer) and the counters of
        this stream (``requests``, ``row_hits``, ``row_empty``, ``row_conflicts``,
        ``activates``, ``refreshes``, ``refresh_stall_ns``, ``turnarounds``, ...).
        """
        addrs, sz, wr, ti = self._arrays(addresses, sizes, is_write, t_issue)
        m = self.params.max_outstanding_requests_per_core if max_outstanding is None else int(max_outstanding)
        t0 = self.now_ns
        ti = ti + t0
        done = np.empty(addrs.shape[0], dtype=np.float64)
        before = self.state[K.ST_STATS].copy()
        t_end = K.dram_stream(self.p, self.state, addrs, sz, ti, wr, np.int64(m), done, bool(in_order))
        start = float(ti.min()) if ti.size else t0
        return self._report(before, start, float(max(t_end, start)), int(sz.sum()), done)

    def stream_multi(self, addresses, sizes, requesters, max_outstanding, is_write=False,
                     t_issue=None, in_order: bool = True) -> dict[str, Any]:
        """Like :meth:`stream` for several requesters (``requesters[i]`` in 0..R-1), each
        with its own outstanding limit (``max_outstanding``: int or one per requester),
        served in time order."""
        addrs, sz, wr, ti = self._arrays(addresses, sizes, is_write, t_issue)
        req = np.broadcast_to(np.asarray(requesters, dtype=np.int64), addrs.shape).copy()
        n_req = int(req.max()) + 1 if req.size else 1
        if req.size and req.min() < 0:
            raise ValueError("requester ids must be >= 0")
        mo = np.broadcast_to(np.asarray(max_outstanding, dtype=np.int64), (n_req,)).copy()
        t0 = self.now_ns
        ti = ti + t0
        done = np.empty(addrs.shape[0], dtype=np.float64)
        before = self.state[K.ST_STATS].copy()
        t_end = K.dram_stream_multi(self.p, self.state, addrs, sz, ti, wr, req, mo, done, bool(in_order))
        start = float(ti.min()) if ti.size else t0
        return self._report(before, start, float(max(t_end, start)), int(sz.sum()), done)


# ======================================================================================
# Cited example devices.  Each value's source is in the comment beside it.  Timings are
# in ns; where a source gives clock cycles, the conversion is shown (cycles x tCK).
#
#   [D3-HBM2]  DRAMsim3, configs/HBM2_8Gb_x128.ini (umd-memsys/DRAMsim3, commit 0eb63609), tCK = 1 ns
#   [D3-DDR4]  DRAMsim3, configs/DDR4_8Gb_x16_3200.ini (same commit), tCK = 0.625 ns
#              (the file rounds tCK to 0.63; 3200 MT/s gives 0.625 exactly)
#   [R2-HBM3]  Ramulator2, python/ramulator/dram/hbm3.py (CMU-SAFARI/ramulator2, commit 0aba1928):
#              org preset HBM3_8Gb_32B, timing preset HBM3_6400Mbps (tCK = 0.625 ns), and the
#              JEDEC-table resolvers for tRRDS, tFAW, tRFC, tREFI in the same file
#   [JEDEC-HBM3] JEDEC JESD238 HBM3 announcement, Jan 2022: 6.4 Gb/s per pin, 819 GB/s per
#              device, 16 independent channels, two pseudo-channels each; first devices
#              on 16 Gb layers
#   [G5-LP5]   gem5, src/python/gem5/components/memory/dram_interfaces/lpddr5.py,
#              class LPDDR5_6400_1x16_BG_BL16 (and the LPDDR5_5500_1x16_BG_BL32 base it inherits)
#   [G5-CTRL]  gem5, src/mem/MemCtrl.py: static_frontend_latency = 10 ns, static_backend_latency = 10 ns
#   [ORIN]     NVIDIA Jetson AGX Orin data sheet: 256-bit LPDDR5, 204.8 GB/s
#   [ASSUMED]  a controller/system choice, not a device property: change it per chip
# ======================================================================================
_CTRL_NS = 20.0          # [G5-CTRL] 10 ns frontend + 10 ns backend (reads see both)
_OUTSTANDING = 256       # [ASSUMED] per-core DMA requests in flight
_INTERLEAVE = 256        # [ASSUMED] GPU-style 256 B channel interleave

EXAMPLE_DEVICES: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "hbm2_8gb_x128": MappingProxyType({
        "name": "hbm2_8gb_x128", "technology": "HBM2",
        "capacity_gib": 8.0,                    # [D3-HBM2] channel_size 1024 MB x 8 channels
        "channels": 8,                          # [D3-HBM2] channels = 8
        "pseudo_channels_per_channel": 1,       # [D3-HBM2] legacy mode (128-bit channels)
        "bus_width_bits": 128,                  # [D3-HBM2] bus_width = 128
        "data_rate_gbps_per_pin": 2.0,          # [D3-HBM2] tCK = 1 ns, DDR -> 2 Gb/s
        "burst_length": 4,                      # [D3-HBM2] BL = 4 -> 64 B per access
        "banks_per_pseudo_channel": 16,         # [D3-HBM2] 4 bank groups x 4 banks
        "row_buffer_bytes": 1024,               # [D3-HBM2] 64 columns x 128 bits
        "interleave_bytes": _INTERLEAVE,
        "t_rcd_ns": 14.0,                       # [D3-HBM2] tRCDRD = 14
        "t_rp_ns": 14.0,                        # [D3-HBM2] tRP = 14
        "t_cl_ns": 14.0,                        # [D3-HBM2] CL = 14
        "t_ras_ns": 34.0,                       # [D3-HBM2] tRAS = 34
        "t_rrd_ns": 4.0,                        # [D3-HBM2] tRRD_S = 4 (tRRD_L = 6)
        "t_faw_ns": 30.0,                       # [D3-HBM2] tFAW = 30
        "t_rfc_ns": 260.0,                      # [D3-HBM2] tRFC = 260
        "t_refi_ns": 3900.0,                    # [D3-HBM2] tREFI = 3900
        "t_wr_ns": 16.0,                        # [D3-HBM2] tWR = 16
        "t_ccd_ns": None,                       # [D3-HBM2] tCCD_S = 1 < burst (2 ns): bus-bound
        "t_cwl_ns": 4.0,                        # [D3-HBM2] CWL = 4
        "t_rtp_ns": 4.0,                        # [D3-HBM2] tRTP_S = 4
        "t_wtr_ns": 6.0,                        # [D3-HBM2] tWTR_S = 6
        "controller_latency_ns": _CTRL_NS,
        "max_outstanding_requests_per_core": _OUTSTANDING,
        "read_energy_pj_per_byte": None,        # not given by the source
        "write_energy_pj_per_byte": None,
    }),
    "hbm3_16gb_8hi": MappingProxyType({
        "name": "hbm3_16gb_8hi", "technology": "HBM3",
        "capacity_gib": 16.0,                   # [JEDEC-HBM3] first devices: 16 Gb layers, 8-high
        "channels": 16,                         # [JEDEC-HBM3] 16 independent channels
        "pseudo_channels_per_channel": 2,       # [JEDEC-HBM3] two pseudo-channels per channel
        "bus_width_bits": 32,                   # [R2-HBM3] dq = 32 per pseudo-channel (= 819.2 GB/s / 6.4 Gb/s / 32)
        "data_rate_gbps_per_pin": 6.4,          # [JEDEC-HBM3] 6.4 Gb/s; [R2-HBM3] HBM3_6400Mbps
        "burst_length": 8,                      # JESD238 BL8 -> 32 B per access ([R2-HBM3] nBL = 2 nCK)
        "banks_per_pseudo_channel": 32,         # [R2-HBM3] HBM3_8Gb_32B: 8 bank groups x 4 banks (8-high)
        "row_buffer_bytes": 1024,               # [R2-HBM3] 32 columns x 32 DQ x BL8 = 1 KiB page
        "interleave_bytes": _INTERLEAVE,
        "t_rcd_ns": 16.25,                      # [R2-HBM3] nRCDRD = 26 x 0.625
        "t_rp_ns": 16.25,                       # [R2-HBM3] nRP = 26 x 0.625
        "t_cl_ns": 16.25,                       # [R2-HBM3] nCL = 26 x 0.625
        "t_ras_ns": 30.0,                       # [R2-HBM3] nRAS = 48 x 0.625
        "t_rrd_ns": 5.0,                        # [R2-HBM3] tRRDS ~ 5 ns
        "t_faw_ns": 15.0,                       # [R2-HBM3] tFAW ~ 15 ns
        "t_rfc_ns": 350.0,                      # [R2-HBM3] tRFCab for 4096 Mb per pseudo-channel (16 GiB / 32)
        "t_refi_ns": 3900.0,                    # [R2-HBM3] tREFI = 3900 ns
        "t_wr_ns": 15.0,                        # [R2-HBM3] nWR = 24 x 0.625
        "t_ccd_ns": None,                       # [R2-HBM3] nCCDS = 2 nCK = one burst (1.25 ns)
        "t_cwl_ns": 5.0,                        # [R2-HBM3] nCWL = 8 x 0.625
        "t_rtp_ns": 3.75,                       # [R2-HBM3] nRTP = 6 x 0.625
        "t_wtr_ns": 5.0,                        # [R2-HBM3] nWTRS = 8 x 0.625 (nWTRL = 12)
        "controller_latency_ns": _CTRL_NS,
        "max_outstanding_requests_per_core": _OUTSTANDING,
        "read_energy_pj_per_byte": None,
        "write_energy_pj_per_byte": None,
    }),
    "ddr4_3200_2ch": MappingProxyType({
        "name": "ddr4_3200_2ch", "technology": "DDR4",
        "capacity_gib": 16.0,                   # [D3-DDR4] channel_size 8192 MB x 2 channels
        "channels": 2,                          # [ASSUMED] dual-channel system
        "pseudo_channels_per_channel": 1,       # DDR4 has none
        "bus_width_bits": 64,                   # [D3-DDR4] bus_width = 64 (4 x16 devices)
        "data_rate_gbps_per_pin": 3.2,          # [D3-DDR4] DDR4-3200
        "burst_length": 8,                      # [D3-DDR4] BL = 8 -> 64 B per access
        "banks_per_pseudo_channel": 8,          # [D3-DDR4] 2 bank groups x 4 banks
        "row_buffer_bytes": 8192,               # [D3-DDR4] 1024 columns x 16 bits x 4 devices
        "interleave_bytes": _INTERLEAVE,
        "t_rcd_ns": 13.75,                      # [D3-DDR4] tRCD = 22 x 0.625
        "t_rp_ns": 13.75,                       # [D3-DDR4] tRP = 22 x 0.625
        "t_cl_ns": 13.75,                       # [D3-DDR4] CL = 22 x 0.625
        "t_ras_ns": 32.5,                       # [D3-DDR4] tRAS = 52 x 0.625
        "t_rrd_ns": 5.625,                      # [D3-DDR4] tRRD_S = 9 x 0.625 (tRRD_L = 11)
        "t_faw_ns": 30.0,                       # [D3-DDR4] tFAW = 48 x 0.625
        "t_rfc_ns": 350.0,                      # [D3-DDR4] tRFC = 560 x 0.625
        "t_refi_ns": 7800.0,                    # [D3-DDR4] tREFI = 12480 x 0.625
        "t_wr_ns": 15.0,                        # [D3-DDR4] tWR = 24 x 0.625
        "t_ccd_ns": None,                       # [D3-DDR4] tCCD_S = 4 = one BL8 burst
        "t_cwl_ns": 10.0,                       # [D3-DDR4] CWL = 16 x 0.625
        "t_rtp_ns": 7.5,                        # [D3-DDR4] tRTP = 12 x 0.625
        "t_wtr_ns": 7.5,                        # [D3-DDR4] tWTR_L = 12 x 0.625
        "controller_latency_ns": _CTRL_NS,
        "max_outstanding_requests_per_core": _OUTSTANDING,
        "read_energy_pj_per_byte": None,
        "write_energy_pj_per_byte": None,
    }),
    "lpddr5_6400_x256": MappingProxyType({
        "name": "lpddr5_6400_x256", "technology": "LPDDR5",
        "capacity_gib": 16.0,                   # [G5-LP5] device_size 1 GiB per x16 channel x 16
        "channels": 16,                         # [ORIN] 256-bit = 16 x16 channels
        "pseudo_channels_per_channel": 1,
        "bus_width_bits": 16,                   # [G5-LP5] device_bus_width = 16
        "data_rate_gbps_per_pin": 6.4,          # [G5-LP5] 6.4 Gb/s
        "burst_length": 16,                     # [G5-LP5] BL16 -> 32 B per access
        "banks_per_pseudo_channel": 16,         # [G5-LP5] 16 banks, bank-group mode
        "row_buffer_bytes": 2048,               # [G5-LP5] 2 KiB page in BG mode
        "interleave_bytes": _INTERLEAVE,
        "t_rcd_ns": 18.0,                       # [G5-LP5] max(2 CK, 18 ns)
        "t_rp_ns": 18.0,                        # [G5-LP5] max(2 CK, 18 ns)
        "t_cl_ns": 21.25,                       # [G5-LP5] RL 17 CK @ 800 MHz
        "t_ras_ns": 42.0,                       # [G5-LP5] max(3 CK, 42 ns)
        "t_rrd_ns": 5.0,                        # [G5-LP5] max(2 CK, 5 ns)
        "t_faw_ns": 20.0,                       # [G5-LP5] tXAW = 20 ns (BG mode)
        "t_rfc_ns": 210.0,                      # [G5-LP5] tRFC = 210 ns (8 Gb per channel)
        "t_refi_ns": 3900.0,                    # [G5-LP5] tREFI = 3.9 us
        "t_wr_ns": 34.0,                        # [G5-LP5] max(3 CK, 34 ns)
        "t_ccd_ns": None,                       # [G5-LP5] BL16 tBURST = 2.5 ns (tCCD_L 5 ns ignored)
        "t_cwl_ns": None,                       # [G5-LP5] gem5 uses RL = WL
        "t_rtp_ns": 4.59,                       # [G5-LP5] tRTP = 4.59 ns (inherited)
        "t_wtr_ns": 6.25,                       # [G5-LP5] max(4 CK, 6.25 ns)
        "controller_latency_ns": _CTRL_NS,
        "max_outstanding_requests_per_core": _OUTSTANDING,
        "read_energy_pj_per_byte": None,
        "write_energy_pj_per_byte": None,
    }),
})


def little_window(p: DramParams) -> int:
    """Requests (of the access granularity) in flight that keep the memory busy by Little's
    law: 2 x peak bytes/ns x the unloaded (empty-bank) read latency / granularity."""
    return int(round(2 * p.peak_bytes_per_s * 1e-9 * p.closed_form_read_latency_ns("empty")
                     / p.access_bytes))


def long_read_stream(p: DramParams, cores: int, per_core: int) -> dict:
    """A long read stream as the engine's cores make it (what tests/test_dram.py and
    benchmarks/bench_dram.py measure a memory's stream efficiency with): 64 KiB transfers
    dealt round-robin to the chip's requesters (count limit), with the chip's requests in
    flight or a Little's-law window at this rate, whichever is larger (the memory's
    property, not the cores' limit).  More than 8 cores are folded into 8 requesters with
    the same total in flight (the multi-requester loop costs O(requesters) per chunk).  At
    least 8 us (two tREFI) and 40 unloaded latencies long, so the ramp-up and drain cost at
    most ~2.5 % (the H200's read latency is 350 ns)."""
    r = min(cores, 8)
    mo = max(per_core * cores, little_window(p)) // r
    tr = 64 << 10
    seconds = max(8e-6, 40 * p.closed_form_read_latency_ns("empty") * 1e-9)
    n = max(int(p.peak_bytes_per_s * seconds), 8 << 20) // tr
    addrs = np.arange(n, dtype=np.int64) * tr
    return DramModel(p).stream_multi(addrs, tr, np.arange(n) % r, mo, in_order=False)


@functools.lru_cache(maxsize=64)
def dram_params(spec: Any) -> DramParams:
    """:meth:`DramParams.from_spec` of a chip's (frozen, hashable) DRAM level, remembered."""
    return DramParams.from_spec(spec)


#: A transfer pattern's rate is measured on at least this many chunks and this many
#: visits of every bank (h200_sxm: 188 pseudo-channels x 48 banks = 36,096 chunks), so the
#: address hash is averaged over many rows.  The rate is taken from the completion of the
#: first quarter of the stream to the last, so ramp-up and the final latency cancel.
#: Numerical choices of the probe, not device properties (tests/test_dram_pattern.py
#: checks the probe against long kernel streams with refresh).
_PATTERN_MIN_CHUNKS = 4096
_PATTERN_VISITS_PER_BANK = 4
#: requests in flight for a pattern probe, in Little's-law windows of the device
#: (:func:`little_window`): plenty, so the probe measures what the device sustains (the
#: requesters' own limits are the mapper's per-core terms).
_PATTERN_WINDOWS_IN_FLIGHT = 8


@functools.lru_cache(maxsize=4096)
def stream_efficiency(p: DramParams, seg_bytes: int, stride_bytes: int, in_flight_chunks: int | None = None) -> float:
    """Fraction of the pin peak that a long read stream of ``seg_bytes``-byte segments
    ``stride_bytes`` apart sustains: the rows of a tile, i.e. a tile's contiguous length
    and its tensor's row pitch (``stride_bytes <= seg_bytes``: one contiguous stream).
    ``in_flight_chunks``: the chunks (a tile row's pieces within one interleave block)
    the requesters keep in flight, as the engine counts its cores' windows (None: plenty,
    what the device itself sustains).

    Measured, not fitted: the pattern runs through the DRAM kernel itself
    (:func:`sim.model.kernels.dram.dram_stream`, cut into interleave-block chunks as the
    engine's DMA cuts a tile row), so the bursts, the row-buffer locality under the
    device's address hash, the bank and ACT limits (tRCD, tRP, tRAS, tRRD, tFAW) and the
    data bus count as they will in the engine.  Refresh is off in the probe and charged
    after it: all-bank refresh as the time it blocks a pseudo-channel (tRFC of every
    tREFI; the kernel's streams lose 1.0-1.6x that, docs/dram_model.md), per-bank refresh
    not at all (it costs those streams 0.3-1.6 %: another bank serves meanwhile), because
    a sample long enough to average refresh would cost too much on a 188-channel HBM3E
    and a short one is dominated by where its few refreshes fall.  Remembered per
    (device, segment, stride)."""
    seg = max(1, int(math.ceil(seg_bytes)))
    stride = int(math.ceil(stride_bytes))
    if stride <= seg:
        # contiguous: one sequential stream, in transfers of a DRAM row per pseudo-channel
        seg = stride = p.row_buffer_bytes * p.num_pseudo_channels
    chunks_per_seg = -(-seg // p.interleave_bytes) + 1
    want = max(_PATTERN_MIN_CHUNKS, _PATTERN_VISITS_PER_BANK * p.num_pseudo_channels * p.banks_per_pseudo_channel)
    n_seg = max(8, min(-(-want // chunks_per_seg), (p.capacity_bytes - seg) // max(stride, 1)))
    addrs = np.arange(n_seg, dtype=np.int64) * stride
    quiet = dataclasses.replace(p, t_refi_ns=0.0)
    plenty = _PATTERN_WINDOWS_IN_FLIGHT * little_window(p)
    if in_flight_chunks is None:
        window = plenty
    else:
        # the kernel's stream counts a chunk as its access-granularity requests
        units = min(-(-seg // p.access_bytes), max(1, p.interleave_bytes // p.access_bytes))
        window = max(1, min(plenty, int(in_flight_chunks) * units))
    r = DramModel(quiet).stream(addrs, seg, max_outstanding=window, in_order=False)
    done = np.maximum.accumulate(r["done_ns"])
    first = n_seg // 4
    t_ns = float(done[-1] - done[first - 1])
    if t_ns <= 0:
        return 1.0
    eff = (n_seg - first) * seg / t_ns * 1e9 / p.peak_bytes_per_s
    if p.t_refi_ns > 0 and p.refresh_mode_effective == "all_bank":
        eff *= 1.0 - p.refresh_overhead
    return float(min(1.0, eff))


def example_spec(name: str) -> SimpleNamespace:
    """A fresh SimpleNamespace with the attributes of example device ``name``."""
    if name not in EXAMPLE_DEVICES:
        raise UnknownNameError("example DRAM device", name, list(EXAMPLE_DEVICES))
    return SimpleNamespace(**dict(EXAMPLE_DEVICES[name]))
