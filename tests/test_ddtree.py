"""build_ddtree against brute-force enumeration; tree invariants; greedy walks; chains; bad input."""

import math

import pytest
import torch
from reference_heap import heap_reference

from sglang_dflash.ddtree import (
    LOGP_FLOOR,
    DraftTree,
    accept_greedy,
    build_ddtree,
    count_prefixes,
    draft_log_probs,
    tree_from_parents,
)
from sglang_dflash.dflash import chain_tree, greedy_chain


def brute_force_prefixes(logits: torch.Tensor) -> list[tuple[float, tuple[int, ...]]]:
    """All prefixes of one request with their scores, best first (ties: shallower first).

    Scores are float32 sums in depth order of torch's log_softmax clamped at LOGP_FLOOR; build_ddtree's own
    log-probabilities may differ in the last bits, so scores compare within `close`.
    """
    L, V = logits.shape
    table = torch.log_softmax(logits.float(), -1).clamp_min(LOGP_FLOOR)
    out, frontier = [], {(): torch.tensor(0.0)}
    for d in range(L):
        frontier = {p + (t,): s + table[d, t] for p, s in frontier.items() for t in range(V)}
        out += [(float(s), p) for p, s in frontier.items()]
    out.sort(key=lambda e: (-e[0], len(e[1])))
    return out


def close(x: float, y: float) -> bool:
    """Equal up to float32 rounding of a sum of a few log-probabilities."""
    return math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-5)


def node_paths(tree: DraftTree, r: int) -> list[tuple[int, ...]]:
    parents, tokens = tree.parents[r].tolist(), tree.token_ids[r].tolist()
    paths = [()]
    for i in range(1, len(parents)):
        paths.append(paths[parents[i]] + (tokens[i],))
    return paths


def check_invariants(tree: DraftTree) -> None:
    R, N = tree.token_ids.shape
    for r in range(R):
        parents = tree.parents[r].tolist()
        assert parents[0] == -1
        assert all(0 <= parents[i] < i for i in range(1, N)), "not topological"
        depth = [0] * N
        anc = torch.zeros(N, N, dtype=torch.bool)
        anc[0, 0] = True
        children = {i: [] for i in range(N)}
        for i in range(1, N):
            depth[i] = depth[parents[i]] + 1
            anc[i] = anc[parents[i]]
            anc[i, i] = True
            children[parents[i]].append(i)
        assert tree.depths[r].tolist() == depth
        assert max(depth) <= tree.max_depth
        assert torch.equal(tree.positions[r], tree.depths[r])
        assert torch.equal(tree.ancestor_mask[r], anc)
        tokens = tree.token_ids[r].tolist()
        for p, kids in children.items():
            assert len({tokens[c] for c in kids}) == len(kids), "siblings share a token"
            assert tree.next_token[r, p].item() == (kids[0] if kids else -1)
            for a, b in zip(kids, kids[1:] + [-1]):
                assert tree.next_sibling[r, a].item() == b
        assert tree.next_sibling[r, 0].item() == -1


def random_logits(R: int, L: int, V: int, gen: torch.Generator, ties: bool) -> torch.Tensor:
    if ties:  # few distinct values, so equal scores abound; some zero-probability tokens too
        logits = torch.randint(0, 3, (R, L, V), generator=gen).float()
        logits[torch.rand(R, L, V, generator=gen) < 0.1] = -math.inf
        logits[..., 0] = torch.where(torch.isinf(logits).all(-1), 0.0, logits[..., 0])
        return logits
    return torch.randn(R, L, V, generator=gen) * 2


def budgets_for(total: int, gen: torch.Generator) -> list[int]:
    """Every budget for small trees; otherwise the small ones, the largest allowed and a sample."""
    if total <= 400:
        return list(range(1, total + 1))
    top = min(total, 1500)
    sample = torch.randint(1, top + 1, (25,), generator=gen).tolist()
    return sorted(set(range(1, 41)) | {top - 1, top} | set(sample))


SHAPES = [(L, V) for L in range(1, 6) for V in range(1, 8)]


