"""Kernel libraries: a vendor library's kernel menu as a data file a chip names.

A chip whose kernels come from a library (a GPU's cuBLAS/CUTLASS/cuDNN) constrains the mapper
with a ``mapping:`` block (:class:`~sim.spec.mapping_spec.MappingSpec`: tile menus, split-K,
clusters, fixed kernel lists per array, pipeline sizing).  That menu belongs to the library on
an architecture, not to one chip, so it lives in its own file, ``kernel_libraries/<name>.yaml``
(:class:`KernelLibrarySpec`: ``schema_version``, ``name``, ``description`` and the ``mapping:``
block), found like chips and stacks (:mod:`sim.spec.catalog`: ``$SIM_LIBRARY_DIR``, then
``~/.config/sim/kernel_libraries``, then the shipped folder).  A chip names one::

    kernel_library: cublas_sm90     # or a path, relative to the chip file

and :func:`with_kernel_library` puts the library's ``mapping:`` under the chip's before the chip
is validated, the chip's own ``mapping:`` keys overriding the library's key by key.
:func:`chip_document` is the one way a chip file becomes the document validated: a
``--set kernel_library=...`` first, then the library merged, then the other ``--set`` edits,
so they reach into the library's keys too (``mapping.array_kernels.tensor_cores.8.stages=4``).
The validated :class:`~sim.spec.chip.ChipSpec` then holds the merged ``mapping`` as if it had
been written inline, so nothing downstream knows the difference and
a chip's ``to_dict()`` stays self-contained (sweep workers need no library file).

Which kernels an op becomes and which library path each dtype takes is the software stack's
(``stacks/``, :mod:`sim.spec.stack_spec`); the library says what those paths' kernels can be.
"""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Literal, Union

import sim.spec.catalog as catalog
from sim.errors import ConfigError, ConfigProblem, UnknownNameError
from sim.spec.loader import apply_overrides, parse_override, read_yaml, validate
from sim.spec.mapping_spec import MappingSpec
from sim.spec.spec_base import _Spec
from sim.spec.yaml_reader import YamlDoc

__all__ = ["KernelLibrarySpec", "chip_document", "kernel_library_named", "list_kernel_libraries", "load_kernel_library",
           "with_kernel_library"]

#: the chip-file key naming a library
KEY = "kernel_library"


class KernelLibrarySpec(_Spec):
    """One kernel library file: its name (= the file name) and the mapping constraints it sets."""

    schema_version: Literal[1]
    name: str
    description: str = ""
    mapping: MappingSpec


_cache: dict[tuple[str, int], tuple[KernelLibrarySpec, YamlDoc]] = {}


def list_kernel_libraries() -> list[str]:
    """Names of the available kernel libraries (shipped and the user's), sorted."""
    return catalog.names("libraries")


def _library_path(name: str, relative_to: Path | None) -> Path:
    text = str(name)
    if text.endswith((".yaml", ".yml")) or "/" in text:
        path = Path(text).expanduser()
        if not path.is_absolute() and relative_to is not None:
            path = relative_to / path
        if not path.is_file():
            raise ConfigError(ConfigProblem(str(path), 0, "", "kernel library file not found"))
        return path
    found = catalog.find("libraries", text)
    if found is None:
        raise UnknownNameError("kernel library", text, list_kernel_libraries())
    return found


def load_kernel_library(name_or_path: Union[str, Path], relative_to: Path | None = None
                        ) -> tuple[KernelLibrarySpec, YamlDoc]:
    """A kernel library by name (``"cublas_sm90"``) or YAML path (relative paths against
    ``relative_to``): the validated spec and its parsed file.  Errors name file, line and key."""
    path = _library_path(str(name_or_path), relative_to)
    key = catalog.file_key(path)
    if key is not None and key in _cache:
        return _cache[key]
    doc = read_yaml(path)
    spec = validate(KernelLibrarySpec, doc)
    if path.parent.name == catalog.KINDS["libraries"].folder and spec.name != path.stem:
        raise ConfigError(ConfigProblem(str(path), doc.line_of(("name",)), "name",
                                        f"name {spec.name!r} must equal the file name {path.stem!r}"))
    if key is not None:
        _cache[key] = (spec, doc)
    return spec, doc


def with_kernel_library(doc: YamlDoc) -> YamlDoc:
    """``doc`` (a chip file, overrides applied) with the ``mapping:`` of the library its
    ``kernel_library`` names merged under its own ``mapping:`` keys, and ``kernel_library``
    removed; ``doc`` itself when it names none.  A problem in the library file is reported at
    that file's line, also one that only the chip can see (an array the library names that the
    chip lacks: :attr:`YamlDoc.origins`)."""
    data = doc.data
    if not isinstance(data, dict) or KEY not in data:
        return doc
    name = data[KEY]
    line = doc.line_of((KEY,))
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(ConfigProblem(doc.source, line, KEY, f"must name a kernel library (valid: "
                                                               f"{', '.join(list_kernel_libraries())}), got {name!r}"))
    chip_dir = Path(doc.source).parent if doc.source else None
    try:
        _, lib_doc = load_kernel_library(name.strip(), chip_dir)
    except UnknownNameError as exc:
        raise ConfigError(ConfigProblem(doc.source, line, KEY, str(exc))) from None
    own = data.get("mapping")
    merged = copy.deepcopy(lib_doc.data["mapping"])
    if isinstance(own, dict):
        merged.update(own)
    elif own is not None:
        merged = own  # not a mapping: the chip's validation reports it at its own line
    out = {k: v for k, v in data.items() if k != KEY}
    out["mapping"] = merged
    lines = dict(doc.lines)
    lines.setdefault(("mapping",), line)
    origins = dict(doc.origins)
    if isinstance(merged, dict):
        for k in merged:
            lines.setdefault(("mapping", k), line)
            if not (isinstance(own, dict) and k in own):
                origins[("mapping", k)] = lib_doc  # a problem in it is the library file's
    return YamlDoc(out, lines, doc.source, origins)


def _split_overrides(overrides, flag: str) -> tuple[dict, dict]:
    """(the ``kernel_library`` edit, every other edit) of ``--set``-style overrides."""
    if isinstance(overrides, str):
        overrides = [overrides]
    if isinstance(overrides, (list, tuple)):
        overrides = dict(parse_override(o, flag) for o in overrides)
    overrides = dict(overrides or {})
    return ({k: v for k, v in overrides.items() if str(k) == KEY},
            {k: v for k, v in overrides.items() if str(k) != KEY})


def kernel_library_named(doc: YamlDoc, overrides=None, flag: str = "--set") -> str | None:
    """The kernel library a chip file names once ``overrides`` apply (None: an inline
    ``mapping:`` or none), for reports (``sim show``)."""
    first, _ = _split_overrides(overrides, flag)
    data = apply_overrides(doc, first, flag).data
    name = data.get(KEY) if isinstance(data, dict) else None
    return str(name) if name is not None else None


def chip_document(doc: YamlDoc, overrides=None, flag: str = "--set") -> YamlDoc:
    """A chip file's document as validated: ``overrides`` (``--set`` edits, a list of
    ``path=value`` or a mapping) applied around the merge of its kernel library - an edit of
    ``kernel_library`` itself before it, every other edit after it."""
    first, rest = _split_overrides(overrides, flag)
    return apply_overrides(with_kernel_library(apply_overrides(doc, first, flag)), rest, flag)
