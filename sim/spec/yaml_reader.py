"""Reading config YAML with the line of every key: :class:`YamlDoc` (data plus lines by
location), :func:`parse_yaml_text` and :func:`read_yaml` (duplicate keys rejected, YAML 1.2
floats such as ``1.2e12`` read as numbers), bounded by :data:`MAX_NODES`, :data:`MAX_DEPTH`
and :data:`MAX_FILE_BYTES` (:class:`LimitError`), and :func:`read_text_checked` (regular UTF-8
files only).

Parsing is the first step every config file goes through and what overrides and validation
errors point back into, so it is the base the other loader modules build on;
:mod:`sim.spec.loader` re-exports every name.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from sim.errors import ConfigError, ConfigProblem

Loc = tuple[Any, ...]


class _Loader(yaml.SafeLoader):
    """SafeLoader that reads YAML 1.2 floats (``1e9``, ``2.5E-3``) as floats.  PyYAML's own
    parser, not libyaml's (CSafeLoader): that one reads a chip file in ~1 ms instead of ~10 but
    accepted 38 of 2,000 random mutations of shipped files that this one refuses and read one
    differently; a file is parsed once per process."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(
        r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
        |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
        |\.[0-9_]+(?:[eE][-+][0-9]+)?
        |[-+]?\.(?:inf|Inf|INF)
        |\.(?:nan|NaN|NAN))$""",
        re.X,
    ),
    list("-+0123456789."),
)


class YamlDoc:
    """Parsed YAML data plus the line (1-based) of every key / list item, by location tuple."""

    def __init__(self, data: Any, lines: dict[Loc, int], source: str, origins: dict[Loc, "YamlDoc"] | None = None):
        self.data = data
        self.lines = lines
        self.source = source
        #: parts merged in from another file (a chip's kernel library: ``("mapping", key)``):
        #: problems inside them are that file's, at its lines
        self.origins = dict(origins or {})

    def line_of(self, loc: Loc) -> int:
        """Line of ``loc`` or of its nearest ancestor that has one (0 if none)."""
        loc = tuple(loc)
        while loc:
            if loc in self.lines:
                return self.lines[loc]
            loc = loc[:-1]
        return self.lines.get((), 0)

    def where(self, loc: Loc) -> tuple[str, int, str]:
        """(file, line, how it got here) of ``loc``: the file it was merged in from
        (:attr:`origins`) and the line of this one that merged it, else this file's line and ''."""
        loc = tuple(loc)
        for n in range(len(loc), 0, -1):
            origin = self.origins.get(loc[:n])
            if origin is not None:
                return origin.source, origin.line_of(loc), f"merged in by {self.source}:{self.line_of(loc[:n])}"
        return self.source, self.line_of(loc), ""


#: limits that keep a hostile or mistaken file from hanging the loader: values (nodes) after
#: alias expansion, nesting depth, file size
MAX_NODES = 250_000
MAX_DEPTH = 64
MAX_FILE_BYTES = 16 << 20


class LimitError(ConfigError):
    """A YAML document over :data:`MAX_NODES`, :data:`MAX_DEPTH` or :data:`MAX_FILE_BYTES`."""


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0
        self.active: set[int] = set()


