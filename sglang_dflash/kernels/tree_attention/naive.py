"""Pure-torch reference: attention of N draft-tree tokens over a cached prefix plus the tree.

Every tree token sees the whole prefix of its request and, inside the tree, its ancestors and
itself (ancestor_mask). GQA: query head h reads KV head h // (HQ // HKV). Softmax in float32 (float64 inputs stay float64).
"""

from __future__ import annotations

import torch
from torch import Tensor


def tree_attention_ref(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    prefix_lens: Tensor,
    k_tree: Tensor,
    v_tree: Tensor,
    ancestor_mask: Tensor,
    scale: float | None = None,
    slots: Tensor | None = None,
    window: int | None = None,
    positions: Tensor | None = None,
    table: Tensor | None = None,
) -> Tensor:
    """q [R, N, HQ, Dh]; k_cache, v_cache [R, T, HKV, Dh] with prefix_lens[r] <= T valid tokens (or
    [rows, T, HKV, Dh] read at rows `slots` [R]); k_tree, v_tree [R, N, HKV, Dh]; ancestor_mask bool
    [R, N, N] -> out [R, N, HQ, Dh] (q's dtype). window, positions long [R, N]: prefix key t is seen
    from position p only if p - t < window (a sliding-window layer; the tree part is ancestor_mask's).
    table int [rows, T] (a page table of page size 1, as SGLang's req_to_token): k_cache, v_cache are then
    token pools [P, HKV, Dh], and prefix token t of request r is at pool index table[slots[r] (or r), t]."""
    if table is not None:
        table = table if slots is None else table[slots]
        k_cache, v_cache = k_cache[table.long()], v_cache[table.long()]
    elif slots is not None:
        k_cache, v_cache = k_cache[slots], v_cache[slots]
    R, N, HQ, Dh = q.shape
    T, HKV = k_cache.shape[1], k_cache.shape[2]
    scale = Dh**-0.5 if scale is None else scale
    dtype = torch.promote_types(q.dtype, torch.float32)  # float32 at least, float64 stays
    keys = torch.cat([k_cache, k_tree], dim=1).to(dtype).repeat_interleave(HQ // HKV, dim=2)  # [R, T + N, HQ, Dh]
    values = torch.cat([v_cache, v_tree], dim=1).to(dtype).repeat_interleave(HQ // HKV, dim=2)
    in_prefix = (torch.arange(T, device=q.device) < prefix_lens[:, None])[:, None, :].expand(R, N, T)
    if window is not None:
        in_prefix = in_prefix & (positions[:, :, None] - torch.arange(T, device=q.device) < window)
    visible = torch.cat([in_prefix, ancestor_mask], dim=2)
    scores = torch.einsum("rnhd,rthd->rhnt", q.to(dtype), keys) * scale
    probs = torch.softmax(scores.masked_fill(~visible[:, None], float("-inf")), dim=-1)
    return torch.einsum("rhnt,rthd->rnhd", probs, values).to(q.dtype)
