"""Request workloads: arrival processes, prompt/output length distributions, trace replay.

Every generator draws from one seeded :class:`numpy.random.Generator`, so a workload is a
pure function of its parameters and seed.  A request is a frozen :class:`Request`;
a workload is a tuple of them sorted by arrival time (ties keep generation order).

Arrivals: ``poisson`` (exponential gaps, mean 1/rate), ``gamma`` (gamma-distributed gaps
with the same mean and coefficient of variation ``cv``: cv > 1 is burstier than Poisson,
cv = 1 is Poisson), ``fixed`` (gaps of exactly 1/rate).  Lengths: ``fixed``, ``uniform``
(integers in [low, high]), ``lognormal`` (given the mean and sigma of the underlying
normal's log, clipped to [low, high]), ``empirical`` (resampled from a file of integers,
one per line or a CSV column).
"""
from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from sim.errors import WorkloadError, quoted

ARRIVALS = ("poisson", "gamma", "fixed")
LENGTHS = ("fixed", "uniform", "lognormal", "empirical")


#: the latest arrival a request may have: ten years of simulated time
MAX_ARRIVAL_S = 3.2e8
#: the longest prompt or output a length distribution may give (tokens): far beyond any
#: model's context, well inside numpy's int64
MAX_LENGTH_TOKENS = 1 << 30
#: the burstiest gamma arrivals generated: a coefficient of variation of the gaps of 100
#: (measured LLM serving traces are far below it) still draws a run's arrivals in one batch;
#: 1e10 asked for a terabyte
MAX_CV = 100.0
#: the most requests one workload generates (each is a request object and rows of the outputs)
MAX_REQUESTS = 10_000_000


