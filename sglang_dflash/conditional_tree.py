"""Draft trees scored by a drafter's conditional heads (DFlash2's candidate selector, DSpark's Markov head).

DDTree scores a branch by the product of independent per-depth marginals. A conditional head instead scores each
depth's candidates given the candidate chosen at the depth before, so a prefix (c_1 .. c_d) scores

    first[c_1] + sum_{e=2..d} step[e-2][c_{e-1}, c_e]

over fixed per-depth candidate sets (K tokens per depth, distinct within a depth). Every term is a log-probability
(<= 0: each row of `step` normalised over its K candidates, e.g. by `log_softmax`), so no prefix outscores its
parent and the best `budget` prefixes form a tree; the target's verify judges it as any other, so the scores only
decide acceptance, never the output.

Exact top-B: a prefix among the best B has its parent among the best B, hence among the best B of its depth; so
depth d + 1's best B are among depth d's best B extended by their K candidates. Ties: a deeper prefix after a
shallower one, then the order of generation (parent rank, candidate index), as `build_ddtree` numbers its nodes.

Shapes: R requests, L depths, K candidates per depth, B = budget; N = B + 1 nodes (node 0 the root).
Plain torch on any device (a Triton build is future work).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .ddtree import LOGP_FLOOR, DraftTree, tree_from_parents
from .kernels.tree_build.naive import best_of_beams

__all__ = ["build_conditional_tree", "prefix_count"]


def prefix_count(K: int, L: int) -> int:
    """The prefixes of L depths of K candidates each (K + K^2 + .. + K^L): the largest budget they can fill."""
    return sum(K**d for d in range(1, L + 1))


def build_conditional_tree(
    cand_ids: Tensor, first: Tensor, step: Tensor, root_tokens: Tensor, budget: int, *, validate: bool = True
) -> DraftTree:
    """The best `budget` prefixes under conditional scores, as a DraftTree of N = budget + 1 nodes.

    cand_ids long [R, L, K]: each depth's candidate tokens. first float [R, K]: depth 1's log-scores (after the root).
    step float [R, L - 1, K, K]: step[r, d, i, j], the log-score of candidate j at depth d + 2 after candidate i at
    depth d + 1. Scores must be <= 0 (-inf: not a candidate; NaN counts as LOGP_FLOOR). root_tokens long [R]. validate: refuse a
    request with fewer than `budget` finite prefixes (reads one flag back to the host; off inside CUDA graphs)."""
    R, L, K = cand_ids.shape
    if first.shape != (R, K) or step.shape != (R, L - 1, K, K) or root_tokens.shape != (R,):
        raise ValueError(
            f"shapes: cand_ids [R, L, K] = {list(cand_ids.shape)} needs first [R, K], step [R, L - 1, K, K], "
            f"roots [R]; got {list(first.shape)}, {list(step.shape)}, {list(root_tokens.shape)}"
        )
    total = prefix_count(K, L)
    if not isinstance(budget, int) or not 1 <= budget <= total:
        raise ValueError(f"budget={budget!r} must be in [1, {total}] (the prefixes of {L} depths of {K} candidates)")
    B, device = budget, first.device
    # a NaN score (a drafter's NaN or +inf) counts as the floor, so the result is still a tree
    first, step = (torch.where(torch.isnan(x), LOGP_FLOOR, x.double()) for x in (first, step))

    # depth 1's beam: the candidates themselves (padded with no-prefix entries up to B)
    width = min(B, K)
    score, cand = torch.sort(first, dim=1, descending=True, stable=True)
    score, cand = score[:, :width], cand[:, :width]
    scores = [_pad(score, B, -math.inf)]
    cands = [_pad(cand, B, 0)]
    parents = [torch.full((R, B), -1, device=device, dtype=torch.long)]
    rows = torch.arange(R, device=device)[:, None, None]
    for d in range(1, L):
        prev_score, prev_cand = scores[-1], cands[-1]
        ext = prev_score[:, :, None] + step[rows, d - 1, prev_cand[:, :, None], torch.arange(K, device=device)]  # [R, B, K]
        score, flat = torch.sort(ext.flatten(1), dim=1, descending=True, stable=True)
        score, flat = score[:, :B], flat[:, :B]
        scores.append(score)
        cands.append(flat % K)
        parents.append(flat // K + (d - 1) * B)  # the parent's entry in the flattened beams
    scores, cands, parents = (torch.stack(t, 1).flatten(1) for t in (scores, cands, parents))  # [R, L * B]
    if validate and (torch.isfinite(scores).sum(1) < B).any():
        raise ValueError(f"fewer than {B} prefixes have a finite score")
    token_ids, parent_ids = best_of_beams(scores, parents, cands, cand_ids, root_tokens, B)
    return tree_from_parents(token_ids, parent_ids, max_depth=L)


def _pad(t: Tensor, width: int, value) -> Tensor:
    return torch.cat([t, t.new_full((t.shape[0], width - t.shape[1]), value)], dim=1) if t.shape[1] < width else t
