"""Deterministic generation of the GPU validation cases (dev and holdout).

Standalone on purpose: imports only the standard library, so it runs on the GPU
machine (python3.12 + torch) and here alike, and never imports the `sim` package.

A case is a dict with the columns of the case-file format (CASE_COLUMNS); unused
columns are None (written as empty cells).  `generate("dev")` and
`generate("holdout")` draw from the same generators with different seeds; a
holdout case never repeats a dev shape.

Shape constraints of the PyTorch entry points are encoded in CONSTRAINTS and were
checked on the H200 (torch 2.11+cu130) in the feasibility call; see
validation/measurements/README.md.
"""

from __future__ import annotations

import csv
import math
import random
from typing import Dict, Iterable, List, Optional

CASE_COLUMNS = [
    "kind", "dtype", "m", "k", "n", "batch", "heads", "kv_heads", "head_dim",
    "q_len", "kv_len", "causal", "hidden", "ffn", "bytes", "measured_ms",
]
INT_COLUMNS = [c for c in CASE_COLUMNS if c not in ("kind", "dtype", "measured_ms")]

GEMM_DTYPES = ["bf16", "fp16", "fp32", "fp8", "int8", "bf16_2:4"]

SEEDS = {"dev": 20240601, "holdout": 777013}

# Per-dtype shape rules for gemm (x[m,k] @ W[n,k]^T), as found on the H200 with
# torch 2.11.0+cu130 (feasibility call, 2026-11-30):
#   mult_m/k/n: the dimension must be a multiple of this; min_m: smallest m.
# fp8 (torch._scaled_mm, cuBLASLt): k and n multiples of 16 ("trailing dimension of
#   mat1 to be divisible by 16", "mat2 shape must be divisible by 16"); any m >= 1;
#   b must be column-major (W[n,k].t()).
# int8 (torch._int_mm): m > 16 ("self.size(0) needs to be greater than 16"), k and n
#   multiples of 8.
# bf16_2:4 (cuSPARSELt 0.8 via to_sparse_semi_structured): W rows (n) and cols (k)
#   multiples of 16; any m (PyTorch pads x to a multiple of 8 rows).
CONSTRAINTS = {
    "bf16": dict(mult_m=1, mult_k=1, mult_n=1, min_m=1),
    "fp16": dict(mult_m=1, mult_k=1, mult_n=1, min_m=1),
    "fp32": dict(mult_m=1, mult_k=1, mult_n=1, min_m=1),
    "fp8": dict(mult_m=1, mult_k=16, mult_n=16, min_m=1),
    "int8": dict(mult_m=1, mult_k=8, mult_n=8, min_m=17),
    "bf16_2:4": dict(mult_m=1, mult_k=16, mult_n=16, min_m=1),
}

# Rough rates used only to size the case list (estimated time per case).
EST_RATE = {  # FLOP/s (OP/s) actually reachable on large shapes
    "bf16": 650e12, "fp16": 650e12, "fp32": 45e12, "fp8": 1100e12,
    "int8": 1100e12, "bf16_2:4": 700e12,
}
EST_BW = 3.5e12  # bytes/s
EST_ATTN_RATE = 380e12
ELEM_BYTES = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "int8": 1, "bf16_2:4": 2}

