"""Triton: a whole draft-tree build in one kernel, one program per request.

`tree_build`: DDTree's tree, the same selection as `naive.select_prefixes_ref` (per-depth beams over the
(i + 1)(j + 2) <= B pairs of sorted marginals). `conditional_tree_build`: the tree of conditional scores, the same
selection as `naive.select_conditional_prefixes_ref` (per-depth beams over every (beam entry, candidate) pair, the
candidate scored given its parent's candidate). Both then take the global top B with ties broken as the references
do, and write the tree tensors (`ddtree.tree_from_parents`): depths, ancestor mask, first child, next sibling.
Sorting uses packed int64 keys (order-preserving float bits << 32 | reversed candidate index), so one `tl.topk` both
ranks by score and breaks ties by candidate order, like a stable sort.

Shapes: logp float32 [R, L, K] (sorted descending, <= 0, K <= budget), top_ids long [R, L, K]; or first float32
[R, K], step float32 [R, L - 1, K, K] (<= 0, no NaN), cand_ids long [R, L, K]; root_tokens long [R]; outputs [R, N]
(N = budget + 1) and ancestor_mask bool [R, N, N].
"""

from __future__ import annotations

from functools import lru_cache

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu
from .naive import merge_pattern

MAX_TRITON_BUDGET = 512  # the global sort holds L * next_pow2(B) keys in one program
# a conditional depth sorts next_pow2(B) * next_pow2(K) keys in one program: DFlash2's 16 candidates up to budget 512,
# DSpark's K = budget up to 64 (above, `build_conditional_tree` takes the torch build, about 1 ms at B = 64)
MAX_CONDITIONAL_PAIRS = 8192


@triton.jit
def _ordered(x):
    """float32 -> int32 whose signed order is the float order (no NaN; -0.0 as +0.0, equal as in torch's sorts)."""
    bits = tl.where(x == 0.0, 0.0, x).to(tl.int32, bitcast=True)  # (x + 0.0 may be folded to x)
    return bits ^ ((bits >> 31) & 0x7FFFFFFF)


@triton.jit
def _unordered(o):
    return (o ^ ((o >> 31) & 0x7FFFFFFF)).to(tl.float32, bitcast=True)


