"""The pure-torch tree references along each node's root path: the GDN one against Hugging Face transformers' own
Qwen3.5 recurrence (imported inside the test), the conv one against torch's depthwise conv1d."""

import pytest
import torch
import torch.nn.functional as F
from tree_helpers import gdn_inputs, random_parents, root_path

from sglang_dflash.kernels import tree_causal_conv1d_ref, tree_conv_commit_ref, tree_gdn_commit_ref, tree_gdn_verify_ref
from sglang_dflash.kernels.tree_gdn.naive import gdn_gates


def hf_gdn_path(x, slot, r, path):
    """transformers' recurrence over one request's path; returns (outputs [T, HV, V], final state [HV, V, K])."""
    from transformers.models.qwen3_5.modeling_qwen3_5 import torch_recurrent_gated_delta_rule

    HV, H = x["v"].shape[2], x["q"].shape[2]
    g, beta = gdn_gates(x["a"][r, path], x["b"][r, path], x["A_log"], x["dt_bias"])
    expand = lambda t: t[r, path].repeat_interleave(HV // H, dim=1)[None]
    state = x["state_pool"][slot].transpose(-1, -2)[None].float()  # HF layout [1, HV, K, V]
    o, final = torch_recurrent_gated_delta_rule(
        expand(x["q"]), expand(x["k"]), x["v"][r, path][None], g[None], beta[None], state, True, use_qk_l2norm_in_kernel=True
    )
    return o[0], final[0].transpose(-1, -2)


CASES = [  # R, N, H, HV, K, V, chain
    (1, 1, 1, 1, 4, 4, False),
    (3, 7, 2, 6, 8, 12, False),
    (2, 17, 1, 3, 16, 8, False),
    (2, 9, 2, 4, 8, 8, True),
    (4, 5, 3, 3, 5, 7, False),
]


@pytest.mark.parametrize("R,N,H,HV,K,V,chain", CASES)
def test_tree_gdn_matches_transformers_along_root_paths(R, N, H, HV, K, V, chain):
    gen = torch.Generator().manual_seed(N * 31 + R)
    x = gdn_inputs(R, N, H, HV, K, V, pool_size=R + 2, gen=gen)
    slots = torch.randperm(R + 2, generator=gen)[:R]
    parents = random_parents(R, N, gen, chain)
    pool_before = x["state_pool"].clone()
    o, ctx = tree_gdn_verify_ref(**x, slots=slots, parents=parents, dtype=torch.float64)
    assert torch.equal(x["state_pool"], pool_before), "verify modified the pool"
    for r in range(R):
        for i in range(N):
            path = root_path(parents, r, i)
            hf_o, _ = hf_gdn_path(x, slots[r], r, path)
            torch.testing.assert_close(o[r, i], hf_o[-1].double(), rtol=1e-5, atol=1e-5)

    # Commit the path to a random node; one request is padding (slot -1) and must stay untouched.
    accepted = torch.full((R, N + 1), -1)
    expected = x["state_pool"].clone()
    live_slots = slots.clone()
    live_slots[-1] = -1 if R > 1 else slots[-1]
    for r in range(R):
        path = root_path(parents, r, torch.randint(0, N, (1,), generator=gen).item())
        accepted[r, : len(path)] = torch.tensor(path)
        if live_slots[r] >= 0:
            expected[slots[r]] = hf_gdn_path(x, slots[r], r, path)[1].double()
    tree_gdn_commit_ref(x["state_pool"], live_slots, ctx, accepted)
    torch.testing.assert_close(x["state_pool"], expected, rtol=1e-5, atol=1e-5)


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
def test_tree_conv_matches_a_causal_conv1d_along_root_paths(R, N, D, W, chain, bias):
    """Each node's output is torch's own depthwise conv1d (then SiLU, as Qwen3.5's GDN layers apply it) over the slot's
    conv history followed by the tokens of the node's root path; the commit keeps the last W - 1 columns of the
    accepted path's sequence."""
    gen = torch.Generator().manual_seed(N * 7 + D)
    x = torch.randn(R, N, D, generator=gen, dtype=torch.float64)
    conv_state = torch.randn(R + 1, D, W - 1, generator=gen, dtype=torch.float64)
    weight = torch.randn(D, W, generator=gen, dtype=torch.float64)
    b = torch.randn(D, generator=gen, dtype=torch.float64) if bias else None
    slots = torch.randperm(R + 1, generator=gen)[:R]
    parents = random_parents(R, N, gen, chain)
    state_before = conv_state.clone()
    y = tree_causal_conv1d_ref(x, conv_state, weight, b, slots, parents)
    assert torch.equal(conv_state, state_before), "verify modified conv_state"
    accepted = torch.full((R, N + 1), -1)
    expected = conv_state.clone()
    for r in range(R):
        for i in range(N):
            path = root_path(parents, r, i)
            sequence = torch.cat([conv_state[slots[r]], x[r, path].T], dim=-1)[None]  # [1, D, W - 1 + depth + 1]
            out = F.silu(F.conv1d(sequence, weight[:, None, :], b, groups=D))  # valid positions: the last is node i's
            torch.testing.assert_close(y[r, i], out[0, :, -1])
        path = root_path(parents, r, torch.randint(0, N, (1,), generator=gen).item())
        accepted[r, : len(path)] = torch.tensor(path)
        expected[slots[r]] = torch.cat([conv_state[slots[r]], x[r, path].T], dim=-1)[:, -(W - 1) :]
    tree_conv_commit_ref(conv_state, slots, x, accepted)
    torch.testing.assert_close(conv_state, expected)
