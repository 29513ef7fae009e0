"""Pure-torch reference: the acceptance walk along draft trees.

From the root, descend to the child whose token is the target's token at the current node; stop
where there is none. Vectorised: node i is accepted iff every non-root node on its root path
carries its parent's target token; siblings hold distinct tokens, so the accepted nodes form one
path.
"""

from __future__ import annotations

import torch
from torch import Tensor


def walk_tree_ref(
    token_ids: Tensor, parents: Tensor, depths: Tensor, ancestor_mask: Tensor, target_tokens: Tensor, max_depth: int
) -> tuple[Tensor, Tensor, Tensor]:
    """Trees [R, N] (ancestor_mask [R, N, N]) and the target's token at every node (long [R, N])
    -> (accept_len [R], accepted_nodes [R, max_depth + 1] padded -1, bonus_tokens [R])."""
    R, N = parents.shape
    L = max_depth
    matches = token_ids == target_tokens.gather(1, parents.clamp_min(0))
    matches[:, 0] = True
    accepted = ~(ancestor_mask & ~matches[:, None, :]).any(-1)  # [R, N]
    last = torch.where(accepted, depths, -1).argmax(1)
    slots = torch.where(accepted, depths, L + 1)  # column L + 1 collects the rejected nodes
    accepted_nodes = torch.full((R, L + 2), -1, device=parents.device, dtype=torch.long)
    accepted_nodes.scatter_(1, slots, torch.arange(N, device=parents.device).expand(R, N))
    return accepted.sum(1) - 1, accepted_nodes[:, : L + 1], target_tokens.gather(1, last[:, None])[:, 0]
