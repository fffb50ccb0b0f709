#!/usr/bin/env python3
"""A real LLM serving loop on one GPU, to validate `sim serve` (issue 13).  Standalone: it
never imports `sim`.

A Llama-style model with Llama-3-8B's shapes (32 layers, hidden 4096, 32 query / 8 KV heads
of 128, SwiGLU 14336, vocabulary 128256) and random bf16 weights; a preallocated KV cache
of ``--slots`` sequences x ``--max-len`` tokens; continuous batching with chunked prefill
(Sarathi-style: every iteration holds at most ``--token-budget`` new tokens, decodes first,
then prompt chunks first come first served); decode-only iterations replay a CUDA graph
captured per batch-size bucket; iterations with prompt chunks run eagerly.  Decode
attention is a split-KV (flash-decoding) Triton kernel that reads each sequence's own
context only (the way paged attention does) and a combine kernel, checked against a plain
PyTorch reference at start-up (the loop falls back to the reference, eagerly, if the kernel
is unavailable or wrong; env.json says which ran).  A prompt chunk behind cached tokens runs
SDPA with a bottom-right causal mask (``causal_lower_right``: FlashAttention), as
measure_models.py does.  ``--bool-mask --decode-nosplit`` reproduce the first runs (a
boolean mask, which with GQA sends SDPA to its math path; one decode program per sequence
and KV head).

Requests arrive as a Poisson process (fixed seed) at each ``--rates`` value for
``--duration-s`` seconds; prompt and output lengths are lognormal.  Every iteration (start,
end, prefill chunks, decoding sequences and their contexts) and every request (arrival,
first token, finish, TTFT, TPOT) is written as CSV; env.json holds the GPU, driver, clocks
and torch version.

    python3 validation/gpu/serving_loop.py --out $OUT --rates 4 8 16 --duration-s 60 --drain-s 15
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.nn.attention.bias import causal_lower_right

HIDDEN, LAYERS, HEADS, KV_HEADS, HEAD_DIM, FFN, VOCAB = 4096, 32, 32, 8, 128, 14336, 128256
ROPE_THETA = 500000.0      # Llama 3 config (rope_theta)
RMS_EPS = 1e-5
GROUP = HEADS // KV_HEADS
DEV = "cuda"
#: attention backends for the eager (prompt-chunk) iterations: not cuDNN, which builds an
#: execution plan for each new shape, and chunked prefill makes a new shape every iteration
SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]
#: a chunk behind cached tokens as an explicit boolean mask (runs 1 and 2; ``--bool-mask``):
#: with GQA no fused SDPA backend takes it, and PyTorch runs the math path (fp32 GEMMs, mask,
#: softmax: ~700 more kernels per iteration); otherwise ``causal_lower_right`` (flash)
BOOL_MASK = False


def sync():
    if DEV == "cuda":
        torch.cuda.synchronize()

try:
    import triton
    import triton.language as tl

    @triton.jit
    def _decode_attn_kernel(Q, K, V, O, Slots, Lens, sq_b, sq_h, sk_s, sk_h, sk_t, so_b, so_h, scale,
                            NMAX: tl.constexpr, G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
                            DYN: tl.constexpr):
        b = tl.program_id(0)
        kh = tl.program_id(1)
        n = tl.load(Lens + b)
        slot = tl.load(Slots + b).to(tl.int64)
        offs_g = tl.arange(0, GP)
        offs_d = tl.arange(0, D)
        offs_t = tl.arange(0, BLOCK)
        gmask = offs_g < G
        q = tl.load(Q + b * sq_b + (kh * G + offs_g)[:, None] * sq_h + offs_d[None, :], mask=gmask[:, None],
                    other=0.0)
        m = tl.full([GP], float("-inf"), tl.float32)
        l = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        kb = K + slot * sk_s + kh * sk_h
        vb = V + slot * sk_s + kh * sk_h
        # DYN: loop to this sequence's own length (compiled); else to NMAX with masks (the
        # interpreter cannot loop to a loaded value; used for the CPU check only)
        for start in range(0, n if DYN else NMAX, BLOCK):
            t = start + offs_t
            tm = t < n
            k = tl.load(kb + t[:, None] * sk_t + offs_d[None, :], mask=tm[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * scale
            s = tl.where(tm[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            p = tl.exp(s - m_new[:, None])
            alpha = tl.exp(m - m_new)
            l = l * alpha + tl.sum(p, axis=1)
            v = tl.load(vb + t[:, None] * sk_t + offs_d[None, :], mask=tm[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        out = acc / l[:, None]
        tl.store(O + b * so_b + (kh * G + offs_g)[:, None] * so_h + offs_d[None, :], out.to(O.dtype.element_ty),
                 mask=gmask[:, None])

    @triton.jit
    def _decode_attn_split_kernel(Q, K, V, Mo, Lo, Ao, Slots, Lens, sq_b, sq_h, sk_s, sk_h, sk_t, scale,
                                  G: tl.constexpr, GP: tl.constexpr, D: tl.constexpr, BLOCK: tl.constexpr,
                                  CHUNK: tl.constexpr, SPLITS: tl.constexpr, DYN: tl.constexpr):
        # flash-decoding: program (b, kh, sp) covers tokens [sp*CHUNK, (sp+1)*CHUNK) of sequence
        # b's own context and writes its unnormalised partial (max, sum, acc) for the combine
        b = tl.program_id(0)
        kh = tl.program_id(1)
        sp = tl.program_id(2)
        n = tl.load(Lens + b)
        slot = tl.load(Slots + b).to(tl.int64)
        offs_g = tl.arange(0, GP)
        offs_d = tl.arange(0, D)
        offs_t = tl.arange(0, BLOCK)
        gmask = offs_g < G
        q = tl.load(Q + b * sq_b + (kh * G + offs_g)[:, None] * sq_h + offs_d[None, :], mask=gmask[:, None],
                    other=0.0)
        m = tl.full([GP], float("-inf"), tl.float32)
        l = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        kb = K + slot * sk_s + kh * sk_h
        vb = V + slot * sk_s + kh * sk_h
        lo = sp * CHUNK
        hi = tl.minimum(n, lo + CHUNK)
        # DYN: loop over this split's own tokens; else (the CPU interpreter, which cannot loop
        # from a program id) over CHUNK with masks
        for off in range(lo if DYN else 0, hi if DYN else CHUNK, BLOCK):
            t = off + offs_t if DYN else lo + off + offs_t
            tm = t < hi
            k = tl.load(kb + t[:, None] * sk_t + offs_d[None, :], mask=tm[:, None], other=0.0)
            s = tl.dot(q, tl.trans(k)) * scale
            s = tl.where(tm[None, :], s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)   # a split with no token yet
            p = tl.exp(s - m_safe[:, None])
            alpha = tl.exp(m - m_safe)
            l = l * alpha + tl.sum(p, axis=1)
            v = tl.load(vb + t[:, None] * sk_t + offs_d[None, :], mask=tm[:, None], other=0.0)
            acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
            m = m_new
        row = (b * (G * tl.num_programs(1)) + kh * G + offs_g) * SPLITS + sp
        tl.store(Mo + row, m, mask=gmask)
        tl.store(Lo + row, l, mask=gmask)
        tl.store(Ao + row[:, None] * D + offs_d[None, :], acc, mask=gmask[:, None])

    @triton.jit
    def _decode_attn_combine_kernel(Mo, Lo, Ao, O, so_b, so_h, H, D: tl.constexpr, SPLITS: tl.constexpr,
                                    SP: tl.constexpr):
        b = tl.program_id(0)
        h = tl.program_id(1)
        offs_s = tl.arange(0, SP)
        offs_d = tl.arange(0, D)
        smask = offs_s < SPLITS
        row = (b * H + h) * SPLITS + offs_s
        m = tl.load(Mo + row, mask=smask, other=float("-inf"))
        l = tl.load(Lo + row, mask=smask, other=0.0)
        mx = tl.max(m, axis=0)
        w = tl.where(m == float("-inf"), 0.0, tl.exp(m - mx))
        acc = tl.load(Ao + row[:, None] * D + offs_d[None, :], mask=smask[:, None], other=0.0)
        out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l * w, axis=0)
        tl.store(O + b * so_b + h * so_h + offs_d, out.to(O.dtype.element_ty))
    HAVE_TRITON = True
except Exception:  # pragma: no cover - no triton
    HAVE_TRITON = False


def decode_attn_triton(q, kc, vc, slots, lens):
    """q [B, HEADS, D]; kc/vc [S, KV_HEADS, MAXLEN, D]; slots, lens [B] int32 -> [B, HEADS, D]."""
    B = q.shape[0]
    o = torch.empty_like(q)
    _decode_attn_kernel[(B, KV_HEADS)](q, kc, vc, o, slots, lens, q.stride(0), q.stride(1), kc.stride(0),
                                       kc.stride(1), kc.stride(2), o.stride(0), o.stride(1),
                                       1.0 / math.sqrt(HEAD_DIM), kc.shape[2], G=GROUP, GP=16, D=HEAD_DIM,
                                       BLOCK=64, DYN=os.environ.get("TRITON_INTERPRET") != "1",
                                       num_warps=4, num_stages=2)
    return o


#: flash-decoding split of each sequence's context (tokens per program); vLLM's paged
#: attention v2 partitions by 512, FlashDecoding picks splits that fill the SMs
SPLIT_CHUNK = 256


def decode_attn_triton_split(q, kc, vc, slots, lens):
    """As :func:`decode_attn_triton`, split-KV: ceil(max_len / SPLIT_CHUNK) programs per
    (sequence, KV head), each over its share of the sequence's own context, then one combine
    program per (sequence, head).  The grid is fixed by the cache's length (CUDA graphs);
    programs past a sequence's length only write an empty partial."""
    B = q.shape[0]
    splits = -(-kc.shape[2] // SPLIT_CHUNK)
    mo = torch.empty(B * HEADS * splits, device=q.device, dtype=torch.float32)
    lo = torch.empty_like(mo)
    ao = torch.empty(B * HEADS * splits, HEAD_DIM, device=q.device, dtype=torch.float32)
    o = torch.empty_like(q)
    _decode_attn_split_kernel[(B, KV_HEADS, splits)](q, kc, vc, mo, lo, ao, slots, lens, q.stride(0), q.stride(1),
                                                     kc.stride(0), kc.stride(1), kc.stride(2),
                                                     1.0 / math.sqrt(HEAD_DIM), G=GROUP, GP=16, D=HEAD_DIM,
                                                     BLOCK=64, CHUNK=SPLIT_CHUNK, SPLITS=splits,
                                                     DYN=os.environ.get("TRITON_INTERPRET") != "1",
                                                     num_warps=4, num_stages=2)
    _decode_attn_combine_kernel[(B, HEADS)](mo, lo, ao, o, o.stride(0), o.stride(1), HEADS, D=HEAD_DIM,
                                            SPLITS=splits, SP=triton.next_power_of_2(splits), num_warps=4)
    return o


def decode_attn_ref(q, kc, vc, slots, lens):
    B = q.shape[0]
    L = int(lens.max().item())
    k = kc[slots.long(), :, :L].float()              # [B, KV, L, D]
    v = vc[slots.long(), :, :L].float()
    qq = q.float().view(B, KV_HEADS, GROUP, HEAD_DIM)
    s = torch.einsum("bkgd,bkld->bkgl", qq, k) / math.sqrt(HEAD_DIM)
    mask = torch.arange(L, device=q.device)[None, :] < lens[:, None]
    s = s.masked_fill(~mask[:, None, None, :], float("-inf"))
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bkgl,bkld->bkgd", p, v).reshape(B, HEADS, HEAD_DIM).to(q.dtype)


class Model:
    def __init__(self, slots: int, max_len: int, dev: str = "cuda", seed: int = 0):
        g = torch.Generator(device=dev).manual_seed(seed)
        bf = torch.bfloat16

        def w(*shape):
            return (torch.randn(*shape, device=dev, dtype=bf, generator=g) * 0.02)
        self.emb = w(VOCAB, HIDDEN)
        self.lm_head = w(HIDDEN, VOCAB)
        self.final_norm = torch.ones(HIDDEN, device=dev, dtype=bf)
        self.layers = []
        for _ in range(LAYERS):
            self.layers.append({
                "attn_norm": torch.ones(HIDDEN, device=dev, dtype=bf),
                "wqkv": w(HIDDEN, (HEADS + 2 * KV_HEADS) * HEAD_DIM),
                "wo": w(HEADS * HEAD_DIM, HIDDEN),
                "mlp_norm": torch.ones(HIDDEN, device=dev, dtype=bf),
                "wgu": w(HIDDEN, 2 * FFN),
                "wdown": w(FFN, HIDDEN),
            })
        self.kc = torch.zeros(LAYERS, slots, KV_HEADS, max_len, HEAD_DIM, device=dev, dtype=bf)
        self.vc = torch.zeros_like(self.kc)
        inv = 1.0 / (ROPE_THETA ** (torch.arange(0, HEAD_DIM, 2, device=dev, dtype=torch.float32) / HEAD_DIM))
        ang = torch.arange(max_len, device=dev, dtype=torch.float32)[:, None] * inv[None, :]
        self.cos = ang.cos().to(bf)
        self.sin = ang.sin().to(bf)
        self.attn = decode_attn_ref

    def rope(self, x, pos):
        c = self.cos[pos][:, None, :]
        s = self.sin[pos][:, None, :]
        x1, x2 = x[..., : HEAD_DIM // 2], x[..., HEAD_DIM // 2:]
        return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)

    def forward(self, tok, pos, dec_slots, dec_lens, n_dec: int, chunks):
        """``tok``/``pos`` [T]: the ``n_dec`` decode rows first, then each chunk's tokens;
        ``chunks``: list of (slot, start, n) (host ints); returns next tokens of logit rows."""
        T = tok.shape[0]
        x = self.emb[tok]
        for li, L in enumerate(self.layers):
            h = F.rms_norm(x, (HIDDEN,), L["attn_norm"], RMS_EPS)
            qkv = h @ L["wqkv"]
            qk = self.rope(qkv[:, : (HEADS + KV_HEADS) * HEAD_DIM].view(T, HEADS + KV_HEADS, HEAD_DIM), pos)
            q = qk[:, :HEADS]
            k = qk[:, HEADS:]
            v = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM:].view(T, KV_HEADS, HEAD_DIM)
            kc, vc = self.kc[li], self.vc[li]
            outs = []
            if n_dec:
                sl = dec_slots[:n_dec].long()
                p = pos[:n_dec]
                kc[sl, :, p] = k[:n_dec]
                vc[sl, :, p] = v[:n_dec]
                outs.append(self.attn(q[:n_dec].contiguous(), kc, vc, dec_slots[:n_dec], dec_lens[:n_dec]))
            off = n_dec
            for slot, start, n in chunks:
                kc[slot, :, start:start + n] = k[off:off + n].transpose(0, 1)
                vc[slot, :, start:start + n] = v[off:off + n].transpose(0, 1)
                qq = q[off:off + n].transpose(0, 1)[None]                     # [1, H, n, D]
                kk = kc[slot, :, : start + n][None]                          # [1, KV, start+n, D]
                vv = vc[slot, :, : start + n][None]
                if start == 0:
                    o = F.scaled_dot_product_attention(qq, kk, vv, is_causal=True, enable_gqa=True)
                else:
                    if BOOL_MASK:   # the first runs' setting: with GQA, SDPA's math path
                        m = (torch.arange(start + n, device=tok.device)[None, :]
                             <= (start + torch.arange(n, device=tok.device))[:, None])
                    else:           # causal aligned to the bottom right, as measure_models.py: flash
                        m = causal_lower_right(n, start + n)
                    o = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=m, enable_gqa=True)
                outs.append(o[0].transpose(0, 1))
                off += n
            a = outs[0] if len(outs) == 1 else torch.cat(outs, dim=0)
            x = x + a.reshape(T, HEADS * HEAD_DIM) @ L["wo"]
            h = F.rms_norm(x, (HIDDEN,), L["mlp_norm"], RMS_EPS)
            gu = h @ L["wgu"]
            x = x + (F.silu(gu[:, :FFN]) * gu[:, FFN:]) @ L["wdown"]
        rows = list(range(n_dec))
        off = n_dec
        for _, _, n in chunks:
            off += n
            rows.append(off - 1)
        idx = torch.tensor(rows, device=tok.device) if chunks else None
        xr = x[:n_dec] if idx is None else x[idx]
        logits = F.rms_norm(xr, (HIDDEN,), self.final_norm, RMS_EPS) @ self.lm_head
        return logits.argmax(dim=-1)


