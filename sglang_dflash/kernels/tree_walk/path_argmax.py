"""Triton: greedy acceptance that reads only the target rows on the accepted path.

`greedy_walk(token_ids, parents, target_logits, L)` equals
`walk_tree_ref(..., target_tokens=target_logits.argmax(-1), max_depth=L)` but reads at most L + 1
rows of the vocabulary per request (the nodes of the accepted path) instead of all N.

Shapes: token_ids, parents long [R, N] (a DraftTree's: parents[:, 0] == -1, siblings carry
distinct tokens); target_logits float [R, N, V] (bf16 / fp16 / fp32; any strides over R and N,
unit stride over V). Returns accept_len long [R], accepted_nodes long [R, L + 1] (padded -1),
bonus_tokens long [R].

Launches, a fixed count for fixed shapes (no host sync, captures in a CUDA graph; launch order is
the only synchronisation, no atomics):
  d = 0..L  `_path_argmax_kernel`, grid (R, P): the node at depth d is the child of the node at
            depth d - 1 (nodes[d - 1, r], from launch d - 1) carrying the target token there (the
            best of launch d - 1's P chunk results; -1: none, the walk stopped). Program (r, 0)
            stores it in nodes [L + 1, R]; every program (r, p) then stores the (max, first index)
            of vocabulary chunk p of that node's row in vals / idxs [L + 1, R, P], or returns at
            once if the walk stopped.
  final     `_path_walk_kernel`, grid (R,): accepted_nodes = nodes[:, r], the bonus token from the
            chunk results of the last accepted depth.
Chunk results of a depth the walk never reached stay unwritten and are never read. P: R * P about
twice the SM count (at least 1 per request), chunks a multiple of a BLOCK-wide load, the last one
partial; so a deep walk reads R rows per launch across the whole GPU.

Argmax ties go to the smallest index (as torch.argmax). NaN logits are skipped (an all-NaN or
all -inf row gives index 0), where torch.argmax returns the first NaN.
"""

from __future__ import annotations

import functools

import torch
import triton
import triton.language as tl
from torch import Tensor

MAX_BLOCK = 2048  # vocabulary entries a program loads at once
MIN_BLOCK = 128
DEFAULT_SMS = 132  # H100 / H200: what CPU tensors under the interpreter plan for


@triton.jit
def _depth_token(vals, idxs, j, r, R, P, live, PP: tl.constexpr):
    """The target token at depth j of request r: the best of its P chunk results (int64; -1 if not live)."""
    c = tl.arange(0, PP)
    base = (j * R + r) * P
    v = tl.load(vals + base + c, mask=c < P, other=float("-inf"))  # garbage where not live: unused
    best = tl.argmax(v, axis=0, tie_break_left=True)  # chunk order is index order
    return tl.load(idxs + base + best, mask=live, other=-1).to(tl.int64)


@triton.jit(do_not_specialize=["d"])
def _path_argmax_kernel(
    logits,
    token_ids,
    parents,
    nodes,
    vals,
    idxs,
    d,
    R,
    N,
    V,
    P,
    CW,
    stride_r,
    stride_n,
    NN: tl.constexpr,
    PP: tl.constexpr,
    BLOCK: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64)
    p = tl.program_id(1)
    # The loads of nodes, vals, parents and token_ids are independent: their latencies overlap.
    prev_depth = tl.maximum(d - 1, 0)
    prev = tl.load(nodes + prev_depth * R + r, mask=d > 0, other=-1)
    live = prev >= 0
    i = tl.arange(0, NN)
    im = i < N
    par = tl.load(parents + r * N + i, mask=im, other=-2)
    tok = tl.load(token_ids + r * N + i, mask=im, other=-1)
    token = _depth_token(vals, idxs, prev_depth, r, R, P, live, PP)
    hit = im & live & (par == prev) & (tok == token)
    child = tl.min(tl.where(hit, i, NN), axis=0)  # siblings carry distinct tokens: at most one hit
    cur = tl.where(d == 0, 0, tl.where(child < NN, child, -1))
    tl.store(nodes + d * R + r, cur, mask=p == 0)
    if cur >= 0:
        row = logits + r * stride_r + cur.to(tl.int64) * stride_n
        lane = p.to(tl.int64) * CW + tl.arange(0, BLOCK)
        best_v = tl.full([BLOCK], float("-inf"), tl.float32)
        best_i = lane
        for o in range(0, CW, BLOCK):
            off = lane + o
            x = tl.load(row + off, mask=off < V, other=float("-inf")).to(tl.float32)
            upd = x > best_v  # strict: a lane keeps its first maximum; NaN never wins
            best_v = tl.where(upd, x, best_v)
            best_i = tl.where(upd, off, best_i)
        m = tl.max(best_v, axis=0)
        first = tl.min(tl.where(best_v == m, best_i, V), axis=0)
        out = (d * R + r) * P + p
        tl.store(vals + out, m)
        tl.store(idxs + out, first.to(tl.int32))


