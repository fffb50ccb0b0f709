"""Validation against measured GPU runs: ``sim validate CHIP CASES.csv``.

A case file holds one measured PyTorch call per row (format in
validation/measurements/README.md):

    kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,hidden,ffn,bytes,measured_ms

Each case is lowered to the ops PyTorch runs for it - the same op types every workload
uses - and simulated on the chip.  The software stack is described, not fitted: which
instruction path a library uses (``torch._int_mm`` runs sm80-class mma.sync kernels),
which kernel menu it has (cuSPARSELt 0.8 runs one 128x256x64 sparse kernel and pads the
input to a multiple of 8 rows first), how many kernels a call launches.  A timed call
costs the chip's per-kernel launch overhead for every kernel plus, once, the event-timing
overhead (both microbenchmarked, see the chip file).
"""
from __future__ import annotations

import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .errors import SimError, WorkloadError

COLUMNS = ("kind", "dtype", "m", "k", "n", "batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "causal",
           "hidden", "ffn", "bytes", "measured_ms")
KINDS = ("gemm", "attention", "layer", "copy")
GEMM_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8", "bf16_2:4")
_NEEDED = {
    "gemm": ("dtype", "m", "k", "n"),
    "attention": ("batch", "heads", "kv_heads", "head_dim", "q_len", "kv_len", "causal"),
    "layer": ("hidden", "heads", "kv_heads", "head_dim", "ffn", "batch", "q_len", "kv_len"),
    "copy": ("bytes",),
}
#: cuSPARSELt 0.8's only sparse bf16 kernel on sm90 (kernel names recorded in
#: validation/measurements/h200_case_stats.csv: ..._tilesize128x256x64_...): 256 rows of
#: x by 128 rows of W per tile, k tile 64; inputs padded to a multiple of 8 rows.  Its
#: "segment_k" variant runs in some cases (no cublasLt-style reduction kernel follows it);
#: the model does not split k for it
CUSPARSELT_TILES = (256, 128, 64)
CUSPARSELT_ROW_MULTIPLE = 8
#: 16-bit elements per 16 bytes: the row-stride alignment Hopper's TMA requires
#: (cuTensorMapEncodeTiled: globalStrides multiple of 16 bytes)
TMA_ALIGN_ELEMENTS = 8


@dataclass(frozen=True)
class Case:
    line: int
    kind: str
    dtype: str
    values: dict
    measured_ms: float | None

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
    rows = list(csv.reader(text.splitlines()))
    if not rows:
        raise WorkloadError(f"{path}: empty case file")
    header = [h.strip() for h in rows[0]]
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
        values: dict[str, float] = {}
        bad = False
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
            cases.append(Case(ln, kind, dtype, values, measured))
    if problems:
        shown = problems[:50]
        more = f"\n  ... and {len(problems) - 50} more" if len(problems) > 50 else ""
        raise WorkloadError(f"{path}: {len(problems)} bad row(s):\n  " + "\n  ".join(shown) + more)
    if not cases:
        raise WorkloadError(f"{path}: no cases after the header row")
    return cases


# ----------------------------------------------------------------------------- lowering


