"""A DRAM parameter record packed for the Numba kernels: the float64 parameter vector they read
(:func:`params_array`, the ``P_*`` indices of :mod:`sim.model.kernels.dram`) and their fresh
state (:func:`fresh_state`: banks closed, buses idle, refreshes staggered).

Kept apart from :class:`~sim.model.memory.dram_parameters.DramParams` (whose ``to_array`` and
``new_state`` call these) because this is the kernels' layout, not the device's description.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

import sim.model.kernels.dram as K
from sim.model.memory.dram_checks import _is_pow2
from sim.model.memory.dram_hash import _hash_poly, _stagger_multiplier

if TYPE_CHECKING:
    from sim.model.memory.dram_parameters import DramParams

__all__ = ["fresh_state", "params_array"]


def _log2_or_minus1(x: int) -> int:
    return int(x).bit_length() - 1 if _is_pow2(int(x)) else -1


def params_array(p: DramParams) -> np.ndarray:
    """The float64 parameter vector the kernels read (``P_*`` indices)."""
    vec = np.zeros(K.N_PARAMS, dtype=np.float64)
    npc = p.num_pseudo_channels
    bpr = p.row_buffer_bytes // p.interleave_bytes
    vec[K.P_CHANNELS] = p.channels
    vec[K.P_PCS_PER_CHANNEL] = p.pseudo_channels_per_channel
    vec[K.P_NUM_PC] = npc
    vec[K.P_BANKS] = p.banks_per_pseudo_channel
    vec[K.P_ACCESS_BYTES] = p.access_bytes
    vec[K.P_INTERLEAVE_BYTES] = p.interleave_bytes
    vec[K.P_ROW_BYTES] = p.row_buffer_bytes
    vec[K.P_BLOCKS_PER_ROW] = bpr
    vec[K.P_ACCESS_SHIFT] = _log2_or_minus1(p.access_bytes)
    vec[K.P_IL_SHIFT] = _log2_or_minus1(p.interleave_bytes)
    vec[K.P_PC_SHIFT] = _log2_or_minus1(npc)
    vec[K.P_BPR_SHIFT] = _log2_or_minus1(bpr)
    vec[K.P_BANK_SHIFT] = _log2_or_minus1(p.banks_per_pseudo_channel)
    vec[K.P_ADDRESS_HASH] = 1.0 if p.address_hash else 0.0
    vec[K.P_T_BURST] = p.burst_ns
    vec[K.P_T_CCD] = p.t_ccd_effective_ns
    vec[K.P_T_SLOT] = p.slot_ns
    vec[K.P_T_RCD] = p.t_rcd_ns
    vec[K.P_T_RP] = p.t_rp_ns
    vec[K.P_T_CL] = p.t_cl_ns
    vec[K.P_T_CWL] = p.t_cl_ns if p.t_cwl_ns is None else p.t_cwl_ns
    vec[K.P_T_RAS] = p.t_ras_ns
    vec[K.P_T_RRD] = p.t_rrd_s_effective_ns
    vec[K.P_T_FAW] = p.t_faw_ns
    vec[K.P_T_RFC] = p.t_rfc_ns
    vec[K.P_T_REFI] = max(0.0, p.t_refi_ns)
    vec[K.P_T_WR] = p.t_wr_ns
    vec[K.P_T_RTP] = p.t_rtp_ns
    vec[K.P_T_WTR] = p.t_wtr_ns
    vec[K.P_T_RTW] = (4.0 / p.data_rate_gbps_per_pin) if p.t_rtw_ns is None else p.t_rtw_ns
    vec[K.P_CTRL_LATENCY] = p.controller_latency_ns
    vec[K.P_WRITE_BATCH] = p.write_batch_bursts
    vec[K.P_READ_PJ_PER_BYTE] = p.read_energy_pj_per_byte or 0.0
    vec[K.P_WRITE_PJ_PER_BYTE] = p.write_energy_pj_per_byte or 0.0
    vec[K.P_PEAK_BYTES_PER_NS] = p.peak_bytes_per_s * 1e-9
    vec[K.P_MAX_OUTSTANDING] = p.max_outstanding_requests_per_core
    per_bank = p.refresh_mode_effective == "per_bank"
    vec[K.P_REFRESH_PER_BANK] = 1.0 if per_bank else 0.0
    vec[K.P_T_RFC_PB] = p.t_rfc_pb_effective_ns
    vec[K.P_T_REFI_PB] = max(0.0, p.t_refi_ns) / p.banks_per_pseudo_channel
    vec[K.P_T_ACT_SLOT] = p.act_slot_ns
    vec[K.P_FRFCFS] = 1.0 if p.scheduler == "frfcfs" else 0.0
    vec[K.P_WINDOW_NS] = p.scheduler_window_effective_ns
    vec[K.P_ROW_HIT_CAP] = p.row_hit_cap
    turn = vec[K.P_T_RTW] + p.t_wtr_ns + p.t_cl_ns
    vec[K.P_T_TURN_PER_WRITE] = turn / p.write_batch_bursts
    vec[K.P_RW_HORIZON] = 2 * p.write_batch_bursts * p.slot_ns + turn
    vec[K.P_BANK_GROUPS] = p.bank_groups_effective
    vec[K.P_T_CCD_L] = p.t_ccd_l_effective_ns
    vec[K.P_T_RRD_L] = p.t_rrd_l_effective_ns
    addr_bits = max(1, (p.capacity_bytes - 1).bit_length())
    pc_bits = max(0, int(vec[K.P_PC_SHIFT]))
    rest_bits = addr_bits - int(vec[K.P_IL_SHIFT]) - pc_bits
    row_bits = rest_bits - max(0, int(vec[K.P_BPR_SHIFT])) - max(0, int(vec[K.P_BANK_SHIFT]))
    vec[K.P_PC_POLY:K.P_PC_POLY + 6] = _hash_poly(int(vec[K.P_PC_SHIFT]), rest_bits)
    vec[K.P_BANK_POLY:K.P_BANK_POLY + 6] = _hash_poly(int(vec[K.P_BANK_SHIFT]), row_bits)
    return vec

def fresh_state(p: DramParams) -> tuple[np.ndarray, ...]:
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
    npc = p.num_pseudo_channels
    nbanks = npc * p.banks_per_pseudo_channel
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
    interval = p.t_refi_ns
    if p.refresh_mode_effective == "per_bank":
        interval = p.t_refi_ns / p.banks_per_pseudo_channel
    if p.t_refi_ns > 0 and p.refresh_stagger:
        slot = (np.arange(npc, dtype=np.int64) * _stagger_multiplier(npc)) % npc
        pc_t[:, K.C_NEXT_REFRESH] = (slot.astype(np.float64) + 1.0) * (interval / npc)
    elif p.t_refi_ns > 0:
        pc_t[:, K.C_NEXT_REFRESH] = interval
    else:
        pc_t[:, K.C_NEXT_REFRESH] = np.inf
    pc_i = np.zeros((npc, K.N_PC_I), dtype=np.int64)
    stats = np.zeros(K.N_STATS, dtype=np.float64)
    stats[K.S_FIRST_ARRIVAL_NS] = np.inf
    stats[K.S_LAST_DONE_NS] = 0.0
    return (bank_row, bank_t, pc_t, pc_i, bank_i, stats)
