"""A convolutional network's layers on a chip: frames/s, DRAM accesses per MAC, energy.

``sim conv CHIP NETWORK`` and :func:`run_network` run every layer of a network file
(:mod:`sim.spec.network_spec`, e.g. ``networks/alexnet.yaml``) through the engine at a batch
size, back to back, and report per layer and in total what the accelerator papers report: the
processing time and frame rate, DRAM traffic (bytes, and accesses of one word of the format per
MAC, as Eyeriss's JSSC 2017 paper counts them), energy and array utilisation.  Each layer is
one engine op (:class:`sim.ir.ops.Conv2d`): im2col onto the array - on a row-stationary array
with the filter row held in the PEs (Eyeriss's 1-D row primitive) - with DRAM moving the
ifmap pixels under each tile's windows (:class:`sim.ir.lowered.ConvWindows`).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sim.apps.inference import default_dtype
from sim.apps.single_op import _chip, check_limits
from sim.errors import WorkloadError
from sim.ir.ops import Conv2d
from sim.ir.results import OpResult
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_op
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format
from sim.spec.network_spec import NetworkSpec, load_network

if TYPE_CHECKING:  # pandas costs 0.3 s to import: loaded when a network is run, not with `import sim`
    import pandas as pd

__all__ = ["NetworkResult", "network_ops", "run_network"]


def network_ops(network: NetworkSpec, batch: int, dtype: str) -> list[Conv2d]:
    """The network's layers as engine ops at ``batch`` images of ``dtype``."""
    return [Conv2d(layer.name, layer.in_h, layer.in_w, layer.in_channels, layer.out_channels, layer.kernel_h,
                   layer.kernel_w, layer.stride, layer.padding, batch=batch, dtype=dtype, groups=layer.groups)
            for layer in network.layers]


@dataclass
class NetworkResult:
    """One network at one batch size on one chip: ``layers`` (one row per layer) and the
    totals over the layers run back to back."""

    chip: str
    network: str
    batch: int
    dtype: str
    dataflow: str
    memory: str
    seconds: float
    frames_per_s: float
    macs: int
    dram_bytes: float
    dram_accesses_per_mac: float
    energy_j: float
    utilization: float
    layers: "pd.DataFrame"
    results: list[OpResult] = field(default_factory=list, repr=False)

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON: the totals and one dict per layer (what ``sim conv --json`` prints)."""
        out = {k: getattr(self, k) for k in ("chip", "network", "batch", "dtype", "dataflow", "memory", "seconds",
                                             "frames_per_s", "macs", "dram_bytes", "dram_accesses_per_mac",
                                             "energy_j", "utilization")}
        out["layers"] = self.layers.to_dict(orient="records")
        return out


def run_network(chip: ChipSpec | str, network: NetworkSpec | str, *, batch: int = 1, dtype: str | None = None,
                dataflow: str | None = None, memory: str = "modeled", overrides=None) -> NetworkResult:
    """Run every layer of ``network`` (a :class:`NetworkSpec`, a shipped name or a path) at
    ``batch`` images on ``chip``.  ``dtype`` defaults to the first usual format the chip
    computes (as ``sim run``); ``dataflow`` to each array's default."""
    chip = _chip(chip, overrides)
    if not isinstance(network, (str, os.PathLike, NetworkSpec)):
        raise WorkloadError(f"a network is a name from networks/, a YAML path or a NetworkSpec, got {network!r}")
    net = network if isinstance(network, NetworkSpec) else load_network(network)
    dtype = dtype or default_dtype(chip)
    word_bytes = get_format(dtype).bits_per_value / 8.0
    rows, results = [], []
    for op in network_ops(net, batch, dtype):
        check_limits(chip, op)
        r = simulate_op(chip, op, Options(dataflow=dataflow, memory=memory))
        results.append(r)
        comp = r.mapping.get("compute", {})
        rows.append({
            "layer": op.name, "out": f"{op.out_h}x{op.out_w}x{op.out_channels}", "macs": op.macs,
            "ms": r.seconds * 1e3, "utilization": r.utilization, "dram_read_bytes": r.dram_read_bytes,
            "dram_write_bytes": r.dram_write_bytes, "compulsory_dram_bytes": op.min_dram_bytes(),
            "dram_accesses_per_mac": r.dram_bytes / word_bytes / op.macs, "energy_mj": r.energy_pj * 1e-9,
            "dataflow": comp.get("dataflow"), "row_length": comp.get("row_length"), "bound": r.traffic_bound,
            "tiles": f"{r.mapping.get('tile_m')}x{r.mapping.get('tile_n')}x{r.mapping.get('tile_k')}",
        })
    import pandas as pd

    layers = pd.DataFrame(rows)
    seconds = float(sum(r.seconds for r in results))
    macs = int(layers["macs"].sum())
    dram = float(sum(r.dram_bytes for r in results))
    peak = chip.peak_macs_per_cycle(get_format(dtype).rate_class) * chip.clock_hz
    flows = sorted({str(x) for x in layers["dataflow"]})
    return NetworkResult(
        chip=chip.name, network=net.name, batch=batch, dtype=dtype, dataflow="/".join(flows), memory=memory,
        seconds=seconds, frames_per_s=batch / seconds if seconds > 0 else 0.0, macs=macs, dram_bytes=dram,
        dram_accesses_per_mac=dram / word_bytes / macs, energy_j=float(sum(r.energy_pj for r in results)) * 1e-12,
        utilization=macs / (seconds * peak) if seconds > 0 and peak > 0 else 0.0, layers=layers, results=results)
