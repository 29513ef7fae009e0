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
On the GPU one Triton program per request (`kernels.tree_build.conditional_tree_build`), else torch
(`kernels.tree_build.select_conditional_prefixes_ref`).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from .ddtree import LOGP_FLOOR, DraftTree, _is_capturing, tree_from_parents
from .kernels.tree_build import conditional_fits, conditional_tree_build, select_conditional_prefixes_ref

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
    depth d + 1. Scores are log-probabilities (-inf: not a candidate; NaN and +inf count as LOGP_FLOOR, anything above 0
    as 0). root_tokens long [R]. validate: refuse a request with fewer than `budget` finite prefixes (reads one flag
    back to the host; off inside CUDA graphs). The GPU build sums the scores in float32, the CPU reference in float64:
    at a near tie of two prefixes they may keep different ones (the tree holds the best `budget` either way, up to
    rounding)."""
    R, L, K = cand_ids.shape
    if first.shape != (R, K) or step.shape != (R, L - 1, K, K) or root_tokens.shape != (R,):
        raise ValueError(
            f"shapes: cand_ids [R, L, K] = {list(cand_ids.shape)} needs first [R, K], step [R, L - 1, K, K], "
            f"roots [R]; got {list(first.shape)}, {list(step.shape)}, {list(root_tokens.shape)}"
        )
    total = prefix_count(K, L)
    if not isinstance(budget, int) or not 1 <= budget <= total:
        raise ValueError(f"budget={budget!r} must be in [1, {total}] (the prefixes of {L} depths of {K} candidates)")
    # a NaN or +inf score (a drafter's NaN or +inf) counts as the floor, and none is above 0 (a rounding error there
    # would let a child outscore its parent), so the result is always a tree
    floor = dict(nan=LOGP_FLOOR, posinf=LOGP_FLOOR, neginf=-math.inf)
    first, step = (torch.nan_to_num(x.float(), **floor).clamp_max(0.0) for x in (first, step))
    if first.is_cuda and conditional_fits(budget, K):
        fields, best = conditional_tree_build(first, step, cand_ids, root_tokens, budget)
        tree = DraftTree(**fields, max_depth=L)
    else:
        token_ids, parent_ids, best = select_conditional_prefixes_ref(cand_ids, first, step, root_tokens, budget)
        tree = tree_from_parents(token_ids, parent_ids, max_depth=L)
    if validate and not _is_capturing() and not bool(torch.isfinite(best).all()):
        raise ValueError(f"fewer than {budget} prefixes have a finite score")
    return tree
