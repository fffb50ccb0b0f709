"""Sweep specs: a base chip, one or more workloads, parameters to vary and metrics to keep.

A spec is YAML (``sim sweep SPEC.yaml``) or the same structure as a Python dict::

    name: llama3-8b-decode
    chip: npu_128x128                 # a name (sim list chips) or a path (relative to this file)
    set:                              # overrides applied to every point (like --set)
      memory.levels.hbm.capacity_gib: 24
    workloads:                        # every point runs every workload
      - model: llama3-8b              # kind: llm (default): run_llm's arguments
        model_set: {max_context: 8192}  # optional edits of the model (like `sim run --model-set`)
        phase: decode
        batch: 16
        context_len: 2048
        dtype: fp8
      - kind: gemm                    # kind: gemm: one GEMM (m, k, n, count, dtype...)
        m: 2048
        k: 4096
        n: 4096
      - kind: serving                 # kind: serving: request-level serving (sim serve's options)
        model: llama3-8b
        scheduler: chunked_prefill
        rate_per_s: 8
        duration_s: 30
        prompt: {kind: lognormal, median: 256, sigma: 0.8, low: 16, high: 1536}
        slo_ttft_ms: 200
    parameters:                       # Cartesian product of the axes; the last varies fastest
      cores.arrays.0.rows: [64, 128, 256]                           # a list
      memory.levels.vmem.capacity_kib: {from: 1024, to: 16384, num: 5, log: true}
      memory.levels.hbm.data_rate_gbps_per_pin: {from: 3.2, to: 9.6, step: 1.6}
      workload.batch: [1, 16]         # workload.<field> varies a workload field
      workload.rate_per_s: [4, 8, 16] # (of the workloads it applies to: here the serving one)
      zip:                            # axes varied together: one axis of the product
        cores.arrays.0.cols: [64, 128, 256]
        cores.cores.count: [8, 4, 1]
    metrics: [tokens_per_s, energy_per_token_j, area_mm2, "energy_per_token_j.*"]

Parameter paths are the dotted paths of ``--set`` (list items by index or by ``name``);
``chip`` varies the base chip itself.  A range is ``{from, to, step}`` (``to`` included
when it falls on the grid) or ``{from, to, num}`` (evenly spaced; ``log: true`` for
geometric spacing); whole-number ends give whole numbers.  ``zip`` holds one mapping of
axes of equal length, or a list of such mappings.

Every mistake is reported with the spec file, line and key (:class:`~sim.errors.ConfigError`).

This module loads a spec (:func:`load_sweep_spec`, :func:`sweep_spec_from_dict`,
:class:`LoadedSpec`, the point limit); the schema lives in :mod:`~sim.apps.sweep.spec_schema`,
the parameter axes in :mod:`~sim.apps.sweep.spec_axes` and the metric catalogue in
:mod:`~sim.apps.sweep.spec_metrics`.  Every name is re-exported here.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from sim.apps.serving.schedulers import SCHEDULERS
from sim.apps.serving.workload import LengthDist
from sim.apps.sweep.spec_axes import (Axis, _axis_values, _check_names, _clean_float, _expand_range, _is_int,
                                      _named_choices, _number, parse_axes)
from sim.apps.sweep.spec_metrics import (_DEFAULT_METRICS, BREAKDOWN_PREFIXES, DEFAULT_GEMM_METRICS,
                                         DEFAULT_LLM_METRICS, DEFAULT_SERVING_METRICS, METRICS, SERVING_METRICS,
                                         check_metrics)
from sim.apps.sweep.spec_schema import (_GEMM_ONLY, _LLM_AND_SERVING, _LLM_ONLY, _SERVING_ONLY, GRAPH_POLICIES,
                                        NOT_FOR, ROUTERS, WORKLOAD_PREFIX, LengthSpec, Scalar, SweepSpec,
                                        WorkloadSpec, _kinds_of, format_value)
from sim.errors import ConfigError, ConfigProblem
from sim.spec.loader import YamlDoc, parse_override, read_yaml, validate

__all__ = ["WorkloadSpec", "SweepSpec", "Axis", "LengthSpec", "load_sweep_spec", "sweep_spec_from_dict", "METRICS",
           "SERVING_METRICS", "DEFAULT_LLM_METRICS", "DEFAULT_GEMM_METRICS", "DEFAULT_SERVING_METRICS",
           "BREAKDOWN_PREFIXES", "WORKLOAD_PREFIX", "NOT_FOR"]


@dataclass(frozen=True)
class LoadedSpec:
    spec: SweepSpec
    doc: Optional[YamlDoc]
    base_dir: Path
    axes: tuple[Axis, ...]
    metrics: tuple[str, ...]

    @property
    def name(self) -> str:
        if self.spec.name:
            return self.spec.name
        if self.doc is not None and self.doc.source and not self.doc.source.startswith("<"):
            return Path(self.doc.source.split(" (")[0]).stem
        return "sweep"

    def line_of(self, loc) -> int:
        return self.doc.line_of(loc) if self.doc is not None else 0

    @property
    def source(self) -> str:
        return self.doc.source if self.doc is not None else "<sweep spec>"


#: the most points a sweep may have (``SIM_SWEEP_MAX_POINTS`` changes it); checked before
#: anything is planned, so a mistaken range never costs memory
MAX_POINTS = int(__import__("os").environ.get("SIM_SWEEP_MAX_POINTS", "100000"))


def _check_size(spec: SweepSpec, doc: YamlDoc | None, axes: list) -> None:
    total = max(1, len(spec.workloads))
    for ax in axes:
        total *= max(1, len(ax.values))
    if total <= MAX_POINTS:
        return
    source = doc.source if doc is not None else "<sweep spec>"
    line = doc.line_of(("parameters",)) if doc is not None else 0
    sizes = " x ".join(f"{len(ax.values):,} ({'+'.join(ax.paths)})" for ax in axes)
    raise ConfigError(ConfigProblem(
        source, line, "parameters",
        f"the sweep has {total:,} points ({len(spec.workloads)} workload(s) x {sizes}), above the limit of "
        f"{MAX_POINTS:,}; narrow the ranges or split the sweep (SIM_SWEEP_MAX_POINTS raises the limit)"))


def _finish(spec: SweepSpec, doc: YamlDoc | None, base_dir: Path) -> LoadedSpec:
    axes = parse_axes(spec, doc)
    _check_size(spec, doc, axes)
    metrics = check_metrics(spec, doc)
    names: dict[str, int] = {}
    problems = []
    for i, w in enumerate(spec.workloads):
        if w.label in names:
            problems.append(ConfigProblem(doc.source if doc else "<sweep spec>",
                                          doc.line_of(("workloads", i)) if doc else 0, f"workloads.{i}",
                                          f"two workloads are called '{w.label}'; give them different 'name's"))
        names[w.label] = i
    if problems:
        raise ConfigError(problems)
    return LoadedSpec(spec, doc, base_dir, tuple(axes), tuple(metrics))


def load_sweep_spec(path: str | Path) -> LoadedSpec:
    """Read and check a sweep spec file (errors name the file, line and key)."""
    doc = read_yaml(path)
    spec = validate(SweepSpec, doc)
    return _finish(spec, doc, Path(path).resolve().parent)


def sweep_spec_from_dict(data: dict, base_dir: str | Path = ".") -> LoadedSpec:
    """A spec given as a Python dict (same structure as the YAML)."""
    doc = YamlDoc(data, {(): 0}, "<sweep spec>")
    spec = validate(SweepSpec, doc)
    return _finish(spec, doc, Path(base_dir).resolve())
