"""Cited example DRAM devices (:data:`EXAMPLE_DEVICES`: HBM2, HBM3, DDR4-3200,
LPDDR5-6400, every value with its source) and :func:`example_spec`, which hands one out
as a fresh attribute object.

These are reference data for tests, benchmarks and :class:`~sim.model.memory.dram.DramModel`
(which accepts a preset name), not part of the timing model, so they are kept out of the
model's modules; :mod:`sim.model.memory.dram` re-exports both names.
"""
from __future__ import annotations

from types import MappingProxyType, SimpleNamespace
from typing import Any, Mapping

from sim.errors import UnknownNameError

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


def example_spec(name: str) -> SimpleNamespace:
    """A fresh SimpleNamespace with the attributes of example device ``name``."""
    if name not in EXAMPLE_DEVICES:
        raise UnknownNameError("example DRAM device", name, list(EXAMPLE_DEVICES))
    return SimpleNamespace(**dict(EXAMPLE_DEVICES[name]))
