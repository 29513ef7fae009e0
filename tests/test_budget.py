"""The verify budget planner (`sglang_dflash.budget`). Oracles: hand-worked plans, and brute force over every vector
of per-request budgets (each request verifying a prefix of its candidates) for the best expected tokens per second."""

from __future__ import annotations

import itertools

import pytest
import torch

from sglang_dflash.budget import VerifyCost, plan_budget


def rate(probs: torch.Tensor, budgets, cost: VerifyCost) -> float | None:
    """Expected tokens per second of verifying the first budgets[r] candidates of each request r."""
    seconds = cost.of(probs.shape[0] + sum(budgets))
    if seconds is None:
        return None
    return (probs.shape[0] + sum(float(probs[r, :b].sum()) for r, b in enumerate(budgets))) / seconds


def random_case(gen: torch.Generator, R: int, M: int):
    """Rows best-first (non-increasing), a cost table with its own gaps and steps."""
    probs = torch.rand(R, M, generator=gen, dtype=torch.float64).sort(dim=1, descending=True).values
    sizes = sorted(set(torch.randint(1, R * (M + 1) + 3, (6,), generator=gen).tolist()) | {R * (M + 1)})
    steps = torch.rand(len(sizes), generator=gen, dtype=torch.float64) * 0.4
    return probs, VerifyCost(tuple(sizes), tuple((1.0 + steps.cumsum(0)).tolist()))


def test_hand_worked_plan():
    """Rates by B: 0: 2 / 1.0; 1: 2.9 / 1.1; 2: 3.5 / 1.2; 3: 4.0 / 1.3 (best); 4: 4.1 / 2.0."""
    probs = torch.tensor([[0.9, 0.5], [0.6, 0.1]])
    plan = plan_budget(probs, VerifyCost((2, 3, 4, 5, 6), (1.0, 1.1, 1.2, 1.3, 2.0)))
    assert plan.budgets.tolist() == [2, 1] and plan.total == 3
    assert plan.expected_tokens == pytest.approx(4.0) and plan.tokens_per_second == pytest.approx(4.0 / 1.3)


def test_a_forward_costs_the_size_it_pads_to():
    cost = VerifyCost((2, 4, 8), (1.0, 1.2, 3.0))
    assert [cost.of(t) for t in (1, 2, 3, 4, 5, 8, 9)] == [1.0, 1.0, 1.2, 1.2, 3.0, 3.0, None]
    # B = 0: 2 / 1.0; B = 1: 2.8 / 1.2; B = 2: 2.85 / 1.2 (3 tokens cost as 4: the second node comes free)
    plan = plan_budget(torch.tensor([[0.8], [0.05]]), cost)
    assert plan.budgets.tolist() == [1, 1] and plan.tokens_per_second == pytest.approx(2.85 / 1.2)


def test_plain_decoding_where_speculation_does_not_pay():
    probs = torch.tensor([[0.3, 0.1], [0.2, 0.0]])
    plan = plan_budget(probs, VerifyCost((2, 3, 4, 6), (1.0, 2.0, 3.0, 4.0)))
    assert plan.budgets.tolist() == [0, 0] and plan.tokens_per_second == pytest.approx(2.0)


@pytest.mark.parametrize("seed", range(40))
def test_plan_is_the_best_of_every_budget_vector(seed):
    gen = torch.Generator().manual_seed(seed)
    R, M = 1 + seed % 3, 1 + seed % 4
    probs, cost = random_case(gen, R, M)
    cap = None if seed % 5 else R * M // 2
    plan = plan_budget(probs, cost, max_total=cap)
    rates = [
        r
        for b in itertools.product(range(M + 1), repeat=R)
        if cap is None or sum(b) <= cap
        if (r := rate(probs, b, cost)) is not None
    ]
    assert plan.tokens_per_second == pytest.approx(max(rates), rel=1e-12)
    assert rate(probs, plan.budgets.tolist(), cost) == pytest.approx(plan.tokens_per_second, rel=1e-12)
    assert cap is None or plan.total <= cap
    assert plan.tokens_per_second >= R / cost.of(R) * (1 - 1e-12)  # never below plain decoding under its model


