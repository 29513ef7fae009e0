"""The benchmark-only forced acceptance (benchmarks/gpu/forced_acceptance.py). Depth model: its profile, the path it
accepts on hand-worked trees, the distribution of the patched workers' acceptance. Marginal model: its calibration
and its acceptance against an exhaustive enumeration of the target's tokens over trees the package builds. The entry
point SGLang would find."""

from __future__ import annotations

import importlib.metadata
import sys
from types import SimpleNamespace

import pytest
import torch
from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
import forced_acceptance as forced  # noqa: E402

from sglang_dflash.ddtree import build_ddtree, tree_from_parents  # noqa: E402
from sglang_dflash.dflash import chain_tree  # noqa: E402


def test_depth_probs_hand_worked():
    assert forced.depth_probs([0.5, 0.5]).tolist() == [0.5, 0.25, 0.25]
    assert forced.depth_probs([1.0, 0.0, 1.0]).tolist() == [0.0, 1.0, 0.0, 0.0]


@pytest.mark.parametrize("tau, L", [(1.0, 15), (7.7, 15), (10.2, 15), (16.0, 15), (2.5, 3)])
def test_survival_from_tau_gives_that_mean(tau, L):
    probs = forced.depth_probs(forced.survival_from_tau(tau, L))
    assert probs.sum().item() == pytest.approx(1.0) and (probs >= -1e-12).all()
    assert sum((k + 1) * p for k, p in enumerate(probs.tolist())) == pytest.approx(tau, abs=1e-6)
    with pytest.raises(ValueError):
        forced.survival_from_tau(L + 1.5, L)


def test_forced_acceptance_follows_first_children_to_the_drawn_depth():
    # node 0 -> 1 (first child), 2; 1 -> 3; 3 -> 4: the first-child chain is 0, 1, 3, 4 (depth 3)
    tree = tree_from_parents(torch.tensor([[9, 10, 11, 12, 13]] * 3), torch.tensor([[-1, 0, 0, 1, 3]] * 3), max_depth=3)
    logits = torch.zeros(3, 5, 8)
    logits[0, 0, 5] = logits[1, 3, 6] = logits[2, 4, 7] = 1.0  # the target's argmax at each request's last node
    acc = forced.forced_acceptance(tree, logits, torch.tensor([0, 2, 9]))
    assert acc.accepted_nodes.tolist() == [[0, -1, -1, -1], [0, 1, 3, -1], [0, 1, 3, 4]]
    assert acc.accept_len.tolist() == [0, 2, 3] and acc.bonus_tokens.tolist() == [5, 6, 7]


@pytest.mark.parametrize("seed", range(6))
def test_forced_acceptance_on_random_trees_against_a_walk_by_hand(seed):
    """Random trees (each node's parent an earlier node) and depths, against a walk in Python over the parents: from
    the root, the lowest-numbered child, while the depth allows."""
    g = torch.Generator().manual_seed(seed)
    R, N, V = 5, 1 + int(torch.randint(1, 20, (1,), generator=g)), 7
    parents = [[-1] + [int(torch.randint(0, i, (1,), generator=g)) for i in range(1, N)] for _ in range(R)]
    depth_of = [[0] * N for _ in range(R)]
    for r in range(R):
        for i in range(1, N):
            depth_of[r][i] = depth_of[r][parents[r][i]] + 1
    L = max(max(row) for row in depth_of)
    tree = tree_from_parents(torch.randint(0, V, (R, N), generator=g), torch.tensor(parents), max_depth=L)
    logits = torch.randn(R, N, V, generator=g)
    depths = torch.randint(0, L + 2, (R,), generator=g)
    acc = forced.forced_acceptance(tree, logits, depths)
    for r in range(R):
        path = [0]
        while len(path) <= depths[r]:
            children = [i for i in range(N) if parents[r][i] == path[-1]]
            if not children:
                break
            path.append(min(children))
        assert acc.accepted_nodes[r].tolist() == path + [-1] * (L + 1 - len(path))
        assert acc.accept_len[r] == len(path) - 1 and acc.bonus_tokens[r] == logits[r, path[-1]].argmax()


def test_depth_draws_follow_the_profile():
    probs = forced.depth_probs([0.9, 0.6, 0.3])
    depths = forced.draw_depths(torch.cumsum(probs, 0), 20000, torch.Generator().manual_seed(0))
    counts = torch.bincount(depths, minlength=4).double()
    assert depths.min() >= 0 and depths.max() <= 3
    assert ((counts - 20000 * probs).abs() <= 5 * (20000 * probs).sqrt()).all(), (counts, probs)