@pytest.mark.parametrize("ties", [False, True], ids=["distinct", "ties"])
@pytest.mark.parametrize("L,V", SHAPES)
def test_build_matches_brute_force(L, V, ties):
    gen = torch.Generator().manual_seed(1000 * L + 10 * V + ties)
    R = 4
    logits = random_logits(R, L, V, gen, ties)
    roots = torch.randint(0, V, (R,), generator=gen)
    truth = [brute_force_prefixes(logits[r]) for r in range(R)]
    total = count_prefixes(V, L)
    assert all(len(t) == total for t in truth)
    for budget in budgets_for(total, gen):
        tree = build_ddtree(logits, roots, budget)
        assert tree.token_ids.shape == (R, budget + 1)
        assert torch.equal(tree.token_ids[:, 0], roots)
        for r in range(R):
            paths = node_paths(tree, r)
            best = truth[r][:budget]
            score = {p: s for s, p in truth[r]}
            got = [score[p] for p in paths[1:]]
            assert len(set(paths)) == len(paths), "duplicate prefix"
            assert all(a >= b or close(a, b) for a, b in zip(got, got[1:])), "nodes not in descending score order"
            assert all(close(a, b) for a, (b, _) in zip(got, best)), "not the top-B multiset of scores"
            boundary_tie = budget < total and close(truth[r][budget - 1][0], truth[r][budget][0])
            if not boundary_tie:
                assert set(paths[1:]) == {p for _, p in best}
        if budget in (1, total // 2 + 1, min(total, 1500)):
            check_invariants(tree)


def test_build_equals_reference_heap_pop_order():
    """With distinct scores, nodes come out in the reference heap's pop order (descending score)."""
    gen = torch.Generator().manual_seed(7)
    logits = torch.randn(3, 6, 50, generator=gen)
    for budget in (1, 16, 64, 200):
        tree = build_ddtree(logits, torch.zeros(3, dtype=torch.long), budget)
        for r in range(3):
            assert [p for p in node_paths(tree, r)[1:]] == heap_reference(logits[r], budget)


def top_scores(logits: torch.Tensor, budget: int) -> list[float]:
    """The `budget` best prefix scores of one request [L, V], best first, by a beam over depths in float64: a top
    prefix's parent is a top prefix and its token is among its depth's `budget` best (each scores at least as
    well), so the best `budget` of each depth, extended by the next depth's best `budget` tokens, hold them all."""
    table = torch.log_softmax(logits.double(), -1)
    tokens = table.topk(budget, -1).values
    level, scores = torch.zeros(1, dtype=torch.float64), []
    for d in range(logits.shape[0]):
        level = (level[:, None] + tokens[d]).flatten().topk(budget).values
        scores.append(level)
    return torch.cat(scores).topk(budget).values.tolist()


def test_large_vocab_budget_and_determinism():
    """At V = 3000, L = 15, budget 256: the nodes' scores are the `top_scores` oracle's; two builds are equal."""
    gen = torch.Generator().manual_seed(3)
    logits = (torch.randn(2, 15, 3000, generator=gen) * 6).to(torch.bfloat16)  # peaked, like a trained drafter
    a = build_ddtree(logits, torch.tensor([5, 6]), 256)
    b = build_ddtree(logits, torch.tensor([5, 6]), 256)
    for field in ("token_ids", "parents", "ancestor_mask", "next_token", "next_sibling"):
        assert torch.equal(getattr(a, field), getattr(b, field))
    check_invariants(a)
    assert a.depths.max() > 1
    table = torch.log_softmax(logits.double(), -1)
    for r in range(2):
        paths = node_paths(a, r)[1:]
        assert len(set(paths)) == len(paths), "duplicate prefix"
        got = sorted((sum(float(table[r, d, t]) for d, t in enumerate(p)) for p in paths), reverse=True)
        assert all(close(x, y) for x, y in zip(got, top_scores(logits[r], 256), strict=True))


def test_draft_log_probs_are_log_softmax():
    logits = torch.randn(2, 3, 40) * 5
    logits[0, 0, :5] = -math.inf
    lp, ids = draft_log_probs(logits, 40)
    full = torch.log_softmax(logits, -1).clamp_min(LOGP_FLOOR)
    torch.testing.assert_close(lp, full.gather(-1, ids))
    assert (lp[:, :, 1:] <= lp[:, :, :-1]).all()


def test_placed_positions():
    tree = build_ddtree(torch.randn(2, 4, 9), torch.tensor([1, 2]), 10)
    placed = tree.placed(torch.tensor([100, 7]))
    assert torch.equal(placed.positions, tree.depths + torch.tensor([[100], [7]]))
    with pytest.raises(ValueError, match="seq_lens"):
        tree.placed(torch.tensor([1, 2, 3]))


def brute_force_walk(tree: DraftTree, target_tokens: torch.Tensor, r: int):
    parents, tokens, tgt = tree.parents[r].tolist(), tree.token_ids[r].tolist(), target_tokens[r].tolist()
    path = [0]
    while True:
        kids = [j for j in range(len(parents)) if parents[j] == path[-1] and tokens[j] == tgt[path[-1]]]
        if not kids:
            return path, tgt[path[-1]]
        path.append(kids[0])


def agreeing_target_logits(tree: DraftTree, V: int, gen: torch.Generator, p_agree: float = 0.75) -> torch.Tensor:
    """Random target logits whose argmax at each node is one of its children's tokens w.p. p_agree."""
    R, N = tree.token_ids.shape
    logits = torch.randn(R, N, V, generator=gen)
    for r in range(R):
        for i in range(N):
            kids = [j for j in range(N) if tree.parents[r, j] == i]
            if kids and torch.rand(1, generator=gen).item() < p_agree:
                j = kids[torch.randint(len(kids), (1,), generator=gen).item()]
                logits[r, i, tree.token_ids[r, j]] = 10.0
    return logits


@pytest.mark.parametrize("seed", range(40))
def test_accept_greedy_matches_brute_force_walk(seed):
    gen = torch.Generator().manual_seed(seed)
    R, L, V = 3, int(torch.randint(1, 7, (1,), generator=gen)), int(torch.randint(2, 9, (1,), generator=gen))
    budget = int(torch.randint(1, min(count_prefixes(V, L), 60) + 1, (1,), generator=gen))
    tree = build_ddtree(torch.randn(R, L, V, generator=gen) * 3, torch.randint(0, V, (R,), generator=gen), budget)
    target = agreeing_target_logits(tree, V, gen)
    acc = accept_greedy(tree, target)
    assert acc.accepted_nodes.shape == (R, L + 1)
    for r in range(R):
        path, bonus = brute_force_walk(tree, target.argmax(-1), r)
        assert acc.accept_len[r].item() == len(path) - 1
        assert acc.accepted_nodes[r].tolist() == path + [-1] * (L + 1 - len(path))
        assert acc.bonus_tokens[r].item() == bonus


@pytest.mark.parametrize("seed", range(20))
def test_chain_accepts_dflash_cumprod_rule(seed):
    gen = torch.Generator().manual_seed(seed)
    R, L, V = 6, 15, 5  # small vocabulary: long runs of agreement happen
    draft = torch.randint(0, V, (R, L), generator=gen)
    target_tokens = torch.where(
        torch.rand(R, L + 1, generator=gen) < 0.8,
        torch.cat([draft, draft[:, :1]], 1),
        torch.randint(0, V, (R, L + 1), generator=gen),
    )
    target = torch.nn.functional.one_hot(target_tokens, V).float() + 0.01 * torch.randn(R, L + 1, V, generator=gen)
    roots = torch.randint(0, V, (R,), generator=gen)
    acc = accept_greedy(chain_tree(draft, roots), target)
    # DFlash (z-lab dflash_generate): block = [root, drafts], posterior = target argmax.
    accept_len = (draft == target_tokens[:, :-1]).cumprod(dim=1).sum(dim=1)
    assert torch.equal(acc.accept_len, accept_len)
    assert torch.equal(acc.bonus_tokens, target_tokens.gather(1, accept_len[:, None])[:, 0])
    expected = torch.where(torch.arange(L + 1) <= accept_len[:, None], torch.arange(L + 1), -1)
    assert torch.equal(acc.accepted_nodes, expected)


def test_chain_tree_structure():
    tree = greedy_chain(torch.randn(2, 5, 11), torch.tensor([3, 4]))
    check_invariants(tree)
    assert tree.parents[0].tolist() == [-1, 0, 1, 2, 3, 4]
    assert tree.next_token[0].tolist() == [1, 2, 3, 4, 5, -1]
    assert (tree.next_sibling == -1).all()


def test_tree_from_parents_generic():
    parents = torch.tensor([[-1, 0, 0, 1, 1, 2, 4, 0]])
    tree = tree_from_parents(torch.arange(8)[None], parents, max_depth=3)
    check_invariants(tree)
    assert tree.depths[0].tolist() == [0, 1, 1, 2, 2, 2, 3, 1]


def test_bad_input_raises_named_value_errors():
    logits = torch.randn(2, 3, 4)
    roots = torch.tensor([0, 1])
    with pytest.raises(ValueError, match="budget"):
        build_ddtree(logits, roots, 0)
    with pytest.raises(ValueError, match="budget"):
        build_ddtree(logits, roots, count_prefixes(4, 3) + 1)
    build_ddtree(logits, roots, count_prefixes(4, 3))  # the largest budget is allowed
    with pytest.raises(ValueError, match="draft_logits"):
        build_ddtree(logits[0], roots, 4)
    with pytest.raises(ValueError, match="draft_logits"):
        build_ddtree(logits.long(), roots, 4)
    with pytest.raises(ValueError, match="root_tokens"):
        build_ddtree(logits, roots[:1], 4)
    bad = logits.clone()
    bad[1, 2, 3] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        build_ddtree(bad, roots, 4)
    tree = build_ddtree(logits, roots, 4)
    with pytest.raises(ValueError, match="target_logits"):
        accept_greedy(tree, torch.randn(2, 4, 4))
    with pytest.raises(ValueError, match="draft_tokens"):
        chain_tree(torch.randn(2, 3), roots)
    with pytest.raises(ValueError, match="root_tokens"):
        chain_tree(torch.zeros(2, 3, dtype=torch.long), roots[:1])


def test_a_trees_first_nodes_are_the_tree_of_the_smaller_budget():
    """DraftTree.prefix(n) of a budget-B tree: its nodes' token paths are the reference heap's first n - 1 pops (the
    budget-(n - 1) tree), and its links, depths and ancestors are what `tree_from_parents` makes of the first n
    nodes' parents."""
    gen = torch.Generator().manual_seed(11)
    logits, roots = torch.randn(3, 6, 40, generator=gen), torch.randint(0, 40, (3,), generator=gen)
    tree = build_ddtree(logits, roots, 63)
    for n in (1, 2, 9, 33, 64):
        cut = tree.prefix(n)
        check_invariants(cut)
        for r in range(3):
            assert node_paths(cut, r)[1:] == (heap_reference(logits[r], n - 1) if n > 1 else [])
        again = tree_from_parents(cut.token_ids, cut.parents, tree.max_depth)
        for name in ("depths", "ancestor_mask", "next_token", "next_sibling"):
            assert torch.equal(getattr(cut, name), getattr(again, name)), name
    with pytest.raises(ValueError, match="not in"):
        tree.prefix(65)


def test_rows_are_the_named_requests_trees():
    """DraftTree.rows(index): request r of the result is request index[r]'s tree, whole (repeats allowed), with the
    same max_depth, each of them a tree as the builder left it."""
    gen = torch.Generator().manual_seed(12)
    tree = build_ddtree(torch.randn(3, 5, 30, generator=gen), torch.randint(0, 30, (3,), generator=gen), 9)
    picked = tree.rows(torch.tensor([2, 0, 2]))
    check_invariants(picked)
    assert picked.max_depth == tree.max_depth and picked.num_requests == 3
    for r, source in enumerate((2, 0, 2)):
        assert node_paths(picked, r) == node_paths(tree, source)
        assert torch.equal(picked.ancestor_mask[r], tree.ancestor_mask[source])


def test_a_sure_drafter_rounded_above_zero_still_gives_a_topological_tree():
    """Where the drafter is all but certain a GPU's log-softmax can round the top log-probability to a hair above 0;
    the tree of such input is the tree of those entries at exactly 0: every node after its parent, so each prefix's
    parents lie inside it (before the fix, deeper nodes of the sure chain came first)."""
    from sglang_dflash.ddtree import build_ddtree_from_top_k

    gen = torch.Generator().manual_seed(5)
    R, L, K = 2, 6, 9
    logp = torch.sort(torch.rand(R, L, K, generator=gen) * -20 - 25, -1, descending=True).values
    logp[:, :, 0] = torch.tensor([1e-7, 0.0, 3e-7, 1e-7, 2e-7, 0.0])  # the sure chain, rounded up at some depths
    ids = torch.stack([torch.randperm(50, generator=gen)[:K] for _ in range(R * L)]).view(R, L, K)
    roots = torch.zeros(R, dtype=torch.long)
    tree = build_ddtree_from_top_k(logp, ids, roots, K)
    exact = build_ddtree_from_top_k(logp.clamp(max=0.0), ids, roots, K)
    assert torch.equal(tree.parents, exact.parents) and torch.equal(tree.token_ids, exact.token_ids)
    assert (tree.parents[:, 1:] < torch.arange(1, K + 1)).all()
    assert tree.parents[0, 1 : L + 1].tolist() == list(range(L))  # the chain first, depth by depth
    for n in (2, 4, 7):
        assert (tree.prefix(n).parents < n).all()
