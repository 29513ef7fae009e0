"""A drafter that produces NaN or +inf logits: the workers' tree build (validate=False) still returns a tree, which
the target's verify judges as any other, so such logits can cost acceptance but never emit a token; the checked
build refuses them."""

from __future__ import annotations

import pytest
import torch

from sglang_dflash.ddtree import accept_greedy, build_ddtree


def poisoned_logits(R: int, L: int, V: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    logits = torch.randn(R, L, V, generator=g)
    logits[0] = float("nan")  # every depth
    logits[1, L // 2, 3] = float("inf")  # one depth's row: log_softmax makes all of it NaN
    logits[2, :, : V // 4] = float("nan")  # part of every row
    return logits


@pytest.mark.parametrize("budget", [1, 7, 31])
def test_nonfinite_draft_logits_still_build_a_tree(budget):
    R, L, V = 4, 6, 40
    logits = poisoned_logits(R, L, V, budget)
    roots = torch.arange(R) + 1
    tree = build_ddtree(logits, roots, budget, validate=False)
    parents, depths, tokens = tree.parents.tolist(), tree.depths.tolist(), tree.token_ids.tolist()
    for r in range(R):
        assert parents[r][0] == -1 and depths[r][0] == 0 and tokens[r][0] == r + 1
        for i in range(1, budget + 1):  # one root; each node after its parent, one depth below it
            assert 0 <= parents[r][i] < i and depths[r][i] == depths[r][parents[r][i]] + 1 <= L
            assert 0 <= tokens[r][i] < V
        paths = {tuple(tokens[r][j] for j in path(parents[r], i)) for i in range(1, budget + 1)}
        assert len(paths) == budget  # distinct prefixes
    with pytest.raises(ValueError, match="NaN"):
        build_ddtree(logits, roots, budget)


def path(parents: list[int], i: int) -> list[int]:
    """Node i's ancestors below the root, root-side first, and i."""
    out = []
    while i > 0:
        out.append(i)
        i = parents[i]
    return out[::-1]


def test_a_poisoned_tree_emits_only_the_targets_tokens():
    """Greedy acceptance over a tree built from NaN drafts: every emitted token is the target's argmax along the
    accepted path (brute force: follow the target's argmax from the root while a child holds it)."""
    R, L, V, budget = 4, 6, 40, 15
    tree = build_ddtree(poisoned_logits(R, L, V, 0), torch.arange(R), budget, validate=False)
    target = torch.randn(R, budget + 1, V, generator=torch.Generator().manual_seed(1))
    acc = accept_greedy(tree, target)
    best = target.argmax(-1).tolist()
    for r in range(R):
        node, emitted = 0, []
        while True:
            emitted.append(best[r][node])
            child = [c for c in range(1, budget + 1) if tree.parents[r, c] == node and tree.token_ids[r, c] == best[r][node]]
            if not child:
                break
            node = child[0]
        n = int(acc.accept_len[r])
        got = tree.token_ids[r, acc.accepted_nodes[r, 1 : n + 1]].tolist() + [int(acc.bonus_tokens[r])]
        assert got == emitted


def test_nan_conditional_scores_still_build_a_tree():
    """A conditional head's NaN scores (a drafter's NaN or +inf logits) count as the floor: one root, each node after
    its parent, one depth below it."""
    from sglang_dflash.conditional_tree import build_conditional_tree

    R, L, K, budget = 2, 4, 3, 20
    g = torch.Generator().manual_seed(0)
    cand = torch.stack([torch.stack([torch.randperm(30, generator=g)[:K] for _ in range(L)]) for _ in range(R)])
    first = torch.log_softmax(torch.randn(R, K, generator=g), -1)
    step = torch.log_softmax(torch.randn(R, L - 1, K, K, generator=g), -1)
    first[0] = float("nan")
    step[1, 1] = float("nan")
    tree = build_conditional_tree(cand, first, step, torch.tensor([1, 2]), budget, validate=False)
    for r in range(R):
        parents, depths = tree.parents[r].tolist(), tree.depths[r].tolist()
        assert parents[0] == -1 and all(0 <= parents[i] < i and depths[i] == depths[parents[i]] + 1 for i in range(1, budget + 1))
