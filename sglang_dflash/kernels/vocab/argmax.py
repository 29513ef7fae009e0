"""Triton: argmax over the last dim of [M, V] logits (the first index of the maximum, as
torch.argmax), in two passes so that a few rows of a 248k vocabulary still fill the GPU:
chunk maxima over a (M, V / CHUNK) grid, then one program per row.

accept_greedy no longer takes this argmax of every verify row: on the GPU it reads only the rows on
the accepted path (kernels.tree_walk.greedy_walk). This stays for callers that need every row's
argmax (and as the benchmark's previous accept path)."""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu

CHUNK = 8192


@triton.jit
def _chunk_argmax_kernel(x, vals, idxs, V, C, CHUNK: tl.constexpr, PDL: tl.constexpr):
    gpu.pdl_start(PDL)
    m, c = tl.program_id(0).to(tl.int64), tl.program_id(1)
    o = c * CHUNK + tl.arange(0, CHUNK)
    v = tl.load(x + m * V + o, mask=o < V, other=float("-inf")).to(tl.float32)
    best = tl.argmax(v, axis=0, tie_break_left=True)
    tl.store(vals + m * C + c, tl.max(v, axis=0))
    tl.store(idxs + m * C + c, c * CHUNK + best)


@triton.jit
def _row_argmax_kernel(vals, idxs, out, C, CC: tl.constexpr, PDL: tl.constexpr):
    gpu.pdl_start(PDL)
    m = tl.program_id(0).to(tl.int64)
    c = tl.arange(0, CC)
    v = tl.load(vals + m * C + c, mask=c < C, other=float("-inf"))
    best = tl.argmax(v, axis=0, tie_break_left=True)
    tl.store(out + m, tl.load(idxs + m * C + best).to(tl.int64))


def argmax(logits: Tensor) -> Tensor:
    """logits float [..., V] -> long [...]."""
    V = logits.shape[-1]
    x = logits.reshape(-1, V).contiguous()
    M = x.shape[0]
    C = triton.cdiv(V, CHUNK)
    vals = torch.empty(M, C, device=x.device, dtype=torch.float32)
    idxs = torch.empty(M, C, device=x.device, dtype=torch.int32)
    out = torch.empty(M, device=x.device, dtype=torch.long)
    pdl = gpu.pdl_launch(x.device)
    _chunk_argmax_kernel[(M, C)](x, vals, idxs, V, C, CHUNK=CHUNK, num_warps=8, **pdl)
    _row_argmax_kernel[(M,)](vals, idxs, out, C, CC=triton.next_power_of_2(C), num_warps=1, **pdl)
    return out.view(logits.shape[:-1])
