"""Triton: top-K log-probabilities over the vocabulary, exact, reading most of it once.

Per row of x [M, V] (M = R * L draft depths):
  1. chunk statistics: max and sum(exp(x - max)) of every CHUNK-wide chunk (one read of x);
  2. per row: logsumexp from those, and the K chunks with the largest maxima, ranked;
  3. the chunk of rank rho contributes its top (K - rho) elements: any element of the row's top K
     in it is beaten by the maxima of the rho chunks above it and by the elements above it in its
     own chunk, so its rank inside the chunk is < K - rho (and a chunk ranked >= K holds none);
  4. segmented top-K over those K (K + 1) / 2 candidates until one segment is left, then
     log-probability = logit - logsumexp, clamped at LOGP_FLOOR.
Keys pack the order-preserving float bits with the reversed token index, so ties go to the
smaller token id. Only K chunks of CHUNK tokens are read twice.
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl
from torch import Tensor

from ..tree_build.tree_build import _ordered, _unordered
from .naive import LOGP_FLOOR

# In the kernels: 2147483647 - token index are a key's low bits (ties go to the smaller index), and
# -9187343239835811840 = _ordered(-inf) << 32 with low bits 0 is below every real key.
SEGMENT = 1024  # keys per program in the final merges (at least 4 * next_pow2(k))
GROUP_KEYS = 2048  # keys (selected chunks x CHUNK) per chunk top-k program


@triton.jit
def _chunk_stats_kernel(x, cmax, csum, V, C, CHUNK: tl.constexpr, G: tl.constexpr):
    m, g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    c = g * G + tl.arange(0, G)
    o = c[:, None] * CHUNK + tl.arange(0, CHUNK)[None, :]
    v = tl.load(x + m * V + o, mask=o < V, other=float("-inf")).to(tl.float32)
    mx = tl.max(v, axis=1)
    e = tl.where(v == float("-inf"), 0.0, tl.exp(v - mx[:, None]))
    tl.store(cmax + m * C + c, mx, mask=c < C)
    tl.store(csum + m * C + c, tl.sum(e, axis=1), mask=c < C)


@triton.jit
def _select_chunks_kernel(cmax, csum, sel, lse, C, K, CC: tl.constexpr, KC: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, CC)
    cm = c < C
    mx = tl.load(cmax + m * C + c, mask=cm, other=float("-inf"))
    s = tl.load(csum + m * C + c, mask=cm, other=0.0)
    row_max = tl.max(mx, axis=0)
    total = tl.sum(tl.where(mx == float("-inf"), 0.0, s * tl.exp(mx - row_max)), axis=0)
    tl.store(lse + m, row_max + tl.log(total))
    top = tl.topk((_ordered(mx).to(tl.int64) << 32) | tl.where(cm, CC - 1 - c, 0).to(tl.int64), KC)
    t = tl.arange(0, KC)
    tl.store(sel + m * K + t, (CC - 1) - (top & 0x7FFFFFFF).to(tl.int32), mask=t < K)


@triton.jit
def _chunk_topk_kernel(x, sel, offsets, cand, V, K, NCAND, CHUNK: tl.constexpr, KT: tl.constexpr, G: tl.constexpr):
    m, g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    rho = g * G + tl.arange(0, G)
    live = rho < K
    c = tl.load(sel + m * K + rho, mask=live, other=0)
    o = c[:, None].to(tl.int64) * CHUNK + tl.arange(0, CHUNK)[None, :]
    ok = live[:, None] & (o < V)
    v = tl.load(x + m * V + o, mask=ok, other=float("-inf")).to(tl.float32)
    key = (_ordered(v).to(tl.int64) << 32) | tl.where(ok, 2147483647 - o, 0)
    top = tl.topk(key, KT)  # [G, KT], each row sorted
    t = tl.arange(0, KT)
    off = tl.load(offsets + rho, mask=live, other=0)
    keep = live[:, None] & (t[None, :] < (K - rho)[:, None])
    tl.store(cand + m * NCAND + off[:, None] + t[None, :], top, mask=keep)


@triton.jit
def _segment_topk_kernel(
    src,
    dst,
    n,
    SRC_STRIDE,
    DST_STRIDE,
    lse,
    logp,
    ids,
    K,
    FLOOR,
    SEG: tl.constexpr,
    KK: tl.constexpr,
    FINAL: tl.constexpr,
):
    m, s = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o = s * SEG + tl.arange(0, SEG)
    top = tl.topk(tl.load(src + m * SRC_STRIDE + o, mask=o < n, other=-9187343239835811840), KK)
    t = tl.arange(0, KK)
    if FINAL:
        lp = _unordered((top >> 32).to(tl.int32)) - tl.load(lse + m)
        tl.store(logp + m * K + t, tl.where(lp < FLOOR, FLOOR, lp), mask=t < K)  # NaN stays NaN
        tl.store(ids + m * K + t, 2147483647 - (top & 0x7FFFFFFF), mask=t < K)
    else:
        tl.store(dst + m * DST_STRIDE + s * KK + t, top)


def chunk_width(V: int, k: int) -> int:
    """CHUNK: at most 256 tokens, and at least k chunks in the row; 0 if the row is too short."""
    width = min(256, 1 << max(0, (V // k).bit_length() - 1)) if k <= V else 0
    return width if width >= 16 else 0


@lru_cache(maxsize=64)
def _offsets(k: int, kt: int, device: torch.device) -> tuple[Tensor, int]:
    counts = [min(k - rho, kt) for rho in range(k)]
    starts = [sum(counts[:rho]) for rho in range(k)]
    return torch.tensor(starts, dtype=torch.int32, device=device), sum(counts)


def draft_log_probs(logits: Tensor, k: int, chunk: int | None = None, with_lse: bool = False) -> tuple[Tensor, ...]:
    """logits float [..., V] -> (logp float32 [..., k] sorted descending, token ids long [..., k]) and, with_lse,
    the rows' logsumexp float32 [...], as `naive.draft_log_probs_ref`. Needs chunk_width(V, k) > 0 (or an
    explicit power-of-two chunk)."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V).contiguous()
    M, device = x.shape[0], x.device
    CHUNK = chunk or chunk_width(V, k)
    C = triton.cdiv(V, CHUNK)
    if not CHUNK or C < k:
        raise ValueError(f"the chunked top-k needs at least k={k} chunks of >= 16 tokens, V={V}")
    f32 = dict(device=device, dtype=torch.float32)
    cmax, csum, lse = torch.empty(M, C, **f32), torch.empty(M, C, **f32), torch.empty(M, **f32)
    G = max(1, 4096 // CHUNK)
    _chunk_stats_kernel[(M, triton.cdiv(C, G))](x, cmax, csum, V, C, CHUNK=CHUNK, G=G, num_warps=8)
    sel = torch.empty(M, k, device=device, dtype=torch.int32)
    KC = max(2, triton.next_power_of_2(k))
    _select_chunks_kernel[(M,)](cmax, csum, sel, lse, C, k, CC=triton.next_power_of_2(C), KC=KC, num_warps=8)
    KT = min(KC, CHUNK)
    offsets, ncand = _offsets(k, KT, device)
    cand = torch.empty(M, ncand, device=device, dtype=torch.int64)
    GT = max(1, GROUP_KEYS // CHUNK)
    _chunk_topk_kernel[(M, triton.cdiv(k, GT))](x, sel, offsets, cand, V, k, ncand, CHUNK=CHUNK, KT=KT, G=GT, num_warps=4)
    logp = torch.empty(M, k, **f32)
    ids = torch.empty(M, k, device=device, dtype=torch.long)
    n, src = ncand, cand
    while True:
        seg = max(KC, min(max(SEGMENT, 4 * KC), triton.next_power_of_2(n)))
        S = triton.cdiv(n, seg)
        final = S == 1
        dst = src if final else torch.empty(M, S * KC, device=device, dtype=torch.int64)
        _segment_topk_kernel[(M, S)](
            src,
            dst,
            n,
            src.shape[1],
            dst.shape[1],
            lse,
            logp,
            ids,
            k,
            LOGP_FLOOR,
            SEG=seg,
            KK=KC,
            FINAL=final,
            num_warps=4,
        )
        if final:
            out = logp.view(*logits.shape[:-1], k), ids.view(*logits.shape[:-1], k)
            return (*out, lse.view(logits.shape[:-1])) if with_lse else out
        n, src = S * KC, dst
