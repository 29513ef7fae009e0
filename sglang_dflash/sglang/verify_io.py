"""A DraftTree in the tensors of SGLang's EAGLE verify path.

Pure torch (no SGLang import): the worker hands these to SGLang's TARGET_VERIFY machinery (`EagleVerifyInput`
fields); they walk as `sgl_kernel.verify_tree_greedy` walks EAGLE's own trees (tests/sglang/test_verify_io.py).
"""

from __future__ import annotations

import torch
from torch import Tensor

from ..ddtree import DraftTree
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
