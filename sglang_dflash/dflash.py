"""DFlash chain drafting and verification as the degenerate DDTree.

A DFlash block is a chain: node i (1..L) is the drafted token at depth i, its parent is node i - 1.
Verification and commit take the same `DraftTree` paths as DDTree (`accept_greedy`,
`accept_sampling`, the tree kernels), so the chain is checked by every tree test and vice versa;
on a chain, `accept_greedy` accepts exactly DFlash's rule
`accept_len = cumprod(draft[:, 1:] == target[:, :-1]).sum()`.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .ddtree import DraftTree, tree_from_parents


def chain_tree(draft_tokens: Tensor, root_tokens: Tensor) -> DraftTree:
    """R chains of N = L + 1 nodes: [root, draft_tokens[:, 0], ..., draft_tokens[:, L - 1]].

    draft_tokens: long [R, L]; root_tokens: long [R] (the bonus / last verified token).
    """
    if draft_tokens.dim() != 2 or draft_tokens.is_floating_point():
        raise ValueError(f"draft_tokens must be an integer tensor [R, L], got {draft_tokens.dtype} {list(draft_tokens.shape)}")
    R, L = draft_tokens.shape
    if root_tokens.shape != (R,):
        raise ValueError(f"root_tokens must have shape [R] = [{R}], got {list(root_tokens.shape)}")
    device = draft_tokens.device
    token_ids = torch.cat([root_tokens.to(device=device, dtype=torch.long)[:, None], draft_tokens.long()], dim=1)
    parents = (torch.arange(L + 1, device=device) - 1).expand(R, L + 1)
    return tree_from_parents(token_ids, parents, max_depth=L)


def greedy_chain(draft_logits: Tensor, root_tokens: Tensor) -> DraftTree:
    """The chain of the drafter's argmax at each depth: draft_logits float [R, L, V]."""
    if draft_logits.dim() != 3 or not draft_logits.is_floating_point():
        raise ValueError(f"draft_logits must be a float tensor [R, L, V], got {draft_logits.dtype} {list(draft_logits.shape)}")
    return chain_tree(draft_logits.argmax(-1), root_tokens)
