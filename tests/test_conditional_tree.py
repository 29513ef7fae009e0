"""build_conditional_tree against brute force over every prefix: the same set of best prefixes, in an order whose
scores never increase, each node's parent before it, and a tree (one root, depth = parent's + 1). With scores that
ignore the parent it is DDTree's tree."""

from __future__ import annotations

import itertools

import pytest
import torch

from sglang_dflash.conditional_tree import build_conditional_tree
from sglang_dflash.ddtree import build_ddtree


def random_heads(R, L, K, V, seed, ties=False):
    g = torch.Generator().manual_seed(seed)
    cand_ids = torch.stack([torch.stack([torch.randperm(V, generator=g)[:K] for _ in range(L)]) for _ in range(R)])
    raw = torch.randn(R, K, generator=g), torch.randn(R, L - 1, K, K, generator=g)
    if ties:  # few distinct values: many equal scores
        raw = tuple((t * 2).round() / 2 for t in raw)
    return cand_ids, torch.log_softmax(raw[0], -1), torch.log_softmax(raw[1], -1)


def brute_force(cand_ids, first, step, r):
    """{token path: score} over every prefix of request r, scored term by term in float64."""
    L, K = cand_ids.shape[1:]
    out = {}
    for d in range(1, L + 1):
        for idx in itertools.product(range(K), repeat=d):
            s = float(first[r, idx[0]])
            for e in range(1, d):
                s += float(step[r, e - 1, idx[e - 1], idx[e]])
            out[tuple(int(cand_ids[r, e, i]) for e, i in enumerate(idx))] = s
    return out


def paths(tree, r):
    """Each node's token path below the root, node order."""
    toks, par = tree.token_ids[r].tolist(), tree.parents[r].tolist()
    out = [()]
    for i in range(1, len(toks)):
        assert 0 <= par[i] < i
        out.append(out[par[i]] + (toks[i],))
    return out


@pytest.mark.parametrize("R, L, K, budget, ties", [(2, 3, 3, 5, False), (3, 3, 3, 39, False), (2, 4, 2, 11, True),
                                                   (1, 2, 4, 7, True), (2, 3, 4, 1, False), (2, 3, 4, 17, True)])  # fmt: skip
def test_best_prefixes_by_brute_force(R, L, K, budget, ties):
    cand_ids, first, step = random_heads(R, L, K, 50, seed=budget * 7 + L, ties=ties)
    tree = build_conditional_tree(cand_ids, first, step, torch.arange(R) + 100, budget)
    assert tree.token_ids.shape == (R, budget + 1) and tree.token_ids[:, 0].tolist() == list(range(100, 100 + R))
    for r in range(R):
        every = brute_force(cand_ids, first, step, r)
        got = paths(tree, r)[1:]
        assert len(set(got)) == budget
        scores = [every[p] for p in got]
        assert all(a >= b - 1e-12 for a, b in zip(scores, scores[1:]))  # best first
        cut = sorted(every.values(), reverse=True)[budget - 1]  # the budget-th best score
        assert min(scores) >= cut - 1e-12 and all(every[p] <= cut + 1e-12 for p in every if p not in set(got))
        assert tree.depths[r, 1:].tolist() == [len(p) for p in got]


def test_marginal_scores_give_ddtrees_tree():
    """Scores that ignore the parent (every row of step the same) are DDTree's per-depth marginals."""
    R, L, V, budget = 2, 4, 30, 12
    logits = torch.randn(R, L, V, generator=torch.Generator().manual_seed(3))
    logp = torch.log_softmax(logits, -1)
    K = budget
    top, ids = logp.topk(K, dim=-1)
    step = top[:, 1:, None, :].expand(R, L - 1, K, K)
    tree = build_conditional_tree(ids, top[:, 0], step, torch.tensor([1, 2]), budget)
    expected = build_ddtree(logits, torch.tensor([1, 2]), budget)
    for r in range(R):
        assert sorted(paths(tree, r)) == sorted(paths(expected, r))


def test_scores_a_rounding_error_above_zero_still_give_a_tree():
    """A score a little above 0 (float32 rounding of a head's log-mass) or +inf must not let a child outscore its
    parent: every node's parent comes before it and is one depth up."""
    cand_ids, first, step = random_heads(2, 4, 3, 40, seed=5)
    step = step.clone()
    step[:, :, :, 0] = 1e-6  # every candidate 0 "more likely than certain" after any parent
    step[1, 0, 1, 2] = float("inf")
    tree = build_conditional_tree(cand_ids, first, step, torch.tensor([1, 2]), 20)
    for r in range(2):
        parents, depths = tree.parents[r].tolist(), tree.depths[r].tolist()
        assert all(0 <= parents[i] < i and depths[i] == depths[parents[i]] + 1 for i in range(1, len(parents)))


def test_refusals():
    cand_ids, first, step = random_heads(1, 2, 2, 10, 0)
    with pytest.raises(ValueError, match="budget"):
        build_conditional_tree(cand_ids, first, step, torch.tensor([0]), 7)  # 2 + 4 prefixes
    with pytest.raises(ValueError, match="shapes"):
        build_conditional_tree(cand_ids, first[:, :1], step, torch.tensor([0]), 2)
    with pytest.raises(ValueError, match="finite"):
        build_conditional_tree(cand_ids, torch.tensor([[0.0, -float("inf")]]), step, torch.tensor([0]), 4)
