"""Convolutional networks as data: ``networks/<NAME>.yaml`` (:class:`NetworkSpec`).

A network file lists convolution layers by their shapes (ifmap size, channels, filters, kernel,
stride, padding, groups), each cited; ``sim conv CHIP NETWORK`` runs them on a chip
(:mod:`sim.apps.cnn`).  Files are found like every other kind (:mod:`sim.spec.catalog`:
``$SIM_NETWORK_DIR``, then ``~/.config/sim/networks``, then the shipped folder), or given as a
path.  A layer whose shape cannot be a convolution (a filter larger than its padded input,
groups that do not divide the channels) is refused with the file, line and key.
"""
from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import model_validator

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import read_yaml, validate
from sim.spec.spec_base import _int, _rule_errors, _Spec

__all__ = ["ConvLayerSpec", "NetworkSpec", "load_network", "network_path"]

#: the largest ifmap side, channel or filter count a layer may name (a typo guard, far above
#: any published network: VGG's 224 x 224 inputs, 4,096 channels)
_MAX_SIDE = 1 << 16


class ConvLayerSpec(_Spec):
    """One convolution: NCHW, ``out_channels`` filters of ``kernel_h × kernel_w ×
    in_channels / groups``; output side ``(in + 2·padding − kernel) // stride + 1``."""

    name: str
    in_h: _int(1, _MAX_SIDE)
    in_w: _int(1, _MAX_SIDE)
    in_channels: _int(1, _MAX_SIDE)
    out_channels: _int(1, _MAX_SIDE)
    kernel_h: _int(1, 1024)
    kernel_w: _int(1, 1024)
    stride: _int(1, 1024) = 1
    padding: _int(0, 1024) = 0
    groups: _int(1, _MAX_SIDE) = 1

    def shape_problem(self) -> str | None:
        """Why these numbers cannot be a convolution (the rules :class:`sim.ir.ops.Conv2d`
        enforces on an op), or None."""
        if self.in_h + 2 * self.padding < self.kernel_h or self.in_w + 2 * self.padding < self.kernel_w:
            return (f"layer '{self.name}': a {self.kernel_h}x{self.kernel_w} filter does not fit a "
                    f"{self.in_h}x{self.in_w} input with padding {self.padding}")
        if self.in_channels % self.groups or self.out_channels % self.groups:
            return (f"layer '{self.name}': groups={self.groups} must divide in_channels ({self.in_channels}) and "
                    f"out_channels ({self.out_channels})")
        return None


class NetworkSpec(_Spec):
    """One ``networks/*.yaml`` file."""

    schema_version: Literal[1]
    name: str
    description: str = ""
    sources: str = ""
    layers: tuple[ConvLayerSpec, ...]

    @model_validator(mode="after")
    def _shapes(self) -> "NetworkSpec":
        problems = []
        if not self.layers:
            problems.append((("layers",), "a network needs at least one layer", []))
        seen: set[str] = set()
        for i, layer in enumerate(self.layers):
            if layer.name in seen:
                problems.append((("layers", i, "name"), f"layer name {layer.name!r} repeats an earlier one",
                                 layer.name))
            seen.add(layer.name)
            problem = layer.shape_problem()
            if problem:
                problems.append((("layers", i), problem, layer.name))
        if problems:
            raise _rule_errors("NetworkSpec", problems)
        return self


def network_path(name_or_path: str) -> Path:
    """The file a network name (``networks/<name>.yaml`` on the search path) or path names."""
    candidate = Path(name_or_path).expanduser()
    if candidate.suffix in (".yaml", ".yml") or candidate.is_file():
        if not candidate.is_file():
            raise ConfigError(ConfigProblem(str(candidate), 0, "", "network file not found"))
        return candidate
    found = catalog.find("networks", name_or_path)
    if found is None:
        valid = ", ".join(catalog.names("networks")) or "none"
        raise ConfigError(ConfigProblem(name_or_path, 0, "",
                                        f"unknown network {name_or_path!r}; valid: {valid} (or a path to a YAML file)"))
    return found


def load_network(name_or_path: str) -> NetworkSpec:
    """Read and validate a network by name or path (errors name the file, line and key)."""
    path = network_path(name_or_path)
    return validate(NetworkSpec, read_yaml(path))