@pytest.mark.sglang
def test_patched_workers_accept_at_the_profiles_distribution(monkeypatch):
    """`load` with the profile in the environment: the workers' accept_greedy draws depths whose frequencies over
    4000 chains of 6 drafts match the profile (each within 5 standard deviations), and the drafter's logits are
    sharpened (same argmax, raised by 30)."""
    from sglang_dflash.sglang import ddtree_worker_v2, worker_common

    survival = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    monkeypatch.setenv(forced.ENV, "depth:" + ",".join(map(str, survival)))
    monkeypatch.setattr(ddtree_worker_v2, "accept_greedy", ddtree_worker_v2.accept_greedy)  # restored after the test
    monkeypatch.setattr(worker_common.DDTreeWorkerBase, "_run_drafter", lambda self, *a: (None, torch.tensor([[0.0, 2.0, 1.0]])))
    forced.load()
    R = 4000
    tree = chain_tree(torch.zeros(R, 6, dtype=torch.long), torch.zeros(R, dtype=torch.long))
    acc = ddtree_worker_v2.accept_greedy(tree, torch.zeros(R, 7, 4))
    counts = torch.bincount(acc.accept_len, minlength=7).double()
    expected = forced.depth_probs(survival) * R
    assert ((counts - expected).abs() <= 5 * expected.clamp(min=1).sqrt()).all(), (counts, expected)
    hidden, logits = worker_common.DDTreeWorkerBase._run_drafter(None)
    assert hidden is None and logits.tolist() == [[0.0, 32.0, 1.0]]


def test_install_makes_an_entry_point_sglang_finds(tmp_path):
    root = forced.install(tmp_path)
    found = [ep for dist in importlib.metadata.distributions(path=[str(root)]) for ep in dist.entry_points]
    assert [(ep.group, ep.name, ep.value) for ep in found] == [("sglang.srt.plugins", forced.ENTRY, "forced_acceptance:load")]
    assert (root / "forced_acceptance.py").read_text() == (ROOT / "benchmarks" / "gpu" / "forced_acceptance.py").read_text()


def test_step_costs_forces_only_our_named_runs(tmp_path):
    import harness
    import sglang_step_costs

    args = harness.parse_args(["--speculative-algorithm", "DFLASH_CHAIN", "DDTREE", "DFLASH", "--budgets", "63"])
    (tmp_path / "config.json").write_text('{"block_size": 16}')
    runs = harness.sglang_runs(args, tmp_path, tmp_path)
    models = sglang_step_costs.acceptance_models(SimpleNamespace(forced_tau={"DDTREE": 10.2}, calibrated_tau=None), 16)
    sglang_step_costs.forced_runs(runs, models, tmp_path, {"PYTHONPATH": "/site"})
    forced_env = {r.name: r.env.get(forced.ENV) for r in runs}
    assert [n for n, v in forced_env.items() if v] == ["sglang-ddtree63"]
    ddtree = next(r for r in runs if r.name == "sglang-ddtree63")
    assert ddtree.env["PYTHONPATH"] == f"{tmp_path / 'forced_acceptance'}:/site"
    model, _, values = ddtree.env[forced.ENV].partition(":")
    survival = [float(x) for x in values.split(",")]
    assert model == "depth" and len(survival) == 15
    assert sum((k + 1) * p for k, p in enumerate(forced.depth_probs(survival).tolist())) == pytest.approx(10.2, abs=1e-4)
    # --calibrated-tau: one marginal model for every run of ours (SGLang's own DFLASH keeps the target's acceptance)
    runs = harness.sglang_runs(args, tmp_path, tmp_path)
    models = sglang_step_costs.acceptance_models(SimpleNamespace(forced_tau=None, calibrated_tau=(7.7, 10.2)), 16)
    sglang_step_costs.forced_runs(runs, models, tmp_path, {"PYTHONPATH": "/site"})
    specs = {r.name: r.env.get(forced.ENV) for r in runs if r.env.get(forced.ENV)}
    assert list(specs) == ["sglang-dflash-chain", "sglang-ddtree63"] and len(set(specs.values())) == 1
    probs = [float(x) for x in specs["sglang-ddtree63"].removeprefix("marginal:").split(",")]
    assert len(probs) == forced.RANKS and probs == pytest.approx(forced.rank_probs(7.7, 10.2, 15), rel=1e-8)


# --- the marginal model


def enumerated_accept(tree, probs: list[float], top: list[list[int]], V: int) -> list[float]:
    """Per request, the expected accept length (drafted tokens, bonus excluded) when the target's token at depth d is
    top[r][d - 1] + k (mod V) with probs[k] (rank k + 1), or any other token (mass 1 - sum(probs)), independently:
    every sequence of ranks enumerated, the tree walked by hand over its parents."""
    import itertools

    R, N = tree.token_ids.shape
    L = tree.max_depth
    out = []
    for r in range(R):
        tokens, parents = tree.token_ids[r].tolist(), tree.parents[r].tolist()
        mean = 0.0
        outcomes = [*range(len(probs)), None]  # None: a token ranked past the given ranks (no tree holds it)
        for ranks in itertools.product(outcomes, repeat=L):
            p, node, length = 1.0, 0, 0
            for k in ranks:
                p *= (1 - sum(probs)) if k is None else probs[k]
            for d, k in enumerate(ranks):
                want = None if k is None else (top[r][d] + k) % V
                child = next((i for i in range(N) if parents[i] == node and tokens[i] == want), None)
                if child is None:
                    break
                node, length = child, length + 1
            mean += p * length
        out.append(mean)
    return out


