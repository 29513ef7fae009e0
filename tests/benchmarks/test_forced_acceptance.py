"""The benchmark-only forced acceptance (benchmarks/gpu/forced_acceptance.py): its profile, the path it accepts on
hand-worked trees, the distribution of the patched workers' acceptance, and the entry point SGLang would find."""

from __future__ import annotations

import importlib.metadata
import sys

import pytest
import torch
from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks" / "gpu"))
import forced_acceptance as forced  # noqa: E402

from sglang_dflash.ddtree import tree_from_parents  # noqa: E402
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
    monkeypatch.setenv(forced.ENV, ",".join(map(str, survival)))
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
    sglang_step_costs.forced_runs(runs, {"DDTREE": 10.2}, tmp_path, {"PYTHONPATH": "/site"}, 16)
    forced_env = {r.name: r.env.get(forced.ENV) for r in runs}
    assert [n for n, v in forced_env.items() if v] == ["sglang-ddtree63"]
    ddtree = next(r for r in runs if r.name == "sglang-ddtree63")
    assert ddtree.env["PYTHONPATH"] == f"{tmp_path / 'forced_acceptance'}:/site"
    survival = [float(x) for x in ddtree.env[forced.ENV].split(",")]
    assert len(survival) == 15 and sum((k + 1) * p for k, p in enumerate(forced.depth_probs(survival).tolist())) == (
        pytest.approx(10.2, abs=1e-4)
    )
