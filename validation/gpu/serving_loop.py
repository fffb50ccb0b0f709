#!/usr/bin/env python3
"""A real LLM serving loop on one GPU, to validate `sim serve` (issue 13).  Standalone: it
never imports `sim`.

A Llama-style model with Llama-3-8B's shapes (32 layers, hidden 4096, 32 query / 8 KV heads
of 128, SwiGLU 14336, vocabulary 128256) and random bf16 weights; a preallocated KV cache
of ``--slots`` sequences x ``--max-len`` tokens; continuous batching with chunked prefill
(Sarathi-style: every iteration holds at most ``--token-budget`` new tokens, decodes first,
then prompt chunks first come first served); decode-only iterations replay a CUDA graph
captured per batch-size bucket.  Decode attention is a split-KV (flash-decoding) Triton
kernel that reads each sequence's own context only (the way paged attention does) and a
combine kernel, checked against a plain PyTorch reference at start-up (the loop falls back
to the reference, eagerly, if the kernel is unavailable or wrong; env.json says which ran).

Iterations with prompt chunks (``--graphs``):

* ``all`` (the default; run 6): replayed from CUDA graphs too, as vLLM V1 / TensorRT-LLM /
  SGLang run mixed batches.  One graph per token bucket (:data:`TOKEN_BUCKETS`) holds the
  model's body over that many rows - the decoding sequences' rows, then the chunks' tokens,
  then padding rows (the scratch slot) - with every per-iteration value (token ids,
  positions, cache slots, decode lengths, the chunk table and the prefill kernel's tile
  table) written into one static device buffer before the replay; the LM head is its own
  graph per bucket of the rows that need logits.  Prompt chunks' attention is one varlen
  Triton kernel per layer (causal mask aligned to the bottom right, behind the chunk's
  cached tokens; lengths read from device tensors, so no shape changes), the decoding
  sequences' the split-KV kernel over a fixed number of rows (rows of length 0 do nothing).
  Both are checked against fp32 references at start-up, and one mixed iteration through the
  graphs against the eager forward; an iteration the graphs cannot hold (more than
  :data:`CMAX` chunks) runs eagerly (iterations.csv ``graph`` 0).
* ``decode`` (runs 1-5): eager.  A prompt chunk behind cached tokens runs SDPA with a
  bottom-right causal mask (``causal_lower_right``: FlashAttention), as measure_models.py
  does.  ``--bool-mask --decode-nosplit`` reproduce the first runs (a boolean mask, which
  with GQA sends SDPA to its math path; one decode program per sequence and KV head).

Requests arrive as a Poisson process (fixed seed) at each ``--rates`` value for
``--duration-s`` seconds; prompt and output lengths are lognormal.  Every iteration (start,
end, prefill chunks, decoding sequences and their contexts) and every request (arrival,
first token, finish, TTFT, TPOT) is written as CSV; env.json holds the GPU, driver, clocks
and torch version.

    python3 validation/gpu/serving_loop.py --out $OUT --rates 4 8 16 --duration-s 60 --drain-s 15 \
        --micro-graph-host 10 --micro-chunk-attn                     # run 6
    python3 validation/gpu/serving_loop.py --graphs decode --out $OUT --rates 4 8 16 --duration-s 60 \
        --drain-s 15                                                   # runs 3-5 (and 4)

CPU smoke test of either mode (tiny model, fp32, the Triton interpreter; slow):
``TRITON_INTERPRET=1 python3 validation/gpu/serving_loop.py --tiny --slots 32 --max-len 256
--token-budget 64 --rates 4 --duration-s 2 --drain-s 60 --out /tmp/x``.
"""
from __future__ import annotations

