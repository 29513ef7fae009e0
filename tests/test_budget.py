"""The verify budget planner (`sglang_dflash.budget`). Oracles: hand-worked plans, and brute force over every vector
of per-request budgets (each request verifying a prefix of its candidates) for the best expected tokens per second;
for one width for the whole batch (`plan_nodes`), hand-worked widths and the rate of every tier."""

from __future__ import annotations

import itertools

import pytest
import torch

from sglang_dflash.budget import BudgetControl, VerifyCost, WidthController, plan_budget, plan_nodes


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
    """A DDTree's nodes, as candidates, from its top-K lists (as the engine and the server have them, merged over
    tensor-parallel shards or not): the budget best prefixes' path probabilities (brute force over every prefix of the
    full distributions), non-increasing in node order, as `plan_budget` requires; the tree is `build_ddtree`'s."""
    from sglang_dflash.budget import tree_accept_probs
    from sglang_dflash.ddtree import build_ddtree, build_ddtree_from_top_k, draft_log_probs

    gen = torch.Generator().manual_seed(200 + seed)
    R, L, V, B = 2, 3, 4 + seed % 2, 9
    logits = torch.randn(R, L, V, generator=gen) * 2
    logp, ids = draft_log_probs(logits, min(B, V))
    tree = build_ddtree_from_top_k(logp, ids, torch.zeros(R, dtype=torch.long), B)
    assert torch.equal(tree.token_ids, build_ddtree(logits, torch.zeros(R, dtype=torch.long), B).token_ids)
    probs = tree_accept_probs(tree, logp, ids)
    assert probs.shape == (R, B) and (probs[:, 1:] <= probs[:, :-1] * (1 + 1e-6)).all()
    for r in range(R):
        best = all_prefixes(torch.softmax(logits[r].double(), dim=-1))[:B]
        torch.testing.assert_close(probs[r].double(), torch.tensor(best, dtype=torch.float64), rtol=1e-5, atol=1e-7)


def test_one_width_for_the_batch_hand_worked():
    """R = 2, tiers 1 / 2 / 4 nodes, a forward of R x N tokens: N = 1: 2 / 1.0 = 2; N = 2: (2 + 0.9 + 0.8) / 1.2 =
    3.08 (best); N = 4: (2 + 1.5 + 1.0) / 2.0 = 2.25. Costlier wide forwards: plain decoding (2 / 1.0 against 3.7 / 3.0
    and 4.5 / 5.0)."""
    probs = torch.tensor([[0.9, 0.5, 0.1], [0.8, 0.2, 0.0]])
    assert plan_nodes(probs, BudgetControl(VerifyCost((2, 4, 8), (1.0, 1.2, 2.0)), (1, 2, 4))) == 2
    assert plan_nodes(probs, BudgetControl(VerifyCost((2, 4, 8), (1.0, 3.0, 5.0)), (1, 2, 4))) == 1
    # a tie (N = 2: 2.5 / 1.25 = 2, as N = 1) goes to the narrower; past the table (N = 4: 8 > 6 tokens) is not offered
    tie = torch.tensor([[0.5, 0.25, 0.25], [0.0, 0.0, 0.0]])
    assert plan_nodes(tie, BudgetControl(VerifyCost((2, 6), (1.0, 1.25)), (1, 2, 4))) == 1
    assert plan_nodes(probs, BudgetControl(VerifyCost((2, 6), (1.0, 0.5)), (1, 2, 4))) == 2


@pytest.mark.parametrize("seed", range(20))
def test_the_width_has_the_best_rate_of_every_tier(seed):
    gen = torch.Generator().manual_seed(seed)
    R, M = 1 + seed % 4, 7
    probs, cost = random_case(gen, R, M)
    tiers = tuple(sorted(set(torch.randint(1, M + 2, (3,), generator=gen).tolist()) | {1}))
    n = plan_nodes(probs, BudgetControl(cost, tiers))
    rates = {t: rate(probs, [t - 1] * R, cost) for t in tiers}
    rates = {t: r for t, r in rates.items() if r is not None}
    assert rates[n] == max(rates.values()) and all(rates[t] < rates[n] for t in rates if t < n)


@pytest.mark.parametrize(
    "tiers, probs, message",
    [((), torch.ones(1, 3), "ascending"), ((2, 2), torch.ones(1, 3), "ascending"), ((0, 2), torch.ones(1, 3), ">= 1"),
     ((1,), torch.ones(1, 3), "2 nodes or more"), ((1, 5), torch.ones(1, 3), "fewer than the widest tier's 4"),
     ((4, 5), torch.ones(2, 4), "at most 6 tokens")],
)  # fmt: skip
def test_width_refusals(tiers, probs, message):
    with pytest.raises(ValueError, match=message):
        plan_nodes(probs, BudgetControl(VerifyCost((2, 6), (1.0, 2.0)), tiers))


def test_width_controller_calibrates_by_acceptance_hand_worked():
    """One request, tiers 1 / 3. Nothing drafted yet: the narrowest. Then a tree of probabilities 0.9 (depth 1) and
    0.5 (depth 2), both verified, one accepted: depth factors (1 + 1) / (0.9 + 1) and (0 + 1) / (0.5 + 1), so the same
    tree counts 0.9 * 2 / 1.9 + 0.5 / 1.5 = 1.2807 expected drafts, not 1.4: against plain decoding (1 token / 1.0 s)
    3 nodes at 2.3 s lose (2.2807 / 2.3), at 2.2 s win; uncalibrated they would win at 2.3 s too (2.4 / 2.3)."""
    probs, depths = torch.tensor([[0.9, 0.5]]), torch.tensor([[1, 2]])
    for seconds, calibrated, raw in ((2.3, 1, 3), (2.2, 3, 3)):
        control = BudgetControl(VerifyCost((1, 3), (1.0, seconds)), (1, 3))
        width = WidthController(max_depth=2)
        assert width.nodes([0], control) == 1
        width.observe([0], probs, depths, nodes=3, accept_len=[1])
        assert width.factors([0])[0][1:].tolist() == pytest.approx([2 / 1.9, 1 / 1.5])
        assert width.nodes([0], control) == calibrated and plan_nodes(probs, control) == raw


