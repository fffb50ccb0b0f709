"""Convolutions in the engine (issue 12, item 2): DRAM moves the ifmap pixels under a tile's
windows (sim.ir.lowered.ConvWindows), not their im2col copies; row-stationary runs Eyeriss's
1-D row primitive (the filter row in the PE) for convolutions and picks its row length for
GEMMs; networks as data (networks/*.yaml) through `sim conv`.

Independent truth: closed forms of the unique pixels under a window, the equivalence of a
1x1 convolution and its GEMM, and the Eyeriss papers' published AlexNet results (Chen et al.,
IEEE JSSC 52(1) 2017, abstract: the convolution layers at 35 frames/s and 0.0029 DRAM accesses
per MAC at batch 4, 200 MHz; ISCA 2016: RS the most energy-efficient of the dataflows on
AlexNet's convolution layers), and the MAC counts the papers give for AlexNet and VGG-16.
"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sim.apps.cnn import network_ops, run_network
from sim.errors import ConfigError, ShapeError
from sim.ir.lowered import ConvWindows
from sim.ir.ops import Conv2d, Gemm
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op
from sim.spec.network_spec import load_network
from sim.spec.registry import load_chip

ROOT = Path(__file__).resolve().parents[1]

#: Chen et al., JSSC 2017, abstract: AlexNet's convolution layers on Eyeriss, batch 4
EYERISS_ALEXNET_FPS = 35.0
EYERISS_ALEXNET_DRAM_ACCESSES_PER_MAC = 0.0029


def _windows(op: Conv2d) -> ConvWindows:
    return ConvWindows(op.out_h, op.out_w, op.in_h, op.in_w, op.kernel_h, op.kernel_w, op.stride)


# --------------------------------------------------------------------------- the unique pixels


def test_a_1x1_convolution_reads_every_im2col_entry_once():
    w = _windows(Conv2d("c", 14, 14, 64, 32, 1, 1))
    for mt, kt in ((1, 1), (14, 64), (196, 16), (7, 3)):
        assert float(w.a_fraction(mt, kt)) == pytest.approx(1.0)


def test_whole_images_read_the_ifmap_once():
    """A tile of whole images and every (channel, window) position: the unique pixels are the
    (unpadded) ifmap, Nb * C * H * W, exactly."""
    for op in (Conv2d("c3", 13, 13, 256, 384, 3, 3, padding=1, batch=4),
               Conv2d("c1", 227, 227, 3, 96, 11, 11, stride=4, batch=2)):
        g = op.as_gemm()
        unique = float(_windows(op).a_fraction(g.m, g.k)) * g.m * g.k
        assert unique == pytest.approx(op.batch * op.in_channels * op.in_h * op.in_w)


def test_one_output_row_of_one_channel_needs_its_window_rows():
    """3x3, stride 1, 56-wide: one output row (56 pixels) x one channel's 9 window positions
    reads 3 ifmap rows of 56 pixels (the unpadded width), not 56 x 9 entries."""
    w = _windows(Conv2d("c", 56, 56, 64, 64, 3, 3, padding=1))
    assert float(w.a_fraction(56, 9)) * 56 * 9 == pytest.approx(3 * 56)
    # a tile narrower than a row: 8 pixels x one filter row (3 positions) -> 1 row of 10 pixels
    assert float(w.a_fraction(8, 3)) * 8 * 3 == pytest.approx(10)


# --------------------------------------------------------------------------- the engine


def test_a_1x1_convolution_costs_what_its_gemm_costs():
    chip = load_chip("npu_128x128")
    op = Conv2d("c", 28, 28, 256, 512, 1, 1, batch=2, dtype="bf16")
    conv = simulate_op(chip, op)
    gemm = simulate_op(chip, op.as_gemm())
    assert conv.dram_read_bytes == pytest.approx(gemm.dram_read_bytes)
    assert conv.cycles == pytest.approx(gemm.cycles)


@pytest.mark.parametrize("chip_name", ["npu_128x128", "edge_npu", "eyeriss"])
def test_a_3x3_convolution_reads_the_ifmap_as_its_tiles_need_not_per_im2col_copy(chip_name):
    """Under every dataflow a chip runs: DRAM reads at least the compulsory ifmap and weights,
    and well below the im2col matrix the same GEMM would read (9 copies of most pixels)."""
    chip = load_chip(chip_name)
    dtype = "int8" if chip_name == "edge_npu" else "bf16"
    op = Conv2d("c", 56, 56, 128, 128, 3, 3, padding=1, batch=1, dtype=dtype)
    conv = simulate_op(chip, op)
    gemm = simulate_op(chip, Gemm("g", *(lambda g: (g.m, g.k, g.n))(op.as_gemm()), dtype=dtype))
    assert conv.dram_read_bytes >= op.a_bytes() + op.b_bytes()
    assert conv.dram_read_bytes < 0.6 * gemm.dram_read_bytes
    assert conv.cycles <= gemm.cycles * 1.01     # less traffic never makes it slower here


def test_grouped_convolution_is_its_groups():
    op = Conv2d("c", 27, 27, 96, 256, 5, 5, padding=2, groups=2)
    g = op.as_gemm()
    assert (g.count, g.k, g.n) == (2, 5 * 5 * 48, 128)
    assert op.macs == 27 * 27 * 256 * 5 * 5 * 48
    with pytest.raises(ShapeError, match="groups=3 must divide"):
        Conv2d("c", 27, 27, 96, 256, 5, 5, groups=3)


# --------------------------------------------------------------------------- row stationary


def test_row_stationary_holds_the_filter_row_and_differs_from_ws():
    """The issue's complaint: AlexNet's conv layers gave identical cycles, bytes and energy under
    rs and ws.  RS now runs the 1-D row primitive (row_length = kernel width) and spends less
    energy on the same chip."""
    chip = load_chip("eyeriss", ["cores.arrays.pe_array.dataflows=[rs,ws]"])
    op = network_ops(load_network("alexnet"), 4, "bf16")[2]    # conv3, 3x3
    rs = simulate_op(chip, op, Options(dataflow="rs"))
    ws = simulate_op(chip, op, Options(dataflow="ws"))
    assert rs.mapping["compute"]["row_length"] == 3
    assert rs.energy_pj < ws.energy_pj
    assert (rs.cycles, rs.energy_pj) != (ws.cycles, ws.energy_pj)


def test_rs_gemm_row_length_is_chosen_within_one_percent_of_the_fastest():
    """For a GEMM the mapper tries the row lengths the register file holds on the mapping's
    tiles and keeps the least-energy one within 1 % of the fastest: never more than 1 % slower
    than row length 1 (WS's schedule), never more energy."""
    chip = load_chip("eyeriss")
    picked_longer = False
    for m, k, n in ((64, 256, 256), (512, 1152, 256), (2048, 512, 512)):
        g = Gemm("g", m, k, n, dtype="bf16")
        best = simulate_op(chip, g)
        one = simulate_op(chip, g, Options(row_length=1))
        assert best.seconds <= one.seconds * 1.01 + 1e-12
        assert best.energy_pj <= one.energy_pj
        picked_longer |= best.mapping["compute"]["row_length"] > 1
    assert picked_longer


def test_rs_is_the_least_energy_dataflow_on_alexnet():
    """Chen et al., ISCA 2016: on AlexNet's convolution layers RS is the most energy-efficient
    dataflow (here: the same Eyeriss chip under each dataflow)."""
    chip = load_chip("eyeriss", ["cores.arrays.pe_array.dataflows=[rs,ws,os,is]"])
    energy = {df: run_network(chip, "alexnet", batch=4, dataflow=df).energy_j for df in ("rs", "ws", "os", "is")}
    assert min(energy, key=energy.get) == "rs", energy


# --------------------------------------------------------------------------- Eyeriss on AlexNet


def test_eyeriss_alexnet_against_the_jssc_2017_measurements():
    """Frames/s within 20 % of the chip's 35; DRAM accesses per MAC not below the paper's 0.0029,
    which counts run-length-compressed feature maps, and within 4x of it (the model moves
    uncompressed words)."""
    r = run_network("eyeriss", "alexnet", batch=4)
    assert r.macs == pytest.approx(4 * 666e6, rel=0.01)
    assert EYERISS_ALEXNET_FPS * 0.8 <= r.frames_per_s <= EYERISS_ALEXNET_FPS * 1.2, r.frames_per_s
    assert EYERISS_ALEXNET_DRAM_ACCESSES_PER_MAC <= r.dram_accesses_per_mac <= 4 * EYERISS_ALEXNET_DRAM_ACCESSES_PER_MAC
    # every layer moves at least its compulsory bytes
    assert (r.layers["dram_read_bytes"] + r.layers["dram_write_bytes"] >= r.layers["compulsory_dram_bytes"]).all()


def test_shipped_networks_have_the_papers_mac_counts():
    """AlexNet: 666 million MACs per 227x227 image; VGG-16: 15.3 billion per 224x224 image
    (Chen et al., ISSCC 2016, 14.5)."""
    for name, per_image in (("alexnet", 666e6), ("vgg16", 15.3e9)):
        macs = sum(op.macs for op in network_ops(load_network(name), 1, "bf16"))
        assert macs == pytest.approx(per_image, rel=0.01), name


# --------------------------------------------------------------------------- sim conv


def _sim(*args, **kw):
    return subprocess.run([sys.executable, "-m", "sim", *args], capture_output=True, text=True, cwd=ROOT, **kw)


def test_sim_conv_json_and_table():
    proc = _sim("conv", "eyeriss", "alexnet", "--batch", "4", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["network"] == "alexnet" and len(out["layers"]) == 5
    assert out["frames_per_s"] == pytest.approx(4 / out["seconds"])
    table = _sim("conv", "eyeriss", "alexnet", "--batch", "4", "-q")
    assert table.returncode == 0 and "frames_per_s" in table.stdout and "conv5" in table.stdout


def test_bad_network_files_name_file_line_and_key(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("schema_version: 1\nname: bad\nlayers:\n"
                   "  - {name: c1, in_h: 5, in_w: 5, in_channels: 3, out_channels: 8, kernel_h: 7, kernel_w: 7}\n"
                   "  - {name: c2, in_h: 5, in_w: 5, in_channels: 3, out_channels: 8, kernel_h: 3, kernel_w: 3, "
                   "groups: 2}\n")
    proc = _sim("conv", "eyeriss", str(bad))
    assert proc.returncode == 2
    assert f"{bad}:4: layers.0" in proc.stderr and "does not fit" in proc.stderr
    assert f"{bad}:5: layers.1" in proc.stderr and "groups=2" in proc.stderr
    assert "Traceback" not in proc.stderr
    with pytest.raises(ConfigError, match="unknown network 'nope'; valid: alexnet"):
        load_network("nope")
    assert _sim("conv", "eyeriss", "alexnet", "--batch", "0").returncode == 2
