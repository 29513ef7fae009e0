"""Triton: top-K log-probabilities over the vocabulary, exact, reading the vocabulary once.

Per row of x [M, V] (M = R * L draft depths), two launches:
  1. `_chunk_stats_kernel`, grid (M, chunk groups): max and sum(exp(x - max)) of every CHUNK-wide
     chunk (the one full read of x).
  2. `_row_topk_kernel`, grid (M,): the logsumexp from those; the K chunks with the largest maxima,
     ranked (ties: smaller chunk first) and tau, the K-th of those maxima (int32 keys for bf16 / fp16
     logits, whose maxima leave the low 16 / 13 ordered fp32 bits equal for the chunk index; int64 for
     fp32). Every element of the row's top K is >= tau and lies in a selected chunk (K elements, the
     chunk maxima, have keys at least the K-th chunk maximum's; a chunk not selected has max <= tau
     and, if == tau, a larger index than every selected chunk whose max is tau). So the elements >= tau of the K selected
     chunks (about K of them) are compacted into CAP slots (up to TILE entries of the selected chunks
     in one load), and their top K is one top-k over the CAP slots. If more than CAP are >= tau (ties
     at tau, rows of -inf), a running merge over blocks of CAP runs over every element of the selected
     chunks instead: slower, equally exact.
Keys pack the order-preserving float bits with the reversed token index, so ties go to the
smaller token id. log-probability = logit - logsumexp, clamped at LOGP_FLOOR; NaN rows stay NaN.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu
from ..tree_build.tree_build import _ordered, _unordered
from .naive import LOGP_FLOOR

# In the kernels: 2147483647 - token index are a key's low bits (ties go to the smaller index), and
# PAD = -9187343239835811840 = _ordered(-inf) << 32 with low bits 0 is below every real key.
GROUP = 4096  # vocabulary entries a program reads at once for the chunk statistics
TILE = 8192  # the most entries of the selected chunks the row top-k loads at once (16384 spill on sm_90)
CAP_BLOCKS = 4  # compaction slots per row, in blocks of KC keys


@triton.jit
def _token_key(v, o):
    """int64 keys of logits v (fp32) at token indices o: the larger key is the larger logit, then the smaller index."""
    return (_ordered(v).to(tl.int64) << 32) | (2147483647 - o)


@triton.jit
def _chunk_stats_kernel(x, cmax, csum, V, C, CHUNK: tl.constexpr, G: tl.constexpr, PDL: tl.constexpr):
    gpu.pdl_start(PDL)
    m, g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    c = g * G + tl.arange(0, G)
    o = c[:, None] * CHUNK + tl.arange(0, CHUNK)[None, :]
    v = tl.load(x + m * V + o, mask=o < V, other=float("-inf")).to(tl.float32)
    mx = tl.max(v, axis=1)
    # e^(v - mx) as 2^(v log2 e - mx log2 e): one FFMA and one ex2.approx an entry (tl.exp adds a denormal guard of
    # three instructions); -inf entries give 0, an all -inf chunk's NaN sum is never read (its max is -inf)
    e = tl.math.exp2(v * 1.4426950408889634 - (mx * 1.4426950408889634)[:, None])
    tl.store(cmax + m * C + c, mx, mask=c < C)
    tl.store(csum + m * C + c, tl.sum(e, axis=1), mask=c < C)


@triton.jit
def _merge_block(x, cand, sel, m, b0, n, over, V, CHUNK: tl.constexpr, KC: tl.constexpr, CAP: tl.constexpr):
    """int64 keys [CAP] of entries b0 .. b0 + CAP of the merge: compacted candidates, or (over) the selected chunks'
    elements in order; PAD past n."""
    PAD: tl.constexpr = -9187343239835811840
    j = b0 + tl.arange(0, CAP)
    inb = j < n
    from_cand = tl.load(cand + m * CAP + j, mask=inb & (j < CAP) & ~over, other=PAD)
    o = tl.load(sel + m * KC + j // CHUNK, mask=inb & over, other=0).to(tl.int64) * CHUNK + j % CHUNK
    ok = inb & over & (o < V)
    v = tl.load(x + m * V + o, mask=ok, other=float("-inf")).to(tl.float32)
    return tl.where(ok, _token_key(v, o), from_cand)


@triton.jit
def _row_topk_kernel(
    x,
    cmax,
    csum,
    sel,
    cand,
    logp,
    ids,
    lse,
    V,
    C,
    K,
    FLOOR,
    CHUNK: tl.constexpr,
    CC: tl.constexpr,
    KC: tl.constexpr,
    G: tl.constexpr,
    CAP: tl.constexpr,
    LOW: tl.constexpr,
    PDL: tl.constexpr,
):
    gpu.pdl_start(PDL)
    m = tl.program_id(0).to(tl.int64)
    PAD: tl.constexpr = -9187343239835811840
    c = tl.arange(0, CC)
    cm = c < C
    mx = tl.load(cmax + m * C + c, mask=cm, other=float("-inf"))
    s = tl.load(csum + m * C + c, mask=cm, other=0.0)
    row_max = tl.max(mx, axis=0)
    # the sum is >= 1 (the maximum's own term), but the maximum's approximate exp2 after an FMA can fall just below 1,
    # which would give it a log-probability above 0
    total = tl.sum(tl.where(mx == float("-inf"), 0.0, s * tl.exp(mx - row_max)), axis=0)
    row_lse = row_max + tl.log(tl.where(total < 1.0, 1.0, total))  # (a NaN total stays NaN)
    tl.store(lse + m, row_lse)
    t = tl.arange(0, KC)
    if LOW > 0:  # 16-bit logits: a chunk maximum's LOW low bits are equal (ordered: all 0, or all 1 below zero), so
        # the chunk index takes their place and the keys are int32
        top = tl.topk((_ordered(mx) & -(1 << LOW)) | tl.where(cm, CC - 1 - c, 0), KC)
        tl.store(sel + m * KC + t, (CC - 1) - (top & (CC - 1)), mask=t < K)
        kth = tl.max(tl.where(t == K - 1, top, -2147483648), axis=0) & -(1 << LOW)
        tau = _unordered(kth | tl.where(kth < 0, (1 << LOW) - 1, 0))
    else:
        top = tl.topk((_ordered(mx).to(tl.int64) << 32) | tl.where(cm, CC - 1 - c, 0).to(tl.int64), KC)
        tl.store(sel + m * KC + t, (CC - 1) - (top & 0x7FFFFFFF).to(tl.int32), mask=t < K)
        tau = _unordered((tl.max(tl.where(t == K - 1, top, PAD), axis=0) >> 32).to(tl.int32))
    tl.debug_barrier()

    # Compact the elements >= tau of the selected chunks, G chunks at a time (NaN compares false).
    g = tl.arange(0, G)
    e = tl.arange(0, CHUNK)
    count = tl.full([], 0, tl.int32)
    for r0 in range(0, K, G):
        live = r0 + g < K
        o = tl.load(sel + m * KC + r0 + g, mask=live, other=0)[:, None].to(tl.int64) * CHUNK + e[None, :]
        ok = live[:, None] & (o < V)
        v = tl.load(x + m * V + o, mask=ok, other=float("-inf")).to(tl.float32)
        hit = (ok & (v >= tau)).to(tl.int32)
        per_chunk = tl.sum(hit, axis=1)
        pos = count + (tl.cumsum(per_chunk, axis=0) - per_chunk)[:, None] + tl.cumsum(hit, axis=1) - hit
        tl.store(cand + m * CAP + pos, _token_key(v, o), mask=(hit > 0) & (pos < CAP))
        count += tl.sum(per_chunk, axis=0)
    tl.debug_barrier()

    # Top K of the candidates (one block of CAP), or (overflow) of every selected element, in blocks of CAP merged.
    over = count > CAP
    n = tl.where(over, K * CHUNK, count)
    best = tl.topk(_merge_block(x, cand, sel, m, 0, n, over, V, CHUNK, KC, CAP), KC)
    for b0 in range(CAP, n, CAP):
        block = tl.topk(_merge_block(x, cand, sel, m, b0, n, over, V, CHUNK, KC, CAP), KC)
        best = tl.topk(tl.reshape(tl.join(best, block), [2 * KC]), KC)
    lp = _unordered((best >> 32).to(tl.int32)) - row_lse
    tl.store(logp + m * K + t, tl.where(lp < FLOOR, FLOOR, lp), mask=t < K)  # NaN stays NaN
    tl.store(ids + m * K + t, tl.where(best == PAD, 0, 2147483647 - (best & 0x7FFFFFFF)), mask=t < K)


def chunk_width(V: int, k: int) -> int:
    """CHUNK: at most 256 tokens, and at least k chunks in the row; 0 if the row is too short."""
    width = min(256, 1 << max(0, (V // k).bit_length() - 1)) if k <= V else 0
    return width if width >= 16 else 0


def draft_log_probs(logits: Tensor, k: int, chunk: int | None = None, with_lse: bool = False) -> tuple[Tensor, ...]:
    """logits float [..., V] -> (logp float32 [..., k] sorted descending, token ids long [..., k]) and, with_lse,
    the rows' logsumexp float32 [...], as `naive.draft_log_probs_ref`. Needs chunk_width(V, k) > 0 (or an
    explicit power-of-two chunk)."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V).contiguous()
    M, device = x.shape[0], x.device
    CHUNK = chunk or chunk_width(V, k)
    C = triton.cdiv(V, CHUNK) if CHUNK else 0
    if not CHUNK or C < k:
        raise ValueError(f"the chunked top-k needs at least k={k} chunks of >= 16 tokens, V={V}")
    f32 = dict(device=device, dtype=torch.float32)
    cmax, csum, lse = torch.empty(M, C, **f32), torch.empty(M, C, **f32), torch.empty(M, **f32)
    G = max(1, GROUP // CHUNK)
    pdl = gpu.pdl_launch(device)
    _chunk_stats_kernel[(M, triton.cdiv(C, G))](x, cmax, csum, V, C, CHUNK=CHUNK, G=G, num_warps=8, **pdl)
    KC = max(2, triton.next_power_of_2(k))
    CAP = CAP_BLOCKS * KC
    logp = torch.empty(M, k, **f32)
    ids = torch.empty(M, k, device=device, dtype=torch.long)
    CC = triton.next_power_of_2(C)
    low = {torch.bfloat16: 16, torch.float16: 13}.get(x.dtype, 0)  # low fp32 bits that a 16-bit value leaves zero
    _row_topk_kernel[(M,)](
        x,
        cmax,
        csum,
        torch.empty(M, KC, device=device, dtype=torch.int32),
        torch.empty(M, CAP, device=device, dtype=torch.int64),
        logp,
        ids,
        lse,
        V,
        C,
        k,
        LOGP_FLOOR,
        CHUNK=CHUNK,
        CC=CC,
        KC=KC,
        G=min(KC, max(1, TILE // CHUNK)),
        CAP=CAP,
        LOW=low if CC <= 1 << low else 0,
        num_warps=16,
        **pdl,
    )
    out = logp.view(*logits.shape[:-1], k), ids.view(*logits.shape[:-1], k)
    return (*out, lse.view(logits.shape[:-1])) if with_lse else out