@dataclass(frozen=True)
class Request:
    """One request: when it arrives, how long its prompt is, how many tokens it generates.

    ``prefix_id``: requests with the same id share their first ``prefix_tokens`` prompt
    tokens (a system prompt, a conversation history), which a prefix cache can reuse.
    """

    id: int
    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    prefix_id: str | None = None
    prefix_tokens: int = 0

    def __post_init__(self) -> None:
        if not (isinstance(self.arrival_s, (int, float)) and math.isfinite(self.arrival_s)
                and 0 <= self.arrival_s <= MAX_ARRIVAL_S):
            # (1e300 passed and overflowed the queue-growth fit with numpy warnings)
            raise WorkloadError(f"request {self.id}: arrival_s must be a number of seconds in 0..{MAX_ARRIVAL_S:g}, "
                                f"got {self.arrival_s!r}")
        for name in ("prompt_tokens", "output_tokens"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not 1 <= v <= MAX_LENGTH_TOKENS:
                raise WorkloadError(f"request {self.id}: {name} must be a whole number in 1..{MAX_LENGTH_TOKENS:,}, "
                                    f"got {quoted(v)}")
        if not (0 <= self.prefix_tokens <= self.prompt_tokens):
            raise WorkloadError(f"request {self.id}: prefix_tokens must be in 0..prompt_tokens "
                                f"({self.prompt_tokens}), got {self.prefix_tokens}")


@dataclass(frozen=True)
class LengthDist:
    """A distribution of token counts (see the module notes)."""

    kind: str = "fixed"
    value: int = 512                 # fixed
    low: int = 1                     # uniform / clip
    high: int = 1 << 20              # uniform / clip
    mean_log: float = 6.0            # lognormal: mean of log(length)
    sigma_log: float = 0.5           # lognormal: std of log(length)
    values: tuple[int, ...] = ()     # empirical

    def __post_init__(self) -> None:
        if self.kind not in LENGTHS:
            raise WorkloadError(f"length distribution: kind must be one of {', '.join(LENGTHS)}, got {self.kind!r}")
        if self.kind == "fixed" and self.value < 1:
            raise WorkloadError(f"length distribution: value must be >= 1, got {self.value}")
        big = next((v for v in (self.value, self.low, self.high, *self.values) if v > MAX_LENGTH_TOKENS), None)
        if big is not None:
            # 10^20 passed and failed in numpy's int64 (no model has such a context)
            raise WorkloadError(f"length distribution: {big:,} tokens is beyond the {MAX_LENGTH_TOKENS:,} a request "
                                "may have")
        if self.low < 1 or self.high < self.low:
            raise WorkloadError(f"length distribution: need 1 <= low <= high, got low={self.low}, high={self.high}")
        if self.kind == "lognormal" and not (math.isfinite(self.mean_log) and math.isfinite(self.sigma_log)):
            raise WorkloadError(f"length distribution: the lognormal's parameters must be finite, got "
                                f"mean_log={self.mean_log}, sigma_log={self.sigma_log}")
        if self.kind == "lognormal" and not self.sigma_log >= 0:
            raise WorkloadError(f"length distribution: sigma_log must be >= 0, got {self.sigma_log}")
        if self.kind == "empirical" and (not self.values or min(self.values) < 1):
            raise WorkloadError("length distribution: empirical needs at least one value, all >= 1")

    @classmethod
    def from_file(cls, path: str | Path, column: str | None = None) -> "LengthDist":
        """Empirical lengths from a file: one integer per line, or a CSV with ``column``."""
        p = Path(path)
        if not p.exists():
            raise WorkloadError(f"length file {p} does not exist")
        vals: list[int] = []
        try:
            return cls._read_lengths(p, column, vals)
        except csv.Error as exc:  # a cell beyond the csv module's 131,072 characters
            raise WorkloadError(f"{p}:{len(vals) + 2 if column else len(vals) + 1}: not a CSV row ({exc})") from None
        except UnicodeDecodeError:
            raise WorkloadError(f"{p}: not UTF-8 text; save the lengths as UTF-8") from None

    @classmethod
    def _read_lengths(cls, p: Path, column: str | None, vals: list[int]) -> "LengthDist":
        with p.open(encoding="utf-8") as f:
            if column:
                for i, row in enumerate(csv.DictReader(f), start=2):
                    try:
                        vals.append(int(float(row[column])))
                    except (KeyError, TypeError, ValueError, OverflowError):
                        raise WorkloadError(f"{p}:{i}: column {column!r} is missing or not a number") from None
            else:
                for i, line in enumerate(f, start=1):
                    if line.strip():
                        try:
                            vals.append(int(float(line)))
                        except (ValueError, OverflowError):
                            raise WorkloadError(f"{p}:{i}: not a number: {quoted(line.strip())}") from None
        return cls(kind="empirical", values=tuple(vals))

    def sample(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            return np.full(n, self.value, dtype=np.int64)
        if self.kind == "uniform":
            return rng.integers(self.low, self.high + 1, size=n, dtype=np.int64)
        if self.kind == "lognormal":
            # clipped before the cast: a wide sigma draws lengths beyond int64 (or inf), which a cast
            # turns into garbage with a numpy warning (lognormal:100:1000 did); the same integers otherwise
            x = np.clip(rng.lognormal(self.mean_log, self.sigma_log, size=n), self.low, self.high)
            return np.rint(x).astype(np.int64)
        return rng.choice(np.asarray(self.values, dtype=np.int64), size=n, replace=True)

    @property
    def max_value(self) -> int:
        if self.kind == "fixed":
            return self.value
        if self.kind == "empirical":
            return max(self.values)
        return self.high


def arrival_times(kind: str, rate_per_s: float, n: int, rng: np.random.Generator, cv: float = 1.0) -> np.ndarray:
    """``n`` arrival times (seconds, first gap included) of a process with mean ``rate_per_s``."""
    if kind not in ARRIVALS:
        raise WorkloadError(f"arrival: must be one of {', '.join(ARRIVALS)}, got {kind!r}")
    if not (isinstance(rate_per_s, (int, float)) and math.isfinite(rate_per_s) and rate_per_s > 0):
        raise WorkloadError(f"rate: must be a number > 0 requests/s, got {rate_per_s!r}")
    if kind == "gamma" and not 0 < cv <= MAX_CV:
        raise WorkloadError(f"cv: the gamma arrivals' coefficient of variation must be in (0, {MAX_CV:g}], got {cv!r}")
    mean = 1.0 / rate_per_s
    if kind == "poisson":
        gaps = rng.exponential(mean, size=n)
    elif kind == "gamma":
        shape = 1.0 / (cv * cv)            # gamma: CV = 1/sqrt(shape), mean = shape * scale
        gaps = rng.gamma(shape, mean / shape, size=n)
    else:
        gaps = np.full(n, mean)
    return np.cumsum(gaps)


def generate(*, rate_per_s: float, duration_s: float | None = None, num_requests: int | None = None,
             arrival: str = "poisson", cv: float = 1.0, prompt: LengthDist | int = 512,
             output: LengthDist | int = 128, prefix_groups: int = 0, prefix_tokens: int = 0,
             seed: int = 0) -> tuple[Request, ...]:
    """Requests arriving over ``duration_s`` seconds, or exactly ``num_requests`` of them.

    ``prefix_groups`` > 0: each request belongs to one of that many shared-prefix groups
    (uniformly drawn) whose first ``prefix_tokens`` prompt tokens are common.
    """
    if duration_s is None and num_requests is None:
        raise WorkloadError("workload: give duration_s or num_requests")
    if duration_s is not None and not (math.isfinite(duration_s) and duration_s > 0):
        raise WorkloadError(f"duration: must be > 0 seconds, got {duration_s!r}")
    if num_requests is not None and not 1 <= num_requests <= MAX_REQUESTS:
        raise WorkloadError(f"num_requests: must be in 1..{MAX_REQUESTS:,}, got {num_requests!r}")
    if num_requests is None and isinstance(rate_per_s, (int, float)) and rate_per_s * duration_s > MAX_REQUESTS:
        raise WorkloadError(f"rate: {rate_per_s:g} requests/s over {duration_s:g} s is {rate_per_s * duration_s:,.0f} "
                            f"requests; at most {MAX_REQUESTS:,} are simulated (shorten the duration)")
    prompt = prompt if isinstance(prompt, LengthDist) else LengthDist("fixed", value=int(prompt))
    output = output if isinstance(output, LengthDist) else LengthDist("fixed", value=int(output))
    rng = np.random.default_rng(seed)
    if num_requests is None:
        # enough arrivals to cover the duration with overwhelming probability, then cut
        n = int(rate_per_s * duration_s + 10 * math.sqrt(rate_per_s * duration_s * max(1.0, cv * cv)) + 10)
        t = arrival_times(arrival, rate_per_s, n, rng, cv)
        t = t[t < duration_s]
        if not len(t):
            raise WorkloadError(f"rate: no request arrives within {duration_s:g} s at {rate_per_s:g} requests/s; "
                                "raise the rate or the duration")
    else:
        t = arrival_times(arrival, rate_per_s, int(num_requests), rng, cv)
    n = len(t)
    p = prompt.sample(rng, n)
    o = output.sample(rng, n)
    groups = rng.integers(0, prefix_groups, size=n) if prefix_groups > 0 else None
    out = []
    for i in range(n):
        pid = f"p{int(groups[i])}" if groups is not None else None
        pt = min(int(prefix_tokens), int(p[i])) if pid is not None else 0
        out.append(Request(i, float(t[i]), int(p[i]), int(o[i]), pid, pt))
    return tuple(out)


_FIELDS = ("arrival_s", "prompt_tokens", "output_tokens")


def _row_to_request(i: int, row: dict[str, Any], where: str) -> Request:
    for f in _FIELDS:
        if f not in row or row[f] in (None, ""):
            raise WorkloadError(f"{where}: field {f!r} is missing (a trace needs {', '.join(_FIELDS)}; "
                                "optional prefix_id, prefix_tokens)")
    def number(f, v) -> float:
        # JSON true/false are not numbers (float(True) would read as 1 token); NaN and
        # infinities are no time and no token count
        if isinstance(v, bool):
            raise WorkloadError(f"{where}: field {f!r} is not a number: {v!r}")
        try:
            fv = float(v)
        except (TypeError, ValueError):
            raise WorkloadError(f"{where}: field {f!r} is not a number: {quoted(v)}") from None
        except OverflowError:  # a JSON integer of hundreds of digits
            raise WorkloadError(f"{where}: field {f!r} is beyond any time or token count: {quoted(v)}") from None
        if not math.isfinite(fv):
            raise WorkloadError(f"{where}: field {f!r} must be a finite number, got {v!r}")
        return fv

    arr = number("arrival_s", row["arrival_s"])
    vals = {}
    for f in ("prompt_tokens", "output_tokens", "prefix_tokens"):
        v = row.get(f)
        if f == "prefix_tokens" and v in (None, ""):
            vals[f] = None
            continue
        fv = number(f, v)
        if fv != int(fv):
            raise WorkloadError(f"{where}: field {f!r} must be a whole number, got {v!r}")
        vals[f] = int(fv)
    pid = row.get("prefix_id")
    pid = None if pid in (None, "") else str(pid)
    pt = vals["prefix_tokens"]
    if pt is None:
        pt = vals["prompt_tokens"] if pid is not None else 0
    try:
        return Request(i, arr, vals["prompt_tokens"], vals["output_tokens"], pid, pt)
    except WorkloadError as e:
        raise WorkloadError(f"{where}: {e}") from None


def load_trace(path: str | Path) -> tuple[Request, ...]:
    """Replay a trace: CSV with a header or JSONL, fields ``arrival_s``, ``prompt_tokens``,
    ``output_tokens`` and optionally ``prefix_id``, ``prefix_tokens`` (default: the whole
    prompt is the shared prefix when ``prefix_id`` is given).  Sorted by arrival time."""
    p = Path(path)
    if not p.exists():
        raise WorkloadError(f"trace {p} does not exist")
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].split(b"\n")
        raise WorkloadError(f"{p}:{len(line)}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                            f"{len(line[-1]) + 1}); save the trace as UTF-8 CSV or JSONL") from None
    rows: list[tuple[str, dict]] = []
    if p.suffix.lower() in (".jsonl", ".json", ".ndjson"):
        for ln, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as e:
                raise WorkloadError(f"{p}:{ln}: not valid JSON ({e.msg})") from None
            except (ValueError, RecursionError) as e:
                # a number of more than 4,300 digits, objects nested thousands deep
                why = "nested too deeply" if isinstance(e, RecursionError) else "a number too long to read"
                raise WorkloadError(f"{p}:{ln}: not a trace line ({why})") from None
            if not isinstance(obj, dict):
                raise WorkloadError(f"{p}:{ln}: each line must be a JSON object")
            rows.append((f"{p}:{ln}", obj))
    else:
        reader = csv.DictReader(io.StringIO(text, newline=""))
        if reader.fieldnames is None:
            raise WorkloadError(f"{p}: empty trace")
        seen = set()
        for c in reader.fieldnames:
            if c in seen:
                raise WorkloadError(f"{p}:1: column {c!r} appears twice in the header")
            seen.add(c)
        missing = [c for c in _FIELDS if c not in reader.fieldnames]
        if missing:
            raise WorkloadError(f"{p}:1: field {missing[0]!r} is missing from the header "
                                f"(found {', '.join(reader.fieldnames)})")
        try:
            for ln, row in enumerate(reader, start=2):
                rows.append((f"{p}:{ln}", row))
        except csv.Error as e:
            # a field beyond the csv module's 131,072 characters, a NUL byte
            raise WorkloadError(f"{p}:{len(rows) + 2}: not a CSV row ({e})") from None
    if not rows:
        raise WorkloadError(f"{p}: the trace has no requests")
    reqs = [_row_to_request(i, row, where) for i, (where, row) in enumerate(rows)]
    order = sorted(range(len(reqs)), key=lambda i: (reqs[i].arrival_s, i))
    return tuple(Request(k, reqs[i].arrival_s, reqs[i].prompt_tokens, reqs[i].output_tokens, reqs[i].prefix_id,
                         reqs[i].prefix_tokens) for k, i in enumerate(order))


def save_trace(requests, path: str | Path) -> Path:
    """Write requests as a CSV trace that :func:`load_trace` reads back."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with p.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["arrival_s", "prompt_tokens", "output_tokens", "prefix_id", "prefix_tokens"])
        for r in requests:
            w.writerow([repr(float(r.arrival_s)), r.prompt_tokens, r.output_tokens, r.prefix_id or "",
                        r.prefix_tokens if r.prefix_id else ""])
    return p
