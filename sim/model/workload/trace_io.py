"""Read and write traces as CSV or JSONL (chosen by the file extension).

CSV
    First line ``# sim-trace {json metadata}``; then a header; then one op per row.  The
    columns are ``kind, layer, block, repeat, stage`` followed by the union of the op
    fields (in the order of :data:`sim.ir.ops.OP_TYPES`).  A cell of a field the
    op's kind does not have is empty; ``None`` is an empty cell; booleans are
    ``true``/``false``; ``tags`` are joined with ``;``; floats are written with ``repr``
    so the round trip is exact.
JSONL
    First line ``{"trace": {metadata}}``; then one JSON object per op with the same keys
    as the CSV columns (only the op's own fields).

Reading checks every row and raises :class:`~sim.errors.WorkloadError` naming the file,
the line (1-based, as an editor shows it) and the column / field.
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import MISSING, fields
from pathlib import Path
from typing import Any

from sim.errors import SimError, UnknownNameError, WorkloadError
from sim.ir.ops import OP_TYPES, op_from_dict, op_to_dict
from sim.model.workload.llm import Trace, TraceOp

PLACEMENT = ("kind", "layer", "block", "repeat", "stage")
CSV_MAGIC = "# sim-trace "


def _op_columns() -> list[str]:
    cols: list[str] = []
    for cls in OP_TYPES.values():
        for f in fields(cls):
            if f.name not in cols:
                cols.append(f.name)
    return cols


def _field_types(cls: type) -> dict[str, str]:
    """Field name -> type annotation as text (the ops module uses postponed annotations)."""
    out = {}
    for f in fields(cls):
        t = f.type if isinstance(f.type, str) else getattr(f.type, "__name__", str(f.type))
        out[f.name] = t.replace(" ", "")
    return out


# --------------------------------------------------------------------------- writing


def _csv_cell(value: Any, where: str) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise WorkloadError(f"{where}: cannot write a non-finite number {value!r}")
        return repr(value)
    if isinstance(value, (tuple, list)):
        for tag in value:
            if ";" in str(tag):
                raise WorkloadError(f"{where}: tag {tag!r} contains ';', which the CSV format uses as separator")
        return ";".join(str(v) for v in value)
    return str(value)


def _row_dict(t: TraceOp) -> dict[str, Any]:
    d = op_to_dict(t.op)
    row = {"kind": d.pop("kind"), "layer": t.layer, "block": t.block, "repeat": t.repeat, "stage": t.stage}
    row.update(d)
    return row


def trace_to_csv_text(trace: Trace) -> str:
    cols = list(PLACEMENT) + _op_columns()
    buf = io.StringIO()
    buf.write(CSV_MAGIC + json.dumps(trace.meta, sort_keys=True) + "\n")
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(cols)
    for i, t in enumerate(trace.ops):
        row = _row_dict(t)
        writer.writerow([_csv_cell(row[c], f"op {i} '{t.op.name}' field {c}") if c in row else "" for c in cols])
    return buf.getvalue()


def trace_to_jsonl_text(trace: Trace) -> str:
    lines = [json.dumps({"trace": trace.meta}, sort_keys=True)]
    for t in trace.ops:
        row = _row_dict(t)
        if "tags" in row:
            row["tags"] = list(row["tags"])
        lines.append(json.dumps(row))
    return "\n".join(lines) + "\n"


def write_trace(trace: Trace, path: str | Path) -> Path:
    """Write ``trace`` to ``path`` (``.csv`` or ``.jsonl``); returns the path."""
    path = Path(path)
    kind = _kind_of(path)
    text = trace_to_csv_text(trace) if kind == "csv" else trace_to_jsonl_text(trace)
    path.write_text(text, encoding="utf-8")
    return path


def _kind_of(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix in (".jsonl", ".ndjson"):
        return "jsonl"
    raise WorkloadError(f"{path}: unknown trace file type '{suffix}' (valid: .csv, .jsonl)")


# --------------------------------------------------------------------------- reading


def _parse_value(text: str, typ: str, has_default: bool, default: Any, where: str) -> Any:
    """Parse a CSV cell according to the dataclass annotation ``typ``."""
    optional = "None" in typ.split("|")
    base = [p for p in typ.split("|") if p != "None"]
    base_t = base[0] if base else "str"
    if text == "":
        if optional:
            return None
        if base_t.startswith("tuple"):
            return ()
        if base_t == "str":
            return ""
        if has_default:
            return default
        raise WorkloadError(f"{where}: missing value")
    try:
        if base_t == "int":
            if text.strip().lstrip("-").isdigit():
                return int(text)
            raise ValueError
        if base_t == "float":
            return float(text)
        if base_t == "bool":
            low = text.strip().lower()
            if low in ("true", "1", "yes"):
                return True
            if low in ("false", "0", "no"):
                return False
            raise ValueError
        if base_t.startswith("tuple"):
            return tuple(text.split(";"))
        return text
    except ValueError:
        expected = {"int": "a whole number", "float": "a number", "bool": "true or false"}.get(base_t, base_t)
        raise WorkloadError(f"{where}: expected {expected}, got {text!r}") from None


def _placement(raw: dict[str, Any], where: str) -> tuple[int | None, str, int, int]:
    def as_int(name: str, value: Any, allow_none: bool, default: int | None) -> int | None:
        if value is None or value == "":
            if allow_none:
                return None
            if default is not None:
                return default
            raise WorkloadError(f"{where}: column '{name}': missing value")
        if isinstance(value, bool):
            raise WorkloadError(f"{where}: column '{name}': expected a whole number, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, str) and value.strip().lstrip("-").isdigit():
            return int(value)
        raise WorkloadError(f"{where}: column '{name}': expected a whole number, got {value!r}")

    layer = as_int("layer", raw.get("layer"), True, None)
    block = raw.get("block", "")
    if block is None:
        block = ""
    if not isinstance(block, str):
        raise WorkloadError(f"{where}: column 'block': expected text, got {block!r}")
    repeat = as_int("repeat", raw.get("repeat"), False, 1)
    stage = as_int("stage", raw.get("stage"), False, 0)
    return layer, block, repeat, stage  # type: ignore[return-value]


def _make_traceop(op_data: dict[str, Any], place: tuple, where: str, word: str) -> TraceOp:
    try:
        op = op_from_dict(op_data)
    except UnknownNameError as exc:
        bad = [k for k, v in op_data.items() if k != "kind" and v == exc.name]
        col = f"{word} '{bad[0]}': " if bad else ""
        raise WorkloadError(f"{where}: {col}{exc}") from None
    except SimError as exc:
        raise WorkloadError(f"{where}: {exc}") from None
    except (TypeError, ValueError) as exc:
        raise WorkloadError(f"{where}: {exc}") from None
    layer, block, repeat, stage = place
    try:
        return TraceOp(op, layer, block, repeat, stage)
    except WorkloadError as exc:
        raise WorkloadError(f"{where}: {exc}") from None


def _read_meta(text: str, where: str) -> dict[str, Any]:
    try:
        meta = json.loads(text)
    except json.JSONDecodeError as exc:
        raise WorkloadError(f"{where}: metadata is not valid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(meta, dict):
        raise WorkloadError(f"{where}: metadata must be a JSON object")
    return meta


def trace_from_csv_text(text: str, source: str = "<csv>") -> Trace:
    lines = text.splitlines(keepends=True)
    meta: dict[str, Any] = {}
    start = 0
    if lines and lines[0].startswith(CSV_MAGIC):
        meta = _read_meta(lines[0][len(CSV_MAGIC):], f"{source}:1")
        start = 1
    elif lines and lines[0].startswith("#"):
        start = 1
    reader = csv.reader(io.StringIO("".join(lines[start:])))
    try:
        header = next(reader)
    except StopIteration:
        raise WorkloadError(f"{source}: no header row") from None
    header_line = start + 1
    known = set(PLACEMENT) | set(_op_columns())
    for c in header:
        if c not in known:
            import difflib

            close = difflib.get_close_matches(c, sorted(known), n=1)
            hint = f"; did you mean '{close[0]}'?" if close else ""
            raise WorkloadError(f"{source}:{header_line}: unknown column '{c}'{hint} (valid: {', '.join(sorted(known))})")
    if "kind" not in header:
        raise WorkloadError(f"{source}:{header_line}: the header has no 'kind' column")
    if len(set(header)) != len(header):
        dup = [c for c in header if header.count(c) > 1][0]
        raise WorkloadError(f"{source}:{header_line}: column '{dup}' appears twice")
    ops: list[TraceOp] = []
    while True:
        try:
            row = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            raise WorkloadError(f"{source}:{start + reader.line_num}: CSV syntax error: {exc}") from None
        line = start + reader.line_num
        if not row or all(c == "" for c in row):
            continue
        where = f"{source}:{line}"
        if len(row) != len(header):
            raise WorkloadError(f"{where}: {len(row)} cells, the header has {len(header)}")
        raw = dict(zip(header, row))
        kind = raw["kind"]
        if kind not in OP_TYPES:
            raise WorkloadError(f"{where}: column 'kind': unknown op kind {kind!r} (valid: {', '.join(OP_TYPES)})")
        cls = OP_TYPES[kind]
        types = _field_types(cls)
        defaults = {f.name: f.default for f in fields(cls)}
        op_data: dict[str, Any] = {"kind": kind}
        for col, cell in raw.items():
            if col in PLACEMENT:
                continue
            if col not in types:
                if cell != "":
                    raise WorkloadError(f"{where}: column '{col}': a {kind} op has no field '{col}' (cell must be empty)")
                continue
            d = defaults[col]
            op_data[col] = _parse_value(cell, types[col], d is not MISSING, d, f"{where}: column '{col}'")
        missing = [n for n in types if n not in op_data and defaults[n] is MISSING]
        if missing:
            raise WorkloadError(f"{where}: column '{missing[0]}': required by a {kind} op but not in the header")
        ops.append(_make_traceop(op_data, _placement(raw, where), where, "column"))
    return Trace(tuple(ops), meta)


_JSON_TYPES = {"int": (int,), "float": (int, float), "str": (str,), "bool": (bool,)}


def trace_from_jsonl_text(text: str, source: str = "<jsonl>") -> Trace:
    meta: dict[str, Any] = {}
    ops: list[TraceOp] = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{source}:{n}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise WorkloadError(f"{where}: not valid JSON: {exc.msg} (column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise WorkloadError(f"{where}: expected a JSON object, got {type(obj).__name__}")
        if "trace" in obj and "kind" not in obj:
            if ops:
                raise WorkloadError(f"{where}: the metadata line must come first")
            if not isinstance(obj["trace"], dict):
                raise WorkloadError(f"{where}: field 'trace': metadata must be a JSON object")
            meta = obj["trace"]
            continue
        kind = obj.get("kind")
        if kind not in OP_TYPES:
            raise WorkloadError(f"{where}: field 'kind': unknown op kind {kind!r} (valid: {', '.join(OP_TYPES)})")
        cls = OP_TYPES[kind]
        types = _field_types(cls)
        op_data: dict[str, Any] = {"kind": kind}
        for key, value in obj.items():
            if key in PLACEMENT:
                continue
            if key not in types:
                import difflib

                close = difflib.get_close_matches(key, list(types), n=1)
                hint = f"; did you mean '{close[0]}'?" if close else ""
                raise WorkloadError(f"{where}: field '{key}': a {kind} op has no such field{hint} "
                                    f"(valid: {', '.join(types)})")
            typ = types[key]
            parts = typ.split("|")
            if value is None:
                if "None" not in parts:
                    raise WorkloadError(f"{where}: field '{key}': must not be null")
            elif parts[0].startswith("tuple"):
                if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                    raise WorkloadError(f"{where}: field '{key}': expected a list of strings, got {value!r}")
                value = tuple(value)
            else:
                ok = _JSON_TYPES.get(parts[0], (object,))
                if isinstance(value, bool) and parts[0] != "bool" or not isinstance(value, ok):
                    raise WorkloadError(f"{where}: field '{key}': expected {parts[0]}, got {value!r}")
            op_data[key] = value
        missing = [f.name for f in fields(cls) if f.name not in op_data and f.default is MISSING]
        if missing:
            raise WorkloadError(f"{where}: field '{missing[0]}': missing (required by a {kind} op)")
        ops.append(_make_traceop(op_data, _placement(obj, where), where, "field"))
    return Trace(tuple(ops), meta)


def read_trace(path: str | Path) -> Trace:
    """Read a trace written by :func:`write_trace` (or by hand) from ``.csv`` / ``.jsonl``."""
    path = Path(path)
    kind = _kind_of(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WorkloadError(f"{path}: file not found") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read: {exc}") from None
    if kind == "csv":
        return trace_from_csv_text(text, str(path))
    return trace_from_jsonl_text(text, str(path))


__all__ = ["write_trace", "read_trace", "trace_to_csv_text", "trace_to_jsonl_text",
           "trace_from_csv_text", "trace_from_jsonl_text"]
