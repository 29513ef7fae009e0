"""Triton: the acceptance walk (`naive.walk_tree_ref`), one program per request.

Depth by depth: a node of depth s is accepted iff its parent is and it carries the parent's
target token. Needs no ancestor mask. Shapes as in the reference.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu


@triton.jit
def _tree_walk_kernel(
    token_ids,
    parents,
    depths,
    target,
    s_acc,
    accept_len,
    accepted_nodes,
    bonus,
    N,
    L: tl.constexpr,
    NN: tl.constexpr,
    LP: tl.constexpr,
    PDL: tl.constexpr,
):
    gpu.pdl_start(PDL)
    r = tl.program_id(0).to(tl.int64)
    i = tl.arange(0, NN)
    im = i < N
    row = r * N
    par = tl.load(parents + row + i, mask=im, other=-1)
    dep = tl.load(depths + row + i, mask=im, other=-1)
    tgt_par = tl.load(target + row + tl.maximum(par, 0), mask=im, other=-1)
    match = im & ((tl.load(token_ids + row + i, mask=im, other=-2) == tgt_par) | (i == 0))
    acc = i == 0
    sa = s_acc + r * NN
    tl.store(sa + i, acc.to(tl.int8))
    for s in range(1, L + 1):
        tl.debug_barrier()  # only depth-s entries change in step s, and they are read in step s + 1
        acc_par = tl.load(sa + tl.maximum(par, 0), mask=im, other=0) != 0
        acc = acc | ((dep == s) & match & acc_par)
        tl.store(sa + i, acc.to(tl.int8))
    last = tl.argmax(tl.where(acc, dep, -1), axis=0)
    tl.store(accept_len + r, tl.sum(acc.to(tl.int64), axis=0) - 1)
    tl.store(bonus + r, tl.load(target + row + last))
    j = tl.arange(0, LP)
    tl.store(accepted_nodes + r * (L + 1) + j, tl.full([LP], -1, tl.int64), mask=j < L + 1)
    tl.debug_barrier()
    tl.store(accepted_nodes + r * (L + 1) + dep, i.to(tl.int64), mask=acc)


def tree_walk(
    token_ids: Tensor, parents: Tensor, depths: Tensor, target_tokens: Tensor, max_depth: int
) -> tuple[Tensor, Tensor, Tensor]:
    """(accept_len [R], accepted_nodes [R, max_depth + 1], bonus_tokens [R]); inputs long [R, N]."""
    R, N = parents.shape
    device = parents.device
    accept_len = torch.empty(R, device=device, dtype=torch.long)
    accepted_nodes = torch.empty(R, max_depth + 1, device=device, dtype=torch.long)
    bonus = torch.empty(R, device=device, dtype=torch.long)
    NN = triton.next_power_of_2(N)
    _tree_walk_kernel[(R,)](
        token_ids.contiguous(),
        parents.contiguous(),
        depths.contiguous(),
        target_tokens.contiguous(),
        torch.empty(R, NN, device=device, dtype=torch.int8),
        accept_len,
        accepted_nodes,
        bonus,
        N,
        L=max_depth,
        NN=NN,
        LP=triton.next_power_of_2(max_depth + 1),
        num_warps=4 if NN <= 256 else 8,
        **gpu.pdl_launch(device),
    )
    return accept_len, accepted_nodes, bonus
