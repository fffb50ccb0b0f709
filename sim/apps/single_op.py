"""The public Python API: a few functions over the modules that do the work.

>>> import sim
>>> chip = sim.load_chip("npu_128x128", overrides=["clock_mhz=1400"])
>>> r = sim.simulate_gemm(chip, m=2048, k=4096, n=4096, dtype="bf16")
>>> r.cycles, r.utilization, r.dram_read_bytes
"""
from __future__ import annotations

import dataclasses
import os
from typing import Any, Iterable

from sim.apps.inference import default_dtype
from sim.errors import MappingError, ShapeError, SimError, WorkloadError
from sim.ir.ops import Attention, Conv2d, Copy, Gemm, VectorOp
from sim.ir.results import OpResult, results_dataframe
from sim.model.engine.lower import Options
from sim.model.engine.run import clear_cache
from sim.model.engine.assemble import merge_results
from sim.model.engine.simulate import simulate_ops
from sim.model.stacks import chip_stack, launched
from sim.spec.stack_catalog import DEFAULT_STACK
from sim.spec.chip import ChipSpec
from sim.spec.dtypes import RATE_CLASSES
from sim.spec.loader import parse_yaml_text, read_text_checked, validate
from sim.spec.model_spec import ModelSpec
from sim.spec.registry import as_chip, load_chip
from sim.spec.registry import load_chip as _lc


def _chip(chip: ChipSpec | str | os.PathLike[str], overrides=None):
    if isinstance(chip, str) or hasattr(chip, "__fspath__"):
        return load_chip(chip, overrides=overrides)
    chip = as_chip(chip)   # a ChipSpec, else the error saying what a chip may be
    if overrides:
        src = getattr(chip, "source_path", None)
        if src is None:
            raise ShapeError("overrides need a chip loaded from a file (pass a name or path)")
        return _lc(src, overrides=list(chip.overrides or ()) + list(overrides))
    return chip


#: limits of one simulated op: beyond them the engine would run for hours or exhaust memory
#: (the biggest LLM ops of the shipped models are ~10^14 MACs, tests run 1.7e16; GPUs have ~150 cores)
MAX_OP_MACS = 10 ** 17
MAX_CORES = 16_384


def check_limits(chip: ChipSpec, op=None) -> None:
    """Refuse, with a clear :class:`~sim.errors.ShapeError`, a chip with more than
    :data:`MAX_CORES` cores or an op of more than :data:`MAX_OP_MACS` multiply-accumulates."""
    cores = chip.cores.count
    if cores > MAX_CORES:
        src = getattr(chip, "source_path", None)
        where = f"{src}: " if src else ""
        raise ShapeError(f"{where}cores.count: {cores:,} cores is above the simulator's limit of {MAX_CORES:,} "
                         "(every core is simulated)")
    macs = getattr(op, "macs", 0) if op is not None else 0
    if isinstance(macs, int) and macs > MAX_OP_MACS:
        raise ShapeError(f"op '{getattr(op, 'name', '?')}': {macs:.3g} multiply-accumulates is above the limit of "
                         f"{MAX_OP_MACS:.0e} for one op")


def simulate(chip: ChipSpec | str, op, *, dataflow: str | None = None, memory: str = "modeled",
             array: str | None = None,
             row_length: int | None = None, overrides: Iterable[str] | None = None,
             fidelity: str = "high", stack: str | None = None) -> OpResult:
    """Simulate one op (Gemm, Conv2d, Attention, VectorOp, Copy, Collective) on a chip
    (a ChipSpec, a name from arch_configs/ or a path), as the chip's software stack launches
    it called on its own (``stack``: a profile name or path; default the chip's
    ``software_stack``, else ``ideal``, the op as one kernel): the same kernels ``sim run``
    and ``sim validate`` price for it, e.g. on ``h200_sxm`` (eager PyTorch) an int8 GEMM on
    the sm80 path ``torch._int_mm`` takes, a bf16 GEMM whose row strides break 16-byte
    alignment on cuBLAS's align2/align1 kernels, a 2:4 GEMM with cuSPARSELt's padding
    kernels.  An ``array`` given here wins over the stack's.  ``fidelity="fast"`` samples
    large problems more briefly (for big sweeps)."""
    chip = _chip(chip, overrides)
    check_limits(chip, op)
    options = Options(dataflow=dataflow, memory=memory, array=array, row_length=row_length, fidelity=fidelity)
    return _as_launched(chip, op, options, stack)


