"""The Triton kernels behind build_ddtree / walk_tree / accept_greedy against their torch references
(on CPU through TRITON_INTERPRET=1, see conftest.py), outputs poisoned before each run."""

import math

import pytest
import torch
from tree_helpers import DEVICE, poisoned_outputs

from sglang_dflash.ddtree import tree_from_parents
from sglang_dflash.kernels.tree_build import select_prefixes_ref, tree_build
from sglang_dflash.kernels.tree_walk import tree_walk, walk_tree_ref
from sglang_dflash.kernels.vocab import argmax, draft_log_probs, draft_log_probs_ref


def random_top_k(R, L, V, K, gen, ties=False):
    logits = torch.randint(0, 3, (R, L, V), generator=gen).float() if ties else torch.randn(R, L, V, generator=gen) * 3
    return draft_log_probs_ref(logits, K)


@pytest.mark.parametrize(
    "R,L,V,B,ties",
    [
        (1, 1, 5, 3, False),
        (2, 4, 3, 30, False),
        (3, 5, 40, 17, False),
        (1, 15, 50, 64, False),
        (2, 6, 7, 100, True),
        (1, 4, 300, 130, False),
        (4, 3, 9, 1, True),
    ],
)
def test_tree_build_matches_torch(R, L, V, B, ties):
    gen = torch.Generator().manual_seed(R * 100 + B)
    logp, ids = random_top_k(R, L, V, min(B, V), gen, ties)
    roots = torch.randint(0, V, (R,), generator=gen)
    token_ids, parents = select_prefixes_ref(logp, ids, roots, B)
    ref = tree_from_parents(token_ids, parents, max_depth=L)
    with poisoned_outputs():
        got = tree_build(logp.to(DEVICE), ids.to(DEVICE), roots.to(DEVICE), B)
    for name, value in got.items():
        assert torch.equal(value.cpu(), getattr(ref, name)), name


@pytest.mark.parametrize("R,L,V,B", [(3, 4, 6, 20), (2, 15, 30, 64), (1, 1, 4, 2), (5, 6, 3, 50)])
def test_tree_walk_matches_torch(R, L, V, B):
    gen = torch.Generator().manual_seed(B)
    logp, ids = random_top_k(R, L, V, min(B, V), gen)
    token_ids, parents = select_prefixes_ref(logp, ids, torch.zeros(R, dtype=torch.long), B)
    tree = tree_from_parents(token_ids, parents, max_depth=L)
    for _ in range(5):
        # Targets that follow a random root path for a while, then disagree.
        target = torch.randint(0, V, (R, B + 1), generator=gen)
        follow = torch.rand(R, B + 1, generator=gen) < 0.8
        child_token = torch.full((R, B + 1), -1).scatter_(1, parents.clamp_min(0)[:, 1:], token_ids[:, 1:])
        target = torch.where(follow & (child_token >= 0), child_token, target)
        ref = walk_tree_ref(token_ids, parents, tree.depths, tree.ancestor_mask, target, L)
        with poisoned_outputs():
            got = tree_walk(token_ids.to(DEVICE), parents.to(DEVICE), tree.depths.to(DEVICE), target.to(DEVICE), L)
        for a, b in zip(got, ref):
            assert torch.equal(a.cpu(), b)
        assert ref[0].max() > 0


@pytest.mark.parametrize(
    "shape,dtype",
    [((3, 5, 20000), torch.float32), ((7, 8193), torch.bfloat16), ((1, 1, 3), torch.float32), ((6, 40000), torch.bfloat16)],
)
def test_argmax_matches_torch(shape, dtype):
    gen = torch.Generator().manual_seed(shape[-1])
    x = torch.randn(*shape, generator=gen).to(dtype)
    x.view(-1, shape[-1])[0, -1] = 100.0  # the maximum at the very end of a row
    if shape[-1] > 10:
        rows = x.view(-1, shape[-1])
        rows[1 % rows.shape[0], [5, 9000 % shape[-1]]] = 50.0  # a tie: first wins
        rows[-1, [shape[-1] - 3, (2 * 8192 + 7) % shape[-1], (8192 + 9) % shape[-1]]] = 60.0  # a tie across chunks
    with poisoned_outputs():
        got = argmax(x.to(DEVICE))
    assert torch.equal(got.cpu(), x.argmax(-1))


@pytest.mark.parametrize(
    "M,V,k,chunk,ties",
    [
        (3, 5003, 16, None, False),
        (2, 4096 + 17, 64, None, False),
        (4, 999, 5, 16, False),
        (2, 3000, 1, None, False),
        (3, 2500, 20, 32, True),
        (1, 6500, 100, 64, False),
    ],
)
def test_draft_top_k_matches_torch(M, V, k, chunk, ties):
    gen = torch.Generator().manual_seed(V + k)
    logits = torch.randint(0, 4, (M, V), generator=gen).float() if ties else torch.randn(M, V, generator=gen) * 3
    logits[0, :7] = -math.inf
    logits[-1, -1] = 20.0  # the best token is the last one
    ref_logp, ref_ids = draft_log_probs_ref(logits, k)
    with poisoned_outputs():
        logp, ids = draft_log_probs(logits.to(DEVICE), k, chunk=chunk)
    logp, ids = logp.cpu(), ids.cpu()
    torch.testing.assert_close(logp, ref_logp, rtol=1e-6, atol=1e-5)
    assert torch.equal(logits.gather(1, ids), logits.gather(1, ref_ids)), "not the top-k values"
    assert (ids.unique(dim=1).shape == ids.shape) and all(len(set(r.tolist())) == k for r in ids), "repeated token"
    if not ties:
        assert torch.equal(ids, ref_ids)


def test_draft_top_k_nan_row_is_nan():
    logits = torch.randn(2, 3000)
    logits[1, 17] = float("nan")
    logp, _ = draft_log_probs(logits.to(DEVICE), 8)
    assert not logp[0].isnan().any() and logp[1].isnan().all()