class DecodeGraphs:
    """One CUDA graph per decode batch bucket (padded rows read one token of a scratch slot)."""

    def __init__(self, model: Model, buckets, scratch_slot: int):
        self.m, self.buckets = model, sorted(buckets)
        bmax = self.buckets[-1]
        dev = model.kc.device
        self.tok = torch.zeros(bmax, dtype=torch.long, device=dev)
        self.pos = torch.zeros(bmax, dtype=torch.long, device=dev)
        self.slots = torch.full((bmax,), scratch_slot, dtype=torch.int32, device=dev)
        self.lens = torch.ones(bmax, dtype=torch.int32, device=dev)
        self.scratch = scratch_slot
        self.graphs, self.outs = {}, {}
        self.pool = torch.cuda.graph_pool_handle()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for b in self.buckets:
                for _ in range(2):
                    model.forward(self.tok[:b], self.pos[:b], self.slots, self.lens, b, [])
        torch.cuda.current_stream().wait_stream(s)
        for b in reversed(self.buckets):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.outs[b] = model.forward(self.tok[:b], self.pos[:b], self.slots, self.lens, b, [])
            self.graphs[b] = g
        sync()

    def bucket(self, n: int) -> int:
        for b in self.buckets:
            if b >= n:
                return b
        raise ValueError(n)

    def run(self, slots, ctxs):
        n = len(slots)
        b = self.bucket(n)
        sl = torch.full((b,), self.scratch, dtype=torch.int32)
        le = torch.ones(b, dtype=torch.int32)
        po = torch.zeros(b, dtype=torch.long)
        sl[:n] = torch.tensor(slots, dtype=torch.int32)
        po[:n] = torch.tensor(ctxs, dtype=torch.long)
        le[:n] = po[:n].to(torch.int32) + 1
        self.slots[:b].copy_(sl, non_blocking=True)
        self.pos[:b].copy_(po, non_blocking=True)
        self.lens[:b].copy_(le, non_blocking=True)
        self.graphs[b].replay()
        return self.outs[b]


