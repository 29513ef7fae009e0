"""accept_sampling emits tokens distributed exactly as sampling the target alone (chi-square)."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

import sglang_dflash.ddtree as ddtree
from sglang_dflash.ddtree import accept_sampling, tree_from_parents

V = 6
# root --1--> a --2--> c
#      \-3--> b
TOKENS = [0, 1, 3, 2]
PARENTS = [-1, 0, 0, 1]
SAMPLES = 60_000
SETTINGS = [(1.0, 1.0, -1), (0.7, 1.0, -1), (1.3, 0.8, -1), (0.9, 1.0, 4), (1.1, 0.75, 3)]


def filtered_probs(logits: np.ndarray, temperature: float, top_p: float, top_k: int) -> np.ndarray:
    """The target's own sampling distribution, written out independently of the package."""
    z = logits / temperature
    p = np.exp(z - z.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    keep = np.zeros_like(p, dtype=bool)
    before = 0.0
    for rank, t in enumerate(order):
        if (top_k > 0 and rank >= top_k) or (top_p < 1 and before > top_p):
            break
        keep[t] = True
        before += p[t]
    q = np.where(keep, p, 0.0)
    return q / q.sum()


def emitted_pvalues(temperature, top_p, top_k, seed=0):
    """p-values of chi-square tests that the emitted tokens follow the target, one per context:
    first token (root), second given first = 1 (node a), second given 3 (node b), third given 1, 2 (node c)."""
    gen = torch.Generator().manual_seed(seed)
    node_logits = torch.randn(len(TOKENS), V, generator=gen) * 0.8
    for child in range(1, len(TOKENS)):  # drafted tokens likely enough to survive every filter
        node_logits[PARENTS[child], TOKENS[child]] += 1.5
    R, N = SAMPLES, len(TOKENS)
    tree = tree_from_parents(torch.tensor(TOKENS).expand(R, N), torch.tensor(PARENTS).expand(R, N), max_depth=2)
    acc = accept_sampling(tree, node_logits.expand(R, N, V), temperature, top_p, top_k, generator=gen)
    # Emitted sequence: tokens of the accepted nodes after the root, then the bonus token.
    L = acc.accepted_nodes.shape[1] - 1
    path_tokens = tree.token_ids.gather(1, acc.accepted_nodes[:, 1:].clamp_min(0))
    emitted = torch.where(torch.arange(L) < acc.accept_len[:, None], path_tokens, -1)
    emitted = torch.cat([emitted, torch.full((R, 1), -1)], 1).scatter(1, acc.accept_len[:, None], acc.bonus_tokens[:, None])
    emitted = emitted.numpy()

    contexts = {0: emitted[:, 0], 1: emitted[emitted[:, 0] == 1, 1], 2: emitted[emitted[:, 0] == 3, 1]}
    contexts[3] = emitted[(emitted[:, 0] == 1) & (emitted[:, 1] == 2), 2]
    expected = {n: filtered_probs(node_logits[n].double().numpy(), temperature, top_p, top_k) for n in contexts}
    reach = {0: 1.0, 1: expected[0][1], 2: expected[0][3], 3: expected[0][1] * expected[1][2]}
    assert min(reach.values()) * R > 2000, "the test tree is too unlikely to say anything about some context"
    pvalues = {}
    for node, draws in contexts.items():
        counts = np.bincount(draws, minlength=V)
        if len(draws) == 0 or counts[expected[node] == 0].sum():  # unreached, or emitted a filtered-out token
            pvalues[node] = 0.0
            continue
        live = expected[node] > 0
        pvalues[node] = chisquare(counts[live], expected[node][live] * len(draws)).pvalue
    return pvalues


@pytest.mark.parametrize("temperature,top_p,top_k", SETTINGS)
def test_emitted_tokens_follow_the_target(temperature, top_p, top_k):
    pvalues = emitted_pvalues(temperature, top_p, top_k)
    assert min(pvalues.values()) > 1e-3, pvalues


def _ignore_top_p(logits, temperature, top_p=1.0, top_k=-1, generator=None):
    return _real_sample(logits, temperature, 1.0, top_k, generator)


def _shared_noise(logits, temperature, top_p=1.0, top_k=-1, generator=None):
    """One race per request reused at every node: each node's draw alone is right, their joint is not."""
    probs = torch.softmax(logits.float() / temperature, -1)
    race = torch.empty_like(probs[:, :1]).exponential_(generator=generator)
    return (probs / race).argmax(-1)


def _typical_acceptance(logits, temperature, top_p=1.0, top_k=-1, generator=None):
    """Accept a drafted child whenever the target gives it >= 20%: faster, and not lossless."""
    sampled = _real_sample(logits, temperature, top_p, top_k, generator)
    probs = torch.softmax(logits.float() / temperature, -1)
    R, N = sampled.shape
    child_token = torch.full((N,), -1)
    for j in range(1, N):
        child_token[PARENTS[j]] = TOKENS[j]
    ok = (child_token >= 0) & (probs[0, torch.arange(N), child_token.clamp_min(0)] >= 0.2)
    return torch.where(ok, child_token, sampled)


_real_sample = ddtree.sample_tokens


@pytest.mark.parametrize("broken", [_ignore_top_p, _shared_noise, _typical_acceptance])
def test_chi_square_catches_a_broken_sampler(monkeypatch, broken):
    monkeypatch.setattr(ddtree, "sample_tokens", broken)
    pvalues = emitted_pvalues(1.1, 0.75, -1)
    assert min(pvalues.values()) < 1e-6, pvalues


def test_temperature_zero_is_greedy_and_per_request_settings():
    gen = torch.Generator().manual_seed(1)
    R, N = 4, len(TOKENS)
    tree = tree_from_parents(torch.tensor(TOKENS).expand(R, N), torch.tensor(PARENTS).expand(R, N), max_depth=2)
    logits = torch.randn(R, N, V, generator=gen)
    temps = torch.tensor([0.0, 0.0, 1.0, 0.0])
    acc = accept_sampling(
        tree, logits, temps, top_p=torch.tensor([1.0, 0.5, 0.9, 1.0]), top_k=torch.tensor([-1, 2, 3, 1]), generator=gen
    )
    greedy = ddtree.accept_greedy(tree, logits)
    for r in (0, 1, 3):
        assert acc.bonus_tokens[r] == greedy.bonus_tokens[r]
        assert torch.equal(acc.accepted_nodes[r], greedy.accepted_nodes[r])
    with pytest.raises(ValueError, match="top_p"):
        accept_sampling(tree, logits, 1.0, top_p=torch.ones(3))
