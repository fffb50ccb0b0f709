"""Tests of the off-chip DRAM timing model (sim.kernels.dram, sim.memory.dram)."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from sim.errors import ConfigError, UnknownNameError
from sim.kernels import dram as K
from sim.memory import EXAMPLE_DEVICES, DramModel, DramParams, example_spec

DEVICES = list(EXAMPLE_DEVICES)
PLENTY = 1 << 16          # outstanding requests that cover latency and refresh stalls


def params(name: str, **changes) -> DramParams:
    return DramParams.from_spec(example_spec(name), **changes)


def no_refresh(name: str, **changes) -> DramParams:
    return params(name, t_refi_ns=0.0, **changes)


def random_aligned(p: DramParams, size: int, n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return rng.integers(0, p.capacity_bytes // size, n, dtype=np.int64) * size


def same_bank_other_row(model: DramModel, addr: int) -> int:
    """An address in the same pseudo-channel and bank as ``addr`` but another row."""
    pc0, b0, r0 = K.dram_decode(model.p, np.int64(addr))
    step = model.params.row_buffer_bytes
    for i in range(1, 1 << 20):
        a = addr + i * step
        pc, b, r = K.dram_decode(model.p, np.int64(a))
        if pc == pc0 and b == b0 and r != r0:
            return a
    raise AssertionError("no conflicting address found")


# ----------------------------------------------------------------------------- spec
def test_from_spec_reads_a_simplenamespace():
    spec = SimpleNamespace(**dict(EXAMPLE_DEVICES["hbm3_16gb_8hi"]))
    p = DramParams.from_spec(spec)
    assert p.num_pseudo_channels == 32
    assert p.access_bytes == 32
    assert p.burst_ns == pytest.approx(1.25)
    assert p.peak_bytes_per_s == pytest.approx(819.2e9)
    arr = p.to_array()
    assert arr.shape == (K.N_PARAMS,) and arr.dtype == np.float64
    assert arr[K.P_NUM_PC] == 32 and arr[K.P_ACCESS_BYTES] == 32
    assert arr[K.P_T_SLOT] == pytest.approx(1.25)
    assert arr[K.P_MAX_OUTSTANDING] == spec.max_outstanding_requests_per_core
    # optional attributes may be missing entirely: defaults apply
    minimal = SimpleNamespace(**{k: v for k, v in vars(spec).items()
                                 if k not in ("t_ccd_ns", "t_cwl_ns", "t_rtp_ns", "t_wtr_ns",
                                              "read_energy_pj_per_byte", "write_energy_pj_per_byte")})
    q = DramParams.from_spec(minimal)
    assert q.t_ccd_ns is None and q.t_cwl_ns is None and q.t_rtp_ns == 7.5
    assert q.to_array()[K.P_T_CWL] == q.t_cl_ns


def test_from_spec_reports_missing_and_invalid_attributes():
    spec = dict(EXAMPLE_DEVICES["ddr4_3200_2ch"])
    del spec["t_faw_ns"]
    del spec["channels"]
    with pytest.raises(ConfigError) as e:
        DramParams.from_spec(SimpleNamespace(**spec))
    assert "t_faw_ns" in str(e.value) and "channels" in str(e.value)
    with pytest.raises(ConfigError, match="power of two"):
        params("ddr4_3200_2ch", interleave_bytes=384)
    with pytest.raises(ConfigError, match="access granularity"):
        params("ddr4_3200_2ch", interleave_bytes=32)
    with pytest.raises(UnknownNameError, match="did you mean"):
        example_spec("hbm3_16gb_8h")


def test_from_spec_accepts_the_chip_config_dram_level():
    chip = pytest.importorskip("sim.config.chip")
    level_cls = getattr(chip, "DramLevel", None)
    if level_cls is None:
        pytest.skip("sim.config.chip has no DramLevel")
    data = {k: v for k, v in EXAMPLE_DEVICES["hbm3_16gb_8hi"].items() if k in level_cls.model_fields}
    data["kind"] = "dram"
    level = level_cls.model_validate(data)
    p = DramParams.from_spec(level)
    assert p.peak_bytes_per_s == pytest.approx(level.peak_bytes_per_s)
    assert p.access_bytes == level.access_bytes


def test_chunk_bytes_stays_in_one_interleave_block():
    m = DramModel("hbm2_8gb_x128")
    il = m.params.interleave_bytes
    assert K.dram_chunk_bytes(m.p, np.int64(0), np.int64(10_000)) == il
    assert K.dram_chunk_bytes(m.p, np.int64(il - 8), np.int64(10_000)) == 8
    assert K.dram_chunk_bytes(m.p, np.int64(3 * il + 5), np.int64(7)) == 7
    with pytest.raises(ValueError, match="interleave block"):
        m.access(il - 8, 64)


def test_mapping_is_channel_first_and_a_bijection():
    for name in DEVICES:
        m = DramModel(params(name))
        p = m.params
        il, npc = p.interleave_bytes, p.num_pseudo_channels
        # consecutive interleave blocks: every pseudo-channel once per npc blocks
        pcs = [K.dram_decode(m.p, np.int64(i * il))[0] for i in range(4 * npc)]
        for g in range(4):
            assert sorted(pcs[g * npc:(g + 1) * npc]) == list(range(npc))
        # a row's worth of blocks of one pseudo-channel shares (bank, row)
        n = npc * (p.row_buffer_bytes // il) * p.banks_per_pseudo_channel * 4
        dec = np.array([K.dram_decode(m.p, np.int64(i * il)) for i in range(n)])
        keys = dec[:, 0] * 10**12 + dec[:, 1] * 10**9 + dec[:, 2]
        _, counts = np.unique(keys, return_counts=True)
        assert (counts == p.row_buffer_bytes // il).all()     # no two blocks collide


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize("name", DEVICES)
def test_isolated_read_latency_matches_closed_form(name):
    m = DramModel(no_refresh(name))
    p = m.params
    g = p.access_bytes
    # empty bank: ACT + tRCD, CAS + tCL, one burst, controller
    d = m.access(0, g, 0.0)
    assert d == pytest.approx(p.t_rcd_ns + p.t_cl_ns + p.slot_ns + p.controller_latency_ns, rel=1e-12)
    assert d == pytest.approx(p.closed_form_read_latency_ns("empty"), rel=1e-12)
    # row hit, long after
    t = 1000.0
    d = m.access(g, g, t) - t
    assert d == pytest.approx(p.t_cl_ns + p.slot_ns + p.controller_latency_ns, rel=1e-12)
    assert d == pytest.approx(p.closed_form_read_latency_ns("hit"), rel=1e-12)
    # row conflict in the same bank: + tRP + tRCD
    t = 2000.0
    d = m.access(same_bank_other_row(m, 0), g, t) - t
    assert d == pytest.approx(p.closed_form_read_latency_ns("conflict"), rel=1e-12)
    # a whole interleave block in one go: more bursts on the bus
    t = 3000.0
    d = m.access(p.interleave_bytes * p.num_pseudo_channels * 10**4, p.interleave_bytes, t) - t
    assert d == pytest.approx(p.closed_form_read_latency_ns("empty", p.interleave_bytes), rel=1e-12)
    s = m.stats
    assert (s["row_empty"], s["row_hits"], s["row_conflicts"], s["activates"]) == (2, 1, 1, 3)


def test_isolated_write_latency_and_counters():
    m = DramModel(no_refresh("hbm2_8gb_x128"))
    p = m.params
    d = m.access(0, p.access_bytes, 0.0, is_write=True)
    # writes complete when their data is on the bus: tRCD + tCWL + burst, no return path
    assert d == pytest.approx(p.t_rcd_ns + p.t_cwl_ns + p.slot_ns, rel=1e-12)
    r = m.stream(random_aligned(p, 4096, 100), 4096, is_write=True, max_outstanding=64)
    assert r["bytes_written"] == 100 * 4096 and r["bytes_read"] == 0
    mixed = np.arange(200) % 2 == 0
    r = m.stream(random_aligned(p, 1024, 200, seed=1), 1024, is_write=mixed, max_outstanding=64)
    assert r["bytes_written"] == 100 * 1024 and r["bytes_read"] == 100 * 1024
    assert r["turnarounds"] > 0


@pytest.mark.parametrize("name", DEVICES)
def test_one_outstanding_request_is_latency_bound(name):
    """Little's law: with one request in flight, bandwidth = bytes / latency, and the
    time is the sum of the closed-form latencies of the row-buffer cases met."""
    m = DramModel(no_refresh(name))
    p = m.params
    n = 4000
    g = p.access_bytes
    r = m.stream(np.arange(n, dtype=np.int64) * g, g, max_outstanding=1)
    expect_ns = (r["row_hits"] * p.closed_form_read_latency_ns("hit")
                 + r["row_empty"] * p.closed_form_read_latency_ns("empty")
                 + r["row_conflicts"] * p.closed_form_read_latency_ns("conflict"))
    assert r["requests"] == n
    assert r["seconds"] * 1e9 == pytest.approx(expect_ns, rel=1e-9)
    assert r["achieved_bytes_per_s"] == pytest.approx(g / (r["mean_latency_ns"] * 1e-9), rel=1e-9)
    # a few requests in flight, far from saturation: Little's law still holds
    for k in (2, 4, 8):
        m.reset()
        r = m.stream(np.arange(n, dtype=np.int64) * g, g, max_outstanding=k)
        little = k * g / (r["mean_latency_ns"] * 1e-9)
        assert r["achieved_bytes_per_s"] == pytest.approx(little, rel=0.05)
        assert r["efficiency"] < 0.5


# ---------------------------------------------------------------- bandwidth shape
@pytest.mark.parametrize("name", DEVICES)
def test_long_sequential_stream_reaches_85_to_95_percent(name):
    m = DramModel(name)
    r = m.stream([0], [256 << 20], max_outstanding=PLENTY)
    assert 0.85 <= r["efficiency"] <= 0.95, r["efficiency"]
    assert r["row_hit_rate"] >= 0.7
    assert r["refreshes"] > 0


@pytest.mark.parametrize("name", DEVICES)
def test_random_small_reads_are_far_slower(name):
    m = DramModel(name)
    p = m.params
    r = m.stream(random_aligned(p, 64, 100_000), 64, max_outstanding=PLENTY)
    assert r["efficiency"] < 0.40, r["efficiency"]
    assert r["row_hit_rate"] < 0.05


@pytest.mark.parametrize("name", DEVICES)
def test_bandwidth_grows_with_transfer_size_and_saturates(name):
    p = params(name)
    effs = []
    for size in (64, 256, 1024, 4096, 16384, 65536, 1 << 18, 1 << 20, 1 << 22):
        n = max(8, (16 << 20) // size)
        r = DramModel(p).stream(random_aligned(p, size, n, seed=size), size, max_outstanding=PLENTY)
        effs.append(r["efficiency"])
    assert all(b >= a * 0.99 for a, b in zip(effs, effs[1:])), effs
    assert effs[-1] > 3 * effs[0]
    assert effs[-1] == pytest.approx(effs[-2], rel=0.02)        # saturated
    assert effs[-1] >= 0.85


@pytest.mark.parametrize("name", DEVICES)
def test_bandwidth_grows_with_outstanding_requests_and_saturates(name):
    p = params(name)
    effs = []
    for m_out in (1, 4, 16, 64, 256, 1024, 4096, 16384, 65536):
        r = DramModel(p).stream([0], [32 << 20], max_outstanding=m_out)
        effs.append(r["efficiency"])
    assert all(b >= a * 0.995 for a, b in zip(effs, effs[1:])), effs
    assert effs[0] < 0.05
    assert effs[-1] == pytest.approx(effs[-2], rel=0.01)
    assert effs[-1] >= 0.85
    # a pure count limit (out-of-order completion) is never worse than in-order retirement
    for m_out in (64, 1024):
        a = DramModel(p).stream([0], [8 << 20], max_outstanding=m_out)["efficiency"]
        b = DramModel(p).stream([0], [8 << 20], max_outstanding=m_out, in_order=False)["efficiency"]
        assert b >= a * 0.999


def test_several_requesters_share_the_device():
    p = params("hbm3_16gb_8hi")
    n = 64
    addrs = np.arange(n, dtype=np.int64) << 20
    one = DramModel(p).stream(addrs, 1 << 20, max_outstanding=256)
    eight = DramModel(p).stream_multi(addrs, 1 << 20, np.arange(n) % 8, 256)
    assert eight["efficiency"] > 3 * one["efficiency"]
    assert eight["bytes"] == one["bytes"] == n << 20
    # requesters with different limits: the larger window finishes its half first
    m = DramModel(p)
    r = m.stream_multi(addrs, 1 << 20, np.arange(n) % 2, [16, 4096])
    assert r["done_ns"][1::2].max() < r["done_ns"][0::2].max()
    assert r["requests"] == n * (1 << 20) // p.interleave_bytes


@pytest.mark.parametrize("name", DEVICES)
def test_refresh_costs_about_trfc_over_trefi(name):
    size = 128 << 20
    with_ref = DramModel(params(name)).stream([0], [size], max_outstanding=PLENTY)
    without = DramModel(no_refresh(name)).stream([0], [size], max_outstanding=PLENTY)
    p = params(name)
    overhead = with_ref["seconds"] / without["seconds"] - 1.0
    ratio = p.t_rfc_ns / p.t_refi_ns
    # tRFC/tREFI plus the precharge and re-activation around each refresh
    assert ratio <= overhead <= 1.6 * ratio, (overhead, ratio)
    expected = with_ref["seconds"] * 1e9 / p.t_refi_ns * p.num_pseudo_channels
    assert with_ref["refreshes"] == pytest.approx(expected, rel=0.05)
    assert without["refreshes"] == 0


def test_determinism_bit_for_bit():
    p = params("hbm3_16gb_8hi")
    rng = np.random.default_rng(7)
    n = 3000
    addrs = random_aligned(p, 64, n) + rng.integers(0, 8, n) * 4
    sizes = rng.integers(1, 5000, n)
    writes = rng.random(n) < 0.3
    t_issue = np.sort(rng.random(n) * 1e5)
    runs = []
    for _ in range(2):
        m = DramModel(p)
        r = m.stream(addrs, sizes, is_write=writes, max_outstanding=97, t_issue=t_issue)
        r2 = m.stream_multi(addrs, sizes, np.arange(n) % 3, [8, 64, 512], is_write=writes,
                            in_order=False)
        runs.append((r["done_ns"], r2["done_ns"], m.state))
    (a1, b1, s1), (a2, b2, s2) = runs
    assert np.array_equal(a1, a2) and np.array_equal(b1, b2)
    for x, y in zip(s1, s2):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("name", DEVICES)
def test_more_channels_or_faster_pins_never_slower(name):
    """For bandwidth-bound streams (plenty of requests in flight)."""
    base = params(name)
    streams = [
        (np.array([0]), 32 << 20),
        (random_aligned(base, 4096, 4000, seed=1), 4096),
        (random_aligned(base, 64, 20000, seed=2), 64),
    ]
    variants = [base.replace(channels=2 * base.channels),
                base.replace(data_rate_gbps_per_pin=1.5 * base.data_rate_gbps_per_pin)]
    for addrs, size in streams:
        t0 = DramModel(base).stream(addrs, size, max_outstanding=PLENTY)["seconds"]
        for v in variants:
            t1 = DramModel(v).stream(addrs, size, max_outstanding=PLENTY)["seconds"]
            assert t1 <= t0 * (1 + 1e-3), (v.channels, v.data_rate_gbps_per_pin, t1 / t0)


def test_state_layout_and_stats_names():
    p = params("lpddr5_6400_x256")
    st = p.new_state()
    assert len(st) == 5
    bank_row, bank_t, pc_t, pc_i, stats = st
    n_pc = p.num_pseudo_channels
    assert bank_row.shape == (n_pc * p.banks_per_pseudo_channel,) and (bank_row == -1).all()
    assert bank_t.shape == (bank_row.shape[0], K.N_BANK_T)
    assert pc_t.shape == (n_pc, K.N_PC_T) and pc_i.shape == (n_pc, K.N_PC_I)
    assert stats.shape == (K.N_STATS,)
    # staggered refresh: every pseudo-channel at a different phase within tREFI
    first = np.sort(pc_t[:, K.C_NEXT_REFRESH])
    assert np.allclose(first, (np.arange(n_pc) + 1) * p.t_refi_ns / n_pc)
    m = DramModel(p)
    m.stream([0], [1 << 20], max_outstanding=256)
    s = m.stats
    assert s["bytes_read"] == 1 << 20 and s["bursts"] == (1 << 20) // p.access_bytes
    assert s["bus_busy_ns"] == pytest.approx(s["bursts"] * p.slot_ns)
    assert m.now_ns == s["last_done_ns"] > 0
    m.reset()
    assert m.now_ns == 0 and m.stats["requests"] == 0