def workload(rate: float, duration_s: float, seed: int):
    rng = np.random.default_rng(seed)
    n = int(rate * duration_s * 2 + 50)
    t = np.cumsum(rng.exponential(1.0 / rate, size=n))
    t = t[t < duration_s]
    m = len(t)
    # lognormal lengths (medians 256 prompt / 96 output tokens, sigma 0.8), clipped so that
    # prompt + output fits the 2,048-token slots
    p = np.clip(np.rint(rng.lognormal(math.log(256), 0.8, size=m)), 16, 1536).astype(int)
    o = np.clip(np.rint(rng.lognormal(math.log(96), 0.8, size=m)), 8, 480).astype(int)
    return [(float(t[i]), int(p[i]), int(o[i])) for i in range(m)]


def serve(model: Model, graphs: DecodeGraphs | None, reqs, slots: int, budget: int, label: str, it_rows, req_rows,
          drain_s: float):
    dev = model.kc.device
    free = list(range(slots))
    waiting: list[dict] = []
    running: list[dict] = []
    nxt = 0
    done = 0
    t0 = time.perf_counter()
    limit = reqs[-1][0] + drain_s
    n_it = 0
    while done < len(reqs):
        now = time.perf_counter() - t0
        if now > limit:
            break
        while nxt < len(reqs) and reqs[nxt][0] <= now:
            a, p, o = reqs[nxt]
            waiting.append({"id": nxt, "arrival_s": a, "prompt": p, "output": o, "ctx": 0, "to_prefill": p,
                            "gen": 0, "first": None, "last": None, "finish": None, "slot": None})
            nxt += 1
        decodes = [r for r in running if r["to_prefill"] == 0]
        left = budget - len(decodes)
        chunks = []
        for r in running:
            if left <= 0:
                break
            if r["to_prefill"]:
                n = min(r["to_prefill"], left)
                chunks.append((r, n))
                left -= n
        while waiting and left > 0 and free:
            r = waiting.pop(0)
            r["slot"] = free.pop(0)
            running.append(r)
            n = min(r["to_prefill"], left)
            chunks.append((r, n))
            left -= n
        if not decodes and not chunks:
            if nxt < len(reqs):
                wait = reqs[nxt][0] - (time.perf_counter() - t0)
                if wait > 0:
                    time.sleep(min(wait, 0.01))
            continue
        start = time.perf_counter() - t0
        if not chunks and graphs is not None:
            graphs.run([r["slot"] for r in decodes], [r["ctx"] for r in decodes])
        else:
            toks = [0] * (len(decodes) + sum(n for _, n in chunks))
            pos = [r["ctx"] for r in decodes]
            for r, n in chunks:
                pos += list(range(r["ctx"], r["ctx"] + n))
            tok_t = torch.tensor(toks, device=dev)
            pos_t = torch.tensor(pos, device=dev)
            ds = torch.tensor([r["slot"] for r in decodes] or [0], dtype=torch.int32, device=dev)
            dl = torch.tensor([r["ctx"] + 1 for r in decodes] or [1], dtype=torch.int32, device=dev)
            with sdpa_kernel(SDPA_BACKENDS):
                model.forward(tok_t, pos_t, ds, dl, len(decodes), [(r["slot"], r["ctx"], n) for r, n in chunks])
        launched = time.perf_counter() - t0      # the host is done launching (the GPU may still run)
        sync()
        end = time.perf_counter() - t0
        it_rows.append({"rate": label, "iteration": n_it, "start_s": start, "end_s": end, "launched_s": launched,
                        "prefill_tokens": sum(n for _, n in chunks), "prefill_chunks": len(chunks),
                        "chunks": ";".join(f"{n}@{r['ctx']}" for r, n in chunks),
                        "decode_seqs": len(decodes), "decode_context_tokens": sum(r["ctx"] for r in decodes),
                        "decode_context_max": max((r["ctx"] for r in decodes), default=0),
                        "graph": int(not chunks and graphs is not None), "running": len(running),
                        "waiting": len(waiting)})
        n_it += 1
        for r in decodes:
            r["ctx"] += 1
            r["gen"] += 1
            r["last"] = end
        for r, n in chunks:
            r["ctx"] += n
            r["to_prefill"] -= n
            if r["to_prefill"] == 0:
                r["gen"] += 1
                r["first"] = r["last"] = end
        fin = [r for r in running if r["gen"] >= r["output"]]
        for r in fin:
            r["finish"] = end
            running.remove(r)
            free.append(r["slot"])
            free.sort()
            done += 1
            req_rows.append({"rate": label, "id": r["id"], "arrival_s": r["arrival_s"], "prompt_tokens": r["prompt"],
                             "output_tokens": r["output"], "first_token_s": r["first"], "finish_s": r["finish"],
                             "ttft_s": r["first"] - r["arrival_s"],
                             "tpot_s": (r["last"] - r["first"]) / (r["gen"] - 1) if r["gen"] > 1 else float("nan"),
                             "e2e_s": r["finish"] - r["arrival_s"], "status": "finished"})
    for r in running + waiting:
        req_rows.append({"rate": label, "id": r["id"], "arrival_s": r["arrival_s"], "prompt_tokens": r["prompt"],
                         "output_tokens": r["output"], "first_token_s": r["first"], "finish_s": None,
                         "ttft_s": None, "tpot_s": None, "e2e_s": None, "status": "unfinished"})
    return done


