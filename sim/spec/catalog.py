"""Where shipped and user data files live: chips, dataflows, models and software stacks.

The source of truth is the repository's top-level folders ``arch_configs/``,
``dataflows/``, ``workloads/`` and ``stacks/``.  A built wheel carries copies of them inside the
package, under ``sim/data/<folder>`` (setup.py's ``build_py`` copies them), so an
installed simulator finds its chips without the repository.  Lookup order for a name:

1. ``$SIM_ARCH_DIR`` / ``$SIM_DATAFLOW_DIR`` / ``$SIM_WORKLOAD_DIR`` / ``$SIM_STACK_DIR`` when set: it
   *replaces* the shipped folder (a test or a private catalogue sees only its own files);
2. otherwise the shipped folder: ``sim/data/<folder>`` inside an installed package, or
   the repository's ``<folder>`` in a source checkout (editable install);
3. then the user folder ``$SIM_USER_DIR/<folder>`` (default ``~/.config/sim/<folder>``),
   when it exists: a user's own chips are found by name without copying the package's.

Only the standard library is used here: this module sits at the bottom of the layers.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

__all__ = ["DataKind", "KINDS", "USER_DIR_ENV", "primary_dir", "search_dirs", "shipped_dir", "user_dir",
           "find", "names"]

#: environment variable naming the user folder (holding ``arch_configs/`` etc.)
USER_DIR_ENV = "SIM_USER_DIR"
_SUFFIXES = (".yaml", ".yml")


@dataclass(frozen=True)
class DataKind:
    """One kind of data file: its folder name and the variable that replaces the folder."""

    folder: str
    env_var: str


KINDS: dict[str, DataKind] = {
    "chips": DataKind("arch_configs", "SIM_ARCH_DIR"),
    "dataflows": DataKind("dataflows", "SIM_DATAFLOW_DIR"),
    "models": DataKind("workloads", "SIM_WORKLOAD_DIR"),
    "stacks": DataKind("stacks", "SIM_STACK_DIR"),
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


def primary_dir(kind: str) -> Path:
    """``$SIM_*_DIR`` when set (it replaces the shipped folder), else :func:`shipped_dir`."""
    env = os.environ.get(_kind(kind).env_var)
    if env:
        return Path(env).expanduser()
    return shipped_dir(kind)


def search_dirs(kind: str) -> list[Path]:
    """Folders searched for a name, first match wins: the primary folder, then the user folder."""
    dirs = [primary_dir(kind)]
    extra = user_dir(kind)
    if extra.is_dir() and extra not in dirs:
        dirs.append(extra)
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
