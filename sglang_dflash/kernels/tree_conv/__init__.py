"""Causal conv1d along draft trees: `tree_causal_conv1d` / `tree_conv_commit` run the Triton kernels
on CUDA tensors and the pure-torch references otherwise."""

from torch import Tensor

from ..layer_table import LayerTable
from .naive import tree_causal_conv1d_ref, tree_conv_commit_ref
from .tree_conv import conv_windows, tree_causal_conv1d_triton, tree_conv_commit_triton


def tree_causal_conv1d(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    slots: Tensor,
    parents: Tensor,
    windows: Tensor | None = None,
) -> Tensor:
    """x [R, N, D] (pre-conv) -> SiLU(conv) [R, N, D]; conv_state [S, D, W - 1] is not modified.
    windows: `conv_windows(parents, W)`, made once per step and shared by the layers (the kernel's input)."""
    if x.is_cuda:
        return tree_causal_conv1d_triton(x, conv_state, weight, bias, slots, parents, windows=windows)
    return tree_causal_conv1d_ref(x, conv_state, weight, bias, slots, parents)


def tree_conv_commit(conv_state: Tensor, slots: Tensor, x: Tensor, accepted_nodes: Tensor) -> None:
    """conv_state[slots[r]] <- the last W - 1 inputs of (old state, request r's accepted path). Several
    layers at once: conv_state [layers, S, D, W - 1] and x [layers, R, N, D], or on the GPU a `LayerTable` of
    the layers' x (one launch)."""
    if isinstance(x, LayerTable) or x.is_cuda:
        tree_conv_commit_triton(conv_state, slots, x, accepted_nodes)
    elif conv_state.dim() == 4:
        for state, inputs in zip(conv_state, x):
            tree_conv_commit_ref(state, slots, inputs, accepted_nodes)
    else:
        tree_conv_commit_ref(conv_state, slots, x, accepted_nodes)


__all__ = [
    "conv_windows",
    "tree_causal_conv1d",
    "tree_causal_conv1d_ref",
    "tree_causal_conv1d_triton",
    "tree_conv_commit",
    "tree_conv_commit_ref",
    "tree_conv_commit_triton",
]