def _gemm_ops(case: Case):
    """The ops (and options) PyTorch runs for one GEMM call."""
    from .engine.lower import Options
    from .workload.ops import Copy, Gemm, VectorOp

    m, k, n = case.get("m"), case.get("k"), case.get("n")
    d = case.dtype
    if d in ("bf16", "fp16"):
        if k % TMA_ALIGN_ELEMENTS or n % TMA_ALIGN_ELEMENTS:
            # Hopper's TMA needs 16-byte aligned row strides; cuBLAS then runs mma.sync
            # kernels with element-aligned loads: *_align2 CUTLASS sm80 kernels for even
            # strides, *_align1 sm75 kernels for odd ones (kernel names in
            # validation/measurements/h200_case_stats.csv and h200_micro_misaligned_stats.csv)
            path = "tensor_cores_align1" if (k % 2 or n % 2) else "tensor_cores_align2"
            return [(Gemm("gemm", m, k, n, dtype=d), Options(array=path))]
        return [(Gemm("gemm", m, k, n, dtype=d), Options())]
    if d == "fp32":
        return [(Gemm("gemm", m, k, n, dtype="fp32"), Options())]
    if d == "fp8":   # torch._scaled_mm: e4m3 inputs, bf16 output
        return [(Gemm("gemm", m, k, n, dtype="fp8_e4m3", out_dtype="bf16"), Options())]
    if d == "int8":  # torch._int_mm runs sm80-class CUTLASS kernels (mma.sync path)
        return [(Gemm("gemm", m, k, n, dtype="int8", out_dtype="int32"), Options(array="tensor_cores_sm80"))]
    # bf16_2:4: F.linear with a cuSPARSELt semi-structured weight
    ops = []
    m_pad = -(-m // CUSPARSELT_ROW_MULTIPLE) * CUSPARSELT_ROW_MULTIPLE
    if m_pad != m:  # PyTorch pads the input: a fill of the padded buffer and a copy into it
        ops.append((VectorOp("pad_fill", "fill", m_pad * k, 0.0, 0, m_pad * k * 2), Options()))
        ops.append((Copy("pad_copy", m * k * 2), Options()))
    ops.append((Gemm("gemm", m_pad, k, n, dtype="bf16", sparsity="2:4"), Options(tiles=CUSPARSELT_TILES, split_k=(1,))))
    return ops


def _sdpa_ops(op):
    """The kernels cuDNN's SDPA runs for one fused attention op on sm90 (kernel names in
    validation/measurements/h200_case_stats.csv): a single query row (decode) runs an
    Ampere-style mma.sync flash kernel; longer queries run a memset and then the wgmma
    flash kernel.  What the memset clears is not documented; it is costed as a fill of one
    fp32 softmax statistic per query row (an assumption: it is a launch either way)."""
    from .engine.lower import Options
    from .workload.ops import VectorOp

    if op.q_len == 1:
        return [(op, Options(array="tensor_cores_sm80"))]
    rows = op.batch * op.heads * op.q_len
    return [(VectorOp("sdpa_memset", "fill", rows, 0.0, 0, rows * 4), Options()), (op, Options())]


def _attention_ops(case: Case):
    from .workload.ops import Attention

    op = Attention("sdpa", batch=case.get("batch"), heads=case.get("heads"), kv_heads=case.get("kv_heads"),
                   head_dim=case.get("head_dim"), q_len=case.get("q_len"), kv_len=case.get("kv_len"),
                   causal=bool(case.values["causal"]), dtype="bf16", fused=True)
    return _sdpa_ops(op)


def _layer_ops(case: Case):
    """One decoder layer as the trace builder emits it (no RoPE, no LM head, no embedding)."""
    from .config.model_spec import ModelSpec
    from .engine.lower import Options
    from .workload.llm import Iteration, Sequence, build_iteration

    hidden, heads, kvh, hd = case.get("hidden"), case.get("heads"), case.get("kv_heads"), case.get("head_dim")
    spec = ModelSpec(name="validation_layer", hidden_size=hidden, num_layers=1, num_heads=heads, num_kv_heads=kvh,
                     head_dim=hd, ffn_size=case.get("ffn"), activation="silu_glu", norm="rmsnorm",
                     positional="none", vocab_size=32000, max_context=max(case.get("kv_len"), 1))
    q, kv, b = case.get("q_len"), case.get("kv_len"), case.get("batch")
    if q > kv:
        raise WorkloadError(f"line {case.line}: q_len {q} > kv_len {kv}")
    trace = build_iteration(spec, Iteration(tuple(Sequence(q, kv - q) for _ in range(b)), label="layer"),
                            include_lm_head=False, include_embedding=False)
    out = []
    for t in trace:
        out.extend(_eager_kernels(t.op, q) * t.repeat)
    return out


def _eager_kernels(op, q_len: int):
    """The kernels eager PyTorch runs for one trace op of the reference layer
    (validation/gpu/measure.py DecoderLayer; kernel names in h200_case_stats.csv): the K
    and V cache writes are two copies, SiLU and the multiply by ``up`` two elementwise
    kernels, and for q_len > 1 the attention output is made contiguous by a copy before
    the output projection (for one query row the transpose is a view)."""
    from .engine.lower import Options
    from .workload.ops import Copy, VectorOp

    if op.kind == "attention":
        ops = _sdpa_ops(op)
        if q_len > 1:
            ops.append((Copy(f"{op.name}.transpose", op.batch * op.q_len * op.heads * op.head_dim * 2), Options()))
        return ops
    if isinstance(op, VectorOp) and op.op == "kv_append":
        half = VectorOp(f"{op.name}.half", op.op, op.elements // 2, op.ops_per_element, op.read_bytes // 2,
                        op.write_bytes // 2)
        return [(half, Options()), (half, Options())]
    if isinstance(op, VectorOp) and op.op == "silu_mul":
        n = op.elements
        per = op.write_bytes // n if n else 2
        silu = VectorOp(f"{op.name}.silu", "silu_mul", n, 4.0, n * per, n * per)
        mul = VectorOp(f"{op.name}.mul", "add", n, 1.0, 2 * n * per, n * per)
        return [(silu, Options()), (mul, Options())]
    return [(op, Options())]


def _copy_ops(case: Case):
    from .engine.lower import Options
    from .workload.ops import Copy

    return [(Copy("copy", case.get("bytes")), Options())]


_LOWER = {"gemm": _gemm_ops, "attention": _attention_ops, "layer": _layer_ops, "copy": _copy_ops}


def predict(chip, case: Case) -> dict[str, Any]:
    """Predicted milliseconds of one case on ``chip`` and the ops behind it."""
    from .engine.run import simulate_op

    ops = _LOWER[case.kind](case)
    total = 0.0
    kernels = 0
    bounds = []
    for op, opts in ops:
        r = simulate_op(chip, op, opts)
        total += r.seconds
        kernels += 1 + (1 if "second_kernel" in r.details else 0)
        bounds.append(r.bound)
    overhead = chip.runtime.event_timing_overhead_ns * 1e-9 if chip.runtime is not None else 0.0
    if case.kind == "copy" and chip.runtime is not None:
        # a copy case is one cudaMemcpy: its runtime's tail handling (microbenchmarked)
        overhead += chip.runtime.memcpy_extra_ns(case.get("bytes")) * 1e-9
    pred_ms = (total + overhead) * 1e3
    return {"predicted_ms": pred_ms, "kernels": kernels, "bound": max(set(bounds), key=bounds.count) if bounds else ""}


def _predict_row(chip, c: Case) -> dict[str, Any]:
    row = {"line": c.line, "kind": c.kind, "dtype": c.dtype, **{k: int(v) for k, v in c.values.items()},
           "measured_ms": c.measured_ms}
    t0 = time.perf_counter()
    try:
        row.update(predict(chip, c))
        row["error"] = ""
    except SimError as exc:
        row.update({"predicted_ms": float("nan"), "kernels": 0, "bound": "", "error": str(exc)})
    row["wall_s"] = time.perf_counter() - t0
    if c.measured_ms and row["predicted_ms"] == row["predicted_ms"]:
        row["error_pct"] = 100.0 * (row["predicted_ms"] - c.measured_ms) / c.measured_ms
    else:
        row["error_pct"] = float("nan")
    return row


_WORKER_CHIP = None


def _worker_init(chip) -> None:
    global _WORKER_CHIP
    _WORKER_CHIP = chip


def _worker_predict(c: Case) -> dict[str, Any]:
    return _predict_row(_WORKER_CHIP, c)


def validate(chip, cases_path: str | Path, progress: bool = True, jobs: int = 1):
    """Predict every case; return a DataFrame with measured, predicted and signed error (%).

    ``jobs`` > 1 spreads the cases over that many processes; every case is predicted the
    same way wherever it runs (the simulator is deterministic), so the table is identical
    to a serial run's except for the ``wall_s`` column."""
    import pandas as pd

    from .config.registry import load_chip

    if isinstance(chip, (str, Path)):
        chip = load_chip(chip)
    cases = read_cases(cases_path)
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=len(cases), desc="validate", unit="case", file=sys.stderr)
    rows: list[dict[str, Any]] = []
    jobs = max(1, min(int(jobs), len(cases)))
    if jobs == 1:
        for c in cases:
            rows.append(_predict_row(chip, c))
            if bar is not None:
                bar.update()
    else:
        import multiprocessing as mp
        from concurrent.futures import ProcessPoolExecutor

        # spawn: a fresh interpreter per worker (no forked locks or compiled-code state)
        with ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_worker_init,
                                 initargs=(chip,)) as pool:
            for row in pool.map(_worker_predict, cases, chunksize=1):
                rows.append(row)
                if bar is not None:
                    bar.update()
    if bar is not None:
        bar.close()
    return pd.DataFrame(rows)