# Model shapes: hidden, heads, kv_heads, head_dim, ffn, vocab.
MODELS = {
    "qwen2-0.5b":   dict(hidden=896,   heads=14, kv_heads=2,  head_dim=64,  ffn=4864,  vocab=151936),
    "qwen2-1.5b":   dict(hidden=1536,  heads=12, kv_heads=2,  head_dim=128, ffn=8960,  vocab=151936),
    "llama-3.2-1b": dict(hidden=2048,  heads=32, kv_heads=8,  head_dim=64,  ffn=8192,  vocab=128256),
    "llama-3.2-3b": dict(hidden=3072,  heads=24, kv_heads=8,  head_dim=128, ffn=8192,  vocab=128256),
    "qwen2-7b":     dict(hidden=3584,  heads=28, kv_heads=4,  head_dim=128, ffn=18944, vocab=152064),
    "llama-2-7b":   dict(hidden=4096,  heads=32, kv_heads=32, head_dim=128, ffn=11008, vocab=32000),
    "llama-3-8b":   dict(hidden=4096,  heads=32, kv_heads=8,  head_dim=128, ffn=14336, vocab=128256),
    "mistral-7b":   dict(hidden=4096,  heads=32, kv_heads=8,  head_dim=128, ffn=14336, vocab=32000),
    "falcon-7b":    dict(hidden=4544,  heads=71, kv_heads=1,  head_dim=64,  ffn=18176, vocab=65024),
    "llama-2-13b":  dict(hidden=5120,  heads=40, kv_heads=40, head_dim=128, ffn=13824, vocab=32000),
    "qwen2.5-14b":  dict(hidden=5120,  heads=40, kv_heads=8,  head_dim=128, ffn=13824, vocab=152064),
    "starcoder-15b": dict(hidden=6144, heads=48, kv_heads=1,  head_dim=128, ffn=24576, vocab=49152),
    "llama-3-70b":  dict(hidden=8192,  heads=64, kv_heads=8,  head_dim=128, ffn=28672, vocab=128256),
    "gpt3-175b":    dict(hidden=12288, heads=96, kv_heads=96, head_dim=128, ffn=49152, vocab=50257),
}
# Relative draw weights (GPT-3 size kept rare: it is the slowest).
MODEL_WEIGHTS = {
    "qwen2-0.5b": 1.0, "qwen2-1.5b": 0.7, "llama-3.2-1b": 0.8, "llama-3.2-3b": 0.7,
    "qwen2-7b": 0.8, "llama-2-7b": 0.8, "llama-3-8b": 1.2, "mistral-7b": 0.5,
    "falcon-7b": 0.6, "llama-2-13b": 0.6, "qwen2.5-14b": 0.7, "starcoder-15b": 0.5,
    "llama-3-70b": 1.1, "gpt3-175b": 0.35,
}

# Case counts per split.
COUNTS = {
    "dev": {
        "gemm": {"bf16": 90, "fp16": 26, "fp32": 24, "fp8": 34, "int8": 28, "bf16_2:4": 28},
        "attention": 110, "layer": 60, "copy": 30,
    },
    "holdout": {
        "gemm": {"bf16": 36, "fp16": 11, "fp32": 10, "fp8": 14, "int8": 12, "bf16_2:4": 12},
        "attention": 45, "layer": 25, "copy": 15,
    },
}

MAX_CASE_MS = 60.0          # skip / shrink cases estimated longer than this
MAX_CASE_BYTES = 24 << 30   # device memory a case may allocate (inputs+outputs)


def blank_case(kind: str, dtype: str) -> Dict:
    c = {col: None for col in CASE_COLUMNS}
    c["kind"] = kind
    c["dtype"] = dtype
    return c


def case_key(c: Dict) -> tuple:
    return tuple(c.get(col) for col in CASE_COLUMNS if col != "measured_ms")


# ----------------------------------------------------------------------------------
# estimates (used only for sizing and ordering; never written as results)
# ----------------------------------------------------------------------------------

def gemm_flops(m: int, k: int, n: int) -> float:
    return 2.0 * m * k * n


def attention_flops(c: Dict) -> float:
    b, h, d, q, kv = c["batch"], c["heads"], c["head_dim"], c["q_len"], c["kv_len"]
    f = 4.0 * b * h * q * kv * d
    if c["causal"] and q == kv:
        f *= 0.5
    return f


def attention_bytes(c: Dict) -> float:
    b, h, kvh, d, q, kv = (c["batch"], c["heads"], c["kv_heads"], c["head_dim"],
                           c["q_len"], c["kv_len"])
    return 2.0 * (2 * b * h * q * d + 2 * b * kvh * kv * d)


def layer_weights(c: Dict) -> int:
    hd, h, kvh, d, f = c["hidden"], c["heads"], c["kv_heads"], c["head_dim"], c["ffn"]
    return hd * (h + 2 * kvh) * d + h * d * hd + hd * 2 * f + f * hd