def _walk(node: yaml.Node, loader: _Loader, loc: Loc, lines: dict[Loc, int], problems: list[ConfigProblem],
          source: str, budget: _Budget | None = None) -> Any:
    budget = budget if budget is not None else _Budget()
    budget.nodes += 1
    line = node.start_mark.line + 1
    if budget.nodes > MAX_NODES:
        raise LimitError(ConfigProblem(source, line, _dotted(loc),
                                       f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?)"))
    if len(loc) > MAX_DEPTH:
        raise LimitError(ConfigProblem(source, line, _dotted(loc[:MAX_DEPTH]),
                                       f"nested more than {MAX_DEPTH} levels deep"))
    if isinstance(node, (yaml.MappingNode, yaml.SequenceNode)):
        if id(node) in budget.active:
            raise LimitError(ConfigProblem(source, line, _dotted(loc), "a recursive alias (a value that contains itself)"))
        budget.active.add(id(node))
    try:
        if isinstance(node, yaml.MappingNode):
            out: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                kline = key_node.start_mark.line + 1
                if not isinstance(key_node, yaml.ScalarNode):
                    what = "list" if isinstance(key_node, yaml.SequenceNode) else "mapping"
                    problems.append(ConfigProblem(source, kline, _dotted(loc),
                                                  f"a key must be a plain name, not a {what}"))
                    continue
                key = loader.construct_object(key_node, deep=True)
                if not isinstance(key, str):
                    # `~: 3`, `null: 3`, `on: 3`, `3: x`: YAML makes the key null, a boolean or a number,
                    # which no config key is (validation said "None: Keys should be strings", on the
                    # mapping's first line)
                    raw = key_node.value
                    what = ("null" if key is None else "a boolean" if isinstance(key, bool)
                            else f"a number ({type(key).__name__})")
                    problems.append(ConfigProblem(source, kline, _dotted(loc + (raw,)),
                                                  f"a key must be a name; YAML reads {raw!r} as {what} (quote it, "
                                                  f"\"{raw}\": ..., if it is meant as a name)"))
                    continue
                if key in out:
                    problems.append(ConfigProblem(source, kline, _dotted(loc + (key,)), "duplicate key"))
                lines[loc + (key,)] = kline
                out[key] = _walk(value_node, loader, loc + (key,), lines, problems, source, budget)
            return out
        if isinstance(node, yaml.SequenceNode):
            items = []
            for i, item in enumerate(node.value):
                lines[loc + (i,)] = item.start_mark.line + 1
                items.append(_walk(item, loader, loc + (i,), lines, problems, source, budget))
            return items
        try:
            return loader.construct_object(node, deep=True)
        except (ValueError, OverflowError) as exc:
            # Python refuses to read integers of more than 4,300 digits (a 5,000-digit number was
            # an internal error, exit 3); no config value needs one
            problems.append(ConfigProblem(source, node.start_mark.line + 1, _dotted(loc),
                                          f"the value {str(node.value)[:20]}... ({len(str(node.value)):,} "
                                          f"characters) is too long to read as a number"))
            return None
    finally:
        budget.active.discard(id(node))


def _nul_problem(text: str, source: str) -> ConfigProblem | None:
    i = text.find("\0")
    if i < 0:
        return None
    return ConfigProblem(source, text.count("\n", 0, i) + 1, "", "the file contains a NUL byte (is it a binary file?)")


def parse_yaml_text(text: str, source: str) -> YamlDoc:
    """Parse YAML text; ``source`` names it in error messages.

    Bounded: at most :data:`MAX_NODES` values after alias expansion and :data:`MAX_DEPTH`
    levels of nesting (a :class:`LimitError` otherwise); recursive aliases, keys that are
    lists or mappings and NUL bytes are clear errors.
    """
    nul = _nul_problem(text, source)
    if nul is not None:
        raise ConfigError(nul)
    loader = None
    problems: list[ConfigProblem] = []
    try:
        loader = _Loader(text)  # PyYAML's own reader checks the characters here
        node = loader.get_single_node()
        if node is None:
            raise ConfigError(ConfigProblem(source, 1, "", "the file is empty"))
        lines: dict[Loc, int] = {(): node.start_mark.line + 1}
        data = _walk(node, loader, (), lines, problems, source)
    except yaml.reader.ReaderError as exc:
        # a character YAML does not allow (a control character, a lone surrogate): where it is
        code = ord(exc.character) if isinstance(exc.character, str) else int(exc.character)
        pos = max(0, int(getattr(exc, "position", 0) or 0))
        line, col = text.count("\n", 0, pos) + 1, pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise ConfigError(ConfigProblem(source, line, "", f"character U+{code:04X} at column {col} is not allowed in "
                                                          "YAML (a control character?); config files are plain "
                                                          "text")) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
        line = mark.line + 1 if mark is not None else 0
        msg = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(ConfigProblem(source, line, "", f"YAML syntax error: {msg}")) from None
    except RecursionError:
        raise LimitError(ConfigProblem(source, 0, "", f"nested too deeply (more than {MAX_DEPTH} levels)")) from None
    finally:
        if loader is not None:
            loader.dispose()
    if problems:
        raise ConfigError(problems)
    return YamlDoc(data, lines, source)


def read_text_checked(path: str | Path, max_bytes: int | None = None) -> str:
    """A config file's text: only regular files (no FIFOs, devices such as ``/dev/zero``,
    folders), at most ``max_bytes`` (default :data:`MAX_FILE_BYTES`), UTF-8."""
    import os
    import stat

    path = Path(path)
    limit = MAX_FILE_BYTES if max_bytes is None else max_bytes
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise ConfigError(ConfigProblem(str(path), 0, "", "file not found")) from None
    except OSError as exc:
        raise ConfigError(ConfigProblem(str(path), 0, "", f"cannot read file: {exc.strerror or exc}")) from None
    if stat.S_ISDIR(st.st_mode):
        raise ConfigError(ConfigProblem(str(path), 0, "", "is a folder, not a file"))
    if not stat.S_ISREG(st.st_mode):
        raise ConfigError(ConfigProblem(str(path), 0, "", "not a regular file (a device, FIFO or socket); "
                                                          "give the path of a config file"))
    if st.st_size > limit:
        raise LimitError(ConfigProblem(str(path), 0, "", f"the file is {st.st_size:,} bytes; config files are limited "
                                                         f"to {limit:,} bytes"))
    try:
        with open(path, "rb") as f:
            raw = f.read(limit + 1)
    except OSError as exc:
        raise ConfigError(ConfigProblem(str(path), 0, "", f"cannot read file: {exc.strerror or exc}")) from None
    if len(raw) > limit:
        raise LimitError(ConfigProblem(str(path), 0, "", f"the file is over the limit of {limit:,} bytes"))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise ConfigError(ConfigProblem(str(path), line, "", f"not UTF-8 text (byte {exc.start:,}: {exc.reason})")) from None


def read_yaml(path: str | Path) -> YamlDoc:
    """Read and parse a YAML file (errors name the file; see :func:`read_text_checked`)."""
    return parse_yaml_text(read_text_checked(path), str(Path(path)))


def _dotted(loc: Loc) -> str:
    return ".".join(str(p) for p in loc)
