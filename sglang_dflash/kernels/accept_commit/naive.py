"""Pure-torch reference: a spec-v2 step's commit of each request's accepted path.

Under spec v2 the scheduler maps N KV slots past each request's committed length before the verify (req_to_token
columns seq_len .. seq_len + N - 1 hold node i's slot at column i) and appends what the worker returns. After the
acceptance the worker (1) reorders each window so that its first columns hold the accepted path's slots, root first,
then the other nodes' in node order (a permutation inside the window: the request keeps exactly the slots it was
given), and (2) returns the tokens to emit, the accept lengths and the new sequence lengths.
"""

from __future__ import annotations

import torch
from torch import Tensor


def front_accepted_slots_ref(req_to_token: Tensor, slots: Tensor, seq_lens: Tensor, accepted_nodes: Tensor, N: int) -> None:
    """In place: request r's verify window req_to_token[slots[r], seq_lens[r] : seq_lens[r] + N] reordered, the
    accepted path's slots first (path order), then the rest (node order). accepted_nodes long [R, P], -1 padded."""
    R = slots.shape[0]
    if R == 0:
        return
    device = req_to_token.device
    cols = seq_lens.long()[:, None] + torch.arange(N, device=device)  # [R, N]
    rows = slots.long()[:, None].expand(R, N)
    window = req_to_token[rows, cols]
    key = N + torch.arange(N, device=device).expand(R, N).clone()  # the rest keep node order, after the path
    P = accepted_nodes.shape[1]
    valid = accepted_nodes >= 0
    where = torch.where(valid, accepted_nodes, torch.full_like(accepted_nodes, N))  # column N: a dump
    keyed = torch.cat([key, key.new_zeros(R, 1)], dim=1)
    keyed.scatter_(1, where, torch.arange(P, device=device).expand(R, P).clone())
    order = keyed[:, :N].argsort(dim=1)
    req_to_token[rows, cols] = window.gather(1, order)


def committed_tokens_ref(token_ids: Tensor, accepted_nodes: Tensor, accept_len: Tensor, bonus: Tensor) -> Tensor:
    """[R, N] long: row r's first accept_len[r] + 1 entries are the tokens request r commits (its accepted draft
    tokens, then the bonus), the rest 0 (spec v2's `next_token_ids` layout, stride N). token_ids long [R, N]."""
    R, N = token_ids.shape
    nodes = accepted_nodes[:, 1:]  # the accepted draft nodes, root excluded
    tokens = token_ids.gather(1, nodes.clamp(min=0))
    out = torch.zeros(R, N, dtype=torch.long, device=tokens.device)
    width = min(nodes.shape[1], N)
    out[:, :width] = torch.where(nodes[:, :width] >= 0, tokens[:, :width], 0)
    out.scatter_(1, accept_len.long()[:, None], bonus.long()[:, None])
    return out


def commit_accepted_ref(
    req_to_token: Tensor, slots: Tensor, seq_lens: Tensor, token_ids: Tensor, accepted_nodes: Tensor,
    accept_len: Tensor, bonus: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """The whole commit: the windows reordered in place (`front_accepted_slots_ref`), and (tokens long [R, N]
    (`committed_tokens_ref`), accept_lens int32 [R] = accept_len + 1, new_seq_lens long [R] = seq_lens + that)."""
    front_accepted_slots_ref(req_to_token, slots, seq_lens, accepted_nodes, token_ids.shape[1])
    accept_lens = (accept_len + 1).to(torch.int32)
    tokens = committed_tokens_ref(token_ids, accepted_nodes, accept_len, bonus)
    return tokens, accept_lens, seq_lens.long() + accept_lens