def summarize(df) -> dict[str, Any]:
    """Median / p90 / max absolute error (%) overall and per kind (and per gemm dtype)."""
    def stats(sub) -> dict[str, Any]:
        e = sub["error_pct"].dropna().abs()
        if e.empty:
            return {"cases": int(len(sub)), "median_abs_error_pct": None, "p90_abs_error_pct": None,
                    "max_abs_error_pct": None, "mean_signed_error_pct": None}
        return {"cases": int(len(sub)), "median_abs_error_pct": float(e.median()),
                "p90_abs_error_pct": float(np.percentile(e, 90)), "max_abs_error_pct": float(e.max()),
                "mean_signed_error_pct": float(sub["error_pct"].dropna().mean())}

    out = {**stats(df), "failed": int((df["error"] != "").sum())}
    out["by_kind"] = {k: stats(g) for k, g in df.groupby("kind")}
    gem = df[df["kind"] == "gemm"]
    if not gem.empty:
        out["by_gemm_dtype"] = {d: stats(g) for d, g in gem.groupby("dtype")}
    return out


def scatter_plot(df, path: str | Path, title: str) -> Path:
    from .plotting import _plt

    plt = _plt()
    colors = {"gemm": "#1f77b4", "attention": "#d62728", "layer": "#2ca02c", "copy": "#9467bd"}
    fig, ax = plt.subplots(figsize=(7, 6.5), dpi=120)
    ok = df.dropna(subset=["predicted_ms", "measured_ms"])
    for kind, g in ok.groupby("kind"):
        e = g["error_pct"].abs()
        ax.scatter(g["measured_ms"], g["predicted_ms"], s=16, alpha=0.75, color=colors.get(kind, "0.4"),
                   label=f"{kind} (n={len(g)}, median |err| {e.median():.1f}%)")
    if not ok.empty:
        lo = min(ok["measured_ms"].min(), ok["predicted_ms"].min()) / 1.5
        hi = max(ok["measured_ms"].max(), ok["predicted_ms"].max()) * 1.5
        x = np.array([lo, hi])
        ax.plot(x, x, color="k", lw=1)
        ax.fill_between(x, x / 1.25, x * 1.25, color="0.85", alpha=0.5, label="±25%")
        ax.fill_between(x, x / 1.1, x * 1.1, color="0.7", alpha=0.5, label="±10%")
        ax.set_xlim(lo, hi)
        ax.set_ylim(lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("measured (ms)")
    ax.set_ylabel("predicted (ms)")
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.25)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- CLI