import argparse
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from micro_csv import write_rows  # noqa: E402

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
#: the model's activation and weight format (bf16; the CPU smoke test runs fp32, since the
#: Triton interpreter mishandles bf16)
DT = torch.bfloat16


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
                                  CHUNK: tl.constexpr, SPLITS: tl.constexpr, DYN: tl.constexpr,
                                  SKIP: tl.constexpr = False):
        # flash-decoding: program (b, kh, sp) covers tokens [sp*CHUNK, (sp+1)*CHUNK) of sequence
        # b's own context and writes its unnormalised partial (max, sum, acc) for the combine.
        # SKIP (--graphs all): a split past the sequence's length (a row of length 0 included)
        # neither loads q nor writes a partial; the combine reads only the splits in use
        b = tl.program_id(0)
        kh = tl.program_id(1)
        sp = tl.program_id(2)
        n = tl.load(Lens + b)
        slot = tl.load(Slots + b).to(tl.int64)
        offs_g = tl.arange(0, GP)
        offs_d = tl.arange(0, D)
        offs_t = tl.arange(0, BLOCK)
        lo = sp * CHUNK
        gmask = offs_g < G
        if SKIP:
            gmask = gmask & (lo < n)
        q = tl.load(Q + b * sq_b + (kh * G + offs_g)[:, None] * sq_h + offs_d[None, :], mask=gmask[:, None],
                    other=0.0)
        m = tl.full([GP], float("-inf"), tl.float32)
        l = tl.zeros([GP], tl.float32)
        acc = tl.zeros([GP, D], tl.float32)
        kb = K + slot * sk_s + kh * sk_h
        vb = V + slot * sk_s + kh * sk_h
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
                                    SP: tl.constexpr, Lens=None, CHUNK: tl.constexpr = 1, SKIP: tl.constexpr = False):
        b = tl.program_id(0)
        h = tl.program_id(1)
        offs_s = tl.arange(0, SP)
        offs_d = tl.arange(0, D)
        smask = offs_s < SPLITS
        omask = offs_d < D
        if SKIP:     # only the splits the sequence reaches; a row of length 0 is not written
            n = tl.load(Lens + b)
            smask = smask & (offs_s * CHUNK < n)
            omask = omask & (n > 0)
        row = (b * H + h) * SPLITS + offs_s
        m = tl.load(Mo + row, mask=smask, other=float("-inf"))
        l = tl.load(Lo + row, mask=smask, other=0.0)
        mx = tl.max(m, axis=0)
        w = tl.where(m == float("-inf"), 0.0, tl.exp(m - mx))
        acc = tl.load(Ao + row[:, None] * D + offs_d[None, :], mask=smask[:, None], other=0.0)
        out = tl.sum(acc * w[:, None], axis=0) / tl.sum(l * w, axis=0)
        tl.store(O + b * so_b + h * so_h + offs_d, out.to(O.dtype.element_ty), mask=omask)

    @triton.jit
    def _chunk_attn_kernel(Q, K, V, O, TileChunk, TileQ0, NTiles, CSlot, CStart, CLen, CRow,
                           sq_t, sq_h, sk_s, sk_h, sk_t, so_t, so_h, scale,
                           G: tl.constexpr, D: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
                           KMAX: tl.constexpr, DYN: tl.constexpr):
        # varlen prefill attention for --graphs all: program (tile, head) takes BM query rows of
        # one prompt chunk (chunk c's rows q0 .. q0+BM of its n new tokens, which sit behind
        # `start` cached tokens of its sequence's cache slot) and one query head, and walks that
        # slot's keys 0 .. start+min(q0+BM, n) with the causal mask aligned to the bottom right
        # (query i sees keys <= start+i).  Every length is read from device tensors (the tile
        # table is built by the host before the graph replays); tiles past NTiles do nothing
        tile = tl.program_id(0)
        h = tl.program_id(1)
        nt = tl.load(NTiles)
        if tile < nt:
            c = tl.load(TileChunk + tile)
            q0 = tl.load(TileQ0 + tile)
            slot = tl.load(CSlot + c).to(tl.int64)
            start = tl.load(CStart + c)
            n = tl.load(CLen + c)
            row0 = tl.load(CRow + c)
            kh = h // G
            offs_m = q0 + tl.arange(0, BM)
            offs_d = tl.arange(0, D)
            offs_n = tl.arange(0, BN)
            mm = offs_m < n
            rows = (row0 + offs_m).to(tl.int64)
            q = tl.load(Q + rows[:, None] * sq_t + h * sq_h + offs_d[None, :], mask=mm[:, None], other=0.0)
            qpos = start + offs_m
            kend = start + tl.minimum(q0 + BM, n)
            m_i = tl.full([BM], float("-inf"), tl.float32)
            l_i = tl.zeros([BM], tl.float32)
            acc = tl.zeros([BM, D], tl.float32)
            kb = K + slot * sk_s + kh * sk_h
            vb = V + slot * sk_s + kh * sk_h
            for s0 in range(0, kend if DYN else KMAX, BN):
                t = s0 + offs_n
                tm = t < kend
                k = tl.load(kb + t[:, None] * sk_t + offs_d[None, :], mask=tm[:, None], other=0.0)
                sc = tl.dot(q, tl.trans(k)) * scale
                sc = tl.where((t[None, :] <= qpos[:, None]) & tm[None, :], sc, float("-inf"))
                m_new = tl.maximum(m_i, tl.max(sc, axis=1))
                m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
                p = tl.exp(sc - m_safe[:, None])
                alpha = tl.exp(m_i - m_safe)
                l_i = l_i * alpha + tl.sum(p, axis=1)
                v = tl.load(vb + t[:, None] * sk_t + offs_d[None, :], mask=tm[:, None], other=0.0)
                acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
                m_i = m_new
            out = acc / tl.where(l_i == 0.0, 1.0, l_i)[:, None]
            tl.store(O + rows[:, None] * so_t + h * so_h + offs_d[None, :], out.to(O.dtype.element_ty),
                     mask=mm[:, None])
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