def est_ms(c: Dict) -> float:
    kind = c["kind"]
    if kind == "gemm":
        m, k, n, dt = c["m"], c["k"], c["n"], c["dtype"]
        eb = ELEM_BYTES[dt]
        wbytes = k * n * eb * (0.5625 if dt == "bf16_2:4" else 1.0)
        byts = m * k * eb + wbytes + m * n * (4 if dt in ("fp32", "int8") else 2)
        return 1e3 * max(gemm_flops(m, k, n) / EST_RATE[dt], byts / EST_BW) + 0.006
    if kind == "attention":
        return 1e3 * max(attention_flops(c) / EST_ATTN_RATE, attention_bytes(c) / EST_BW) + 0.01
    if kind == "layer":
        tokens = c["batch"] * c["q_len"]
        w = layer_weights(c)
        t_mm = max(2.0 * tokens * w / EST_RATE["bf16"], 2.0 * w / EST_BW)
        a = dict(batch=c["batch"], heads=c["heads"], kv_heads=c["kv_heads"],
                 head_dim=c["head_dim"], q_len=c["q_len"], kv_len=c["kv_len"],
                 causal=1 if c["q_len"] == c["kv_len"] else 0)
        t_at = max(attention_flops(a) / EST_ATTN_RATE, attention_bytes(a) / EST_BW)
        t_elem = 12.0 * tokens * c["hidden"] * 2 / EST_BW
        return 1e3 * (t_mm + t_at + t_elem) + 0.03
    if kind == "copy":
        return 1e3 * 2.0 * c["bytes"] / EST_BW + 0.004
    raise ValueError(kind)


def est_mem_bytes(c: Dict) -> float:
    kind = c["kind"]
    if kind == "gemm":
        eb = ELEM_BYTES[c["dtype"]]
        return (c["m"] * c["k"] + c["k"] * c["n"]) * eb * 2 + c["m"] * c["n"] * 4
    if kind == "attention":
        return attention_bytes(c) * 1.2
    if kind == "layer":
        tokens = c["batch"] * c["q_len"]
        kv = 2 * c["batch"] * c["kv_heads"] * c["kv_len"] * c["head_dim"] * 2
        act = tokens * (c["hidden"] * 8 + 3 * c["ffn"] + (c["heads"] + 2 * c["kv_heads"]) * c["head_dim"] * 2) * 2
        return layer_weights(c) * 2 + kv + act
    if kind == "copy":
        return 2 * c["bytes"]
    raise ValueError(kind)


def est_wall_s(c: Dict, target_s: float = 0.3, max_reps: int = 200, flush_ms: float = 0.1) -> float:
    """Wall time the harness spends on one case (setup + warm-up + timed repeats)."""
    t = est_ms(c)
    reps = repeats_for(t, target_s=target_s, max_reps=max_reps)
    setup = 0.03 + est_mem_bytes(c) / 200e9  # allocation + random fill
    if c["kind"] == "layer":
        setup += 0.15  # graph capture
    if c["dtype"] == "bf16_2:4":
        setup += 0.05
    return setup + (6 + reps) * (t + flush_ms + 0.02) / 1e3


def repeats_for(t_ms: float, target_s: float = 0.3, max_reps: int = 200,
                min_reps: int = 20, min_reps_long: int = 5) -> int:
    """Adaptive repeat count: >= min_reps, up to max_reps for short ops (until about
    target_s of measured time); ops longer than target_s/min_reps get fewer repeats,
    never under min_reps_long."""
    t_ms = max(t_ms, 1e-4)
    want = int(math.ceil(target_s * 1e3 / t_ms))
    if t_ms * min_reps <= target_s * 1e3:
        return max(min_reps, min(max_reps, want))
    return max(min_reps_long, min(min_reps, want))


# ----------------------------------------------------------------------------------
# helpers for drawing shapes
# ----------------------------------------------------------------------------------

def _loguniform_int(rng: random.Random, lo: int, hi: int) -> int:
    return int(round(math.exp(rng.uniform(math.log(lo), math.log(hi)))))


def _round_to(x: int, mult: int, lo: int = 1) -> int:
    if mult <= 1:
        return max(lo, x)
    return max(lo, mult * max(1, int(round(x / mult))))