def micro_decode(kc, vc, slots: int, reps: int = 50) -> list[dict]:
    """Both Triton decode-attention kernels (no split / split-KV) on a grid of batch x context,
    every sequence at the same length, CUDA-event timed (median of ``reps`` after a warm-up)."""
    rows = []
    for B in (1, 4, 16, 32, 64, 128):
        for ctx in (128, 512, 1024, 2000):
            if B > slots or ctx > kc.shape[2]:
                continue
            q = torch.randn(B, HEADS, HEAD_DIM, device=DEV, dtype=torch.bfloat16)
            sl = torch.arange(B, device=DEV, dtype=torch.int32)
            le = torch.full((B,), ctx, device=DEV, dtype=torch.int32)
            for name, fn in (("nosplit", decode_attn_triton), ("split", decode_attn_triton_split)):
                for _ in range(3):
                    fn(q, kc, vc, sl, le)
                ts = []
                for _ in range(reps):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    fn(q, kc, vc, sl, le)
                    e1.record()
                    e1.synchronize()
                    ts.append(e0.elapsed_time(e1) * 1e3)
                kv_bytes = 2 * B * KV_HEADS * ctx * HEAD_DIM * 2
                us = float(np.median(ts))
                rows.append({"kernel": name, "batch": B, "context": ctx, "median_us": round(us, 3),
                             "p10_us": round(float(np.percentile(ts, 10)), 3),
                             "kv_bytes": kv_bytes, "kv_gb_per_s": round(kv_bytes / us / 1e3, 1)})
    return rows