def all_prefixes(marginals: torch.Tensor) -> list[float]:
    """Path probability of every drafted prefix (depth 1..L, any of the K tokens per depth), best first.
    marginals [L, K]: each depth's K most probable tokens' probabilities."""
    L, K = marginals.shape
    paths = [
        float(marginals[torch.arange(d), torch.tensor(ids)].prod())
        for d in range(1, L + 1)
        for ids in itertools.product(range(K), repeat=d)
    ]
    return sorted(paths, reverse=True)


@pytest.mark.parametrize("seed", range(12))
def test_trees_plan_at_least_what_chains_plan(seed):
    """Per request DDTree's candidates are its best M prefixes; a chain's are the top-1 token at each depth. Under
    the same cost table the tree plan's expected tokens per second is never below the chain plan's."""
    gen = torch.Generator().manual_seed(100 + seed)
    R, L, K, M = 1 + seed % 3, 3, 3, 5
    marginals = torch.rand(R, L, K, generator=gen, dtype=torch.float64).sort(dim=2, descending=True).values
    marginals = marginals / marginals.sum(dim=2, keepdim=True) * 0.95  # the K shown hold 95% of each depth's mass
    trees = torch.tensor([all_prefixes(marginals[r])[:M] for r in range(R)], dtype=torch.float64)
    chains = marginals[:, :, 0].cumprod(dim=1)
    _, cost = random_case(gen, R, M)
    assert plan_budget(trees, cost).tokens_per_second >= plan_budget(chains, cost).tokens_per_second * (1 - 1e-12)


@pytest.mark.parametrize(
    "probs, cost, message",
    [
        (torch.tensor([[0.2, 0.5]]), VerifyCost((1, 3), (1.0, 2.0)), "non-increasing"),
        (torch.tensor([[1.5]]), VerifyCost((1, 3), (1.0, 2.0)), r"in \[0, 1\]"),
        (torch.tensor([0.5]), VerifyCost((1, 3), (1.0, 2.0)), r"\[R, M\]"),
        (torch.tensor([[0.5], [0.4], [0.3]]), VerifyCost((1, 2), (1.0, 2.0)), "at most 2 tokens"),
    ],
)
def test_refusals(probs, cost, message):
    with pytest.raises(ValueError, match=message):
        plan_budget(probs, cost)


@pytest.mark.parametrize(
    "tokens, seconds, message",
    [((), (), "0 sizes"), ((2, 2), (1.0, 1.0), "ascending"), ((0, 2), (1.0, 1.0), "positive"), ((1,), (0.0,), "times")],
)
def test_cost_table_refusals(tokens, seconds, message):
    with pytest.raises(ValueError, match=message):
        VerifyCost(tokens, seconds)


@pytest.mark.parametrize("seed", range(6))
def test_tree_nodes_are_the_best_prefixes_best_first(seed):
    """A DDTree's nodes, as candidates: the budget best prefixes' path probabilities (brute force over every prefix of
    the full distributions), non-increasing in node order, as `plan_budget` requires."""
    from sglang_dflash.budget import tree_accept_probs
    from sglang_dflash.ddtree import build_ddtree

    gen = torch.Generator().manual_seed(200 + seed)
    R, L, V, B = 2, 3, 4, 9
    logits = torch.randn(R, L, V, generator=gen) * 2
    tree = build_ddtree(logits, torch.zeros(R, dtype=torch.long), B)
    probs = tree_accept_probs(tree, logits)
    assert probs.shape == (R, B) and (probs[:, 1:] <= probs[:, :-1] * (1 + 1e-6)).all()
    for r in range(R):
        best = all_prefixes(torch.softmax(logits[r].double(), dim=-1))[:B]
        torch.testing.assert_close(probs[r].double(), torch.tensor(best, dtype=torch.float64), rtol=1e-5, atol=1e-7)
