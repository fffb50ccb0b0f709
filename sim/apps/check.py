"""`sim check`: validate config files of every kind - chips, dataflows, models, sweeps and software
stacks - recognising each file's kind by its keys or its folder, and report every problem with
file, line and key.  It sits in the apps layer because a sweep's check resolves its chip, models
and parameter paths (:mod:`sim.apps.sweep.plan`)."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping, Union

import sim.spec.catalog as catalog
from sim.apps.sweep.plan import check_spec
from sim.apps.sweep.spec import load_sweep_spec
from sim.errors import ConfigError, ConfigProblem, SimError, UnknownNameError
from sim.model.stacks import stack_array_problems
from sim.spec.stack_catalog import chip_stack_problems
from sim.spec.chip import ChipSpec
from sim.spec.dataflow_spec import DataflowSpec
from sim.spec.dram_technology import DramTechnologySpec, check_file_name
from sim.spec.kernel_library import chip_document, load_kernel_library
from sim.spec.loader import read_yaml, validate
from sim.spec.model_spec import ModelSpec
from sim.spec.network_spec import NetworkSpec
from sim.spec.registry import PathLike, list_chips, load_chip, looks_like_path, resolve_chip_path
from sim.spec.stack_spec import StackSpec

__all__ = ["check_files", "config_kind"]

_SUFFIXES = (".yaml", ".yml")


def _is_chip(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in ("cores", "memory", "clock_mhz", "noc"))


def _is_dataflow(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in ("stationary_operand", "spatial_rows", "spatial_cols", "temporal"))


def _is_model(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in ("hidden_size", "num_layers", "num_heads", "ffn_size", "vocab_size",
                                   "num_hidden_layers", "num_attention_heads", "intermediate_size"))


def _is_sweep(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in ("workloads", "parameters", "metrics"))


def _is_dram_technology(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in ("beats_per_tck", "speed_bin_gbps", "t_ccd_s_nck")) and not _is_chip(data)


def _is_network(data: Mapping[str, Any]) -> bool:
    layers = data.get("layers")
    return isinstance(layers, list) and any(isinstance(x, Mapping) and "kernel_h" in x for x in layers)


def _check_network(path: Path, doc) -> None:
    _name_is_file_name(path, doc, validate(NetworkSpec, doc).name, "networks")


def _is_kernel_library(data: Mapping[str, Any]) -> bool:
    return "mapping" in data and not _is_chip(data)


def _is_stack(data: Mapping[str, Any]) -> bool:
    return any(k in data for k in ("kv_append", "gated_activation", "fuse_rope_kv_append", "fuse_residual_norm"))


def _name_is_file_name(path: Path, doc, name: str, folder: str) -> None:
    """A file in its kind's folder is found by name, so its ``name`` must be its file name."""
    if path.parent.name == folder and name != path.stem:
        raise ConfigError(ConfigProblem(str(path), doc.line_of(("name",)), "name",
                                        f"name '{name}' must equal the file name '{path.stem}'"))


def _catalog_chips() -> list[ChipSpec]:
    """The chips ``sim list chips`` shows that load (a broken one is its own file's problem)."""
    out = []
    for name in list_chips():
        try:
            out.append(load_chip(name))
        except SimError:
            pass
    return out


def _check_stack(path: Path, doc) -> None:
    """The profile, and the arrays (library paths) it names: on every catalog chip whose
    ``software_stack`` it is; for a profile no chip names (used with ``--stack``), arrays that no
    catalog chip has at all (``decode_array: tensor_cores_sm9O`` passed before and failed every run)."""
    spec = validate(StackSpec, doc)
    _name_is_file_name(path, doc, spec.name, "stacks")
    spec._source_path = path
    chips = _catalog_chips()
    users = [c for c in chips if c.software_stack == spec.name]
    problems: list[ConfigProblem] = []
    for chip in users:
        problems += [p for p in stack_array_problems(spec, chip, doc) if p not in problems]
    if not users and chips:
        have = sorted({a.name for c in chips for a in c.cores.arrays})
        for loc, a in spec.array_refs():
            if a not in have:
                problems.append(ConfigProblem(str(path), doc.line_of(loc), ".".join(map(str, loc)), str(
                    UnknownNameError("array", a, have)) + "; no chip in the catalog has it (the profile is used "
                    "with --stack on a chip that has its arrays)"))
    if problems:
        raise ConfigError(problems)


def _check_chip(path: Path, doc) -> None:
    """The chip, and the software stack it names: it exists and every array it uses is the chip's
    (the check every command makes when it loads a chip: sim.spec.stack_catalog.chip_stack_problems)."""
    chip = validate(ChipSpec, chip_document(doc))
    problems = chip_stack_problems(chip, path, doc.line_of(("software_stack",)))
    if problems:
        raise ConfigError(problems)


def _check_dram_technology(path: Path, doc) -> None:
    spec = validate(DramTechnologySpec, doc)
    if path.parent.name == catalog.KINDS["dram"].folder:
        check_file_name(path, doc, spec)