@triton.jit
def _path_walk_kernel(
    nodes, vals, idxs, accept_len, accepted_nodes, bonus, R, P, L: tl.constexpr, LP: tl.constexpr, PP: tl.constexpr
):
    r = tl.program_id(0).to(tl.int64)
    j = tl.arange(0, LP)
    jm = j < L + 1
    path = tl.load(nodes + j * R + r, mask=jm, other=-1)
    tl.store(accepted_nodes + r * (L + 1) + j, path.to(tl.int64), mask=jm)
    last = tl.sum((path >= 0).to(tl.int32), axis=0) - 1  # depth 0 is always accepted
    tl.store(accept_len + r, last.to(tl.int64))
    tl.store(bonus + r, _depth_token(vals, idxs, last, r, R, P, last >= 0, PP))


@functools.cache
def _sm_count(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _programs(device: torch.device) -> int:
    """Programs that fill the device about twice over."""
    if device.type != "cuda":
        return 2 * DEFAULT_SMS
    return 2 * _sm_count(device.index if device.index is not None else torch.cuda.current_device())


def greedy_walk(
    token_ids: Tensor,
    parents: Tensor,
    target_logits: Tensor,
    max_depth: int,
    *,
    block: int | None = None,
    chunk: int | None = None,
) -> tuple[Tensor, Tensor, Tensor]:
    """(accept_len [R], accepted_nodes [R, max_depth + 1], bonus_tokens [R]), see the module
    docstring. block / chunk (a multiple of block) override the vocabulary tiling (tests)."""
    R, N, V = target_logits.shape
    L = max_depth
    device = target_logits.device
    x = target_logits if target_logits.stride(2) == 1 else target_logits.contiguous()
    want = triton.cdiv(V, max(1, _programs(device) // R))  # vocabulary entries per program
    if block is None:
        block = min(MAX_BLOCK, max(MIN_BLOCK, triton.next_power_of_2(want)))
    if chunk is None:
        chunk = block * triton.cdiv(want, block)
    if block & (block - 1) or chunk % block:
        raise ValueError(f"block must be a power of two and chunk a multiple of it, got {block}, {chunk}")
    P = triton.cdiv(V, chunk)
    NN, PP = triton.next_power_of_2(N), triton.next_power_of_2(P)
    token_ids, parents = token_ids.contiguous(), parents.contiguous()
    nodes = torch.empty(L + 1, R, device=device, dtype=torch.int32)
    vals = torch.empty(L + 1, R, P, device=device, dtype=torch.float32)
    idxs = torch.empty(L + 1, R, P, device=device, dtype=torch.int32)
    for d in range(L + 1):
        _path_argmax_kernel[(R, P)](
            x,
            token_ids,
            parents,
            nodes,
            vals,
            idxs,
            d,
            R,
            N,
            V,
            P,
            chunk,
            x.stride(0),
            x.stride(1),
            NN=NN,
            PP=PP,
            BLOCK=block,
            num_warps=max(1, min(8, block // 256)),
        )
    accept_len = torch.empty(R, device=device, dtype=torch.long)
    accepted_nodes = torch.empty(R, L + 1, device=device, dtype=torch.long)
    bonus = torch.empty(R, device=device, dtype=torch.long)
    LP = triton.next_power_of_2(L + 1)
    _path_walk_kernel[(R,)](nodes, vals, idxs, accept_len, accepted_nodes, bonus, R, P, L=L, LP=LP, PP=PP, num_warps=1)
    return accept_len, accepted_nodes, bonus
