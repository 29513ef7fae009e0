"""Full-vocabulary decisions from a vocabulary-parallel LM head, identical on every tensor-parallel rank.

At TP > 1 each rank holds the logits of one contiguous vocabulary shard. The drafter's top-K
log-probabilities (DDTREE's tree) and argmax (DFLASH's chain), and the target's greedy tokens,
are merged from per-shard candidates gathered over the TP group, so every rank builds the same
tree and accepts the same path; sampled decisions are broadcast from one rank. Plain
torch.distributed on the group SGLang gives the worker; no SGLang import.
"""

from __future__ import annotations

import torch
import torch.distributed as dist
from torch import Tensor

from ..ddtree import draft_log_probs
from ..kernels import vocab
from ..kernels.vocab.naive import LOGP_FLOOR


def _gather(t: Tensor, group) -> Tensor:
    """[W, *t.shape]: t from every rank of the group, in rank order."""
    out = [torch.empty_like(t) for _ in range(dist.get_world_size(group))]
    dist.all_gather(out, t.contiguous(), group=group)
    return torch.stack(out)


def draft_log_probs_vocab_parallel(local_logits: Tensor, k: int, vocab_start: int, group=None) -> tuple[Tensor, Tensor]:
    """local_logits float [R, L, Vs] (global token ids vocab_start .. vocab_start + Vs - 1) -> the full
    vocabulary's top-k log-probabilities float32 [R, L, k] (sorted descending, clamped at LOGP_FLOOR)
    and their global token ids [R, L, k], the same on every rank (`ddtree.build_ddtree_from_top_k`)."""
    # each shard's top-k and logsumexp in one pass (the Triton vocabulary pass on the GPU, as at TP=1)
    logp, ids, lse = draft_log_probs(local_logits, min(k, local_logits.shape[-1]), with_lse=True)
    logp, ids, lse = _gather(logp, group), _gather(ids + vocab_start, group), _gather(lse, group)
    W, R, L, kl = logp.shape
    shift = lse - torch.logsumexp(lse, 0)  # [W, R, L]: shard log-probabilities -> full-vocabulary ones
    vals = (logp + shift[..., None]).permute(1, 2, 0, 3).reshape(R, L, W * kl)
    top, pick = vals.topk(k, dim=-1)
    return top.clamp_min(LOGP_FLOOR), ids.permute(1, 2, 0, 3).reshape(R, L, W * kl).gather(-1, pick)


def argmax_vocab_parallel(local_logits: Tensor, vocab_start: int, group=None) -> Tensor:
    """local_logits [..., Vs] -> long [...], the global argmax (first index of the maximum, as torch.argmax
    over the whole vocabulary: shards are in rank order, ties go to the lower rank)."""
    idx = vocab.argmax(local_logits) if local_logits.is_cuda else local_logits.argmax(-1)  # no float copy of the shard
    val = local_logits.gather(-1, idx[..., None])[..., 0].float()
    vals, ids = _gather(val, group), _gather(idx + vocab_start, group)
    return ids.gather(0, vals.argmax(0, keepdim=True))[0]


def broadcast_decisions(tensors: list[Tensor], src: int = 0, group=None) -> None:
    """Overwrite the tensors on every rank with rank `src`'s (sampled acceptance: one rank decides)."""
    if dist.is_initialized() and dist.get_world_size(group) > 1:
        for t in tensors:
            dist.broadcast(t, src=src, group=group)
