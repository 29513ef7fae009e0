"""The pure-torch tree references along each node's root path: the GDN one against a float64 token-by-token gated
delta rule written here (and, as a second check, Hugging Face transformers' own Qwen3.5 recurrence), the conv one
against torch's depthwise conv1d."""

import math

import pytest
import torch
import torch.nn.functional as F
from tree_helpers import gdn_inputs, random_parents, root_path

from sglang_dflash.kernels import tree_causal_conv1d_ref, tree_conv_commit_ref, tree_gdn_commit_ref, tree_gdn_verify_ref


def gates(x, r, node, h):
    """Qwen3.5's gates of V-head h at one token, from its raw inputs: g = -exp(A_log) softplus(a + dt_bias),
    beta = sigmoid(b), as Python floats."""
    g = -math.exp(x["A_log"][h]) * math.log1p(math.exp(x["a"][r, node, h] + x["dt_bias"][h]))
    return g, 1 / (1 + math.exp(-x["b"][r, node, h]))


def recurrence_path(x, slot, r, path):
    """The gated delta rule in float64, one V-head and one token at a time, over one request's path; the state S
    [K, V] (the transpose of the pool's [V, K]), q and k L2-normalised (eps 1e-6 under the root), q scaled by
    K**-0.5: S <- exp(g) S; S <- S + beta k (v - S^T k)^T; o = S^T q. Returns (outputs [T, HV, V], final state
    [HV, V, K], the pool's layout)."""
    HV, H, K = x["v"].shape[2], x["q"].shape[2], x["q"].shape[3]
    o = torch.empty(len(path), HV, x["v"].shape[3], dtype=torch.float64)
    final = torch.empty(x["state_pool"].shape[1:], dtype=torch.float64)
    for h in range(HV):
        S = x["state_pool"][slot, h].double().T.clone()
        for t, node in enumerate(path):
            q, k, v = x["q"][r, node, h // (HV // H)], x["k"][r, node, h // (HV // H)], x["v"][r, node, h]  # float64
            q = q / math.sqrt(float(q @ q) + 1e-6) * K**-0.5
            k = k / math.sqrt(float(k @ k) + 1e-6)
            g, beta = gates(x, r, node, h)
            S = S * math.exp(g)
            S = S + beta * torch.outer(k, v - S.T @ k)
            o[t, h] = S.T @ q
        final[h] = S.T
    return o, final


def transformers_path(x, slot, r, path):
    """transformers' float32 recurrence over one request's path (called directly: no kernel dispatch), with the
    gates of `gates`; returns as `recurrence_path`."""
    hf = pytest.importorskip("transformers.models.qwen3_5.modeling_qwen3_5")
    HV, H = x["v"].shape[2], x["q"].shape[2]
    g, beta = (torch.tensor([[gates(x, r, n, h)[j] for h in range(HV)] for n in path]) for j in (0, 1))
    expand = lambda t: t[r, path].repeat_interleave(HV // H, dim=1)[None]  # noqa: E731
    state = x["state_pool"][slot].transpose(-1, -2)[None].float()  # HF layout [1, HV, K, V]
    o, final = hf.torch_recurrent_gated_delta_rule(
        expand(x["q"]), expand(x["k"]), x["v"][r, path][None], g[None], beta[None], state, True, use_qk_l2norm_in_kernel=True
    )
    return o[0].double(), final[0].transpose(-1, -2).double()


CASES = [  # R, N, H, HV, K, V, chain
    (1, 1, 1, 1, 4, 4, False),
    (3, 7, 2, 6, 8, 12, False),
    (2, 17, 1, 3, 16, 8, False),
    (2, 9, 2, 4, 8, 8, True),
    (4, 5, 3, 3, 5, 7, False),
]


@pytest.mark.parametrize("oracle, tol", [(recurrence_path, 1e-10), (transformers_path, 1e-5)], ids=["float64", "transformers"])
@pytest.mark.parametrize("R,N,H,HV,K,V,chain", CASES)
def test_tree_gdn_matches_the_recurrence_along_root_paths(R, N, H, HV, K, V, chain, oracle, tol):
    """Every node's output is the recurrence's last along its root path from the slot's state; the commit leaves
    the state after the accepted path in the slot, and a padding request (slot -1) changes nothing."""
    gen = torch.Generator().manual_seed(N * 31 + R)
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R + 2, gen=gen)
    slots = torch.randperm(R + 2, generator=gen)[:R]
    parents = random_parents(R, N, gen, chain)
    pool_before = x["state_pool"].clone()
    o, ctx = tree_gdn_verify_ref(**x, slots=slots, parents=parents, dtype=torch.float64)
    assert torch.equal(x["state_pool"], pool_before), "verify modified the pool"
    for r in range(R):
        for i in range(N):
            torch.testing.assert_close(o[r, i], oracle(x, slots[r], r, root_path(parents, r, i))[0][-1], rtol=tol, atol=tol)

    # Commit the path to a random node; one request is padding (slot -1) and must stay untouched.
    accepted = torch.full((R, N + 1), -1)
    expected = x["state_pool"].clone()
    live_slots = slots.clone()
    live_slots[-1] = -1 if R > 1 else slots[-1]
    for r in range(R):
        path = root_path(parents, r, torch.randint(0, N, (1,), generator=gen).item())
        accepted[r, : len(path)] = torch.tensor(path)
        if live_slots[r] >= 0:
            expected[slots[r]] = oracle(x, slots[r], r, path)[1]
    tree_gdn_commit_ref(x["state_pool"], live_slots, ctx, accepted)
    torch.testing.assert_close(x["state_pool"], expected, rtol=tol, atol=tol)


def test_gdn_negative_slot_starts_from_zero_state():
    gen = torch.Generator().manual_seed(0)
    x = gdn_inputs(2, 3, 1, 2, 4, 4, pool_size=2, gen=gen)
    parents = random_parents(2, 3, gen)
    o_pad, _ = tree_gdn_verify_ref(**x, slots=torch.tensor([0, -1]), parents=parents, dtype=torch.float64)
    x["state_pool"][1] = 0
    o_zero, _ = tree_gdn_verify_ref(**x, slots=torch.tensor([0, 1]), parents=parents, dtype=torch.float64)
    torch.testing.assert_close(o_pad, o_zero)


@pytest.mark.parametrize(
    "R,N,D,W,chain,bias",
    [(1, 1, 4, 4, False, True), (3, 11, 6, 4, False, False), (2, 8, 5, 4, True, True), (2, 6, 3, 2, False, True)],
)
@pytest.mark.parametrize("activation", [True, False])
def test_tree_conv_matches_a_causal_conv1d_along_root_paths(R, N, D, W, chain, bias, activation):
    """Each node's output is torch's own depthwise conv1d (then, with activation, SiLU, as Qwen3.5's GDN layers apply
    it) over the slot's conv history followed by the tokens of the node's root path; the commit keeps the last W - 1
    columns of the accepted path's sequence."""
    gen = torch.Generator().manual_seed(N * 7 + D)
    x = torch.randn(R, N, D, generator=gen, dtype=torch.float64)
    conv_state = torch.randn(R + 1, D, W - 1, generator=gen, dtype=torch.float64)
    weight = torch.randn(D, W, generator=gen, dtype=torch.float64)
    b = torch.randn(D, generator=gen, dtype=torch.float64) if bias else None
    slots = torch.randperm(R + 1, generator=gen)[:R]
    parents = random_parents(R, N, gen, chain)
    state_before = conv_state.clone()
    y = tree_causal_conv1d_ref(x, conv_state, weight, b, slots, parents, activation=activation)
    assert torch.equal(conv_state, state_before), "verify modified conv_state"
    accepted = torch.full((R, N + 1), -1)
    expected = conv_state.clone()
    for r in range(R):
        for i in range(N):
            path = root_path(parents, r, i)
            sequence = torch.cat([conv_state[slots[r]], x[r, path].T], dim=-1)[None]  # [1, D, W - 1 + depth + 1]
            out = F.conv1d(sequence, weight[:, None, :], b, groups=D)  # valid positions: the last is node i's
            out = F.silu(out) if activation else out
            torch.testing.assert_close(y[r, i], out[0, :, -1])
        path = root_path(parents, r, torch.randint(0, N, (1,), generator=gen).item())
        accepted[r, : len(path)] = torch.tensor(path)
        expected[slots[r]] = torch.cat([conv_state[slots[r]], x[r, path].T], dim=-1)[:, -(W - 1) :]
    tree_conv_commit_ref(conv_state, slots, x, accepted)
    torch.testing.assert_close(conv_state, expected)
