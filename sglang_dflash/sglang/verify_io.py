"""A DraftTree and its Acceptance in the tensors of SGLang's EAGLE verify path.

Pure torch (no SGLang import): the workers hand these to SGLang's TARGET_VERIFY machinery
(`EagleVerifyInput` fields) and to its post-verify bookkeeping, which expects what
`sgl_kernel.verify_tree_greedy` writes (`predict`, `accept_index`, `accept_length`).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..ddtree import Acceptance, DraftTree
from ..kernels.tree_attention import sglang_custom_mask


def eagle_verify_fields(tree: DraftTree, seq_lens: Tensor, seq_lens_sum: int) -> dict:
    """EagleVerifyInput's tensors for R trees of N nodes placed after seq_lens [R] (sum as a host int):
    draft_token [R * N], custom_mask (see `sglang_custom_mask`), positions [R * N] = seq_len + depth,
    retrieve_index [R, N] = flat node index, retrieve_next_token / retrieve_next_sibling [R, N] (first
    child / next sibling in node indices, -1 if none), spec_steps = the deepest possible node, and
    draft_token_num = N. Node 0 of each tree is its root (the last verified token)."""
    R, N = tree.token_ids.shape
    custom_mask, _ = sglang_custom_mask(tree.ancestor_mask, seq_lens, seq_lens_sum)
    return dict(
        draft_token=tree.token_ids.reshape(-1),
        custom_mask=custom_mask,
        positions=(seq_lens[:, None].to(tree.depths) + tree.depths).reshape(-1),
        retrieve_index=torch.arange(R * N, device=tree.token_ids.device).view(R, N),
        retrieve_next_token=tree.next_token,
        retrieve_next_sibling=tree.next_sibling,
        spec_steps=tree.max_depth,
        draft_token_num=N,
    )


def eagle_acceptance(tree: DraftTree, acc: Acceptance) -> tuple[Tensor, Tensor, Tensor]:
    """(predict int32 [R * N], accept_index int32 [R, L + 1], accept_length int32 [R]) as
    `verify_tree_greedy` leaves them: accept_index holds the flat indices of the accepted path from
    the root (padded -1), predict at each of them the next emitted token (the next path node's
    token, the bonus token at the last); other entries of predict are 0 (SGLang never reads them)."""
    R, N = tree.token_ids.shape
    nodes = acc.accepted_nodes
    flat = torch.arange(R, device=nodes.device)[:, None] * N + nodes
    on_path = nodes >= 0
    accept_index = torch.where(on_path, flat, -1)
    following = tree.token_ids.gather(1, nodes[:, 1:].clamp(min=0))  # token of path node j + 1
    j = torch.arange(nodes.shape[1], device=nodes.device)
    last = j[None, :] == acc.accept_len[:, None]
    emitted = torch.where(last, acc.bonus_tokens[:, None], torch.cat([following, following[:, :1]], 1))
    predict = torch.zeros(R * N, dtype=torch.int32, device=nodes.device)
    predict[flat[on_path]] = emitted[on_path].to(torch.int32)
    return predict, accept_index.to(torch.int32), acc.accept_len.to(torch.int32)


def last_accepted_node(acc: Acceptance) -> Tensor:
    """Node index (within its tree) of each request's last accepted node: the step whose state SGLang's
    `update_mamba_state_after_mtp_verify` keeps (its `accepted_steps` for topk > 1)."""
    return acc.accepted_nodes.gather(1, acc.accept_len[:, None].long())[:, 0]