def decode_attn_triton_split(q, kc, vc, slots, lens, skip: bool = False, out=None):
    """As :func:`decode_attn_triton`, split-KV: ceil(max_len / SPLIT_CHUNK) programs per
    (sequence, KV head), each over its share of the sequence's own context, then one combine
    program per (sequence, head).  The grid is fixed by the cache's length (CUDA graphs);
    programs past a sequence's length only write an empty partial (``skip``: write nothing,
    and rows of length 0 are left as they are in ``out``: the mixed graphs of ``--graphs all``
    run this kernel over a fixed number of rows, of which the decoding sequences are the first)."""
    B = q.shape[0]
    splits = -(-kc.shape[2] // SPLIT_CHUNK)
    mo = torch.empty(B * HEADS * splits, device=q.device, dtype=torch.float32)
    lo = torch.empty_like(mo)
    ao = torch.empty(B * HEADS * splits, HEAD_DIM, device=q.device, dtype=torch.float32)
    o = torch.empty_like(q) if out is None else out
    _decode_attn_split_kernel[(B, KV_HEADS, splits)](q, kc, vc, mo, lo, ao, slots, lens, q.stride(0), q.stride(1),
                                                     kc.stride(0), kc.stride(1), kc.stride(2),
                                                     1.0 / math.sqrt(HEAD_DIM), G=GROUP, GP=16, D=HEAD_DIM,
                                                     BLOCK=64, CHUNK=SPLIT_CHUNK, SPLITS=splits,
                                                     DYN=os.environ.get("TRITON_INTERPRET") != "1",
                                                     SKIP=skip, num_warps=4, num_stages=2)
    if skip:
        _decode_attn_combine_kernel[(B, HEADS)](mo, lo, ao, o, o.stride(0), o.stride(1), HEADS, D=HEAD_DIM,
                                                SPLITS=splits, SP=triton.next_power_of_2(splits), Lens=lens,
                                                CHUNK=SPLIT_CHUNK, SKIP=True, num_warps=4)
    else:
        _decode_attn_combine_kernel[(B, HEADS)](mo, lo, ao, o, o.stride(0), o.stride(1), HEADS, D=HEAD_DIM,
                                                SPLITS=splits, SP=triton.next_power_of_2(splits), num_warps=4)
    return o


def decode_attn_triton_split_skip(q, kc, vc, slots, lens):
    return decode_attn_triton_split(q, kc, vc, slots, lens, skip=True)


#: the varlen prefill kernel's query rows per program and keys per step (--graphs all)
CHUNK_BM, CHUNK_BN = 64, 64


def chunk_tiles(T: int, cmax: int) -> int:
    """Programs along the query axis a graph of ``T`` rows launches: every chunk of n rows takes
    ceil(n / CHUNK_BM) tiles, so at most T / CHUNK_BM + one per chunk."""
    return -(-T // CHUNK_BM) + min(cmax, T)


def chunk_attn_triton(q, kc, vc, o, meta, ntiles_grid: int):
    """Prompt chunks' attention (every chunk of the iteration in one launch): ``q`` [T, HEADS,
    D] (a view), ``o`` [T, HEADS, D]; ``meta``: the device tensors of :class:`StaticInputs`
    (tile table, tile count, chunk slots / starts / lengths / first rows)."""
    _chunk_attn_kernel[(ntiles_grid, HEADS)](
        q, kc, vc, o, meta["tchunk"], meta["tq0"], meta["ntiles"], meta["cslot"], meta["cstart"], meta["clen"],
        meta["crow"], q.stride(0), q.stride(1), kc.stride(0), kc.stride(1), kc.stride(2), o.stride(0), o.stride(1),
        1.0 / math.sqrt(HEAD_DIM), G=GROUP, D=HEAD_DIM, BM=CHUNK_BM, BN=CHUNK_BN, KMAX=kc.shape[2],
        DYN=os.environ.get("TRITON_INTERPRET") != "1", num_warps=4, num_stages=2)
    return o


def chunk_attn_ref(q, kc, vc, chunks):
    """Reference for :func:`chunk_attn_triton` in fp32: ``chunks`` (slot, start, n, row0) on
    the host; returns {row0: [n, HEADS, D]}."""
    out = {}
    for slot, start, n, row0 in chunks:
        qq = q[row0:row0 + n].float().transpose(0, 1)                    # [H, n, D]
        k = kc[slot, :, : start + n].float().repeat_interleave(GROUP, dim=0)   # [H, start+n, D]
        v = vc[slot, :, : start + n].float().repeat_interleave(GROUP, dim=0)
        s = qq @ k.transpose(1, 2) / math.sqrt(HEAD_DIM)
        allowed = torch.arange(start + n, device=q.device)[None, :] <= (start + torch.arange(n, device=q.device))[:, None]
        s = s.masked_fill(~allowed[None], float("-inf"))
        out[row0] = (torch.softmax(s, dim=-1) @ v).transpose(0, 1)
    return out


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
        bf = DT

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

    def forward(self, tok, pos, dec_slots, dec_lens, n_dec: int, chunks, hidden: bool = False):
        """``tok``/``pos`` [T]: the ``n_dec`` decode rows first, then each chunk's tokens;
        ``chunks``: list of (slot, start, n) (host ints); returns next tokens of logit rows
        (``hidden``: the last layer's output instead, for the start-up check)."""
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
        if hidden:
            return x
        rows = list(range(n_dec))
        off = n_dec
        for _, _, n in chunks:
            off += n
            rows.append(off - 1)
        idx = torch.tensor(rows, device=tok.device) if chunks else None
        xr = x[:n_dec] if idx is None else x[idx]
        logits = F.rms_norm(xr, (HIDDEN,), self.final_norm, RMS_EPS) @ self.lm_head
        return logits.argmax(dim=-1)

    def forward_static(self, S: "StaticInputs", T: int):
        """The body of a mixed CUDA graph (``--graphs all``): ``T`` rows (a bucket: the decoding
        sequences' rows, then the prompt chunks' rows, then padding) whose token ids,
        positions, cache slots, decode lengths and chunk table are read from ``S``'s device
        tensors, so that one capture serves every iteration of up to ``T`` new tokens.  Every
        row's K/V is written to its (slot, position) (padding rows: the scratch slot); the
        decoding sequences' attention is the split-KV kernel over the first ``min(T, slots)``
        rows (rows of length 0 do nothing), the chunks' one varlen kernel launch per layer.
        The last layer writes its output into ``S.x``."""
        d = S.d
        tok, pos, rs = d["tok"][:T], d["pos"][:T], d["rslot"][:T]
        dmax = min(T, S.dmax)
        ntg = chunk_tiles(T, S.cmax)
        x = self.emb[tok]
        o = torch.empty(T, HEADS, HEAD_DIM, device=x.device, dtype=x.dtype)
        for li, L in enumerate(self.layers):
            h = F.rms_norm(x, (HIDDEN,), L["attn_norm"], RMS_EPS)
            qkv = h @ L["wqkv"]
            qk = self.rope(qkv[:, : (HEADS + KV_HEADS) * HEAD_DIM].view(T, HEADS + KV_HEADS, HEAD_DIM), pos)
            q = qk[:, :HEADS]
            kc, vc = self.kc[li], self.vc[li]
            kc[rs, :, pos] = qk[:, HEADS:]
            vc[rs, :, pos] = qkv[:, (HEADS + KV_HEADS) * HEAD_DIM:].view(T, KV_HEADS, HEAD_DIM)
            decode_attn_triton_split(q[:dmax], kc, vc, d["dslot"][:dmax], d["dlen"][:dmax], skip=True, out=o[:dmax])
            chunk_attn_triton(q, kc, vc, o, d, ntg)
            x = x + o.view(T, HEADS * HEAD_DIM) @ L["wo"]
            h = F.rms_norm(x, (HIDDEN,), L["mlp_norm"], RMS_EPS)
            gu = h @ L["wgu"]
            y = (F.silu(gu[:, :FFN]) * gu[:, FFN:]) @ L["wdown"]
            if li == len(self.layers) - 1:
                torch.add(x, y, out=S.x[:T])
            else:
                x = x + y

    def head_static(self, S: "StaticInputs", L: int):
        """The LM head of a mixed iteration (its own graph per row bucket): the rows that need
        logits gathered from ``S.x``, the final norm, the head GEMM and the argmax."""
        xr = S.x[S.d["lrows"][:L]]
        return (F.rms_norm(xr, (HIDDEN,), self.final_norm, RMS_EPS) @ self.lm_head).argmax(dim=-1)


#: --graphs all: the token counts graphs are captured at (an iteration replays the smallest
#: bucket that holds its new tokens; the rows that need logits take the same buckets).  Up to
#: 128 the decode buckets, then steps of 32 up to the largest token budget
TOKEN_BUCKETS = (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256,
                 288, 320, 352, 384, 416, 448, 480, 512)
#: at most this many prompt chunks in a mixed graph (an iteration with more runs eagerly; with
#: 16-token prompts at least, a 512-token budget holds at most 33)
CMAX = 40


def bucket_of(buckets, n: int):
    for b in buckets:
        if b >= n:
            return b
    return None


class StaticInputs:
    """What a mixed graph reads: one int64 device buffer (token ids, positions and cache slots
    per row; the decoding rows' slots and lengths; the chunk table: slot, start, length, first
    row; the varlen kernel's tile table and tile count; the rows that need logits), filled from
    a pinned host copy in one transfer per iteration, and the final hidden states ``x``."""

    def __init__(self, tmax: int, dmax: int, cmax: int, scratch: int, dev):
        self.tmax, self.dmax, self.cmax, self.scratch = tmax, dmax, cmax, scratch
        self.ntmax = chunk_tiles(tmax, cmax)
        sizes = [("tok", tmax), ("pos", tmax), ("rslot", tmax), ("dslot", dmax), ("dlen", dmax), ("cslot", cmax),
                 ("cstart", cmax), ("clen", cmax), ("crow", cmax), ("tchunk", self.ntmax), ("tq0", self.ntmax),
                 ("ntiles", 1), ("lrows", tmax)]
        total = sum(n for _, n in sizes)
        self.dev_buf = torch.zeros(total, dtype=torch.long, device=dev)
        self.host = torch.zeros(total, dtype=torch.long, pin_memory=(str(dev).startswith("cuda")))
        self.np = self.host.numpy()
        self.d, self.h = {}, {}
        o = 0
        for name, n in sizes:
            self.d[name] = self.dev_buf[o:o + n]
            self.h[name] = self.np[o:o + n]
            o += n
        self.x = torch.zeros(tmax, HIDDEN, dtype=DT, device=dev)
        self.fill([], [], [])
        self.upload()

    def fits(self, n_dec: int, chunks) -> bool:
        T = n_dec + sum(n for _, _, n in chunks)
        return T <= self.tmax and n_dec <= self.dmax and len(chunks) <= self.cmax

    def fill(self, dec_slots, dec_ctx, chunks) -> tuple[int, int]:
        """The host side of a mixed iteration: decoding sequences (slots, cached tokens) and
        chunks (slot, start, n) laid out into the pinned buffer; returns (rows, logit rows)."""
        h = self.h
        self.np[:] = 0
        h["rslot"][:] = self.scratch
        h["dslot"][:] = self.scratch
        nd = len(dec_slots)
        if nd:
            h["pos"][:nd] = dec_ctx
            h["rslot"][:nd] = dec_slots
            h["dslot"][:nd] = dec_slots
            h["dlen"][:nd] = np.asarray(dec_ctx) + 1
        row = nd
        nt = 0
        for c, (slot, start, n) in enumerate(chunks):
            h["pos"][row:row + n] = np.arange(start, start + n)
            h["rslot"][row:row + n] = slot
            h["cslot"][c], h["cstart"][c], h["clen"][c], h["crow"][c] = slot, start, n, row
            for q0 in range(0, n, CHUNK_BM):
                h["tchunk"][nt], h["tq0"][nt] = c, q0
                nt += 1
            row += n
        h["ntiles"][0] = nt
        L = nd + len(chunks)
        h["lrows"][:nd] = np.arange(nd)
        ends = np.cumsum([n for _, _, n in chunks]) + nd - 1
        h["lrows"][nd:L] = ends
        return row, L

    def upload(self):
        self.dev_buf.copy_(self.host, non_blocking=True)


class MixedGraphs:
    """--graphs all: one CUDA graph per token bucket for iterations with prompt chunks
    (:meth:`Model.forward_static`) and one per row bucket for their LM head
    (:meth:`Model.head_static`).  Without CUDA (the CPU smoke test) the same static code runs
    uncaptured."""

    def __init__(self, model: Model, S: StaticInputs, buckets, head_buckets, capture: bool):
        self.m, self.S, self.capture = model, S, capture
        self.buckets, self.head_buckets = sorted(buckets), sorted(head_buckets)
        self.graphs, self.heads, self.outs = {}, {}, {}
        if not capture:
            return
        self.pool = torch.cuda.graph_pool_handle()
        st = torch.cuda.Stream()
        st.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(st):
            for T in self.buckets:
                for _ in range(2):
                    model.forward_static(S, T)
            for L in self.head_buckets:
                for _ in range(2):
                    model.head_static(S, L)
        torch.cuda.current_stream().wait_stream(st)
        for T in reversed(self.buckets):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                model.forward_static(S, T)
            self.graphs[T] = g
        for L in reversed(self.head_buckets):
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=self.pool):
                self.outs[L] = model.head_static(S, L)
            self.heads[L] = g
        sync()

    def fits(self, n_dec: int, chunks) -> bool:
        T = n_dec + sum(n for _, _, n in chunks)
        return self.S.fits(n_dec, chunks) and bucket_of(self.buckets, T) is not None and \
            bucket_of(self.head_buckets, n_dec + len(chunks)) is not None

    def run(self, dec_slots, dec_ctx, chunks) -> tuple[int, int]:
        """One mixed iteration; returns the (token, logit-row) buckets it replayed."""
        T, L = self.S.fill(dec_slots, dec_ctx, chunks)
        tb, lb = bucket_of(self.buckets, T), bucket_of(self.head_buckets, L)
        self.S.upload()
        if self.capture:
            self.graphs[tb].replay()
            self.heads[lb].replay()
            self.last = self.outs[lb]
        else:
            self.m.forward_static(self.S, tb)
            self.last = self.m.head_static(self.S, lb)
        return tb, lb


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


def workload(rate: float, duration_s: float, seed: int, max_len: int = 2048):
    rng = np.random.default_rng(seed)
    n = int(rate * duration_s * 2 + 50)
    t = np.cumsum(rng.exponential(1.0 / rate, size=n))
    t = t[t < duration_s]
    m = len(t)
    # lognormal lengths (medians 256 prompt / 96 output tokens, sigma 0.8), clipped so that
    # prompt + output fits the 2,048-token slots
    # (a smaller --max-len, the CPU smoke test, scales the clips)
    p = np.clip(np.rint(rng.lognormal(math.log(256), 0.8, size=m)), 16, 1536 * max_len // 2048).astype(int)
    o = np.clip(np.rint(rng.lognormal(math.log(96), 0.8, size=m)), 8, 480 * max_len // 2048).astype(int)
    return [(float(t[i]), int(p[i]), int(o[i])) for i in range(m)]


def serve(model: Model, graphs: DecodeGraphs | None, reqs, slots: int, budget: int, label: str, it_rows, req_rows,
          drain_s: float, mixed: MixedGraphs | None = None):
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
        padded = logit_rows = 0
        graph = 0
        if not chunks and graphs is not None:
            graphs.run([r["slot"] for r in decodes], [r["ctx"] for r in decodes])
            padded = logit_rows = graphs.bucket(len(decodes))
            graph = 1
        elif chunks and mixed is not None and mixed.fits(len(decodes), [(r["slot"], r["ctx"], n) for r, n in chunks]):
            padded, logit_rows = mixed.run([r["slot"] for r in decodes], [r["ctx"] for r in decodes],
                                           [(r["slot"], r["ctx"], n) for r, n in chunks])
            graph = 1
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
                        "graph": graph, "running": len(running), "waiting": len(waiting),
                        **({"tokens_padded": padded, "logit_rows_padded": logit_rows} if mixed is not None else {})})
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
            q = torch.randn(B, HEADS, HEAD_DIM, device=DEV, dtype=DT)
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


def _rel(a, b) -> float:
    a, b = a.float(), b.float()
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def check_graph_kernels(q, kc, vc, sl, le, args) -> dict:
    """--graphs all: the split-KV kernel with rows of length 0 (left as they were) and the
    varlen prefill kernel on random chunks (behind 0 to ~1,000 cached tokens, 1 to 200 new,
    some sharing a tile boundary) against fp32 references, on fresh random data; the output is
    poisoned first so that every row the kernels must write is checked as written."""
    out = {}
    B = q.shape[0]
    le0 = le.clone()
    le0[B // 2:] = 0
    o = torch.full_like(q, float("nan"))
    decode_attn_triton_split(q, kc, vc, sl, le0, skip=True, out=o)
    ref = decode_attn_ref(q[: B // 2], kc, vc, sl[: B // 2], le0[: B // 2])
    out["decode_skip_rel_err"] = _rel(o[: B // 2], ref)
    out["decode_skip_untouched"] = bool(torch.isnan(o[B // 2:]).all())
    ml = args.max_len
    g = torch.Generator().manual_seed(1)
    trials = []
    for trial in range(3):
        chunks = []
        if trial == 2:        # one long chunk behind many cached tokens
            n = min(512, ml // 2)
            chunks.append((1, ml - n, n))
        for c in range(5 if trial < 2 else 0):
            n = CHUNK_BM if (trial == 1 and c == 0) else int(torch.randint(1, 201, (1,), generator=g))
            start = int(torch.randint(1, max(2, min(1000, ml - n)), (1,), generator=g)) if c % 2 else 0
            chunks.append(((c + 1) % args.slots, min(start, ml - n), n))
        nd = 3 if trial == 0 else 0
        S = StaticInputs(sum(n for _, _, n in chunks) + nd, max(nd, 1), CMAX, args.slots, q.device)
        T, _ = S.fill([0] * nd, [5] * nd, chunks)
        S.upload()
        qq = torch.randn(T, HEADS + KV_HEADS, HEAD_DIM, device=q.device, dtype=DT)[:, :HEADS]
        oo = torch.full((T, HEADS, HEAD_DIM), float("nan"), device=q.device, dtype=DT)
        chunk_attn_triton(qq, kc, vc, oo, S.d, chunk_tiles(T, CMAX))
        rows, errs = nd, []
        refs = chunk_attn_ref(qq, kc, vc, [(sl_, st, n, r) for (sl_, st, n), r in
                                           zip(chunks, np.cumsum([nd] + [n for _, _, n in chunks])[:-1])])
        for r0, rr in refs.items():
            errs.append(_rel(oo[r0:r0 + rr.shape[0]], rr))
        trials.append({"chunks": chunks, "rel_err": max(errs), "decode_rows_untouched":
                       bool(torch.isnan(oo[:nd]).all()) if nd else True})
    out["chunk_trials"] = trials
    out["chunk_max_rel_err"] = max(t["rel_err"] for t in trials)
    out["ok"] = bool(out["decode_skip_rel_err"] < 2e-2 and out["decode_skip_untouched"]
                     and out["chunk_max_rel_err"] < 2e-2 and all(t["decode_rows_untouched"] for t in trials))
    print("graph kernel checks:", out, flush=True)
    return out


def check_end_to_end(model: Model, mixed: "MixedGraphs", args) -> dict:
    """--graphs all: one mixed iteration (3 decoding sequences, 3 chunks, one behind cached
    tokens) through the captured graphs and through the eager forward (SDPA for the chunks):
    the last layer's output and the next tokens must agree."""
    s = args.slots
    dec_slots, dec_ctx = [0, 1, 2], [40, 130, 5]
    room = mixed.S.tmax - 3
    chunks = [(3 % s, 0, min(100, room // 2)), (4 % s, 64, min(30, room // 4)), (5 % s, min(200, args.max_len - 2), 1)]
    mixed.run(dec_slots, dec_ctx, chunks)
    sync()
    T = 3 + sum(n for *_, n in chunks)
    xg = mixed.S.x[:T].clone()
    tok_g = mixed.last.clone()
    toks = torch.zeros(T, dtype=torch.long, device=DEV)
    pos = torch.tensor(dec_ctx + [p for _, st, n in chunks for p in range(st, st + n)], device=DEV)
    ds = torch.tensor(dec_slots, dtype=torch.int32, device=DEV)
    dl = torch.tensor([c + 1 for c in dec_ctx], dtype=torch.int32, device=DEV)
    with sdpa_kernel(SDPA_BACKENDS):
        xe = model.forward(toks, pos, ds, dl, 3, chunks, hidden=True)
        tok_e = model.forward(toks, pos, ds, dl, 3, chunks)
    sync()
    L = 3 + len(chunks)
    out = {"hidden_rel_err": _rel(xg, xe), "next_tokens_equal": int((tok_g[:L] == tok_e[:L]).sum()), "rows": L}
    # bf16 through every layer, with other GEMM shapes (the bucket's rows) and another chunk
    # attention (Triton varlen against SDPA flash): small differences, not bit equality
    out["ok"] = bool(out["hidden_rel_err"] < 0.2)
    print("end-to-end check:", out, flush=True)
    return out


def micro_graph_host(graphs: "DecodeGraphs", mixed: "MixedGraphs", args, ) -> list[dict]:
    """Host set-up (start to the replay calls' return) and wall time (to the end of the
    device's work) of graph iterations of fixed compositions, ``--micro-graph-host`` rounds,
    each round a new shuffled order (so that every composition sees the same host)."""
    s = args.slots
    def sl(a, b):
        return [i % s for i in range(a, b)]
    comps = {f"decode{b}": (sl(0, b), [256] * b, []) for b in (1, 16, 64, min(128, s))}
    comps.update({
        "chunk256": ([], [], [(0, 0, 256)]),
        "d16+chunk256@256": (sl(1, 17), [300] * 16, [(0, 256, 256)]),
        "d64+2chunks": (sl(2, 66), [500] * 64, [(0, 0, 128), (1 % s, 512, 64)]),
        "d100+4chunks": (sl(4, 104), [700] * 100, [(0, 0, 100), (1 % s, 300, 100), (2 % s, 0, 100), (3 % s, 900, 100)]),
        "chunk512@1024": ([], [], [(0, 1024, 512)]),
    })
    rng = np.random.default_rng(7)
    rows = []
    names = list(comps)
    for rnd in range(args.micro_graph_host + 2):
        rng.shuffle(names)
        for name in names:
            sl, ctx, ch = comps[name]
            t0 = time.perf_counter()
            if ch:
                tb, lb = mixed.run(sl, ctx, ch)
            else:
                graphs.run(sl, ctx)
                tb = lb = graphs.bucket(len(sl))
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            if rnd >= 2:      # two warm-up rounds
                rows.append({"round": rnd - 2, "label": name, "kind": "mixed" if ch else "decode",
                             "decode_seqs": len(sl), "decode_context": ctx[0] if ctx else 0,
                             "chunks": ";".join(f"{n}@{st}" for _, st, n in ch), "tokens": len(sl) + sum(n for *_, n in ch),
                             "tokens_padded": tb, "logit_rows_padded": lb, "host_s": t1 - t0, "wall_s": t2 - t0})
    return rows


def micro_decode_ab(model: Model, args) -> list[dict]:
    """Decode-only CUDA-graph iterations with the split-KV decode kernel as ``--graphs decode``
    runs it (every split writes a partial) and as ``--graphs all`` runs it (``skip``), one set
    of decode graphs each, in the same process: per round a new shuffled order of (kernel,
    batch); host set-up and wall time, as micro_graph_host."""
    buckets = [1, 8, 16, 64]
    sets = {}
    for name, fn in (("split", decode_attn_triton_split), ("split_skip", decode_attn_triton_split_skip)):
        model.attn = fn
        sets[name] = DecodeGraphs(model, buckets, args.slots)
    rng = np.random.default_rng(11)
    keys = [(k, b) for k in sets for b in buckets]
    rows = []
    for rnd in range(args.micro_decode_ab + 2):
        rng.shuffle(keys)
        for k, b in keys:
            t0 = time.perf_counter()
            sets[k].run(list(range(b)), [300] * b)
            t1 = time.perf_counter()
            sync()
            t2 = time.perf_counter()
            if rnd >= 2:
                rows.append({"round": rnd - 2, "kernel": k, "decode_seqs": b, "decode_context": 300,
                             "host_s": t1 - t0, "wall_s": t2 - t0})
    return rows


def micro_chunk_attn(kc, vc, args, reps: int = 30, per_graph: int = 20) -> list[dict]:
    """The varlen prefill kernel alone, as the mixed graphs run it: ``per_graph`` launches
    captured in one CUDA graph, each replay CUDA-event timed, per launch the median of ``reps``
    replays after warm-up (``eager_us``: one eager launch, Triton's launcher included), on a
    few compositions of chunks (new@cached) in the bucket of their tokens."""
    cases = [[(64, 0)], [(256, 0)], [(512, 0)], [(256, 256)], [(256, 1024)], [(128, 1792)], [(512, 1024)],
             [(128, 512)] * 4, [(16, 0)] * 32]
    rows = []
    for case in cases:
        chunks = [(i % args.slots, st, n) for i, (n, st) in enumerate(case)]
        T = sum(n for _, _, n in chunks)
        Tb = bucket_of(TOKEN_BUCKETS, T) or T
        S = StaticInputs(Tb, 1, CMAX, args.slots, DEV)
        S.fill([], [], chunks)
        S.upload()
        q = torch.randn(Tb, HEADS + KV_HEADS, HEAD_DIM, device=DEV, dtype=DT)[:, :HEADS]
        o = torch.empty(Tb, HEADS, HEAD_DIM, device=DEV, dtype=DT)
        for _ in range(3):
            chunk_attn_triton(q, kc, vc, o, S.d, chunk_tiles(Tb, CMAX))
        def timed(fn, div):
            ts = []
            for _ in range(reps):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record()
                fn()
                e1.record()
                e1.synchronize()
                ts.append(e0.elapsed_time(e1) * 1e3 / div)
            return ts
        eager = timed(lambda: chunk_attn_triton(q, kc, vc, o, S.d, chunk_tiles(Tb, CMAX)), 1)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(per_graph):
                chunk_attn_triton(q, kc, vc, o, S.d, chunk_tiles(Tb, CMAX))
        g.replay()
        sync()
        ts = timed(g.replay, per_graph)
        flops = sum(4 * n * (st + (n + 1) / 2) * HEAD_DIM * HEADS for _, st, n in chunks)
        us = float(np.median(ts))
        rows.append({"chunks": ";".join(f"{n}@{st}" for _, st, n in chunks), "tokens": T, "tokens_padded": Tb,
                     "median_us": round(us, 3), "p10_us": round(float(np.percentile(ts, 10)), 3),
                     "eager_us": round(float(np.median(eager)), 3),
                     "causal_flops": flops, "tflops": round(flops / us / 1e6, 1)})
        del g
    return rows


def smi(query: str) -> str:
    try:
        return subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader"], text=True,
                              capture_output=True, timeout=20).stdout.strip()
    except Exception as e:  # pragma: no cover
        return f"error: {e}"


def write_csv(path, rows):
    write_rows(path, rows)


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
    ap.add_argument("--graphs", choices=("all", "decode"), default="all",
                    help="all: every iteration from a CUDA graph (mixed ones from per-token-bucket graphs with "
                         "a varlen Triton prefill attention; run 6); decode: decode-only iterations from graphs, "
                         "iterations with prompt chunks eager (runs 1-5)")
    ap.add_argument("--micro-graph-host", type=int, default=0, metavar="ROUNDS",
                    help="--graphs all: first time the host set-up and wall time of graph iterations of fixed "
                         "compositions, ROUNDS shuffled rounds (graph_host.csv)")
    ap.add_argument("--micro-decode-ab", type=int, default=0, metavar="ROUNDS",
                    help="only time decode-only graph iterations with the split-KV kernel as --graphs decode "
                         "runs it and as --graphs all does (SKIP), side by side in shuffled rounds "
                         "(decode_ab.csv), then exit")
    ap.add_argument("--micro-chunk-attn", action="store_true",
                    help="--graphs all: first time the varlen prefill attention alone on a few chunk shapes "
                         "(chunk_attn.csv)")
    ap.add_argument("--cudnn-sdpa", action="store_true", help="let SDPA use cuDNN too (the first run's setting)")
    ap.add_argument("--bool-mask", action="store_true",
                    help="chunks behind cached tokens with a boolean mask (runs 1 and 2: SDPA's math path)")
    ap.add_argument("--decode-nosplit", action="store_true",
                    help="decode attention one program per (sequence, KV head), no split-KV (runs 1 and 2)")
    ap.add_argument("--micro-decode", action="store_true",
                    help="first time both decode-attention kernels on a grid of batch x context (decode_attn.csv)")
    ap.add_argument("--tiny", action="store_true", help="smoke test: 2 small layers (CPU with TRITON_INTERPRET=1)")
    args = ap.parse_args(argv)
    all_graphs = args.graphs == "all" and not args.no_graphs
    if all_graphs and (args.decode_nosplit or args.bool_mask):
        ap.error("--graphs all runs the split-KV decode kernel and the varlen prefill kernel: "
                 "--decode-nosplit / --bool-mask need --graphs decode")
    global HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB, DEV, BOOL_MASK, GROUP, DT
    BOOL_MASK = args.bool_mask
    if args.tiny:
        HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 256, 2, 8, 2, 512, 1000
        GROUP = HEADS // KV_HEADS
    if not torch.cuda.is_available():
        DEV = "cpu"
        if os.environ.get("TRITON_INTERPRET") == "1":
            DT = torch.float32
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
    triton_attn = decode_attn_triton if args.decode_nosplit else \
        (decode_attn_triton_split_skip if all_graphs else decode_attn_triton_split)
    chunk_ok = False
    if HAVE_TRITON:
        try:
            B = 24
            q = torch.randn(B, HEADS, HEAD_DIM, device=DEV, dtype=DT)
            kc = torch.randn(args.slots + 1, KV_HEADS, args.max_len, HEAD_DIM, device=DEV, dtype=DT)
            vc = torch.randn_like(kc)
            sl = torch.randperm(args.slots, device=DEV)[:B].to(torch.int32)
            le = torch.randint(1, args.max_len, (B,), device=DEV, dtype=torch.int32)
            le[0] = 1                                          # a split with one token, others empty
            err = (triton_attn(q, kc, vc, sl, le).float() - decode_attn_ref(q, kc, vc, sl, le).float()).abs().max()
            env["triton_check_max_abs_err"] = float(err)
            if args.micro_decode and DEV == "cuda":
                write_csv(os.path.join(args.out, "decode_attn.csv"), micro_decode(kc, vc, args.slots))
            if all_graphs:
                env["graph_checks"] = check_graph_kernels(q, kc, vc, sl, le, args)
                chunk_ok = env["graph_checks"]["ok"]
                if args.micro_chunk_attn and DEV == "cuda":
                    write_csv(os.path.join(args.out, "chunk_attn.csv"), micro_chunk_attn(kc, vc, args))
            del kc, vc
            if float(err) < 2e-2:
                impl = "triton_nosplit" if args.decode_nosplit else "triton_split"
        except Exception as e:
            env["triton_error"] = repr(e)[:500]
            print("triton error:", repr(e)[:2000], flush=True)
    env["decode_attention"] = impl
    if all_graphs and not (impl.startswith("triton") and chunk_ok):
        print(f"--graphs all needs the Triton kernels, which failed their check: {env.get('graph_checks')} "
              f"{env.get('triton_error')}", flush=True)
        with open(os.path.join(args.out, "env.json"), "w") as f:
            json.dump(env, f, indent=2)
        return 3
    model.attn = triton_attn if impl.startswith("triton") else decode_attn_ref
    if args.micro_decode_ab and DEV == "cuda":
        write_csv(os.path.join(args.out, "decode_ab.csv"), micro_decode_ab(model, args))
        with open(os.path.join(args.out, "env.json"), "w") as f:
            json.dump(env, f, indent=2)
        return 0
    graphs = None
    if impl.startswith("triton") and not args.no_graphs and DEV == "cuda":
        t = time.time()
        buckets = [b for b in (1, 2, 3, 4, 6, 8, 12, 16, 20, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128)
                   if b <= args.slots] + ([args.slots] if args.slots > 128 else [])
        graphs = DecodeGraphs(model, buckets, args.slots)
        env["graph_capture_s"] = time.time() - t
        env["graph_buckets"] = buckets
    mixed = None
    if all_graphs:
        t = time.time()
        top = bucket_of(TOKEN_BUCKETS, args.token_budget)
        if top is None:
            ap.error(f"--graphs all: --token-budget {args.token_budget} is beyond the largest token bucket "
                     f"({TOKEN_BUCKETS[-1]})")
        tb = [b for b in TOKEN_BUCKETS if b <= top]
        hb = [b for b in tb if b <= (bucket_of(tb, args.slots + CMAX) or top)]
        S = StaticInputs(top, args.slots, CMAX, args.slots, DEV)
        mixed = MixedGraphs(model, S, tb, hb, capture=DEV == "cuda")
        env["mixed_graph_capture_s"] = time.time() - t
        env["graph_token_buckets"] = tb
        env["graph_logit_buckets"] = hb
        env["graph_max_chunks"] = CMAX
        env["chunk_attention"] = f"triton varlen, {CHUNK_BM}x{CHUNK_BN} tiles, one program per (tile, query head)"
        env["graph_end_to_end_check"] = check_end_to_end(model, mixed, args)
        if not env["graph_end_to_end_check"]["ok"]:
            print("mixed graph differs from the eager forward:", env["graph_end_to_end_check"], flush=True)
            with open(os.path.join(args.out, "env.json"), "w") as f:
                json.dump(env, f, indent=2)
            return 3
    # warm the eager path (cuBLAS heuristics, SDPA) on a few chunk shapes
    for n in (16, 128, min(512, args.max_len)):
        with sdpa_kernel(SDPA_BACKENDS):
            model.forward(torch.zeros(n, dtype=torch.long, device=DEV), torch.arange(n, device=DEV),
                          torch.zeros(1, dtype=torch.int32, device=DEV),
                          torch.ones(1, dtype=torch.int32, device=DEV), 0, [(args.slots, 0, n)])
    sync()
    if mixed is not None and graphs is not None and args.micro_graph_host:
        t = time.time()
        write_csv(os.path.join(args.out, "graph_host.csv"), micro_graph_host(graphs, mixed, args))
        env["micro_graph_host_s"] = time.time() - t
    print(f"ready after {time.time() - t_start:.1f} s, attention {impl}, graphs {args.graphs}", flush=True)
    its, reqs_out = [], []
    for i, rate in enumerate(args.rates):
        reqs = workload(rate, args.duration_s, args.seed + i, args.max_len)
        t = time.time()
        n0 = len(its)
        done = serve(model, graphs, reqs, args.slots, args.token_budget, f"{rate:g}", its, reqs_out, args.drain_s,
                     mixed=mixed)
        eager = sum(1 for r in its[n0:] if not r["graph"])
        print(f"rate {rate:g}/s: {done}/{len(reqs)} requests in {time.time() - t:.1f} s, "
              f"{len(its) - n0} iterations ({eager} eager)", flush=True)
        write_csv(os.path.join(args.out, "iterations.csv"), its)
        write_csv(os.path.join(args.out, "requests.csv"), reqs_out)
    env["smi_end"] = smi("clocks.sm,clocks.mem,power.draw,temperature.gpu")
    env["total_s"] = time.time() - t_start
    with open(os.path.join(args.out, "env.json"), "w") as f:
        json.dump(env, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
