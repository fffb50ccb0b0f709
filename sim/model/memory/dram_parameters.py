"""Validated DRAM parameters (:class:`DramParams`): a frozen copy of a DRAM spec with
its checks, its derived timings (tCK, tCCD/tRRD by bank group, refresh, scheduler window,
closed-form latencies) and the kernels' arrays (:meth:`~DramParams.to_array`, the
parameter vector; :meth:`~DramParams.new_state`, fresh state).

It is the one description of a DRAM device that every user shares (the engine's lowering,
the kernel runs, :class:`~sim.model.memory.dram.DramModel`, the stream-efficiency probe),
so it lives apart from the stateful model and the cited example devices;
:mod:`sim.model.memory.dram` re-exports it.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, Mapping

import numpy as np

import sim.model.kernels.dram as K
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.model.memory.dram_hash import _hash_poly, _stagger_multiplier
from sim.spec.dram_technology import DRAM_TECHNOLOGIES, DramTechnology, dram_technology, technology_key

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