def add_validate_parser(sub, func) -> None:
    v = sub.add_parser("validate", help="predict measured cases (CSV) and report the error")
    v.add_argument("chip", help="chip YAML path or name (e.g. h200_sxm)")
    v.add_argument("cases", help="case CSV: kind,dtype,m,k,n,batch,heads,kv_heads,head_dim,q_len,kv_len,causal,"
                                 "hidden,ffn,bytes,measured_ms")
    v.add_argument("--set", action="append", metavar="DOTTED.KEY=VALUE", help="override a chip value")
    v.add_argument("--out", default=None, help="folder for predictions.csv, summary.json and scatter.png")
    v.add_argument("--json", action="store_true", help="the last line printed is one JSON summary object")
    v.add_argument("-j", "--jobs", type=int, default=None,
                   help="processes to predict with (default: the machine's cores, at most 8)")
    v.set_defaults(func=func)


def cmd_validate(args) -> int:
    import pandas as pd

    from .config.registry import load_chip

    chip = load_chip(args.chip, overrides=args.set or [])
    jobs = args.jobs if args.jobs is not None else min(8, os.cpu_count() or 1)
    if jobs < 1:
        raise WorkloadError(f"--jobs must be at least 1 (got {jobs})")
    df = validate(chip, args.cases, progress=sys.stderr.isatty(), jobs=jobs)
    summary = summarize(df)
    summary["chip"] = chip.name
    summary["cases_file"] = str(args.cases)
    if args.out:
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        df.to_csv(out / "predictions.csv", index=False)
        (out / "summary.json").write_text(json.dumps(summary, indent=2))
        scatter_plot(df, out / "scatter.png", f"{chip.name}: predicted vs measured ({Path(args.cases).name})")
    cols = ["line", "kind", "dtype", "measured_ms", "predicted_ms", "error_pct", "bound"]
    with pd.option_context("display.max_rows", 100000, "display.width", 200, "display.float_format",
                           lambda v: f"{v:,.4g}"):
        if not args.json:
            print(df[cols].to_string(index=False))
        table = [{"kind": k, **v} for k, v in summary["by_kind"].items()]
        table.append({"kind": "all", **{k: summary[k] for k in ("cases", "median_abs_error_pct",
                                                                 "p90_abs_error_pct", "max_abs_error_pct",
                                                                 "mean_signed_error_pct")}})
        print(pd.DataFrame(table).to_string(index=False), file=sys.stderr if args.json else sys.stdout)
    if summary["failed"]:
        print(f"{summary['failed']} case(s) could not be predicted (see the error column)", file=sys.stderr)
    if args.json:
        print(json.dumps(summary))
    return 0
