"""The Triton tree conv1d and its commit against the reference (on CPU through TRITON_INTERPRET=1,
see conftest.py): random trees, chains, one node, widths 2-4, channels not a multiple of the
tile, bf16, padding requests; outputs poisoned first; conv_state untouched by verify."""

import pytest
import torch
from tree_helpers import DEVICE, accepted_paths, poisoned_outputs, random_parents, root_path

from sglang_dflash.kernels.layer_table import LayerTable
from sglang_dflash.kernels.tree_conv import tree_causal_conv1d_ref, tree_conv_commit_ref
from sglang_dflash.kernels.tree_conv.tree_conv import conv_windows, tree_causal_conv1d_triton, tree_conv_commit_triton


@pytest.mark.parametrize(
    "R,N,D,W,chain,bias,dtype,tiles",
    [
        (1, 1, 8, 4, False, True, torch.float32, None),
        (3, 11, 37, 4, False, False, torch.float32, None),
        (3, 11, 37, 4, False, True, torch.float32, (16, 4)),  # node tiles of 4: windows cross tiles
        (2, 16, 70, 4, True, True, torch.float32, None),
        (2, 9, 5, 2, False, True, torch.float32, None),
        (4, 13, 96, 3, False, True, torch.bfloat16, None),
        (1, 64, 130, 4, False, False, torch.float32, None),
    ],
)
def test_tree_conv_triton_matches_reference(R, N, D, W, chain, bias, dtype, tiles):
    gen = torch.Generator().manual_seed(N * 7 + D)
    x = torch.randn(R, N, D, generator=gen).to(dtype)
    conv_state = torch.randn(R + 2, D, W - 1, generator=gen).to(dtype)
    weight = torch.randn(D, W, generator=gen).to(dtype)
    b = torch.randn(D, generator=gen).to(dtype) if bias else None
    slots = torch.randperm(R + 2, generator=gen)[:R]
    if R > 1:
        slots[-1] = -1  # a padding request: zero history, never committed
    parents = random_parents(R, N, gen, chain)
    ref = tree_causal_conv1d_ref(
        x.double(), conv_state.double(), weight.double(), None if b is None else b.double(), slots, parents
    )

    dev = lambda t: None if t is None else t.to(DEVICE)  # noqa: E731
    state = dev(conv_state)
    with poisoned_outputs():
        y = tree_causal_conv1d_triton(dev(x), state, dev(weight), dev(b), dev(slots), dev(parents), tiles=tiles)
    assert torch.equal(state.cpu(), conv_state), "verify modified conv_state"
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == torch.float32 else dict(rtol=2e-2, atol=2e-2)
    torch.testing.assert_close(y.cpu().double(), ref, **tol)

    accepted = accepted_paths(parents, 17, gen)
    expected = conv_state.clone()
    tree_conv_commit_ref(expected, slots, x, accepted)
    tree_conv_commit_triton(state, dev(slots), dev(x), dev(accepted))
    assert torch.equal(state.cpu(), expected)


def test_tree_conv_commit_of_stacked_layers_equals_each_layer():
    """conv_state [layers, S, D, W - 1] and x [layers, R, N, D]: one launch equals a commit per layer."""
    gen = torch.Generator().manual_seed(3)
    layers, R, N, D, W = 3, 2, 9, 37, 4
    x = torch.randn(layers, R, N, D, generator=gen)
    conv_state = torch.randn(layers, R + 1, D, W - 1, generator=gen)
    slots = torch.tensor([2, -1])
    parents = random_parents(R, N, gen, False)
    accepted = accepted_paths(parents, 8)
    expected = conv_state.clone()
    for layer in range(layers):
        tree_conv_commit_ref(expected[layer], slots, x[layer], accepted)
    state = conv_state.clone().to(DEVICE)
    tree_conv_commit_triton(state, slots.to(DEVICE), x.to(DEVICE), accepted.to(DEVICE))
    assert torch.equal(state.cpu(), expected)
    assert not torch.equal(expected[:, 2], conv_state[:, 2])  # the commit did something in every layer
    # by address: each layer's own x, a view into wider rows (as the model's projection), one launch
    wide = torch.randn(layers, R, N, D + 5, generator=gen)
    wide[..., :D] = x
    wide = wide.to(DEVICE)  # the table holds addresses: the tensors must live until the launch
    table = LayerTable.of([wide[layer, ..., :D] for layer in range(layers)])
    state = conv_state.clone().to(DEVICE)
    tree_conv_commit_triton(state, slots.to(DEVICE), table, accepted.to(DEVICE))
    assert torch.equal(state.cpu(), expected)


def test_conv_windows_are_the_ancestors_then_state_columns():
    gen = torch.Generator().manual_seed(4)
    R, N, W = 3, 12, 4
    parents = random_parents(R, N, gen, False)
    table = conv_windows(parents, W)
    for r in range(R):
        for i in range(N):
            path = root_path(parents, r, i)  # root .. i
            for m in range(1, W):
                depth = len(path) - 1
                want = path[depth - m] if m <= depth else -(m - depth)
                assert table[r, i, m - 1].item() == want, (r, i, m)
