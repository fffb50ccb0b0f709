"""The case files of ``sim validate``: their columns, the kinds of case and what each kind
needs, and the parser that names the file, line and column of every problem (format in
validation/measurements/README.md).  Pricing a case is :mod:`sim.apps.validation`."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from sim.errors import SimError, WorkloadError
from sim.model.workload.models import list_models
from sim.spec.dtypes import format_names, get_format

COLUMNS = ("kind", "dtype", "m", "k", "n", "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "causal",
           "hidden", "ffn", "bytes", "measured_ms")
#: columns only some kinds need (a file without such rows may leave them out): ``op`` for
#: norm / elementwise; the rest for ``model`` cases (see :func:`_parse_model`)
OPTIONAL_COLUMNS = ("op", "model", "num_layers", "phase", "weight_dtype", "prompt_len", "context_len",
                    "decode_seqs", "decode_ctx")
KINDS = ("gemm", "attention", "layer", "copy", "model", "bmm", "softmax", "norm", "elementwise")
GEMM_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8", "bf16_2:4")
#: tensor formats of the single-op kinds bmm / softmax / norm / elementwise
VECTOR_DTYPES = ("bf16", "fp16", "fp32")
#: what attention and layer cases are priced in (the harness, validation/gpu/measure.py, runs them in bf16)
ATTENTION_DTYPES = ("bf16",)
#: the element a copy case's bytes are counted in (a label: a copy moves bytes whatever they hold)
COPY_DTYPES = ("uint8", "int8", "bf16", "fp16", "fp32")
NORM_OPS = ("rmsnorm", "layernorm")
ELEMENTWISE_OPS = ("add", "mul", "silu", "gelu", "relu")
MODEL_PHASES = ("prefill", "decode", "mixed")
_NEEDED = {
    "gemm": ("dtype", "m", "k", "n"),
    "attention": ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "causal"),
    "layer": ("hidden", "heads", "kv_heads", "head_dim", "ffn", "batch", "q_len", "kv_len"),
    "copy": ("bytes",),
    "model": ("batch",),
    "bmm": ("batch", "m", "k", "n"),
    "softmax": ("m", "n"),
    "norm": ("m", "n"),
    "elementwise": ("n",),
}


#: the largest value a size column may hold: 2^53, where float64 (how a CSV cell is read)
#: stops holding every whole number; the ops' own size limits apply on top
MAX_CASE_DIMENSION = 2**53


@dataclass(frozen=True)
class Case:
    line: int
    kind: str
    dtype: str
    values: dict
    measured_ms: float | None
    #: text columns of the kinds that have them (``op``; ``model``, ``phase``, ``weight_dtype``)
    attrs: dict = field(default_factory=dict)

    def get(self, key: str) -> int:
        return int(self.values[key])


def read_cases(path: str | Path) -> list[Case]:
    """Parse a case CSV; every problem names the file, line and column."""
    import csv

    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkloadError(f"{path}: cannot read case file (expected UTF-8 CSV text): {exc}") from None
    reader = csv.reader(text.splitlines())
    rows = []
    try:
        for row in reader:
            rows.append(row)
    except csv.Error as exc:  # a cell beyond the csv module's 131,072 characters
        raise WorkloadError(f"{path}:{reader.line_num}: not a case CSV row ({exc})") from None
    if not rows:
        raise WorkloadError(f"{path}: empty case file")
    header = [h.strip() for h in rows[0]]
    twice = next((h for i, h in enumerate(header) if h and h in header[:i]), None)
    if twice is not None:  # the first of the two was read, the other silently ignored
        raise WorkloadError(f"{path}:1: column {twice!r} appears twice in the header")
    missing = [c for c in COLUMNS if c not in header]
    if missing:
        raise WorkloadError(f"{path}:1: missing columns {missing}; expected {','.join(COLUMNS)}")
    idx = {h: i for i, h in enumerate(header)}
    cases: list[Case] = []
    problems: list[str] = []
    for ln, row in enumerate(rows[1:], start=2):
        if not row or all(not c.strip() for c in row):
            continue
        cell = lambda c: row[idx[c]].strip() if idx[c] < len(row) else ""  # noqa: E731
        kind = cell("kind")
        if kind not in KINDS:
            problems.append(f"{path}:{ln}: column kind: unknown kind {kind!r} (valid: {', '.join(KINDS)})")
            continue
        dtype = cell("dtype") or "bf16"
        if kind == "gemm" and dtype not in GEMM_DTYPES:
            problems.append(f"{path}:{ln}: column dtype: {dtype!r} is not a gemm dtype (valid: {', '.join(GEMM_DTYPES)})")
            continue
        valid = ATTENTION_DTYPES if kind in ("attention", "layer") else COPY_DTYPES if kind == "copy" else None
        if valid is not None and dtype not in valid:
            # 'fp99' was accepted and priced as bf16
            problems.append(f"{path}:{ln}: column dtype: {dtype!r} is not a dtype of {kind} cases (valid: {', '.join(valid)})")
            continue
        if kind in ("bmm", "softmax", "norm", "elementwise") and dtype not in VECTOR_DTYPES:
            problems.append(f"{path}:{ln}: column dtype: {dtype!r} is not a dtype of {kind} cases "
                            f"(valid: {', '.join(VECTOR_DTYPES)})")
            continue
        absent = [c for c in _NEEDED[kind] if c != "dtype" and c not in idx]
        if absent:
            problems.append(f"{path}:{ln}: kind {kind} needs column(s) {', '.join(absent)}, missing from the header")
            continue
        values: dict[str, float] = {}
        attrs: dict[str, str] = {}
        bad = False
        if kind in ("norm", "elementwise"):
            valid = NORM_OPS if kind == "norm" else ELEMENTWISE_OPS
            op = cell("op") if "op" in idx else ""
            if op not in valid:
                problems.append(f"{path}:{ln}: column op: {op!r} is not a {kind} op (valid: {', '.join(valid)})")
                continue
            attrs["op"] = op
        if kind == "model":
            got = _parse_model(cell, idx, f"{path}:{ln}", problems)
            if got is None:
                continue
            dtype, extra_values, attrs = got
            values.update(extra_values)
        for col in _NEEDED[kind]:
            if col == "dtype":
                continue
            raw = cell(col)
            if raw == "":
                problems.append(f"{path}:{ln}: column {col}: required for kind {kind}")
                bad = True
                continue
            try:
                v = float(raw)
                if not math.isfinite(v):
                    raise ValueError
            except ValueError:
                problems.append(f"{path}:{ln}: column {col}: not a number ({raw!r})")
                bad = True
                continue
            if col == "causal":
                if v not in (0.0, 1.0):
                    problems.append(f"{path}:{ln}: column causal: must be 0 or 1 ({raw!r})")
                    bad = True
            elif v <= 0 or v != int(v):
                problems.append(f"{path}:{ln}: column {col}: must be a positive whole number ({raw!r})")
                bad = True
            elif v > MAX_CASE_DIMENSION:
                # a float this large has lost its integer digits and no op of it could be
                # simulated: say so at the row, not as "could not be predicted"
                problems.append(f"{path}:{ln}: column {col}: {raw!r} is larger than any case can be "
                                f"(at most {MAX_CASE_DIMENSION:,})")
                bad = True
            values[col] = v
        meas = cell("measured_ms")
        measured = None
        if meas != "":
            try:
                measured = float(meas)
                if not (measured > 0 and math.isfinite(measured)):
                    raise ValueError
            except ValueError:
                problems.append(f"{path}:{ln}: column measured_ms: must be a positive number ({meas!r})")
                bad = True
        if not bad:
            cases.append(Case(ln, kind, dtype, values, measured, attrs))
    if problems:
        shown = problems[:50]
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        raise WorkloadError(f"{path}: {len(problems)} bad row(s):\n  " + "\n  ".join(shown) + more)
    if not cases:
        raise WorkloadError(f"{path}: no cases after the header row")
    return cases


def _parse_model(cell, idx: dict, where: str, problems: list[str]):
    """The columns of a ``model`` case: ``model`` (a name from workloads/ or a YAML path),
    ``num_layers`` (optional override), ``phase`` (prefill, decode or mixed), ``dtype`` (the
    GEMM input format: bf16, or fp8 for W8A8), ``weight_dtype`` (optional: the stored weights,
    e.g. int4 for weight-only), ``batch`` and, by phase,

    * prefill: ``prompt_len`` new tokens per sequence behind ``context_len`` cached (0 if empty);
    * decode: ``context_len`` cached tokens, one new token per sequence;
    * mixed: ``batch`` sequences prefilling a ``prompt_len`` chunk behind ``context_len`` cached
      tokens, plus ``decode_seqs`` sequences decoding over ``decode_ctx`` cached tokens.

    Returns ``(dtype, values, attrs)``, or None after appending the problems."""
    def col(c):
        return cell(c) if c in idx else ""

    n0 = len(problems)
    attrs: dict[str, str] = {}
    values: dict[str, float] = {}
    model = col("model")
    if not model:
        problems.append(f"{where}: column model: required for kind model (a name: {', '.join(list_models())}; "
                        "or a YAML path)")
    elif not (model.endswith((".yaml", ".yml")) or "/" in model) and model not in list_models():
        problems.append(f"{where}: column model: unknown model {model!r} (valid: {', '.join(list_models())}; "
                        "or a YAML path)")
    elif (model.endswith((".yaml", ".yml")) or "/" in model) and not Path(model).is_file():
        problems.append(f"{where}: column model: no such model file {model!r}")
    attrs["model"] = model
    phase = col("phase")
    if phase not in MODEL_PHASES:
        problems.append(f"{where}: column phase: {phase!r} is not a model phase (valid: {', '.join(MODEL_PHASES)})")
    attrs["phase"] = phase
    dtype = col("dtype") or "bf16"
    wdt = col("weight_dtype") or dtype
    for c, v in (("dtype", dtype), ("weight_dtype", wdt)):
        try:
            get_format(v)
        except SimError:
            problems.append(f"{where}: column {c}: unknown format {v!r} (valid: {', '.join(format_names())})")
    attrs["weight_dtype"] = wdt
    need = {"prefill": ("prompt_len",), "decode": ("context_len",),
            "mixed": ("prompt_len", "decode_seqs", "decode_ctx")}.get(phase, ())
    for c in ("num_layers", "prompt_len", "context_len", "decode_seqs", "decode_ctx"):
        raw = col(c)
        if raw == "":
            if c in need:
                problems.append(f"{where}: column {c}: required for a {phase} model case")
            continue
        try:
            v = float(raw)
            ok = math.isfinite(v) and v == int(v) and (v >= 0 if c in ("context_len", "decode_ctx") else v > 0)
        except ValueError:
            ok = False
        if not ok:
            kind_ = "a whole number >= 0" if c in ("context_len", "decode_ctx") else "a positive whole number"
            problems.append(f"{where}: column {c}: must be {kind_} ({raw!r})")
            continue
        values[c] = v
    if len(problems) > n0:
        return None
    return dtype, values, attrs
