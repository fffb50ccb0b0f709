"""Run SCALE-Sim's own inputs: its ``.cfg`` file and topology CSV (convolution or GEMM).

For every layer this reports what SCALE-Sim's COMPUTE_REPORT.csv holds - total cycles,
stall cycles, overall utilisation, mapping efficiency, compute utilisation - computed in
closed form with SCALE-Sim's own conventions (its stall-free CALC bandwidth mode), plus
our numbers for the same layer on the same array with modelled SRAM and DRAM.

SCALE-Sim's input conventions, reproduced here (scale-sim-v2 ``scale_config.py`` and
``topology_utils.py``):

* ``[architecture_presets]`` ArrayHeight, ArrayWidth, IfmapSramSzkB, FilterSramSzkB,
  OfmapSramSzkB, Dataflow (os|ws|is), Bandwidth (words/cycle, used in USER mode);
  ``[run_presets]`` InterfaceBandwidth CALC|USER.  Option names are case-insensitive.
* Topology CSVs have a header row.  Convolution rows: ``name, ifmap_h, ifmap_w, filt_h,
  filt_w, channels, num_filters, stride_h[, stride_w],``; a layer whose name contains
  ``DP`` is depthwise and becomes one layer per channel.  GEMM rows (``-i gemm``):
  ``name, M, N, K,`` with K the reduction and N the output columns.
* Words are one byte (int8 here).
"""
from __future__ import annotations

import configparser
import csv
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sim.apps.single_op import simulate
from sim.errors import ConfigError, ConfigProblem, WorkloadError
from sim.ir.ops import MAX_PROBLEM, Gemm
from sim.model.dataflow import get_dataflow
from sim.spec.loader import read_text_checked
from sim.spec.registry import load_chip

#: bounds on what a SCALE-Sim input may ask for (a clear error instead of a hang)
MAX_ARRAY_DIM = 1 << 16        # rows or columns of the array (as a chip file allows)
MAX_SRAM_KB = 1 << 30          # one SRAM, kB
MAX_DIM = 1 << 31              # one topology field (ifmap size, channels, M, N, K...)
MAX_LAYERS = 16_384            # layers after depthwise expansion (one per channel)

_REQUIRED = {
    "architecture_presets": ["ArrayHeight", "ArrayWidth", "IfmapSramSzkB", "FilterSramSzkB", "OfmapSramSzkB",
                             "Dataflow"],
}


@dataclass(frozen=True)
class ScaleSimConfig:
    path: str
    run_name: str
    rows: int
    cols: int
    ifmap_kib: float
    filter_kib: float
    ofmap_kib: float
    dataflow: str
    bandwidth_mode: str        # CALC | USER
    bandwidth_words_per_cycle: float | None


@dataclass(frozen=True)
class TopologyLayer:
    name: str
    line: int
    m: int
    n: int
    k: int
    conv: dict | None          # ifmap_h, ifmap_w, filt_h, filt_w, channels, num_filters, stride_h, stride_w


def _line_of(text: str, key: str) -> int:
    for i, line in enumerate(text.splitlines(), start=1):
        if re.match(rf"\s*{re.escape(key)}\s*[:=]", line, flags=re.I):
            return i
    return 0


