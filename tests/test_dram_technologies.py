"""DRAM technologies as data (dram_technologies/*.yaml, sim.spec.dram_technology): the shipped files
carry the JEDEC / Ramulator 2 / DRAMsim3 values the timing model was built on, a memory that is
not shipped is one user file away, and bad files are refused with file, line and key."""
from __future__ import annotations

import pytest

from sim.errors import ConfigError
from sim.model.memory.dram import dram_params, long_read_stream
from sim.spec.dram_technology import DRAM_TECHNOLOGIES, dram_technology
from sim.spec.registry import load_chip
from test_bad_input import ROOT, refused, sim

#: the cited tables, restated: (beats per tCK, speed bins Gb/s, tCCD_S, tCCD_L nCK, tCCD_L ns,
#: tRRD_S, tRRD_L nCK, default refresh).  JESD79-3 / JESD79-4 (DDR clock, BL8 = 4 nCK),
#: Ramulator2 lpddr5.py (CK:WCK 1:4, BL16 = 2 nCK), DRAMsim3 HBM2_8Gb_x128.ini (BL4 = 2 nCK),
#: Ramulator2 hbm3.py (4 beats per tCK, BL8 = 2 nCK)
CITED = {
    "DDR3": (2, (0.8, 2.133), 4, 4, 0.0, 4, 4, "all_bank"),
    "DDR4": (2, (1.6, 3.2), 4, 5, 5.0, 4, 4, "all_bank"),
    "LPDDR5": (8, (3.2, 6.4), 2, 4, 0.0, 4, 4, "per_bank"),
    "LPDDR5X": (8, (6.4, 8.533), 2, 4, 0.0, 4, 4, "per_bank"),
    "HBM2": (2, (1.0, 2.4), 1, 2, 0.0, 4, 6, "per_bank"),
    "HBM2E": (2, (2.4, 3.6), 1, 2, 0.0, 4, 6, "per_bank"),
    "HBM3": (4, (4.8, 6.4), 2, 4, 0.0, 4, 4, "per_bank"),
    "HBM3E": (4, (6.4, 9.6), 2, 4, 0.0, 4, 4, "per_bank"),
}

HBM4 = """\
schema_version: 1
name: HBM4
beats_per_tck: 4
speed_bin_gbps: [8.0, 12.8]
t_ccd_s_nck: 2
t_ccd_l_nck: 4
t_rrd_s_nck: 4
t_rrd_l_nck: 4
refresh_mode: per_bank
t_rfc_pb_ns:
  - [null, 250]
sources: "a what-if: HBM3's column timings in nCK at HBM4's pin rates"
"""


def test_shipped_files_are_the_cited_tables():
    assert set(DRAM_TECHNOLOGIES) == set(CITED)
    for name, (beats, bins, ccds, ccdl, ccdl_ns, rrds, rrdl, mode) in CITED.items():
        t = dram_technology(name)
        assert (t.beats_per_tck, t.bin_gbps, t.t_ccd_s_nck, t.t_ccd_l_nck, t.t_ccd_l_ns, t.t_rrd_s_nck,
                t.t_rrd_l_nck, t.refresh_mode) == (beats, bins, ccds, ccdl, ccdl_ns, rrds, rrdl, mode), name
    # per-bank refresh by density (JESD238 via Ramulator2 hbm3.py; LPDDR5.cpp tRFCpb_TABLE; HBM2.cpp)
    assert dram_technology("HBM3").per_bank_refresh_ns(8192, 350) == 200
    assert dram_technology("HBM3E").per_bank_refresh_ns(16384, 350) == 250
    assert [dram_technology("LPDDR5").per_bank_refresh_ns(m, 210) for m in (2048, 4096, 8192, 16384)] == \
        [60, 90, 120, 140]
    assert dram_technology("HBM2").per_bank_refresh_ns(1e9, 260) == 160
    assert dram_technology("DDR4").per_bank_refresh_ns(8192, 350) == pytest.approx(200)   # 4/7 of tRFC


def test_a_user_technology_is_one_file_and_follows_its_pin_rate(tmp_path, monkeypatch):
    d = tmp_path / "dram_technologies"
    d.mkdir()
    (d / "HBM4.yaml").write_text(HBM4)
    monkeypatch.setenv("SIM_DRAM_DIR", str(d))
    assert "HBM4" in DRAM_TECHNOLOGIES
    base = load_chip("h200_sxm", ["memory.levels.hbm3e.technology=HBM4"])
    fast = load_chip("h200_sxm", ["memory.levels.hbm3e.technology=HBM4",
                                  "memory.levels.hbm3e.data_rate_gbps_per_pin=12.8"])
    p0, p1 = dram_params(base.memory.dram), dram_params(fast.memory.dram)
    assert p0.speed_bin_gbps == (8.0, 12.8) and p0.t_rfc_pb_effective_ns == 250
    assert p1.tck_ns == pytest.approx(4 / 12.8)
    # a long stream gains with the pins, as on the shipped memories (85-95 % of each peak)
    s0 = long_read_stream(p0, 16, 3072)["achieved_bytes_per_s"]
    s1 = long_read_stream(p1, 16, 3072)["achieved_bytes_per_s"]
    assert 1.7 < s1 / s0 < 2.1
    listed = sim("list", "dram")
    assert listed.returncode == 0 and "HBM3E" in listed.stdout.split()


def test_an_unknown_technology_lists_the_registered_ones(tmp_path):
    text = (ROOT / "arch_configs" / "h200_sxm.yaml").read_text()
    line = text[:text.index("technology: HBM3E")].count("\n") + 1
    f = tmp_path / "chip.yaml"
    f.write_text(text.replace("technology: HBM3E", "technology: HBM9"))
    refused(sim("check", str(f)), f"chip.yaml:{line}", "HBM9", "HBM3E", "LPDDR5X")


def test_a_bad_technology_file_names_its_file_line_and_key(tmp_path, monkeypatch):
    d = tmp_path / "dram_technologies"
    d.mkdir()
    bad = HBM4.replace("beats_per_tck: 4", "beats_per_tck: four")
    (d / "HBM4.yaml").write_text(bad)
    refused(sim("check", str(d / "HBM4.yaml")), "HBM4.yaml:3", "beats_per_tck")
    (d / "HBM4.yaml").write_text(HBM4.replace("[8.0, 12.8]", "[12.8, 8.0]"))
    refused(sim("check", str(d / "HBM4.yaml")), "HBM4.yaml:4", "speed_bin_gbps")
    (d / "HBM4.yaml").write_text(HBM4.replace("name: HBM4", "name: HBM5"))
    refused(sim("check", str(d / "HBM4.yaml")), "must be the file name")
    # in the search path, a broken file is reported where a chip needs the catalog
    (d / "HBM4.yaml").write_text(bad)
    monkeypatch.setenv("SIM_DRAM_DIR", str(d))
    with pytest.raises(ConfigError) as exc:
        load_chip("npu_128x128", ["memory.levels.hbm.technology=HBM4"])
    assert "HBM4.yaml:3" in str(exc.value)
