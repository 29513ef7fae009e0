"""Triton: argmax over the last dim of [M, V] logits (the first index of the maximum, as
torch.argmax), in two passes so that a few rows of a 248k vocabulary still fill the GPU: each
program of a (M, V / (CHUNK * ITERS)) grid keeps a running maximum over ITERS chunks, then one
program per row reduces the chunk results."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

CHUNK = 8192
TARGET_PROGRAMS = 2048  # fewer programs than this: one chunk each; more: up to 8 chunks each


@triton.jit
def _chunk_argmax_kernel(x, vals, idxs, V, C, CHUNK: tl.constexpr, ITERS: tl.constexpr):
    m, c = tl.program_id(0).to(tl.int64), tl.program_id(1)
    lane = tl.arange(0, CHUNK)
    best = tl.full([CHUNK], float("-inf"), tl.float32)
    where = lane + c * CHUNK * ITERS
    for it in range(ITERS):
        o = (c * ITERS + it) * CHUNK + lane
        v = tl.load(x + m * V + o, mask=o < V, other=float("-inf")).to(tl.float32)
        better = v > best  # strict: a lane keeps its earliest maximum
        best = tl.where(better, v, best)
        where = tl.where(better, o, where)
    top = tl.max(best, axis=0)
    tl.store(vals + m * C + c, top)
    tl.store(idxs + m * C + c, tl.min(tl.where(best == top, where, 2147483647), axis=0))


@triton.jit
def _row_argmax_kernel(vals, idxs, out, C, CC: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, CC)
    v = tl.load(vals + m * C + c, mask=c < C, other=float("-inf"))
    best = tl.argmax(v, axis=0, tie_break_left=True)  # chunks are in index order
    tl.store(out + m, tl.load(idxs + m * C + best).to(tl.int64))


def argmax(logits: Tensor, iters: int | None = None) -> Tensor:
    """logits float [..., V] -> long [...]. iters: chunks per program (default: by grid size)."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V).contiguous()
    M = x.shape[0]
    chunks = triton.cdiv(V, CHUNK)
    ITERS = iters or max(1, min(8, M * chunks // TARGET_PROGRAMS))
    C = triton.cdiv(chunks, ITERS)
    vals = torch.empty(M, C, device=x.device, dtype=torch.float32)
    idxs = torch.empty(M, C, device=x.device, dtype=torch.int32)
    out = torch.empty(M, device=x.device, dtype=torch.long)
    _chunk_argmax_kernel[(M, C)](x, vals, idxs, V, C, CHUNK=CHUNK, ITERS=ITERS, num_warps=8)
    _row_argmax_kernel[(M,)](vals, idxs, out, C, CC=max(2, triton.next_power_of_2(C)), num_warps=1)
    return out.view(logits.shape[:-1])
