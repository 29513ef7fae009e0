"""Vocabulary-parallel decisions on two CPU ranks (gloo) equal the single-process ones on the whole
vocabulary, and are identical on both ranks; broadcast makes a sampled decision common."""

import os
import tempfile

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sglang_dflash.kernels.vocab.naive import draft_log_probs_ref
from sglang_dflash.sglang.vocab_parallel import argmax_vocab_parallel, broadcast_decisions, draft_log_probs_vocab_parallel

R, L, V, K = 3, 5, 37, 8  # shards of 19 and 18 tokens


def full_logits() -> torch.Tensor:
    logits = torch.randn(R, L, V, generator=torch.Generator().manual_seed(0)) * 3
    logits[0, 0, 5] = logits[0, 0, 30] = logits[0, 0].max() + 1  # a tie across shards: the lower id wins
    return logits


def rank_main(rank: int, world: int, init: str, out: str) -> None:
    dist.init_process_group("gloo", init_method=init, rank=rank, world_size=world)
    logits = full_logits()
    bounds = [0, 19, V]
    shard = logits[..., bounds[rank] : bounds[rank + 1]]
    logp, ids = draft_log_probs_vocab_parallel(shard, K, bounds[rank])
    best = argmax_vocab_parallel(shard, bounds[rank])
    decided = torch.full((4,), rank)  # each rank "samples" something different
    broadcast_decisions([decided])
    torch.save(dict(logp=logp, ids=ids, best=best, decided=decided), f"{out}.{rank}")
    dist.destroy_process_group()


@pytest.fixture(scope="module")
def ranks():
    with tempfile.TemporaryDirectory() as tmp:
        init = f"file://{os.path.join(tmp, 'rendezvous')}"
        mp.spawn(rank_main, args=(2, init, os.path.join(tmp, "out")), nprocs=2, join=True)
        return [torch.load(os.path.join(tmp, f"out.{r}")) for r in range(2)]


def test_matches_the_whole_vocabulary(ranks):
    logits = full_logits()
    ref_logp, ref_ids = draft_log_probs_ref(logits, K)
    for out in ranks:
        torch.testing.assert_close(out["logp"], ref_logp, rtol=1e-6, atol=1e-6)
        assert torch.equal(out["ids"].sort(-1).values, ref_ids.sort(-1).values)  # tied tokens may come in either order
        torch.testing.assert_close(logits.gather(-1, out["ids"]) - logits.logsumexp(-1, keepdim=True), out["logp"])
        assert torch.equal(out["best"], logits.argmax(-1)) and out["best"][0, 0] == 5


def test_identical_on_every_rank(ranks):
    a, b = ranks
    assert all(torch.equal(a[k], b[k]) for k in ("logp", "ids", "best"))
    assert torch.equal(a["decided"], torch.zeros(4, dtype=torch.long)) and torch.equal(b["decided"], a["decided"])
