"""Validated DRAM parameters (:class:`DramParams`): a frozen copy of a DRAM spec with its
derived timings (tCK, tCCD/tRRD by bank group, refresh, scheduler window, closed-form
latencies).  Its checks are :mod:`~sim.model.memory.dram_checks`; the kernels' arrays it hands
out (:meth:`~DramParams.to_array`, the parameter vector; :meth:`~DramParams.new_state`, fresh
state) are packed by :mod:`~sim.model.memory.dram_packing`.

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

from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.model.memory.dram_checks import _OPTIONAL, _REQUIRED, dram_param_problems
from sim.model.memory.dram_packing import fresh_state, params_array
from sim.spec.dram_technology import DramTechnology, dram_technology

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
        problems = dram_param_problems(self)
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
        """``refresh_mode``, or the technology's default (its file's ``refresh_mode``: per_bank
        for HBM* and LPDDR* - REFSB in JESD235 HBM2, REFPB in JESD238 HBM3, REFpb in LPDDR4/5 -
        all_bank otherwise)."""
        if self.refresh_mode is not None:
            return self.refresh_mode
        return self.tech.refresh_mode

    @property
    def t_rfc_pb_effective_ns(self) -> float:
        """``t_rfc_pb_ns``, or the technology's cited value at this density (its file's
        ``t_rfc_pb_ns`` table by Mbit per pseudo-channel: HBM3/HBM3E 200 ns up to 8 Gb, 250 ns
        above; HBM2/HBM2E 160 ns; LPDDR5/5X 60/90/120/140 ns for 2/4/8/16 Gb), else 4/7 of tRFC
        (``sim.spec.dram_technology.T_RFC_PB_FRACTION``)."""
        if self.t_rfc_pb_ns is not None:
            return float(self.t_rfc_pb_ns)
        mbit = self.capacity_gib * 8192.0 / self.num_pseudo_channels
        return self.tech.per_bank_refresh_ns(mbit, self.t_rfc_ns)

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
        """The float64 parameter vector the kernels read (``P_*`` indices): :func:`params_array`."""
        return params_array(self)

    def new_state(self) -> tuple[np.ndarray, ...]:
        """Fresh kernel state ``(bank_row, bank_t, pc_t, pc_i, bank_i, stats)``: :func:`fresh_state`."""
        return fresh_state(self)