def _as_launched(chip: ChipSpec, op, options: Options, stack) -> OpResult:
    """``op`` priced by the kernels ``stack`` launches for it (:func:`sim.model.stacks.kernels`):
    one kernel's result, or the op's own kernel's result with the others' time and work
    added (``details["stack_kernels"]`` lists them all, in launch order)."""
    pairs = launched(op, chip_stack(chip, stack), options)
    results = simulate_ops(chip, pairs)
    if len(results) == 1:
        return results[0]
    main = next((i for i, (kop, _) in enumerate(pairs) if type(kop) is type(op)), 0)
    out = results[main]
    for i, r in enumerate(results):
        if i != main:
            out = merge_results(out, r)
    return dataclasses.replace(out, details=dict(out.details, stack_kernels=[
        {"name": r.name, "kind": r.kind, "seconds": r.seconds} for r in results]))


def simulate_gemm(chip: ChipSpec | str, m: int, k: int, n: int, *, count: int = 1, dtype: str | None = None,
                  weight_dtype: str | None = None, sparsity: str | None = None, dataflow: str | None = None,
                  memory: str = "modeled", array: str | None = None, row_length: int | None = None,
                  overrides: Iterable[str] | None = None, name: str = "gemm", fidelity: str = "high",
                  stack: str | None = None) -> OpResult:
    """C[m×n] = A[m×k]·B[k×n] on ``chip``, as its software stack launches it (``stack``, see
    :func:`simulate`).  ``dtype`` defaults, as in :func:`sim.run_llm`, to the first of bf16,
    fp16, fp8, int8, fp32 that the chip computes (:func:`sim.apps.inference.default_dtype`)."""
    if dtype is None:
        chip = _chip(chip, overrides)
        overrides = None
        dtype = default_dtype(chip)
    op = Gemm(name, m=m, k=k, n=n, count=count, dtype=dtype, weight_dtype=weight_dtype, sparsity=sparsity)
    return simulate(chip, op, dataflow=dataflow, memory=memory, array=array, row_length=row_length,
                    overrides=overrides, fidelity=fidelity, stack=stack)


# --------------------------------------------------------------------------- a chip's summary


def chip_summary(chip: ChipSpec | str) -> dict:
    """A chip's headline numbers as plain data (what ``sim show CHIP`` prints): clock,
    cores, arrays, its software stack and kernel library (``inline`` for a chip file's own
    ``mapping:``), every memory level (capacity, bandwidth), and per number-format rate
    class the peak FLOP/s (dense and 2:4), the class it really runs as, and the ridge point
    (FLOP per DRAM byte where compute time equals DRAM time)."""
    chip = _chip(chip)
    clock = chip.clock_hz
    arrays = [{"name": a.name, "rows": a.rows, "cols": a.cols, "count": a.count,
               "macs_per_pe_per_cycle": dict(a.macs_per_pe_per_cycle), "dataflows": list(a.dataflows),
               "default_dataflow": a.default_dataflow, "sparsity_2_4": bool(a.sparsity_2_4),
               "same_units_as": a.same_units_as,
               # the two schedule defaults a study can hinge on, as the engine will use them
               # (fold overlap for the default dataflow and the array's first format)
               "fold_overlap": a.overlaps_folds(a.default_dataflow, next(iter(a.macs_per_pe_per_cycle))),
               "fold_overlap_derived": a.fold_overlap is None,
               "pads_edge_folds": bool(a.pads_edge_folds)} for a in chip.cores.arrays]
    library = chip.kernel_library or ("inline" if chip.mapping is not None else None)
    mems = []
    for lv in chip.memory.levels:
        row = {"level": lv.name, "kind": lv.kind}
        if lv.kind == "registers":
            row.update(scope="pe", capacity_bytes=lv.bytes_per_pe, bandwidth_bytes_per_s=None)
        elif lv.kind == "sram":
            per = chip.cores.count if lv.scope == "core" else 1
            row.update(scope=lv.scope, capacity_bytes=lv.capacity_bytes,
                       bandwidth_bytes_per_s=lv.bytes_per_core_cycle(chip.clock_mhz) * clock * per)
            row["note"] = "per core; bandwidth of all cores" if lv.scope == "core" else "shared"
        else:
            row.update(scope="chip", capacity_bytes=lv.capacity_bytes, bandwidth_bytes_per_s=lv.peak_bytes_per_s)
            row["note"] = f"{lv.technology}, {lv.channels} channels x {lv.pseudo_channels_per_channel} pseudo"
        mems.append(row)
    bw = chip.dram_peak_bytes_per_s
    peaks = []
    for rc in RATE_CLASSES:
        try:
            flops = chip.peak_flops(rc)
        except SimError:
            continue
        runs_as = sorted({a.rate_for(rc)[1] for a in chip.cores.arrays if _can(a, rc)})
        row = {"format": rc, "peak_tflops": flops / 1e12, "ridge_flop_per_byte": flops / bw,
               "runs_as": ", ".join(runs_as)}
        if any(a.sparsity_2_4 for a in chip.cores.arrays):
            row["sparse_2_4_tflops"] = chip.peak_flops(rc, sparse=True) / 1e12
        peaks.append(row)
    vu = chip.cores.vector_unit
    return {"name": chip.name, "description": chip.description, "clock_mhz": chip.clock_mhz,
            "cores": chip.cores.count, "arrays": arrays, "vector_ops_per_cycle_per_core": vu.ops_per_cycle,
            "memories": mems, "dram_peak_bytes_per_s": bw, "peaks": peaks,
            "software_stack": chip.software_stack or DEFAULT_STACK, "kernel_library": library}


