"""Exceptions raised by the simulator.

Every error a user can cause derives from :class:`SimError`; the CLI prints its message
and exits with status 2, never with a traceback.  Programming errors (bugs) are left as
ordinary Python exceptions so that they are loud.
"""
from __future__ import annotations

from dataclasses import dataclass, field


def quoted(value, limit: int = 80) -> str:
    """A value as an error message quotes it: its repr, cut to ``limit`` characters (a
    5,000-character value was printed whole)."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[:max(10, limit - 25)]}... ({len(text):,} characters)"


class SimError(Exception):
    """Base class of every error caused by user input."""


@dataclass(frozen=True)
class ConfigProblem:
    """One thing wrong in a configuration file.

    ``line`` is 1-based, 0 when unknown; ``path`` is the dotted path of the key
    (``memory.levels.1.capacity_kib``); ``valid_keys`` lists the keys allowed at that place
    when the problem is an unknown or missing key.
    """

    file: str
    line: int
    path: str
    message: str
    valid_keys: tuple[str, ...] = field(default=())

    def format(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        key = f" {self.path}:" if self.path else ""
        text = f"{where}:{key} {self.message}"
        if self.valid_keys:
            text += f" (valid keys: {', '.join(self.valid_keys)})"
        return text


class ConfigError(SimError):
    """A configuration file (chip, dataflow, model, sweep) is invalid.

    Carries every problem found, so the user can fix them all in one pass.
    """

    def __init__(self, problems: list[ConfigProblem] | ConfigProblem, header: str | None = None):
        if isinstance(problems, ConfigProblem):
            problems = [problems]
        self.problems: list[ConfigProblem] = list(problems)
        files = sorted({p.file for p in self.problems})
        self.header = head = header or (
            f"invalid configuration in {', '.join(files)}: {len(self.problems)} problem"
            + ("s" if len(self.problems) != 1 else "")
        )
        super().__init__(head + "\n" + "\n".join("  " + p.format() for p in self.problems))


class ShapeError(SimError):
    """An operator has an impossible shape (zero or negative dimension, bad ratio...)."""


class MappingError(SimError):
    """No mapping of an operator fits the chip (e.g. a tile cannot fit any SRAM)."""


class WorkloadError(SimError):
    """A workload, trace file or model description cannot be used."""


class ModelSpecError(ConfigError, WorkloadError):
    """A model description, or an edit of it (``--model-set``, ``model_set=``), is invalid.

    A :class:`ConfigError` (every problem with its file, line and dotted key, did-you-mean
    hints) that is also a :class:`WorkloadError`, so code that guards a run against unusable
    workloads catches a bad model the same way."""


class StackProfileError(ConfigError, MappingError):
    """A software-stack profile cannot lower an op as written: it names arrays (library paths)
    the chip does not have, or a kernel's byte or element count comes out negative for the
    op's shape.  A :class:`ConfigError` naming the profile's file, line and key that is also the
    :class:`MappingError` these were before (no kernel exists for the op on the chip)."""


class UnknownNameError(SimError):
    """A name (chip, dataflow, model, dtype...) is not known; the message lists the valid ones."""

    def __init__(self, what: str, name: str, valid: list[str] | tuple[str, ...]):
        import difflib

        close = difflib.get_close_matches(str(name), list(valid), n=1)
        hint = f"; did you mean '{close[0]}'?" if close else ""
        super().__init__(f"unknown {what} '{name}'{hint} (valid: {', '.join(sorted(valid))})")
        self.what, self.name, self.valid = what, name, tuple(valid)