@triton.jit
def _marginal_beams(lp, sc, sp, sr, pat_i, pat_j, K, P, L: tl.constexpr, B: tl.constexpr, BB: tl.constexpr,
                    PP: tl.constexpr):  # fmt: skip
    """DDTree's per-depth beams of sorted marginals lp [L, K] into sc / sp / sr [L, BB] (score, parent entry, token
    rank)."""
    b = tl.arange(0, BB)
    # Depth 1 beam: the top tokens themselves. Each depth's beam stays in registers for the next (a gather by the
    # pairs' beam ranks); its entries are also stored for the global top B below, and no depth waits on memory.
    beam = tl.load(lp + b, mask=b < K, other=float("-inf"))
    tl.store(sc + b, beam)
    tl.store(sp + b, tl.full([BB], -1, tl.int32))
    tl.store(sr + b, b)

    p = tl.arange(0, PP)
    pm = p < P
    pi = tl.load(pat_i + p, mask=pm, other=0)
    pj = tl.load(pat_j + p, mask=pm, other=0)
    # A candidate's key carries its pair itself, i * BB + j (in pair order: lexicographic), so the winners' beam
    # entries come out of the top-k with no table lookup; candidates past P (no prefix) sort after every pair.
    LAST: tl.constexpr = BB * BB + PP - 1
    low = (LAST - tl.where(pm, pi * BB + pj, BB * BB + p)).to(tl.int64)
    tok_lp = tl.load(lp + K + pj, mask=pm & (L > 1), other=0.0)
    for d in range(1, L):
        nxt_lp = tl.load(lp + (d + 1) * K + pj, mask=pm & (d + 1 < L), other=0.0)  # in flight during this depth
        cand = tl.where(pm, tl.gather(beam, pi, 0) + tok_lp, float("-inf"))
        top = tl.topk((_ordered(cand).to(tl.int64) << 32) | low, BB)
        pair = LAST - (top & 0x7FFFFFFF).to(tl.int32)
        pair = tl.where(pair < BB * BB, pair, 0)  # no prefix: parent entry 0, token rank 0
        beam = tl.where(b < B, _unordered((top >> 32).to(tl.int32)), float("-inf"))
        tl.store(sc + d * BB + b, beam)
        tl.store(sp + d * BB + b, pair // BB + (d - 1) * BB)
        tl.store(sr + d * BB + b, pair % BB)
        tok_lp = nxt_lp


@triton.jit
def _conditional_beams(first, step, sc, sp, sr, K, L: tl.constexpr, B: tl.constexpr, BB: tl.constexpr,
                       KK: tl.constexpr, CC: tl.constexpr):  # fmt: skip
    """Per-depth beams of conditional scores (first [K], step [L - 1, K, K]) into sc / sp / sr [L, BB]. Every (beam
    entry i, candidate j) pair competes (a parent's children are scored by its own row of step: no pair pattern);
    its key carries i * KK + j, so ties go to the lexicographic (i, j) order, as the reference's stable sort."""
    b = tl.arange(0, BB)
    c = tl.arange(0, CC)  # CC = max(BB, KK): depth 1's candidates, padded to at least the beam
    f = tl.load(first + c, mask=c < K, other=float("-inf"))
    top = tl.topk((_ordered(f).to(tl.int64) << 32) | (CC - 1 - c).to(tl.int64), BB)
    beam = tl.where(b < B, _unordered((top >> 32).to(tl.int32)), float("-inf"))
    rank = (CC - 1) - (top & 0x7FFFFFFF).to(tl.int32)
    rank = tl.where(rank < K, rank, 0)
    tl.store(sc + b, beam)
    tl.store(sp + b, tl.full([BB], -1, tl.int32))
    tl.store(sr + b, rank)

    q = tl.arange(0, BB * KK)
    qi = q // KK
    qj = q % KK
    qm = (qi < B) & (qj < K)
    low = (BB * KK - 1 - q).to(tl.int64)
    for d in range(1, L):
        row = tl.gather(rank, qi, 0)  # each pair's parent candidate: its row of step
        edge = tl.load(step + ((d - 1) * K + row) * K + qj, mask=qm, other=0.0)
        cand = tl.where(qm, tl.gather(beam, qi, 0) + edge, float("-inf"))
        top = tl.topk((_ordered(cand).to(tl.int64) << 32) | low, BB)
        pair = (BB * KK - 1) - (top & 0x7FFFFFFF).to(tl.int32)
        beam = tl.where(b < B, _unordered((top >> 32).to(tl.int32)), float("-inf"))
        rank = tl.where(pair % KK < K, pair % KK, 0)
        tl.store(sc + d * BB + b, beam)
        tl.store(sp + d * BB + b, pair // KK + (d - 1) * BB)
        tl.store(sr + d * BB + b, rank)


@triton.jit
def _tree_build_kernel(
    logp,
    top_ids,
    roots,
    pat_i,
    pat_j,
    first,
    step,
    s_best,
    s_score,
    s_parent,
    s_rank,
    s_node,
    s_sort,
    token_ids,
    parents,
    depths,
    positions,
    anc,
    next_token,
    next_sibling,
    K,
    P,
    L: tl.constexpr,
    B: tl.constexpr,
    BB: tl.constexpr,
    PP: tl.constexpr,
    LB: tl.constexpr,
    NN: tl.constexpr,
    RB: tl.constexpr,
    COND: tl.constexpr,
    KK: tl.constexpr,
    CC: tl.constexpr,
    PDL: tl.constexpr,
):
    gpu.pdl_start(PDL)
    r = tl.program_id(0).to(tl.int64)
    N: tl.constexpr = B + 1
    lp = logp + r * L * K
    ids = top_ids + r * L * K
    sc = s_score + r * L * BB
    sp = s_parent + r * L * BB
    sr = s_rank + r * L * BB
    sn = s_node + r * LB
    b = tl.arange(0, BB)
    if COND:
        _conditional_beams(first + r * K, step + r * (L - 1) * K * K, sc, sp, sr, K, L, B, BB, KK, CC)
    else:
        _marginal_beams(lp, sc, sp, sr, pat_i, pat_j, K, P, L, B, BB, PP)
    tl.store(sn + tl.arange(0, LB), tl.zeros([LB], tl.int32))  # an entry never chosen reads as the root
    tl.debug_barrier()

    # Global top B of all beam entries; ties: smaller flat index (shallower, then beam rank) first.
    e = tl.arange(0, LB)
    ev = (e < L * BB) & ((e % BB) < B)
    s = tl.load(sc + e, mask=ev, other=float("-inf"))
    top = tl.topk((_ordered(s).to(tl.int64) << 32) | tl.where(ev, LB - 1 - e, 0).to(tl.int64), BB)
    chosen = (LB - 1) - (top & 0x7FFFFFFF).to(tl.int32)
    keep = b < B
    tl.store(s_best + r * BB + b, _unordered((top >> 32).to(tl.int32)))  # the chosen scores (validation)
    tl.store(sn + chosen, b + 1, mask=keep)
    tl.debug_barrier()
    pe = tl.load(sp + chosen, mask=keep, other=-1)
    par = tl.where(pe < 0, 0, tl.load(sn + pe, mask=keep & (pe >= 0), other=0))
    dep = chosen // BB + 1
    tok = tl.load(ids + (dep - 1) * K + tl.load(sr + chosen, mask=keep, other=0), mask=keep, other=0)
    row = r * N
    tl.store(token_ids + row + b + 1, tok, mask=keep)
    tl.store(parents + row + b + 1, par.to(tl.int64), mask=keep)
    tl.store(depths + row + b + 1, dep.to(tl.int64), mask=keep)
    tl.store(positions + row + b + 1, dep.to(tl.int64), mask=keep)
    tl.store(token_ids + row, tl.load(roots + r))
    tl.store(parents + row, -1)
    tl.store(depths + row, 0)
    tl.store(positions + row, 0)

    # Ancestor mask: clear the rows, then walk every node up to the root marking its path.
    i = tl.arange(0, NN)
    im = i < N
    mrow = anc + r * N * N
    rows = tl.arange(0, RB)
    for r0 in range(0, N, RB):
        rr = r0 + rows
        tl.store(mrow + rr[:, None] * N + i[None, :], tl.zeros([RB, NN], tl.int8), mask=(rr[:, None] < N) & im[None, :])
    tl.store(next_token + row + i, tl.full([NN], N, tl.int64), mask=im)
    # Every node's parent in registers (node n >= 1 is beam winner n - 1), for the walk by gathers.
    par_all = tl.where((i >= 1) & im, tl.gather(par, tl.minimum(tl.maximum(i - 1, 0), BB - 1), 0), -1)
    tl.debug_barrier()
    cur = i
    for _ in range(L + 1):
        live = im & (cur >= 0)
        tl.store(mrow + i * N + cur, tl.full([NN], 1, tl.int8), mask=live)
        cur = tl.where(live, tl.gather(par_all, tl.maximum(cur, 0), 0), -1)

    # First child: the smallest child index. Next sibling: the next node in (parent, index) order.
    tl.atomic_min(next_token + row + par_all, i.to(tl.int64), mask=im & (par_all >= 0))
    key = tl.where(im & (par_all >= 0), par_all.to(tl.int32) * NN + i, NN * NN + i)
    key = tl.sort(key)
    tl.store(s_sort + r * (NN + 1) + i, key)
    tl.store(s_sort + r * (NN + 1) + NN, NN * NN + NN)
    tl.debug_barrier()
    nxt = tl.load(s_sort + r * (NN + 1) + i + 1)
    node = key % NN
    sib = tl.where((key < NN * NN) & (nxt // NN == key // NN), nxt % NN, -1)
    tl.store(next_sibling + row + node, sib.to(tl.int64), mask=key < NN * NN)
    tl.store(next_sibling + row, -1)
    tl.debug_barrier()
    first = tl.load(next_token + row + i, mask=im, other=N)
    tl.store(next_token + row + i, tl.where(first == N, -1, first), mask=im)


@lru_cache(maxsize=64)
def _pattern_i32(budget: int, width: int, device: torch.device) -> tuple[Tensor, Tensor]:
    return tuple(t.to(torch.int32) for t in merge_pattern(budget, width, device))


def tree_build(
    logp: Tensor, top_ids: Tensor, root_tokens: Tensor, budget: int, num_warps: int | None = None
) -> dict[str, Tensor]:
    """The DraftTree fields (token_ids, parents, depths, positions (= depths), ancestor_mask, next_token, next_sibling) of
    the top-`budget` prefixes. logp float32 [R, L, K] (K <= budget), top_ids long [R, L, K]."""
    R, L, K = logp.shape
    if budget > MAX_TRITON_BUDGET:
        raise ValueError(f"budget={budget} is above the Triton tree build's limit {MAX_TRITON_BUDGET}")
    pat_i, pat_j = _pattern_i32(budget, K, logp.device)
    out, _ = _launch(logp.contiguous(), logp, logp, top_ids, root_tokens, budget, pat_i, pat_j, False, num_warps)
    return out


def conditional_tree_build(
    first: Tensor, step: Tensor, cand_ids: Tensor, root_tokens: Tensor, budget: int, num_warps: int | None = None
) -> tuple[dict[str, Tensor], Tensor]:
    """The DraftTree fields of the top-`budget` prefixes under conditional scores (as `tree_build`'s), and the chosen
    prefixes' scores float32 [R, budget] (a -inf one: fewer than `budget` finite prefixes; the tree is then
    unspecified). first float32 [R, K], step float32 [R, L - 1, K, K] (no NaN), cand_ids long [R, L, K]."""
    R, L, K = cand_ids.shape
    if not conditional_fits(budget, K):
        raise ValueError(f"budget={budget} with {K} candidates a depth is above the Triton conditional build's limits")
    none = torch.empty(0, device=first.device, dtype=torch.int32)
    return _launch(first, first.contiguous(), step.contiguous(), cand_ids, root_tokens, budget, none, none, True, num_warps)


def conditional_fits(budget: int, K: int) -> bool:
    """Whether the Triton conditional build takes this budget and candidate count."""
    pow2 = triton.next_power_of_2
    return budget <= MAX_TRITON_BUDGET and max(2, pow2(budget)) * max(2, pow2(K)) <= MAX_CONDITIONAL_PAIRS


def _launch(logp, first, step, top_ids, root_tokens, budget, pat_i, pat_j, cond: bool, num_warps):
    L, K = top_ids.shape[1:]
    R, B, N, device = top_ids.shape[0], budget, budget + 1, top_ids.device
    P = pat_i.numel()
    BB, NN, KK = (max(2, triton.next_power_of_2(n)) for n in (B, N, K))
    PP = max(BB, triton.next_power_of_2(P))  # small budgets have fewer pairs than B
    LB = triton.next_power_of_2(L * BB)
    i32 = dict(device=device, dtype=torch.int32)
    out = dict(
        token_ids=torch.empty(R, N, device=device, dtype=torch.long),
        parents=torch.empty(R, N, device=device, dtype=torch.long),
        depths=torch.empty(R, N, device=device, dtype=torch.long),
        positions=torch.empty(R, N, device=device, dtype=torch.long),
        ancestor_mask=torch.empty(R, N, N, device=device, dtype=torch.bool),
        next_token=torch.empty(R, N, device=device, dtype=torch.long),
        next_sibling=torch.empty(R, N, device=device, dtype=torch.long),
    )
    best = torch.empty(R, BB, device=device)
    _tree_build_kernel[(R,)](
        logp,
        top_ids.contiguous(),
        root_tokens.to(device=device, dtype=torch.long),
        pat_i,
        pat_j,
        first,
        step,
        best,
        torch.empty(R, L, BB, device=device),
        torch.empty(R, L, BB, **i32),
        torch.empty(R, L, BB, **i32),
        torch.empty(R, LB, **i32),
        torch.empty(R, NN + 1, **i32),
        out["token_ids"],
        out["parents"],
        out["depths"],
        out["positions"],
        out["ancestor_mask"].view(torch.int8),
        out["next_token"],
        out["next_sibling"],
        K,
        P,
        L=L,
        B=B,
        BB=BB,
        PP=PP,
        LB=LB,
        NN=NN,
        RB=max(1, 4096 // NN),
        COND=cond,
        KK=KK,
        CC=max(BB, KK),
        num_warps=num_warps or (4 if BB < 64 else 8),
        **gpu.pdl_launch(device),
    )
    return out, best[:, :B]