def _check_kernel_library(path: Path, doc) -> None:
    """The library file itself, and every catalog chip that names it: the arrays it names are theirs."""
    spec, _ = load_kernel_library(path)   # its name is its file's, checked there
    found = catalog.find("libraries", spec.name)
    if found is None or found.resolve() != path.resolve():
        return  # not the file chips naming it get: checking them would check another file
    for name in list_chips():
        chip_path = resolve_chip_path(name)
        try:
            chip_doc = read_yaml(chip_path)
        except ConfigError:
            continue  # a broken chip file is its own file's problem
        named = chip_doc.data.get("kernel_library") if isinstance(chip_doc.data, dict) else None
        if named == spec.name:
            validate(ChipSpec, chip_document(chip_doc))


def _check_dataflow(path: Path, doc) -> None:
    _name_is_file_name(path, doc, validate(DataflowSpec, doc).name, "dataflows")


def _check_model(path: Path, doc) -> None:
    validate(ModelSpec, doc)


def _check_sweep(path: Path, doc) -> None:
    # the spec itself, its axes and metrics, its base chip and models, its parameter paths
    # (not every point's chip: `sim sweep --dry-run` checks those)
    check_spec(load_sweep_spec(path))


#: config kinds that :func:`check_files` recognises: (label, recogniser by top-level keys,
#: folder the shipped files of that kind live in, checker)
_KINDS: tuple[tuple[str, Callable[[Mapping[str, Any]], bool], str, Callable[[Path, Any], None]], ...] = (
    ("chip", _is_chip, "arch_configs", _check_chip),
    ("dataflow", _is_dataflow, "dataflows", _check_dataflow),
    ("model", _is_model, "workloads", _check_model),
    ("sweep", _is_sweep, "sweeps", _check_sweep),
    ("stack", _is_stack, "stacks", _check_stack),
    ("kernel library", _is_kernel_library, "kernel_libraries", _check_kernel_library),
    ("DRAM technology", _is_dram_technology, "dram_technologies", _check_dram_technology),
    ("network", _is_network, "networks", _check_network),
)


def config_kind(path: PathLike, data: Any) -> str | None:
    """The kind of a config file (``chip``, ``dataflow``, ``model``, ``sweep``): by its
    top-level keys, else by the folder it is in; None when neither tells."""
    if isinstance(data, Mapping):
        for label, recognise, _folder, _check in _KINDS:
            if recognise(data):
                return label
    parent = Path(path).parent.name
    for label, _recognise, folder, _check in _KINDS:
        if parent == folder:
            return label
    return None


def _expand(paths: Iterable[PathLike]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        text = os.fspath(p)
        path = Path(text).expanduser()
        if path.is_dir():
            found = sorted(q for q in path.iterdir() if q.suffix in _SUFFIXES and q.is_file())
            out.extend(found or [Path(f"\0{path}: no .yaml files in this folder")])
        elif path.exists() or looks_like_path(text):
            out.append(path)
        else:
            try:  # a chip name
                out.append(resolve_chip_path(text))
            except UnknownNameError as exc:
                out.append(Path(f"\0{exc}"))  # marker: report the message as is
    return out


def check_files(paths: Union[PathLike, Iterable[PathLike]], checked: list | None = None) -> list[str]:
    """Validate config files; return one formatted line per problem (empty when all fine).

    ``paths`` may hold files, folders (every ``*.yaml`` inside) and chip names.  Each file
    is recognised by its top-level keys, else by the folder it is in.  Never raises on bad input.
    """
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    problems: list[str] = []
    checked = checked if checked is not None else []
    for path in _expand(paths):
        text = str(path)
        if text.startswith("\0"):
            problems.append(text[1:])
            continue
        try:
            doc = read_yaml(path)
            data = doc.data
            if not isinstance(data, dict):
                raise ConfigError(ConfigProblem(str(path), doc.line_of(()), "",
                                                f"expected a mapping of keys at the top level, got {type(data).__name__}"))
            kind = config_kind(path, data)
            checker = next((c for label, _r, _f, c in _KINDS if label == kind), None)
            if checker is None:
                raise ConfigError(ConfigProblem(
                    str(path), doc.line_of(()), "",
                    "not a recognised config file: a chip has the keys clock_mhz, cores, memory, noc; a dataflow "
                    "stationary_operand, spatial_rows, spatial_cols, temporal; a model hidden_size, num_layers, "
                    "num_heads, ffn_size; a sweep chip, workloads, parameters; a software stack kv_append, "
                    "gated_activation, attention, gemm"))
            checker(path, doc)
            checked.append((str(path), kind))
        except ConfigError as exc:
            problems.extend(p.format() for p in exc.problems)
        except SimError as exc:
            problems.append(f"{path}: {exc}")
        except Exception as exc:  # never raise: report even our own bugs as a problem line
            problems.append(f"{path}: internal error while checking: {type(exc).__name__}: {exc}")
    return problems