def smi(query: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], text=True,
                              capture_output=True, timeout=20).stdout.strip()
    except Exception as e:  # pragma: no cover
        return f"error: {e}"


def write_csv(path, rows):
    if not rows:
        return
    keys = list(rows[0].keys())
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=os.environ.get("OUT", "out"))
    ap.add_argument("--rates", type=float, nargs="+", default=[4.0, 8.0, 16.0])
    ap.add_argument("--duration-s", type=float, default=30.0)
    ap.add_argument("--drain-s", type=float, default=20.0)
    ap.add_argument("--slots", type=int, default=128)
    ap.add_argument("--max-len", type=int, default=2048)
    ap.add_argument("--token-budget", type=int, default=512)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-graphs", action="store_true")
    ap.add_argument("--cudnn-sdpa", action="store_true", help="let SDPA use cuDNN too (the first run's setting)")
    ap.add_argument("--bool-mask", action="store_true",
                    help="chunks behind cached tokens with a boolean mask (runs 1 and 2: SDPA's math path)")
    ap.add_argument("--decode-nosplit", action="store_true",
                    help="decode attention one program per (sequence, KV head), no split-KV (runs 1 and 2)")
    ap.add_argument("--micro-decode", action="store_true",
                    help="first time both decode-attention kernels on a grid of batch x context (decode_attn.csv)")
    ap.add_argument("--tiny", action="store_true", help="smoke test: 2 small layers (CPU with TRITON_INTERPRET=1)")
    args = ap.parse_args(argv)
    global HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB, DEV, BOOL_MASK, GROUP
    BOOL_MASK = args.bool_mask
    if args.tiny:
        HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 256, 2, 8, 2, 512, 1000
        GROUP = HEADS // KV_HEADS
    if not torch.cuda.is_available():
        DEV = "cpu"
    os.makedirs(args.out, exist_ok=True)
    if args.cudnn_sdpa:
        SDPA_BACKENDS.insert(0, SDPBackend.CUDNN_ATTENTION)
    torch.backends.cuda.matmul.allow_tf32 = False
    t_start = time.time()
    env = {"gpu": torch.cuda.get_device_name(0) if DEV == "cuda" else "cpu", "torch": torch.__version__, "cuda": torch.version.cuda,
           "triton": getattr(triton, "__version__", None) if HAVE_TRITON else None,
           "smi_start": smi("name,driver_version,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem,power.draw,"
                            "power.limit,temperature.gpu,memory.total"),
           "args": vars(args), "model": {"hidden": HIDDEN, "layers": LAYERS, "heads": HEADS, "kv_heads": KV_HEADS,
                                          "head_dim": HEAD_DIM, "ffn": FFN, "vocab": VOCAB, "dtype": "bf16"}}
    print(env, flush=True)
    model = Model(args.slots + 1, args.max_len, DEV)       # the last slot is the padding rows' scratch
    env["init_s"] = time.time() - t_start
    # check the Triton decode-attention kernel against the reference
    impl = "reference"
    triton_attn = decode_attn_triton if args.decode_nosplit else decode_attn_triton_split
    if HAVE_TRITON:
        try:
            B = 24
            q = torch.randn(B, HEADS, HEAD_DIM, device=DEV, dtype=torch.bfloat16)
            kc = torch.randn(args.slots + 1, KV_HEADS, args.max_len, HEAD_DIM, device=DEV, dtype=torch.bfloat16)
            vc = torch.randn_like(kc)
            sl = torch.randperm(args.slots, device=DEV)[:B].to(torch.int32)
            le = torch.randint(1, args.max_len, (B,), device=DEV, dtype=torch.int32)
            le[0] = 1                                          # a split with one token, others empty
            err = (triton_attn(q, kc, vc, sl, le).float() - decode_attn_ref(q, kc, vc, sl, le).float()).abs().max()
            env["triton_check_max_abs_err"] = float(err)
            if args.micro_decode and DEV == "cuda":
                write_csv(os.path.join(args.out, "decode_attn.csv"), micro_decode(kc, vc, args.slots))
            del kc, vc
            if float(err) < 2e-2:
                impl = "triton_nosplit" if args.decode_nosplit else "triton_split"
        except Exception as e:
            env["triton_error"] = repr(e)[:500]
    env["decode_attention"] = impl
    model.attn = triton_attn if impl.startswith("triton") else decode_attn_ref
    graphs = None
    if impl.startswith("triton") and not args.no_graphs and DEV == "cuda":
        t = time.time()
        buckets = [b for b in (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128)
                   if b <= args.slots] + ([args.slots] if args.slots > 128 else [])
        graphs = DecodeGraphs(model, buckets, args.slots)
        env["graph_capture_s"] = time.time() - t
        env["graph_buckets"] = buckets
    # warm the eager path (cuBLAS heuristics, SDPA) on a few chunk shapes
    for n in (16, 128, 512):
        with sdpa_kernel(SDPA_BACKENDS):
            model.forward(torch.zeros(n, dtype=torch.long, device=DEV), torch.arange(n, device=DEV),
                          torch.zeros(1, dtype=torch.int32, device=DEV),
                          torch.ones(1, dtype=torch.int32, device=DEV), 0, [(args.slots, 0, n)])
    sync()
    print(f"ready after {time.time() - t_start:.1f} s, attention {impl}", flush=True)
    its, reqs_out = [], []
    for i, rate in enumerate(args.rates):
        reqs = workload(rate, args.duration_s, args.seed + i)
        t = time.time()
        done = serve(model, graphs, reqs, args.slots, args.token_budget, f"{rate:g}", its, reqs_out, args.drain_s)
        print(f"rate {rate:g}/s: {done}/{len(reqs)} requests in {time.time() - t:.1f} s", flush=True)
        write_csv(os.path.join(args.out, "iterations.csv"), its)
        write_csv(os.path.join(args.out, "requests.csv"), reqs_out)
    env["smi_end"] = smi("clocks.sm,clocks.mem,power.draw,temperature.gpu")
    env["total_s"] = time.time() - t_start
    with open(os.path.join(args.out, "env.json"), "w") as f:
        json.dump(env, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