def _can(array, rc: str) -> bool:
    try:
        array.rate_for(rc)
        return True
    except SimError:
        return False


# --------------------------------------------------------------------------- Hugging Face configs

#: Hugging Face config.json keys -> the model YAML's keys (first present wins)
HF_KEYS: dict[str, tuple[str, ...]] = {
    "hidden_size": ("hidden_size", "n_embd", "d_model"),
    "num_layers": ("num_hidden_layers", "n_layer", "num_layers"),
    "num_heads": ("num_attention_heads", "n_head", "num_heads"),
    "num_kv_heads": ("num_key_value_heads", "n_head_kv", "num_kv_heads", "multi_query_group_num"),
    "head_dim": ("head_dim",),
    "ffn_size": ("intermediate_size", "n_inner", "ffn_dim", "ffn_hidden_size"),
    "vocab_size": ("vocab_size", "padded_vocab_size"),
    "max_context": ("max_position_embeddings", "n_positions", "seq_length", "max_seq_len", "max_sequence_length"),
    "num_experts": ("num_local_experts", "num_experts", "n_routed_experts"),
    "experts_per_token": ("num_experts_per_tok", "moe_top_k"),
}
_GATED = ("llama", "mistral", "mixtral", "qwen", "gemma", "phi3", "yi", "deepseek", "internlm", "baichuan", "olmo",
          "cohere", "granite", "starcoder2_no", "exaone", "smollm")


def _read_json_config(path) -> dict:
    import json as _json
    from pathlib import Path


    path = Path(path)
    text = read_text_checked(path)
    try:
        data = _json.loads(text)
    except ValueError as exc:
        raise WorkloadError(f"{path}: not valid JSON ({exc})") from None
    except RecursionError:  # was "the input is nested too deeply to process", no file named
        raise WorkloadError(f"{path}: not a Hugging Face config.json (objects nested too deeply)") from None
    if not isinstance(data, dict):
        raise WorkloadError(f"{path}: expected a JSON object (a Hugging Face config.json), got {type(data).__name__}")
    return data