def _ceil_to(x: int, mult: int) -> int:
    return mult * ((x + mult - 1) // mult)


def _pick_model(rng: random.Random, exclude=()) -> str:
    names = [n for n in MODELS if n not in exclude]
    weights = [MODEL_WEIGHTS[n] for n in names]
    return rng.choices(names, weights=weights)[0]


DECODE_M = [1, 1, 2, 4, 8, 16, 32, 64, 128, 256, 3, 5, 12, 24, 48, 96, 200]


def _draw_m(rng: random.Random) -> int:
    if rng.random() < 0.42:
        return rng.choice(DECODE_M)
    m = _loguniform_int(rng, 257, 16384)
    return _round_to(m, rng.choice([1, 16, 128, 128, 512, 512]), 1)


def _gemm_shape(rng: random.Random, dtype: str):
    r = rng.random()
    if r < 0.72:
        name = _pick_model(rng)
        md = MODELS[name]
        hd, h, kvh, d, f = md["hidden"], md["heads"], md["kv_heads"], md["head_dim"], md["ffn"]
        proj = rng.choices(["qkv", "o", "gate_up", "up", "down", "lm_head"],
                           weights=[1.0, 0.8, 0.9, 0.5, 1.0, 0.15])[0]
        if proj == "qkv":
            k, n = hd, (h + 2 * kvh) * d
        elif proj == "o":
            k, n = h * d, hd
        elif proj == "gate_up":
            k, n = hd, 2 * f
        elif proj == "up":
            k, n = hd, f
        elif proj == "down":
            k, n = f, hd
        else:
            k, n = hd, md["vocab"]
        m = _draw_m(rng)
        if proj == "lm_head":
            m = rng.choice([1, 8, 32, 128, 512, 2048])
    else:
        m = _draw_m(rng)
        mult = rng.choice([1, 8, 64, 128, 128])
        k = _round_to(_loguniform_int(rng, 64, 16384), mult, 16)
        n = _round_to(_loguniform_int(rng, 64, 16384), mult, 16)
    cons = CONSTRAINTS[dtype]
    m = max(cons["min_m"], _ceil_to(m, cons["mult_m"]))
    k = _ceil_to(k, cons["mult_k"])
    n = _ceil_to(n, cons["mult_n"])
    return m, k, n


def gen_gemm(rng: random.Random, dtype: str) -> Dict:
    m, k, n = _gemm_shape(rng, dtype)
    c = blank_case("gemm", dtype)
    c.update(m=m, k=k, n=n)
    cons = CONSTRAINTS[dtype]
    # shrink m (then n) until the case fits the time and memory caps
    while (est_ms(c) > MAX_CASE_MS or est_mem_bytes(c) > MAX_CASE_BYTES) and c["m"] > cons["min_m"]:
        c["m"] = max(cons["min_m"], _ceil_to(c["m"] // 2, cons["mult_m"]))
    while est_ms(c) > MAX_CASE_MS and c["n"] > 256:
        c["n"] = _ceil_to(c["n"] // 2, max(cons["mult_n"], 16))
    return c


def _attn_model(rng: random.Random):
    name = _pick_model(rng)
    md = MODELS[name]
    return md["heads"], md["kv_heads"], md["head_dim"]


DECODE_BATCH = [1, 1, 2, 4, 8, 16, 32, 64, 3, 6, 12, 24, 48]


def gen_attention(rng: random.Random) -> Dict:
    h, kvh, d = _attn_model(rng)
    c = blank_case("attention", "bf16")
    c.update(heads=h, kv_heads=kvh, head_dim=d)
    mode = rng.choices(["decode", "prefill", "prefill_nc", "chunk"], weights=[0.45, 0.35, 0.07, 0.13])[0]
    kv_mult = rng.choice([1, 64, 128, 256, 256])
    if mode == "decode":
        b = rng.choice(DECODE_BATCH)
        kv = _round_to(_loguniform_int(rng, 128, 32768), kv_mult, 128)
        c.update(batch=b, q_len=1, kv_len=kv, causal=0)
    elif mode in ("prefill", "prefill_nc"):
        b = rng.choice([1, 1, 2, 4, 8, 16, 32, 64])
        L = _round_to(_loguniform_int(rng, 128, 32768), kv_mult, 128)
        while b * L > 131072 and b > 1:
            b //= 2
        c.update(batch=b, q_len=L, kv_len=L, causal=1 if mode == "prefill" else 0)
    else:
        b = rng.choice([1, 1, 2, 4, 8])
        q = rng.choice([16, 64, 128, 256, 512, 1024, 2048, 4096])
        kv = _round_to(_loguniform_int(rng, max(2 * q, 256), 32768), kv_mult, 128)
        c.update(batch=b, q_len=q, kv_len=max(kv, q + 1), causal=0)
    # fit time and memory caps: halve batch, then lengths
    while est_ms(c) > MAX_CASE_MS or attention_bytes(c) > (8 << 30):
        if c["batch"] > 1:
            c["batch"] //= 2
        elif c["q_len"] == c["kv_len"]:
            c["q_len"] = c["kv_len"] = max(128, c["kv_len"] // 2)
        else:
            c["kv_len"] = max(c["q_len"] + 1, c["kv_len"] // 2)
            if c["q_len"] > 1:
                c["q_len"] = max(1, c["q_len"] // 2)
    return c


def gen_layer(rng: random.Random, n_big_left: List[int]) -> Dict:
    if n_big_left[0] > 0 and rng.random() < 0.07:  # GPT-3-size layers: a few only
        name = "gpt3-175b"
        n_big_left[0] -= 1
    else:
        name = _pick_model(rng, exclude=("gpt3-175b",))
    md = MODELS[name]
    c = blank_case("layer", "bf16")
    c.update(hidden=md["hidden"], ffn=md["ffn"], heads=md["heads"], kv_heads=md["kv_heads"],
             head_dim=md["head_dim"])
    if rng.random() < 0.55:
        b = rng.choice([1, 1, 2, 4, 8, 16, 32, 64, 3, 12, 24, 48])
        kv = _round_to(_loguniform_int(rng, 512, 8192), rng.choice([1, 128, 256]), 512)
        c.update(batch=b, q_len=1, kv_len=kv, causal=0)
    else:
        b = rng.choice([1, 1, 2, 4])
        L = _round_to(_loguniform_int(rng, 128, 4096), rng.choice([1, 64, 128]), 128)
        c.update(batch=b, q_len=L, kv_len=L, causal=1)
    while (est_ms(c) > 2 * MAX_CASE_MS or est_mem_bytes(c) > MAX_CASE_BYTES):
        if c["batch"] > 1:
            c["batch"] //= 2
        elif c["q_len"] > 1:
            c["q_len"] = c["kv_len"] = max(128, c["q_len"] // 2)
            if c["q_len"] == 128:
                break
        else:
            c["kv_len"] = max(512, c["kv_len"] // 2)
            if c["kv_len"] == 512:
                break
    return c


def gen_copies(rng: random.Random, split: str, count: int) -> List[Dict]:
    out = []
    if split == "dev":
        sizes = [1 << p for p in range(12, 33)]  # 4 KiB .. 4 GiB
        while len(sizes) < count:
            s = _loguniform_int(rng, 5000, 3 << 30)
            sizes.append(s)
    else:
        sizes = []
        while len(sizes) < count:
            if rng.random() < 0.3:
                s = 3 << rng.randint(11, 30)
            else:
                s = _loguniform_int(rng, 4096, 4 << 30)
            sizes.append(s)
    for s in sizes[:count]:
        dt = "bf16" if (s % 2 == 0 and rng.random() < 0.3) else "uint8"
        c = blank_case("copy", dt)
        c["bytes"] = int(s)
        out.append(c)
    return out


# ----------------------------------------------------------------------------------
# splits
# ----------------------------------------------------------------------------------

def _draw_unique(gen, count: int, seen: set, max_tries: int = 200) -> List[Dict]:
    out = []
    tries = 0
    while len(out) < count and tries < count * max_tries:
        tries += 1
        c = gen()
        key = case_key(c)
        if key in seen:
            continue
        seen.add(key)
        out.append(c)
    return out


def generate(split: str, counts: Optional[Dict] = None) -> List[Dict]:
    """All cases of one split, deterministic for a given split name."""
    if split not in SEEDS:
        raise ValueError(f"unknown split {split!r}")
    counts = counts or COUNTS[split]
    seen: set = set()
    if split == "holdout":  # never repeat a dev shape
        for c in generate("dev"):
            seen.add(case_key(c))
    cases: List[Dict] = []
    for dtype in GEMM_DTYPES:
        rng = random.Random(f"{SEEDS[split]}-gemm-{dtype}")
        cases += _draw_unique(lambda: gen_gemm(rng, dtype), counts["gemm"][dtype], seen)
    rng = random.Random(f"{SEEDS[split]}-attention")
    cases += _draw_unique(lambda: gen_attention(rng), counts["attention"], seen)
    rng = random.Random(f"{SEEDS[split]}-layer")
    big = [4 if split == "dev" else 2]
    cases += _draw_unique(lambda: gen_layer(rng, big), counts["layer"], seen)
    rng = random.Random(f"{SEEDS[split]}-copy")
    for c in gen_copies(rng, split, counts["copy"]):
        if case_key(c) not in seen:
            seen.add(case_key(c))
            cases.append(c)
    return cases


def case_id(split: str, idx: int) -> str:
    return f"{split}-{idx:04d}"


# ----------------------------------------------------------------------------------
# CSV I/O
# ----------------------------------------------------------------------------------

def fmt_cell(v) -> str:
    if v is None or v == "":
        return ""
    if isinstance(v, float):
        return f"{v:.6g}"
    return str(v)


def write_cases_csv(path: str, cases: Iterable[Dict]) -> None:
    with open(path, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(CASE_COLUMNS)
        for c in cases:
            w.writerow([fmt_cell(c.get(col)) for col in CASE_COLUMNS])


def read_cases_csv(path: str) -> List[Dict]:
    out = []
    with open(path, newline="") as f:
        r = csv.DictReader(f)
        missing = [c for c in CASE_COLUMNS if c not in (r.fieldnames or [])]
        if missing:
            raise ValueError(f"{path}: missing columns {missing}")
        for row in r:
            c = blank_case(row["kind"].strip(), row["dtype"].strip())
            for col in INT_COLUMNS:
                v = (row.get(col) or "").strip()
                c[col] = int(float(v)) if v else None
            v = (row.get("measured_ms") or "").strip()
            c["measured_ms"] = float(v) if v else None
            out.append(c)
    return out


def describe(c: Dict) -> str:
    k = c["kind"]
    if k == "gemm":
        return f"gemm {c['dtype']} m={c['m']} k={c['k']} n={c['n']}"
    if k == "attention":
        return (f"attn b={c['batch']} h={c['heads']}/{c['kv_heads']} d={c['head_dim']} "
                f"q={c['q_len']} kv={c['kv_len']} causal={c['causal']}")
    if k == "layer":
        return (f"layer hid={c['hidden']} ffn={c['ffn']} h={c['heads']}/{c['kv_heads']} d={c['head_dim']} "
                f"b={c['batch']} q={c['q_len']} kv={c['kv_len']}")
    if k == "copy":
        return f"copy {c['dtype']} bytes={c['bytes']}"
    return str(c)


def summary(cases: List[Dict]) -> Dict[str, int]:
    out: Dict[str, int] = {}
    for c in cases:
        key = c["kind"] + ("/" + c["dtype"] if c["kind"] == "gemm" else "")
        out[key] = out.get(key, 0) + 1
    return out


if __name__ == "__main__":  # print a summary and the estimated wall time
    import sys
    for split in ("dev", "holdout"):
        cs = generate(split)
        tot = sum(est_wall_s(c) for c in cs)
        print(split, len(cs), summary(cs), f"est wall {tot:.0f} s")
        if "-v" in sys.argv:
            for i, c in enumerate(cs):
                print(f"  {case_id(split, i)} {describe(c)}  est {est_ms(c):.3f} ms  wall {est_wall_s(c):.2f} s")