def read_config(path: str | Path) -> ScaleSimConfig:
    path = Path(path)
    text = read_text_checked(path, max_bytes=1 << 20)
    # no interpolation: SCALE-Sim's configs have none, and '%(...)s' must stay plain text
    cp = configparser.ConfigParser(inline_comment_prefixes=("#", ";"), interpolation=None)
    try:
        cp.read_string(text, source=str(path))
    except configparser.Error as exc:
        line = getattr(exc, "lineno", 0) or 0
        raise ConfigError(ConfigProblem(str(path), line, "", f"not a valid SCALE-Sim .cfg: {exc.message}")) from None
    problems: list[ConfigProblem] = []
    for section, keys in _REQUIRED.items():
        if not cp.has_section(section):
            problems.append(ConfigProblem(str(path), 0, section, "missing section",
                                          tuple(_REQUIRED.keys())))
            continue
        for key in keys:
            if not cp.has_option(section, key):
                problems.append(ConfigProblem(str(path), 0, f"{section}.{key}", "missing required key", tuple(keys)))
    if problems:
        raise ConfigError(problems)
    sec = "architecture_presets"

    def num(key: str, cast=int, positive=True):
        raw = cp.get(sec, key).strip()
        where = (str(path), _line_of(text, key), f"{sec}.{key}")
        try:
            f = float(raw)
        except ValueError:
            problems.append(ConfigProblem(*where, f"expected a number, got {raw!r}"))
            return None
        if not math.isfinite(f):
            problems.append(ConfigProblem(*where, f"expected a finite number, got {raw!r}"))
            return None
        limit = MAX_ARRAY_DIM if cast is int else MAX_SRAM_KB
        if f > limit:
            problems.append(ConfigProblem(*where, f"must be at most {limit:,}, got {raw}"))
            return None
        if cast is int and f != int(f):
            problems.append(ConfigProblem(*where, f"expected a whole number, got {raw!r}"))
        v = int(f) if cast is int else f
        if positive and v <= 0:
            problems.append(ConfigProblem(*where, f"must be positive, got {raw}"))
        return v

    rows, cols = num("ArrayHeight"), num("ArrayWidth")
    ifk, fik, ofk = num("IfmapSramSzkB", float), num("FilterSramSzkB", float), num("OfmapSramSzkB", float)
    df = cp.get(sec, "Dataflow").strip().lower()
    if df not in ("os", "ws", "is"):
        problems.append(ConfigProblem(str(path), _line_of(text, "Dataflow"), f"{sec}.Dataflow",
                                      f"SCALE-Sim dataflow must be os, ws or is, got {df!r}"))
    mode = "CALC"
    if cp.has_section("run_presets") and cp.has_option("run_presets", "InterfaceBandwidth"):
        mode = cp.get("run_presets", "InterfaceBandwidth").strip().upper()
        if mode not in ("CALC", "USER"):
            problems.append(ConfigProblem(str(path), _line_of(text, "InterfaceBandwidth"),
                                          "run_presets.InterfaceBandwidth", f"must be CALC or USER, got {mode!r}"))
    bw = None
    if cp.has_option(sec, "Bandwidth"):
        raw = cp.get(sec, "Bandwidth").split(",")[0].strip()
        try:
            bw = float(raw)
            if not (0 < bw < 1e12):
                raise ValueError
        except ValueError:
            if mode == "USER":
                problems.append(ConfigProblem(str(path), _line_of(text, "Bandwidth"), f"{sec}.Bandwidth",
                                              f"expected a positive number of words per cycle, got {raw!r}"))
            bw = None
    elif mode == "USER":
        problems.append(ConfigProblem(str(path), 0, f"{sec}.Bandwidth", "USER bandwidth mode needs Bandwidth"))
    if problems:
        raise ConfigError(problems)
    run_name = cp.get("general", "run_name", fallback=path.stem) if cp.has_section("general") else path.stem
    return ScaleSimConfig(str(path), run_name, rows, cols, ifk, fik, ofk, df, mode, bw)


