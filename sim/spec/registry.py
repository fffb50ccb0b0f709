"""Finding and loading chip files.

Chips ship with the package (the repository's ``arch_configs/`` folder); the folders named by
``$SIM_ARCH_DIR`` and the user folder ``~/.config/sim/arch_configs`` add to it and are searched
first, so a user chip of a shipped name overrides it (:mod:`sim.spec.catalog`).  Anything that takes a chip accepts either a
name (``"tpu_v1"``) or a path to a YAML file; an unknown name raises
:class:`~sim.errors.UnknownNameError` listing the available chips.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Sequence, Union

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.spec.chip import ChipSpec
from sim.spec.kernel_library import chip_document, kernel_library_named
from sim.spec.loader import read_yaml, validate
from sim.spec.stack_catalog import chip_stack_problems

__all__ = ["ARCH_DIR_ENV", "chips_dir", "list_chips", "resolve_chip_path", "load_chip", "looks_like_path"]

#: environment variable naming extra chip folders, searched before the shipped ``arch_configs/``
ARCH_DIR_ENV = catalog.KINDS["chips"].env_var
_SUFFIXES = (".yaml", ".yml")

PathLike = Union[str, "os.PathLike[str]"]
Overrides = Union[Mapping[str, Any], Sequence[str], None]


def chips_dir() -> Path:
    """The shipped folder of chip files (``arch_configs/``); names are also looked up in
    ``$SIM_ARCH_DIR`` and the user folder first (:func:`sim.spec.catalog.search_dirs`)."""
    return catalog.shipped_dir("chips")


def list_chips() -> list[str]:
    """Names (file stems) of the chips in every searched folder (``$SIM_ARCH_DIR``, the user
    folder, :func:`chips_dir`), sorted."""
    return catalog.names("chips")


def looks_like_path(text: str) -> bool:
    """Whether a chip argument is a path (a YAML suffix or a folder separator) rather than a name."""
    return text.endswith(_SUFFIXES) or "/" in text or os.sep in text or text.startswith(".")


def resolve_chip_path(name_or_path: PathLike) -> Path:
    """A chip name (looked up in ``$SIM_ARCH_DIR``, the user folder, then :func:`chips_dir`) or a
    path -> the file's path.

    An existing file is returned as is; text that looks like a path (has a ``.yaml``
    suffix or a directory separator) is returned even when missing, so that loading it
    reports "file not found" at that path; any other unknown name raises
    :class:`UnknownNameError` listing the available chips.
    """
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return path
    text = os.fspath(name_or_path)
    if looks_like_path(text):
        return path
    found = catalog.find("chips", text)
    if found is not None:
        return found
    raise UnknownNameError("chip", text, list_chips())


def _normalise_overrides(overrides: Overrides) -> tuple[str, ...]:
    if not overrides:
        return ()
    if isinstance(overrides, Mapping):
        return tuple(f"{k}={v}" for k, v in overrides.items())
    if isinstance(overrides, str):
        return (overrides,)
    return tuple(str(o) for o in overrides)


def as_chip(chip: ChipSpec | PathLike) -> ChipSpec:
    """``chip`` as a :class:`ChipSpec`: one already loaded, else loaded from its name or path
    (the public functions take either); anything else is a :class:`ConfigError`."""
    if isinstance(chip, ChipSpec):
        return chip
    if isinstance(chip, (str, os.PathLike)):
        return load_chip(chip)
    raise ConfigError(ConfigProblem("chip", 0, "", f"a chip is a ChipSpec, a name from arch_configs/ or a YAML path, "
                                                   f"got {chip!r}"))


def load_chip(name_or_path: PathLike, overrides: Overrides = None) -> ChipSpec:
    """Load and validate a chip; ``overrides`` are ``dotted.path=value`` edits.

    ``overrides`` may be a list of ``"path=value"`` strings (as given to ``--set``) or a
    mapping ``{"memory.levels.hbm.data_rate_gbps_per_pin": 8}``; list items are addressed
    by index or by their ``name``.  The result records :attr:`ChipSpec.source_path` and
    :attr:`ChipSpec.overrides`.  Raises :class:`ConfigError` for any invalid input.
    """
    if not isinstance(name_or_path, (str, os.PathLike)):
        raise ConfigError(ConfigProblem("chip", 0, "", f"a chip is a name from arch_configs/ or a YAML path, got "
                                                       f"{name_or_path!r}"))
    if overrides is not None and not isinstance(overrides, (str, Mapping, list, tuple)):
        raise ConfigError(ConfigProblem("--set", 0, "", f"chip overrides are 'dotted.path=value' strings or a "
                                                         f"mapping, got {overrides!r}"))
    path = resolve_chip_path(name_or_path)
    if isinstance(overrides, str):
        overrides = [overrides]
    raw = read_yaml(path)
    edits = dict(overrides) if isinstance(overrides, Mapping) else overrides
    spec = validate(ChipSpec, chip_document(raw, edits))
    spec = spec._set_provenance(path, _normalise_overrides(overrides), kernel_library_named(raw, edits))
    # the stack it names exists and fits it, on every command (sim gemm never lowers through it)
    problems = chip_stack_problems(spec, path, overrides=spec.overrides)
    if problems:
        raise ConfigError(problems)
    return spec
