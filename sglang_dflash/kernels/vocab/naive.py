"""Pure-torch references for the passes over the vocabulary: the drafter's top-K log-probabilities
per depth, and the target's argmax per node."""

from __future__ import annotations

import torch
from torch import Tensor

# Log-probabilities are clamped here so that a prefix through a zero-probability token keeps a
# finite score: -inf is then free to mark "no such prefix" (beam padding), and sums of up to
# thousands of floors stay finite in float32.
LOGP_FLOOR = -1.0e30


def draft_log_probs_ref(logits: Tensor, k: int, with_lse: bool = False) -> tuple[Tensor, ...]:
    """logits float [..., V] -> (top-k log_softmax float32 [..., k] sorted descending and clamped at
    LOGP_FLOOR, their token ids long [..., k]) and, with_lse, the rows' logsumexp float32 [...].
    NaN (or +inf) logits give NaN rows."""
    top_vals, top_ids = logits.topk(k, dim=-1, sorted=True)
    lse = torch.logsumexp(logits.float(), dim=-1, keepdim=True)
    out = (top_vals.float() - lse).clamp_min(LOGP_FLOOR), top_ids
    return (*out, lse[..., 0]) if with_lse else out


def argmax_ref(logits: Tensor) -> Tensor:
    """logits [..., V] -> long [...], the first index of the maximum."""
    return logits.argmax(-1)