def read_topology(path: str | Path, fmt: str = "auto") -> list[TopologyLayer]:
    """Read a SCALE-Sim topology CSV (``fmt`` conv, gemm or auto from the header)."""
    path = Path(path)
    try:
        lines = read_text_checked(path).splitlines()
    except ConfigError as exc:
        raise WorkloadError(f"cannot read the topology: {exc.problems[0].format()}") from None
    reader = csv.reader(lines)
    try:
        rows = [(i + 1, [c.strip() for c in r]) for i, r in enumerate(reader)]
    except csv.Error as exc:  # a cell beyond the csv module's 131,072 characters
        raise WorkloadError(f"{path}:{reader.line_num}: not a topology row ({exc})") from None
    rows = [(ln, [c for c in cells]) for ln, cells in rows if any(cells)]
    if not rows:
        raise WorkloadError(f"{path}: empty topology file")
    header_line, header = rows[0]
    body = rows[1:]
    if fmt == "auto":
        names = [h.lower() for h in header if h]
        fmt = "gemm" if len(names) <= 5 and any(h in ("m", "n", "k") for h in names) else "conv"
    layers: list[TopologyLayer] = []
    for ln, cells in body:
        while cells and cells[-1] == "":
            cells = cells[:-1]
        if not cells:
            continue
        name = cells[0]
        try:
            floats = [float(c) for c in cells[1:]]
        except ValueError:
            raise WorkloadError(f"{path}:{ln}: layer '{name}': every field after the name must be a number "
                                f"(got {cells[1:]})") from None
        bad = next((c for c, f in zip(cells[1:], floats) if not math.isfinite(f) or f != int(f)), None)
        if bad is not None:
            raise WorkloadError(f"{path}:{ln}: layer '{name}': every field after the name must be a whole number "
                                f"(got {bad!r})")
        vals = [int(f) for f in floats]
        big = next((v for v in vals if v > MAX_DIM), None)
        if big is not None:
            raise WorkloadError(f"{path}:{ln}: layer '{name}': {big:,} is above the limit of {MAX_DIM:,} per field")
        if any(v <= 0 for v in vals):
            raise WorkloadError(f"{path}:{ln}: layer '{name}': dimensions must be positive (got {vals})")
        if fmt == "gemm":
            if len(vals) < 3:
                raise WorkloadError(f"{path}:{ln}: GEMM row needs name, M, N, K (got {len(cells)} fields)")
            m, n, k = vals[:3]
            layers.append(TopologyLayer(name, ln, m, n, k, None))
            continue
        if len(vals) < 7:
            raise WorkloadError(f"{path}:{ln}: convolution row needs name, ifmap_h, ifmap_w, filt_h, filt_w, "
                                f"channels, num_filters, stride (got {len(cells)} fields)")
        ih, iw, fh, fw, ch, nf, sh = vals[:7]
        sw = vals[7] if len(vals) > 7 else sh
        if fh > ih or fw > iw:
            raise WorkloadError(f"{path}:{ln}: layer '{name}': a {fh}x{fw} filter is larger than the {ih}x{iw} ifmap")
        copies = [(name, ch)]
        if "DP" in name and len(layers) + ch > MAX_LAYERS:
            raise WorkloadError(f"{path}:{ln}: depthwise layer '{name}' has {ch:,} channels: SCALE-Sim runs one "
                                f"layer per channel, and a topology is limited to {MAX_LAYERS:,} layers")
        if "DP" in name:  # SCALE-Sim: depthwise layers run as one single-channel layer per channel
            copies = [(f"{name}Channel_{i}", 1) for i in range(ch)]
        for lname, c in copies:
            oh = -(-(ih - fh + sh) // sh)
            ow = -(-(iw - fw + sw) // sw)
            layers.append(TopologyLayer(lname, ln, oh * ow, nf, fh * fw * c, dict(
                ifmap_h=ih, ifmap_w=iw, filt_h=fh, filt_w=fw, channels=c, num_filters=nf, stride_h=sh, stride_w=sw)))
    if not layers:
        raise WorkloadError(f"{path}: no layers after the header row")
    for lay in layers:
        if lay.m * lay.n * lay.k > MAX_PROBLEM:
            # said by the op only after the dataflow report had overflowed numpy's integers (warnings)
            raise WorkloadError(f"{path}:{lay.line}: layer '{lay.name}': M x N x K = {lay.m:,} x {lay.n:,} x "
                                f"{lay.k:,} is beyond what one op may be ({MAX_PROBLEM:.3g})")
    return layers


#: a chip key set from the .cfg -> the .cfg key it came from
_CFG_KEY = {"rows": "ArrayHeight", "cols": "ArrayWidth", "capacity_kib": "IfmapSramSzkB", "input_kib": "IfmapSramSzkB",
            "weight_kib": "FilterSramSzkB", "output_kib": "OfmapSramSzkB", "bytes_per_cycle": "ArrayWidth",
            "bandwidth_bytes_per_cycle": "Bandwidth", "default_dataflow": "Dataflow"}


def chip_overrides(cfg: ScaleSimConfig, sram_level: str = "sram") -> list[str]:
    """--set overrides that turn a base chip into the .cfg's array and SRAMs."""
    total = cfg.ifmap_kib + cfg.filter_kib + cfg.ofmap_kib
    out = [f"cores.arrays.0.rows={cfg.rows}", f"cores.arrays.0.cols={cfg.cols}",
           f"memory.levels.{sram_level}.capacity_kib={total}",
           f"memory.levels.{sram_level}.partition.input_kib={cfg.ifmap_kib}",
           f"memory.levels.{sram_level}.partition.weight_kib={cfg.filter_kib}",
           f"memory.levels.{sram_level}.partition.output_kib={cfg.ofmap_kib}",
           f"memory.levels.{sram_level}.bytes_per_cycle={cfg.rows + 2 * cfg.cols}",
           "cores.arrays.0.dataflows=[os, ws, is]", f"cores.arrays.0.default_dataflow={cfg.dataflow}"]
    if cfg.bandwidth_mode == "USER" and cfg.bandwidth_words_per_cycle:
        out.append(f"noc.bandwidth_bytes_per_cycle={cfg.bandwidth_words_per_cycle}")
    return out


def run_scalesim(cfg_path: str | Path, topology_path: str | Path, topology_format: str = "auto",
                 chip: str = "scalesim_32x32", memory: str = "modeled") -> list[dict[str, Any]]:
    """One dict per layer: SCALE-Sim's COMPUTE_REPORT fields (closed form) and ours."""
    cfg = read_config(cfg_path)
    layers = read_topology(topology_path, topology_format)
    base = load_chip(chip)
    core_srams = base.memory.core_srams
    try:
        chip_spec = load_chip(chip, overrides=chip_overrides(cfg, core_srams[-1].name))
    except ConfigError as exc:  # a .cfg value the chip model refuses: name the .cfg, not the chip file
        raise ConfigError([ConfigProblem(cfg.path, _line_of(Path(cfg.path).read_text(encoding="utf-8"),
                                                            _CFG_KEY.get(p.path.split(".")[-1], "")) or 0,
                                         f"architecture_presets.{_CFG_KEY.get(p.path.split('.')[-1], p.path)}",
                                         p.message) for p in exc.problems]) from None
    df = get_dataflow(cfg.dataflow)
    out = []
    for layer in layers:
        rep = df.fold_report(layer.m, layer.k, layer.n, cfg.rows, cfg.cols)
        ours = simulate(chip_spec, Gemm(layer.name, m=layer.m, k=layer.k, n=layer.n, dtype="int8",
                                        out_dtype="int8"), dataflow=cfg.dataflow, memory=memory)
        row = {
            "layer": layer.name, "dataflow": cfg.dataflow, "m": layer.m, "n": layer.n, "k": layer.k,
            "scalesim_total_cycles": int(rep.scalesim_cycles),
            "scalesim_stall_cycles": 0 if cfg.bandwidth_mode == "CALC" else None,
            "overall_util_pct": 100.0 * float(rep.scalesim_overall_utilization),
            "mapping_efficiency_pct": 100.0 * float(rep.mapping_efficiency),
            "compute_util_pct": 100.0 * float(rep.scalesim_compute_utilization),
            "folds": int(rep.folds), "cycles_per_fold": int(rep.cycles_per_fold), "macs": int(rep.macs),
            "cycles": ours.cycles, "compute_cycles": ours.compute_cycles, "stall_cycles": ours.stall_cycles,
            "utilization_pct": 100.0 * ours.utilization, "dram_read_bytes": ours.dram_read_bytes,
            "dram_write_bytes": ours.dram_write_bytes, "energy_pj": ours.energy_pj, "seconds": ours.seconds,
            "memory": memory, "bandwidth_mode": cfg.bandwidth_mode,
        }
        if layer.conv:
            row.update(layer.conv)
        out.append(row)
    return out
