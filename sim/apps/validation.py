"""Validation against measured GPU runs: ``sim validate CHIP CASES.csv``.

A case file holds one measured PyTorch call per row (format in
validation/measurements/README.md; parsed by :mod:`sim.apps.validation_cases`):

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

import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from sim.apps.inference import check_fit, default_dtype, run_llm
from sim.apps.iteration import run_trace
from sim.apps.interrupt import sigterm_as_interrupt, stop_pool
from sim.apps.kernel_harness import harness_clock
from sim.apps.validation_cases import Case, read_cases
from sim.errors import SimError, WorkloadError
from sim.ir.ops import Attention, Copy, Gemm, VectorOp
from sim.model.engine.lower import Options
from sim.model.engine.simulate import simulate_ops, threads_limited
from sim.model.stacks import chip_stack, launched, load_stack, lower_trace
from sim.model.workload.llm import (VECTOR_OPS_PER_ELEMENT, Iteration, Parallelism, Precision, Sequence, Trace,
                                    build_iteration)
from sim.model.workload.models import load_model_spec
from sim.spec import catalog
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import get_format
from sim.spec.model_spec import ModelSpec
from sim.spec.registry import load_chip


def _most_common(bounds: list[str]) -> str:
    """The roofline class most of a case's kernels have; a tie goes to the first in
    alphabetical order, so the answer does not depend on the hash seed."""
    return max(sorted(set(bounds)), key=bounds.count) if bounds else ""


def _load_eager_profile():
    return load_stack("eager_pytorch")


#: the library constants of the H200's eager PyTorch stack now live in its profile
#: (stacks/eager_pytorch.yaml, with their sources); these names read them from there.
#: cuSPARSELt 0.8's only sparse bf16 kernel on sm90 (..._tilesize128x256x64_...) and the
#: row multiple it pads inputs to
_EAGER = _load_eager_profile()
CUSPARSELT_TILES = tuple(_EAGER.gemm.sparse_2_4.tiles)
CUSPARSELT_ROW_MULTIPLE = _EAGER.gemm.sparse_2_4.row_multiple


def _gemm_ops(case: Case):
    """The kernels eager PyTorch runs for one GEMM call on the H200 (the eager_pytorch
    stack's GEMM rules): ``[(op, Options), ...]``."""
    return [pair for op, opts in _gemm_call(case) for pair in launched(op, _EAGER, opts)]


def _gemm_call(case: Case):
    """The GEMM one PyTorch call computes; the library path it takes (misaligned strides,
    int8's sm80 kernels, cuSPARSELt's padding and tile) is the chip's stack's to say
    (sim.model.stacks, stacks/eager_pytorch.yaml), as for every GEMM of ``sim run``."""
    m, k, n = case.get("m"), case.get("k"), case.get("n")
    d = case.dtype
    if d in ("bf16", "fp16", "fp32"):
        return [(Gemm("gemm", m, k, n, dtype=d), Options())]
    if d == "fp8":   # torch._scaled_mm: e4m3 inputs, bf16 output
        return [(Gemm("gemm", m, k, n, dtype="fp8_e4m3", out_dtype="bf16"), Options())]
    if d == "int8":  # torch._int_mm: int32 output
        return [(Gemm("gemm", m, k, n, dtype="int8", out_dtype="int32"), Options())]
    # bf16_2:4: F.linear with a cuSPARSELt semi-structured weight
    return [(Gemm("gemm", m, k, n, dtype="bf16", sparsity="2:4"), Options())]


def _attention_ops(case: Case):
    """One ``F.scaled_dot_product_attention`` call; the kernels cuDNN runs for it (the
    decode and prefill paths, the memset before a prefill kernel) come from the stack."""
    op = Attention("sdpa", batch=case.get("batch"), heads=case.get("heads"), kv_heads=case.get("kv_heads"),
                   head_dim=case.get("head_dim"), q_len=case.get("q_len"), kv_len=case.get("kv_len"),
                   causal=bool(case.values["causal"]), dtype="bf16", fused=True)
    return [(op, Options())]


def _layer_ops(case: Case):
    """One decoder layer as the trace builder emits it for ``sim run`` (no RoPE, no LM head,
    no embedding); the stack lowers it to kernels exactly as it lowers a model's layers
    (eager PyTorch: two cache copies, SiLU and the multiply apart, the attention output
    copy; validation/gpu/measure.py's DecoderLayer)."""
    hidden, heads, kvh, hd = case.get("hidden"), case.get("heads"), case.get("kv_heads"), case.get("head_dim")
    try:
        spec = ModelSpec(name="validation_layer", hidden_size=hidden, num_layers=1, num_heads=heads,
                         num_kv_heads=kvh, head_dim=hd, ffn_size=case.get("ffn"), activation="silu_glu",
                         norm="rmsnorm", positional="none", vocab_size=32000, max_context=max(case.get("kv_len"), 1))
    except ValidationError as exc:
        # heads 4 with kv_heads 3 leaked pydantic's message and its URL (exit 3)
        first = exc.errors()[0]
        raise WorkloadError(first["msg"].removeprefix("Value error, ")) from None
    q, kv, b = case.get("q_len"), case.get("kv_len"), case.get("batch")
    if q > kv:
        raise WorkloadError(f"q_len {q} > kv_len {kv}")
    return build_iteration(spec, Iteration(tuple(Sequence(q, kv - q) for _ in range(b)), label="layer"),
                           include_lm_head=False, include_embedding=False)


def _sdpa_ops(op):
    """The kernels eager PyTorch's SDPA (cuDNN) runs for one fused attention op on the H200
    (the eager_pytorch stack's attention rule): ``[(op, Options), ...]``."""
    return launched(op, _EAGER, Options())


def case_kernels(chip: ChipSpec, case: Case) -> list:
    """The kernels a case is priced by: ``[(op, Options), ...]``, through the chip's stack
    (:mod:`sim.model.stacks`) - the lowering ``sim run`` uses for the same ops."""
    stack = chip_stack(chip)
    lowered = _LOWER[case.kind](case)
    if isinstance(lowered, Trace):
        return [(k.op, k.options(Options())) for k in lower_trace(lowered, stack) for _ in range(k.repeat)]
    return [pair for op, opts in lowered for pair in launched(op, stack, opts)]


def _copy_ops(case: Case):
    return [(Copy("copy", case.get("bytes")), Options())]


def _bmm_ops(case: Case):
    """``torch.bmm``: ``batch`` independent GEMMs in one cuBLAS batched kernel."""
    return [(Gemm("bmm", case.get("m"), case.get("k"), case.get("n"), count=case.get("batch"), dtype=case.dtype),
             Options())]


def _vector_bytes(case: Case, elements: int) -> int:
    return get_format(case.dtype).bytes_for(elements)


def _softmax_ops(case: Case):
    """``torch.softmax`` over the last dimension: rows ``m`` of ``n`` values, read and written once."""
    el = case.get("m") * case.get("n")
    b = _vector_bytes(case, el)
    return [(VectorOp("softmax", "softmax", el, VECTOR_OPS_PER_ELEMENT["softmax"], b, b, row_elements=case.get("n")),
             Options())]


def _norm_ops(case: Case):
    """``F.rms_norm`` / ``F.layer_norm`` over rows ``m`` of ``n`` values (the LLM trace builder's
    norm: the tensor read and written once, the weight (and bias) read once)."""
    op = case.attrs["op"]
    m, n = case.get("m"), case.get("n")
    params = n * (2 if op == "layernorm" else 1)
    b = _vector_bytes(case, m * n)
    return [(VectorOp(op, op, m * n, VECTOR_OPS_PER_ELEMENT[op], b + _vector_bytes(case, params), b, row_elements=n),
             Options())]


def _elementwise_ops(case: Case):
    """One elementwise kernel over ``n`` values: ``add`` / ``mul`` read two tensors, the
    activations one; each writes one."""
    op = case.attrs["op"]
    n = case.get("n")
    b = _vector_bytes(case, n)
    reads = 2 if op in ("add", "mul") else 1
    per = {"add": 1.0, "mul": 1.0, "silu": VECTOR_OPS_PER_ELEMENT["silu_mul"] - 1.0,
           "gelu": VECTOR_OPS_PER_ELEMENT["gelu"], "relu": VECTOR_OPS_PER_ELEMENT["relu"]}[op]
    return [(VectorOp(op, op, n, per, reads * b, b), Options())]


_LOWER = {"gemm": _gemm_call, "attention": _attention_ops, "layer": _layer_ops, "copy": _copy_ops,
          "bmm": _bmm_ops, "softmax": _softmax_ops, "norm": _norm_ops, "elementwise": _elementwise_ops}


def model_sequences(case: Case):
    """The iteration of a ``model`` case as :class:`~sim.model.workload.llm.Sequence` objects."""
    b = case.get("batch")
    past = int(case.values.get("context_len", 0))
    phase = case.attrs["phase"]
    if phase == "decode":
        return [Sequence(1, past)] * b
    seqs = [Sequence(case.get("prompt_len"), past)] * b
    if phase == "mixed":
        seqs += [Sequence(1, int(case.values["decode_ctx"]))] * case.get("decode_seqs")
    return seqs


def predict_model(chip: ChipSpec, case: Case, with_ops: bool = False) -> dict[str, Any]:
    """A ``model`` case through the path ``sim run`` takes: prefill and decode steps are
    :func:`sim.apps.inference.run_llm` itself; a mixed iteration is the same steps run_llm takes for
    one iteration (its precision, fit check, :func:`~sim.model.workload.llm.build_iteration` with the
    chip's attention lowering, :func:`~sim.apps.iteration.run_trace`) on the mixed batch.  No
    lowering of its own.  Plus, once, the event-timing overhead of the timed call."""
    nl = case.values.get("num_layers")
    spec = load_model_spec(case.attrs["model"], overrides={"num_layers": int(nl)} if nl else None)
    phase = case.attrs["phase"]
    dtype = case.dtype
    wdt = case.attrs.get("weight_dtype") or dtype
    b = case.get("batch")
    past = int(case.values.get("context_len", 0))
    if phase in ("prefill", "decode"):
        kw = dict(phase=phase, batch=b, context_len=past, dtype=dtype, weight_dtype=wdt)
        if phase == "prefill":
            kw["prompt_len"] = case.get("prompt_len")
        res = run_llm(chip, spec, **kw)
        seconds, ops = (res.ttft_s if phase == "prefill" else res.tpot_s), list(res.ops)
    else:
        if dtype is None:  # pragma: no cover - the parser always sets one
            dtype = default_dtype(chip)
        precision = Precision(dtype=dtype, weight_dtype=wdt)
        seqs = model_sequences(case)
        fit = check_fit(chip, spec, precision, Parallelism(), len(seqs), max(s.kv_len for s in seqs))
        if not fit["fits"]:
            raise WorkloadError(f"{spec.name} does not fit one {chip.name}: {fit['bytes_per_chip'] / 1e9:,.1f} GB "
                                f"of weights and KV cache, {fit['capacity_bytes_per_chip'] / 1e9:,.1f} GB of memory")
        trace = build_iteration(spec, Iteration(tuple(seqs), label="mixed"), precision=precision,
                                attention=chip.attention_lowering)
        res = run_trace(chip, trace, label="mixed", dtype=dtype)
        seconds, ops = res.seconds, res.ops
    overhead = chip.runtime.event_timing_overhead_ns * 1e-9 if chip.runtime is not None else 0.0
    bounds = [o["bound"] for o in ops]
    out = {"predicted_ms": (seconds + overhead) * 1e3, "kernels": int(sum(o["repeat"] for o in ops)),
           "bound": _most_common(bounds)}
    if with_ops:
        out["ops"] = ops
    return out


def predict(chip: ChipSpec, case: Case) -> dict[str, Any]:
    """Predicted milliseconds of one case on ``chip`` and the ops behind it (a kernel case at
    the clock the harness's median repeat ran at: :func:`sim.apps.kernel_harness.harness_clock`)."""
    if case.kind == "model":
        return predict_model(chip, case)
    chip, ops = harness_clock(chip, lambda c: case_kernels(c, case))
    total = 0.0
    kernels = 0
    bounds = []
    for r in simulate_ops(chip, ops):
        total += r.seconds
        kernels += 1 + (1 if "second_kernel" in r.details else 0)
        bounds.append(r.bound)
    overhead = chip.runtime.event_timing_overhead_ns * 1e-9 if chip.runtime is not None else 0.0
    if case.kind == "copy" and chip.runtime is not None:
        # a copy case is one cudaMemcpy: its runtime's tail handling (microbenchmarked)
        overhead += chip.runtime.memcpy_extra_ns(case.get("bytes")) * 1e-9
    pred_ms = (total + overhead) * 1e3
    return {"predicted_ms": pred_ms, "kernels": kernels, "bound": _most_common(bounds)}


def _predict_row(chip: ChipSpec, c: Case) -> dict[str, Any]:
    row = {"line": c.line, "kind": c.kind, "dtype": c.dtype, **c.attrs, **{k: int(v) for k, v in c.values.items()},
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


def _worker_init(chip: ChipSpec) -> None:
    global _WORKER_CHIP
    _WORKER_CHIP = chip


def _worker_predict(c: Case) -> dict[str, Any]:
    with threads_limited(1):  # (the pool keeps every CPU busy already)
        return _predict_row(_WORKER_CHIP, c)


def _json_value(v):
    if isinstance(v, np.integer):
        return int(v)
    if isinstance(v, np.floating):
        return float(v)
    raise TypeError(f"cannot store {type(v).__name__} in a checkpoint")


def _checkpoint_header(chip: ChipSpec, cases_path: Path) -> dict[str, Any]:
    """What a checkpoint's rows were predicted for: the chip as validated (every override
    included) and the case file's bytes."""
    import hashlib
    import json

    chip_text = json.dumps(chip.to_dict(), sort_keys=True, default=str)
    # the simulator itself: rows predicted before a code change are not resumed after it
    # (its code, and the model, stack and dataflow files a case may read)
    code = hashlib.sha256()
    package = Path(__file__).resolve().parents[1]
    files = [f for f in package.rglob("*") if f.suffix in (".py", ".yaml", ".yml", ".csv", ".json")]
    for kind in ("dataflows", "models", "stacks"):
        for folder in catalog.search_dirs(kind):
            files += [f for f in folder.glob("*") if f.suffix in (".yaml", ".yml")]
    for f in sorted(set(files)):
        if f.is_file():
            code.update(f.name.encode())
            code.update(f.read_bytes())
    return {"checkpoint_of": {"chip": chip.name, "chip_sha256": hashlib.sha256(chip_text.encode()).hexdigest(),
                              "cases_sha256": hashlib.sha256(Path(cases_path).read_bytes()).hexdigest(),
                              "simulator_sha256": code.hexdigest()}}


def _read_checkpoint(path: Path, header: dict[str, Any], cases: list[Case]) -> dict[int, dict[str, Any]]:
    """Rows already predicted by an earlier run (JSON lines, one per case, after a header
    line).  A checkpoint of another chip, case file or simulator version is an error, not
    a silent mix; a torn last line (the run was killed mid-write) is ignored."""
    import json

    wanted = {c.line for c in cases}
    done: dict[int, dict[str, Any]] = {}
    if not path.is_file() or path.stat().st_size == 0:
        return done
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError:
        lines = [""]
    try:
        first = json.loads(lines[0])
    except (ValueError, RecursionError, IndexError):
        first = None
    if not isinstance(first, dict) or "checkpoint_of" not in first:
        # a damaged file was reported as one "written for another chip"
        raise WorkloadError(f"{path}:1: not a checkpoint of `sim validate` (its first line is no checkpoint "
                            "header); delete it (or choose another folder) to start afresh")
    if first != header:
        raise WorkloadError(f"{path}: this checkpoint was written for another chip, case file or "
                            "simulator version; delete it (or choose another folder) to start afresh")
    for text in lines[1:]:
        try:
            row = json.loads(text)
        except (ValueError, RecursionError):
            continue
        if isinstance(row, dict) and row.get("line") in wanted:
            done[int(row["line"])] = row
    return done


def validate(chip: ChipSpec | str | Path, cases_path: str | Path, progress: bool = True, jobs: int = 1,
             checkpoint: str | Path | None = None):
    """Predict every case; return a DataFrame with measured, predicted and signed error (%).

    ``jobs`` > 1 spreads the cases over that many processes; every case is predicted the
    same way wherever it runs (the simulator is deterministic), so the table is identical
    to a serial run's except for the ``wall_s`` column.

    ``checkpoint`` names a JSON-lines file that every finished case is appended to as soon
    as it finishes, so a run that is interrupted (Ctrl-C, a job limit, a crash) loses
    nothing; a later call with the same file predicts only the cases it lacks.  Rows come
    back in the case file's order either way."""
    import json

    import pandas as pd

    if isinstance(chip, (str, Path)):
        chip = load_chip(chip)
    cases = read_cases(cases_path)
    done: dict[int, dict[str, Any]] = {}
    sink = None
    if checkpoint is not None:
        checkpoint = Path(checkpoint)
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        header = _checkpoint_header(chip, Path(cases_path))
        done = _read_checkpoint(checkpoint, header, cases)
        fresh = not checkpoint.is_file() or checkpoint.stat().st_size == 0
        sink = checkpoint.open("a")
        if not fresh and not checkpoint.read_bytes().endswith(b"\n"):
            sink.write("\n")  # end a torn line so the next row starts on its own
        if fresh:
            sink.write(json.dumps(header) + "\n")
            sink.flush()
    todo = [c for c in cases if c.line not in done]
    bar = None
    if progress:
        from tqdm import tqdm

        # on a terminal a live bar; in a log (CI, nohup) a line every 10 s, so a long run is never silent
        bar = tqdm(total=len(cases), initial=len(cases) - len(todo), desc="validate", unit="case",
                   file=sys.stderr, mininterval=0.5 if sys.stderr.isatty() else 10.0)

    def finished(row: dict[str, Any]) -> None:
        done[int(row["line"])] = row
        if sink is not None:
            # one line per case, flushed: a kill between cases leaves only whole lines
            sink.write(json.dumps(row, default=_json_value) + "\n")
            sink.flush()
        if bar is not None:
            bar.update()

    try:
        jobs = max(1, min(int(jobs), len(todo)))
        # SIGTERM (`timeout`, a scheduler) ends the run as Ctrl-C does: every finished case is
        # already in the checkpoint, and no worker outlives the run
        with sigterm_as_interrupt():
            if jobs == 1:
                for c in todo:
                    finished(_predict_row(chip, c))
            else:
                _predict_on_pool(chip, todo, jobs, finished)
    finally:
        if sink is not None:
            sink.close()
        if bar is not None:
            bar.close()
    return pd.DataFrame([done[c.line] for c in cases])


def _predict_on_pool(chip: ChipSpec, todo: list, jobs: int, finished) -> None:
    import multiprocessing as mp
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # spawn: a fresh interpreter per worker (no forked locks or compiled-code state)
    pool = ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_worker_init,
                               initargs=(chip,))
    try:
        futures = [pool.submit(_worker_predict, c) for c in todo]
        for fut in as_completed(futures):
            finished(fut.result())
    except BaseException:
        stop_pool(pool)  # cases in flight are lost either way; their workers must not run on
        raise
    pool.shutdown()


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
    mod = df[df["kind"] == "model"]
    if not mod.empty:
        out["by_model"] = {d: stats(g) for d, g in mod.groupby("model")}
        out["by_model_phase"] = {d: stats(g) for d, g in mod.groupby("phase")}
        out["by_model_weight_dtype"] = {d: stats(g) for d, g in mod.groupby("weight_dtype")}
    return out


# ----------------------------------------------------------------------------- CLI
