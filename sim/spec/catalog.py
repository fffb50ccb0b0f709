"""Where shipped and user data files live: chips, dataflows, models, software stacks, kernel
libraries, DRAM technologies and convolutional networks.

The source of truth is the repository's top-level folders ``arch_configs/``,
``dataflows/``, ``workloads/``, ``stacks/``, ``kernel_libraries/``, ``dram_technologies/`` and ``networks/``.  A built wheel carries copies of them inside the
package, under ``sim/data/<folder>`` (setup.py's ``build_py`` copies them), so an
installed simulator finds its chips without the repository.

The user's folders are extra search paths, searched before the shipped one, so that a user file
of a shipped name overrides it and every other shipped file is still found.  Lookup order
for a name, first match wins:

1. the folders named by ``$SIM_ARCH_DIR`` / ``$SIM_DATAFLOW_DIR`` / ``$SIM_WORKLOAD_DIR`` /
   ``$SIM_STACK_DIR`` / ``$SIM_LIBRARY_DIR`` / ``$SIM_DRAM_DIR`` / ``$SIM_NETWORK_DIR`` when set (one folder, or several separated by ``os.pathsep``, in order;
   a folder named there that does not exist is a :class:`~sim.errors.ConfigError`, not a
   silently empty catalogue);
2. the user folder ``$SIM_USER_DIR/<folder>`` (default ``~/.config/sim/<folder>``), when it exists;
3. the shipped folder: ``sim/data/<folder>`` inside an installed package, or the repository's
   ``<folder>`` in a source checkout (editable install).

Listings (:func:`names`) are the union of all of them, so an unknown-name error lists every file
registered.  Only the standard library and :mod:`sim.errors` are used here: this module sits at the
bottom of the layers.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from sim.errors import ConfigError, ConfigProblem

__all__ = ["DataKind", "KINDS", "USER_DIR_ENV", "env_dirs", "search_dirs", "shipped_dir", "user_dir",
           "find", "names", "file_key"]

#: environment variable naming the user folder (holding ``arch_configs/`` etc.)
USER_DIR_ENV = "SIM_USER_DIR"
_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class DataKind:
    """One kind of data file: its folder name, the variable naming extra folders of it, and what
    one file is called in messages."""

    folder: str
    env_var: str
    noun: str


KINDS: dict[str, DataKind] = {
    "chips": DataKind("arch_configs", "SIM_ARCH_DIR", "chip"),
    "dataflows": DataKind("dataflows", "SIM_DATAFLOW_DIR", "dataflow"),
    "models": DataKind("workloads", "SIM_WORKLOAD_DIR", "model"),
    "stacks": DataKind("stacks", "SIM_STACK_DIR", "stack"),
    "libraries": DataKind("kernel_libraries", "SIM_LIBRARY_DIR", "kernel library"),
    "dram": DataKind("dram_technologies", "SIM_DRAM_DIR", "DRAM technology"),
    "networks": DataKind("networks", "SIM_NETWORK_DIR", "network"),
}


def _kind(kind: str) -> DataKind:
    try:
        return KINDS[kind]
    except KeyError:  # a programming error, not user input
        raise ValueError(f"unknown data kind {kind!r}; valid: {', '.join(KINDS)}") from None


def shipped_dir(kind: str) -> Path:
    """The package's own folder of ``kind``: inside the installed package, else the checkout's."""
    folder = _kind(kind).folder
    packaged = resources.files("sim") / "data" / folder
    if packaged.is_dir():
        return Path(str(packaged))
    return Path(__file__).resolve().parents[2] / folder  # sim/spec/catalog.py -> the checkout


def user_dir(kind: str) -> Path:
    """The user's folder of ``kind`` (``$SIM_USER_DIR/<folder>``, default ``~/.config/sim/<folder>``)."""
    base = os.environ.get(USER_DIR_ENV)
    root = Path(base).expanduser() if base else Path.home() / ".config" / "sim"
    return root / _kind(kind).folder


def env_dirs(kind: str) -> list[Path]:
    """The folders ``$SIM_*_DIR`` names for ``kind`` (several separated by ``os.pathsep``), in
    order; none when it is unset or empty.  Raises :class:`ConfigError` for one that is not a
    folder: a mistyped path would otherwise only show as a missing name."""
    data = _kind(kind)
    dirs = [Path(part).expanduser() for part in os.environ.get(data.env_var, "").split(os.pathsep) if part]
    for folder in dirs:
        if not folder.is_dir():
            raise ConfigError(ConfigProblem(str(folder), 0, "", f"{data.noun} folder not found (named by "
                                                                f"{data.env_var})"))
    return dirs


def search_dirs(kind: str) -> list[Path]:
    """Folders searched for a name, first match wins: the ``$SIM_*_DIR`` folders, the user
    folder (when it exists), then the shipped folder; each once."""
    dirs: list[Path] = []
    extra = user_dir(kind)
    for folder in [*env_dirs(kind), *([extra] if extra.is_dir() else []), shipped_dir(kind)]:
        if folder not in dirs:
            dirs.append(folder)
    return dirs


def find(kind: str, name: str) -> Path | None:
    """The file named ``name`` (a stem, no suffix) in :func:`search_dirs`, or None."""
    for folder in search_dirs(kind):
        for suffix in _SUFFIXES:
            candidate = folder / f"{name}{suffix}"
            if candidate.is_file():
                return candidate
    return None


def names(kind: str) -> list[str]:
    """Stems of every YAML file in :func:`search_dirs`, sorted and without repeats."""
    found: set[str] = set()
    for folder in search_dirs(kind):
        if folder.is_dir():
            found.update(p.stem for p in folder.iterdir() if p.suffix in _SUFFIXES and p.is_file())
    return sorted(found)


def file_key(path: Path) -> tuple[str, int] | None:
    """(resolved path, modification time): a key for remembering what a file parsed to that
    changes when the file does; None when the file cannot be read."""
    try:
        return (str(path.resolve()), path.stat().st_mtime_ns)
    except OSError:
        return None