@pytest.mark.parametrize("budget", [1, 3, 5, 9])
def test_expected_tau_is_what_a_built_tree_accepts(budget):
    """`expected_tau` (best first over prefixes) against the DDTree the package builds from `calibrated_logits` and
    an enumeration of every rank sequence the target can draw (3 depths, 3 ranks and the rest)."""
    L, V, probs = 3, 11, [0.6, 0.25, 0.1]
    logits = torch.randn(2, L, V, generator=torch.Generator().manual_seed(budget))
    shaped = forced.calibrated_logits(logits, torch.tensor(probs).log(), 1 - sum(probs))
    assert torch.allclose(shaped.softmax(-1).topk(3).values, torch.tensor(probs).expand(2, L, 3), atol=1e-6)
    tree = build_ddtree(shaped, torch.zeros(2, dtype=torch.long), budget)
    top = logits.argmax(-1).tolist()
    expected = enumerated_accept(tree, probs, top, V)
    assert expected == pytest.approx([forced.expected_tau(probs, L, budget) - 1] * 2, abs=1e-6)


@pytest.mark.parametrize("chain_tau, tree_tau", [(7.7, 10.2), (5.5, 7.5), (9.1, 11.5)])
def test_rank_probs_reach_both_figures(chain_tau, tree_tau):
    probs = forced.rank_probs(chain_tau, tree_tau, 15)
    a = probs[0]
    assert 1 + sum(a**d for d in range(1, 16)) == pytest.approx(chain_tau, abs=1e-6)  # the chain: a per depth
    assert forced.expected_tau(probs, 15, forced.TREE_BUDGET) == pytest.approx(tree_tau, abs=1e-4)
    assert sum(probs) <= 1 and all(x >= y for x, y in zip(probs, probs[1:]))
    with pytest.raises(ValueError, match="reaches"):
        forced.rank_probs(chain_tau, chain_tau - 0.5, 15)  # a tree below its own chain
    with pytest.raises(ValueError, match="out of order"):
        forced.rank_probs(2.5, 8.0, 15)  # the fit leaves ranks past the second below an unranked token's share


def test_drawn_tokens_follow_the_ranks():
    V, probs, n = 50, torch.tensor([0.5, 0.2, 0.1], dtype=torch.float64), 40000
    top = torch.full((n, 1), 47)
    drawn = forced.drawn_tokens(top, torch.cumsum(probs, 0), V, torch.Generator().manual_seed(0))[:, 0]
    counts = torch.bincount(drawn, minlength=V).double()
    ranked = [(47 + k) % V for k in range(3)]
    for token, p in zip(ranked, probs.tolist()):
        assert abs(counts[token] - n * p) <= 5 * (n * p) ** 0.5, (token, counts[token])
    others = torch.tensor([t for t in range(V) if t not in ranked])
    expected = n * 0.2 / len(others)  # the rest, uniform over the unranked tokens
    assert ((counts[others] - expected).abs() <= 5 * expected**0.5).all()
    past = forced.drawn_tokens(top, torch.zeros(3, dtype=torch.float64), V, torch.Generator().manual_seed(1))
    assert not torch.isin(past, torch.tensor(ranked)).any()  # all mass past the ranks: never a ranked token


@pytest.mark.sglang
@pytest.mark.parametrize("budget", [4, 9])
def test_patched_workers_accept_as_the_marginal_model(monkeypatch, budget):
    """`load` with a marginal model: the drafter's logits become the calibrated distribution, and the workers'
    accept_greedy over trees built from them (a DDTree, its first 3 nodes as a width tier verifies them, a chain)
    accepts on average what the enumeration gives."""
    from sglang_dflash.sglang import ddtree_worker_v2, worker_common

    L, V, probs = 3, 13, [0.7, 0.2]
    monkeypatch.setenv(forced.ENV, "marginal:" + ",".join(map(str, probs)))
    monkeypatch.setattr(ddtree_worker_v2, "accept_greedy", ddtree_worker_v2.accept_greedy)  # restored after the test
    raw = torch.randn(1, L, V, generator=torch.Generator().manual_seed(budget))
    monkeypatch.setattr(worker_common.DDTreeWorkerBase, "_run_drafter", lambda self, *a: (None, raw))
    forced.load()
    _, logits = worker_common.DDTreeWorkerBase._run_drafter(None)
    assert torch.allclose(logits.softmax(-1).topk(2).values, torch.tensor(probs).expand(1, L, 2), atol=1e-6)
    R, roots = 6000, torch.zeros(1, dtype=torch.long)
    ddtree = build_ddtree(logits, roots, budget)
    for tree in (ddtree, ddtree.prefix(3), chain_tree(logits.argmax(-1), roots)):  # one request's; a width tier's prefix
        mean = enumerated_accept(tree, probs, raw.argmax(-1).tolist(), V)[0]
        many = tree_from_parents(tree.token_ids.expand(R, -1), tree.parents.expand(R, -1), max_depth=tree.max_depth)
        lengths = ddtree_worker_v2.accept_greedy(many, torch.zeros(R, tree.token_ids.shape[1], V)).accept_len.double()
        assert abs(lengths.mean().item() - mean) <= 5 * lengths.std().item() / R**0.5, (lengths.mean(), mean)