def test_width_controller_forgets_and_counts_only_verified_nodes():
    """A step that verifies the root alone predicts nothing and accepts nothing: the counts only decay (so the factors
    drift back to 1 and speculation is tried again); nodes past the verified width are not predictions."""
    width = WidthController(max_depth=2, decay=0.5)
    probs, depths = torch.tensor([[0.8, 0.4], [0.6, 0.3]]), torch.tensor([[1, 2], [1, 1]])
    width.observe([0, 1], probs, depths, nodes=2, accept_len=[0, 1])  # node 0 of each verified, node 1 not
    assert [*width.predicted[0][1:], *width.predicted[1][1:]] == pytest.approx([0.8, 0.0, 0.6, 0.0])
    assert [width.accepted[r][1:].tolist() for r in (0, 1)] == [[0.0, 0.0], [1.0, 0.0]]
    width.observe([0], probs[:1], depths[:1], nodes=1, accept_len=[0])
    assert width.predicted[0][1:].tolist() == pytest.approx([0.4, 0.0]) and width.accepted[1][1] == 1.0


def test_width_controller_keys_requests_by_id_and_forgets_the_finished():
    """The server keys requests by id: each keeps its own counts; `retain` drops every other request's, which then
    counts as never drafted (the narrowest tier)."""
    control = BudgetControl(VerifyCost((1, 3), (1.0, 1.1)), (1, 3))
    width = WidthController(max_depth=2)
    probs, depths = torch.tensor([[0.9, 0.5], [0.9, 0.5]]), torch.tensor([[1, 2], [1, 2]])
    width.observe(["a", "b"], probs, depths, nodes=3, accept_len=[2, 0])
    assert width.factors(["a"])[0][1:].tolist() == pytest.approx([2 / 1.9, 2 / 1.5])
    assert width.factors(["b"])[0][1:].tolist() == pytest.approx([1 / 1.9, 1 / 1.5])
    assert width.nodes(["a"], control) == 3
    width.retain(["a"])
    assert set(width.drafted) == set(width.accepted) == set(width.predicted) == {"a"} and width.nodes(["a", "b"], control) == 1


def test_with_no_request_drafted_yet_each_counts_as_the_last_one_observed():
    """Before any observation: the narrowest (tiers 1 / 3, costs 1.0 / 1.1 s at 1 / 3 tokens). Request a drafted (0.9,
    0.5) at depths 1, 2, verified 3 nodes and accepted 2: factors 2 / 1.9 and 2 / 1.5, calibrated (0.947, 0.667).
    Once a is gone, a new request b (nothing drafted yet) counts as that: width 3 gives 2.614 tokens / 1.1 s against
    1 / 1.0 s, so 3 (at batch 1 each new request had decoded plainly until its first observation, LAG steps on)."""
    control = BudgetControl(VerifyCost((1, 3), (1.0, 1.1)), (1, 3))
    width = WidthController(max_depth=2)
    assert width.nodes(["b"], control) == 1
    width.observe(["a"], torch.tensor([[0.9, 0.5]]), torch.tensor([[1, 2]]), nodes=3, accept_len=[2])
    width.retain(["b"])
    assert width.drafted == {} and width.recent.tolist() == pytest.approx([0.9 * 2 / 1.9, 0.5 * 2 / 1.5])
    assert width.nodes(["b"], control) == 3
    assert width.nodes(["b"], BudgetControl(VerifyCost((1, 3), (1.0, 2.7)), (1, 3))) == 1  # 2.614 / 2.7 < 1 / 1.0


def test_a_request_not_yet_drafted_counts_as_the_mean_of_the_others():
    """Requests a and b drafted (0.9, 0.5) and (0.5, 0.1) at depths 1, 2, verified 1 node and accepted it (depth 1's
    factor 2 / (p + 1)): calibrated (0.947, 0.5) and (0.667, 0.1). A request c that joins counts as their mean (0.807,
    0.3): width 3 gives 6.321 tokens / 1.49 s = 4.24/s against width 2's 5.421 / 1.3 = 4.17/s; counted as nothing
    (zeros) it would give width 2 (5.214 / 1.49 = 3.50 against 4.614 / 1.3 = 3.55)."""
    control = BudgetControl(VerifyCost((3, 6, 9), (1.0, 1.3, 1.49)), (1, 2, 3))
    width = WidthController(max_depth=2)
    probs, depths = torch.tensor([[0.9, 0.5], [0.5, 0.1]]), torch.tensor([[1, 2], [1, 2]])
    width.observe(["a", "b"], probs, depths, nodes=2, accept_len=[1, 1])
    calibrated = torch.stack([(p * width.factors([k])[0][d]).clamp(max=1.0) for k, p, d in zip("ab", probs.double(), depths)])
    three = torch.cat([calibrated, calibrated.mean(0, keepdim=True)])
    assert width.nodes(["a", "b", "c"], control) == plan_nodes(three, control) == 3
    assert plan_nodes(torch.cat([calibrated, torch.zeros(1, 2)]), control) == 2
