"""Finding and reading stack profiles (``stacks/*.yaml``, :class:`~sim.spec.stack_spec.StackSpec`),
and checking the one a chip names against that chip.

Profiles are found like chips (:mod:`sim.spec.catalog`: the folders ``$SIM_STACK_DIR`` names and
``~/.config/sim/stacks`` are searched before the shipped folder, whose profiles are still found).  The lowering that uses them is
:mod:`sim.model.stacks` (which re-exports these names).  :func:`chip_stack_problems` is the one
check of a chip's ``software_stack`` - in its file or given by ``--set software_stack=...`` -
that :func:`sim.spec.registry.load_chip` (every command that loads a chip) and ``sim check`` make.
"""
from __future__ import annotations

import difflib
from pathlib import Path
from typing import Union

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.spec.loader import load_model, read_yaml
from sim.spec.stack_spec import StackSpec

__all__ = ["DEFAULT_STACK", "chip_stack_problems", "list_stacks", "load_stack", "stack_array_problems"]

#: the stack of a chip whose file names none: the trace as built, one kernel per op
DEFAULT_STACK = "ideal"

_cache: dict[tuple[str, int], StackSpec] = {}


def list_stacks() -> list[str]:
    """Names of the available stack profiles (shipped and the user's), sorted."""
    return catalog.names("stacks")


def load_stack(name_or_path: Union[str, Path, StackSpec]) -> StackSpec:
    """A stack profile by name (``"eager_pytorch"``) or YAML path; errors name file, line and key."""
    if isinstance(name_or_path, StackSpec):
        return name_or_path
    text = str(name_or_path)
    path = Path(text).expanduser()
    if not (path.suffix in (".yaml", ".yml") or "/" in text):
        found = catalog.find("stacks", text)
        if found is None:
            raise UnknownNameError("stack", text, list_stacks())
        path = found
    key = catalog.file_key(path)
    if key is not None and key in _cache:
        return _cache[key]
    spec = load_model(StackSpec, path)
    spec._source_path = path
    if spec.name != path.stem:
        raise ConfigError(ConfigProblem(str(path), 1, "name", f"name {spec.name!r} must equal the file name "
                                                              f"{path.stem!r}"))
    chips = catalog.names("chips") if spec.stream_kernels_measured_on else []
    if spec.stream_kernels_measured_on and spec.stream_kernels_measured_on not in chips:
        close = difflib.get_close_matches(spec.stream_kernels_measured_on, chips, n=1)
        raise ConfigError(ConfigProblem(str(path), line_in(path, ("stream_kernels_measured_on",)),
                                        "stream_kernels_measured_on",
                                        f"unknown chip {spec.stream_kernels_measured_on!r}"
                                        + (f"; did you mean {close[0]!r}?" if close else "")
                                        + f" (valid: {', '.join(chips)})"))
    if key is not None:
        _cache[key] = spec
    return spec


def line_in(path, loc) -> int:
    """The line of key path ``loc`` in the YAML file ``path`` (0 when it cannot be read)."""
    try:
        return read_yaml(path).line_of(loc)
    except ConfigError:
        return 0


def stack_array_problems(spec: StackSpec, chip, source_doc=None) -> list[ConfigProblem]:
    """One problem per array the profile names that ``chip`` does not have, at the profile's
    file, line and key (``source_doc``: the profile's parsed YAML, read here when not given)."""
    have = sorted(a.name for a in chip.cores.arrays)
    bad = [(loc, a) for loc, a in spec.array_refs() if a not in have]
    if not bad:
        return []
    path = spec.source_path
    doc = source_doc
    if doc is None and path is not None:
        try:
            doc = read_yaml(path)
        except ConfigError:  # changed since it was read: the key is still named
            doc = None
    where = str(path) if path is not None else f"stack '{spec.name}'"
    out = []
    for loc, a in bad:
        close = difflib.get_close_matches(a, have, n=1)
        out.append(ConfigProblem(where, doc.line_of(loc) if doc is not None else 0, ".".join(map(str, loc)),
                                 f"unknown array '{a}' on chip '{chip.name}'"
                                 + (f"; did you mean '{close[0]}'?" if close else "")
                                 + f" (valid: {', '.join(have)})"))
    return out


def chip_stack_problems(chip, path=None, line: int | None = None, overrides=()) -> list[ConfigProblem]:
    """What is wrong with the software stack ``chip`` names (``software_stack``): a profile that
    does not exist, or one that does not fit the chip (an array it names that the chip lacks).
    Each problem is placed at the ``--set software_stack=...`` edit among ``overrides`` that set it,
    else at the chip's file ``path`` and ``line`` (read from the file when None).  No stack named:
    none (the chip runs :data:`DEFAULT_STACK`).  A profile that is itself invalid raises its own
    ConfigError (its file, line and key)."""
    name = getattr(chip, "software_stack", None)
    if not name:
        return []
    edit = next((o for o in reversed(tuple(overrides or ()))
                 if str(o).split("=", 1)[0].strip() == "software_stack"), None)
    if edit is not None:
        where, at = f"--set {edit}", 0
    else:
        where = str(path) if path is not None else f"chip '{chip.name}'"
        at = line if line is not None else (line_in(path, ("software_stack",)) if path is not None else 0)
    try:
        stack = load_stack(name)
    except UnknownNameError as exc:
        return [ConfigProblem(where, at, "software_stack", str(exc))]
    return [ConfigProblem(where, at, "software_stack", f"stack '{stack.name}' does not fit this chip: {p.format()}")
            for p in stack_array_problems(stack, chip)]