def import_hf_config(path, *, name: str | None = None, source: str | None = None):
    """A Hugging Face ``config.json`` -> ``(YAML text, ModelSpec)`` for ``workloads/``.

    Maps the usual key names of decoder-only transformers (Llama, Mistral, Mixtral, Qwen2,
    Gemma, Falcon, GPT-2, GPT-NeoX...), records ``source`` (default: the file's path) and
    lists the keys read in a comment.  Raises :class:`~sim.errors.WorkloadError` naming the
    file and the key when a required value is missing or invalid.
    """
    import math
    from pathlib import Path

    import yaml


    path = Path(path)
    cfg = _read_json_config(path)
    if isinstance(cfg.get("text_config"), dict):  # multimodal wrappers: the language model's config
        cfg = {**cfg, **cfg["text_config"]}
    model_type = str(cfg.get("model_type", "")).lower()
    used: dict[str, Any] = {}

    def get(key: str):
        for k in HF_KEYS[key]:
            if cfg.get(k) is not None:
                used[k] = cfg[k]
                return cfg[k]
        return None

    out: dict[str, Any] = {"schema_version": 1}
    out["name"] = name or (path.parent.name if path.name == "config.json" and path.parent.name else path.stem)
    arch = ", ".join(cfg.get("architectures") or []) or model_type or "unknown architecture"
    out["description"] = f"imported from a Hugging Face config ({arch})"
    out["source"] = source or str(path)
    missing = []
    for key in ("hidden_size", "num_layers", "num_heads", "vocab_size", "max_context"):
        v = get(key)
        if v is None:
            missing.append(f"{key} (Hugging Face: {' or '.join(HF_KEYS[key])})")
        out[key] = v
    if missing:
        raise WorkloadError(f"{path}: cannot import: no value for " + "; ".join(missing))
    kv = get("num_kv_heads")
    if kv is None and cfg.get("multi_query"):
        kv = 1
        used["multi_query"] = True
    if kv is not None:
        out["num_kv_heads"] = kv
    hd = get("head_dim")
    if hd is not None:
        out["head_dim"] = hd
    ffn = get("ffn_size")
    if ffn is None and isinstance(out["hidden_size"], (int, float)):
        ffn = 4 * out["hidden_size"]  # GPT-2 / Falcon / NeoX: 4 x hidden when not given
    out["ffn_size"] = ffn
    act = str(cfg.get("hidden_act") or cfg.get("hidden_activation") or cfg.get("activation_function") or "gelu")
    for k in ("hidden_act", "hidden_activation", "activation_function"):
        if k in cfg:
            used[k] = cfg[k]
            break
    if not any(a in act.lower() for a in ("silu", "swish", "swiglu", "gelu", "geglu", "relu")):
        # 'foo' became silu_glu or gelu without a word
        key = next((k for k in ("hidden_act", "hidden_activation", "activation_function") if k in cfg), "hidden_act")
        raise WorkloadError(f"{path}: {key} {act!r} is no activation this import knows (silu / swish, gelu, relu "
                            "and their gated forms)")
    gated = any(model_type.startswith(t) for t in _GATED) or "silu" in act or "swiglu" in act
    if "relu" in act and not gated:
        out["activation"] = "relu"
    elif "gelu" in act:
        out["activation"] = "gelu_glu" if gated else "gelu"
    else:
        out["activation"] = "silu_glu" if gated else "gelu"
    if "rms_norm_eps" in cfg or gated:
        out["norm"] = "rmsnorm"
    else:
        out["norm"] = "layernorm"
    rope = any(k in cfg for k in ("rope_theta", "rotary_pct", "rotary_emb_base", "rope_scaling")) or gated \
        or model_type in ("falcon", "gpt_neox", "gptj")
    out["positional"] = "rope" if rope else ("learned" if model_type in ("gpt2", "opt", "gpt_bigcode") else "none")
    if cfg.get("parallel_attn") or cfg.get("use_parallel_residual"):
        out["parallel_attention"] = True
    tie = cfg.get("tie_word_embeddings")
    out["tied_embeddings"] = bool(tie) if tie is not None else model_type in ("gpt2", "gemma", "gemma2", "opt")
    if tie is not None:
        used["tie_word_embeddings"] = tie
    ne, k = get("num_experts"), get("experts_per_token")
    if ne is not None and ne > 1:
        out["num_experts"] = ne
        out["experts_per_token"] = k if k is not None else 2
        if cfg.get("moe_intermediate_size"):
            out["ffn_size"] = cfg["moe_intermediate_size"]
            used["moe_intermediate_size"] = cfg["moe_intermediate_size"]
    bias = cfg.get("attention_bias", cfg.get("qkv_bias", model_type.startswith("qwen2") or model_type == "gpt2"))
    if bias:
        out["attention_bias"] = True
    if cfg.get("mlp_bias"):
        out["mlp_bias"] = True
    for key, v in out.items():
        if isinstance(v, float) and not math.isfinite(v):
            raise WorkloadError(f"{path}: cannot import: {key} is {v}")
    order = ("schema_version", "name", "description", "source", "hidden_size", "num_layers", "num_heads",
             "num_kv_heads", "head_dim", "ffn_size", "activation", "norm", "positional", "parallel_attention",
             "vocab_size", "tied_embeddings", "max_context", "num_experts", "experts_per_token", "attention_bias",
             "mlp_bias")
    out = {k: out[k] for k in order if k in out}
    body = yaml.safe_dump(out, sort_keys=False, default_flow_style=False, allow_unicode=True)
    shown = ", ".join(f"{k} {v}" for k, v in used.items())
    header = (f"# Imported by `sim import-model` from {path}\n"
              f"# Hugging Face keys read: {shown}\n"
              f"# Check what a config.json does not say (gated MLP, norm, positional encoding) against the model card.\n")
    text = header + body
    doc = parse_yaml_text(text, str(path))
    spec = validate(ModelSpec, doc)
    return text, spec
