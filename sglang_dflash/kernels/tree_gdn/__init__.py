"""Gated DeltaNet along draft trees: `tree_gdn_verify` / `tree_gdn_commit` run the Triton kernels on
CUDA tensors whose head dims are powers of two >= 16 (Qwen3.5/3.6: 128), the pure-torch references
otherwise; a context from one goes to its own commit."""

import dataclasses

import torch
from torch import Tensor

from .naive import TreeGDNContext, tree_gdn_commit_ref, tree_gdn_verify_ref
from .tree_gdn import (
    TreeGDNTritonContext,
    aligned_ancestor_mask,
    fused_nodes,
    tree_gdn_commit_triton,
    tree_gdn_verify_triton,
    verify_blocks,
)


def tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, state_pool, slots, parents, scale=None, **kwargs):
    """Outputs [R, N, HV, V] of every node of R trees and a context for `tree_gdn_commit`; the
    pool is not modified. Shapes: `naive.tree_gdn_verify_ref`."""
    K, V = q.shape[-1], v.shape[-1]
    if q.is_cuda and all(d >= 16 and d & (d - 1) == 0 for d in (K, V)):
        return tree_gdn_verify_triton(q, k, v, a, b, A_log, dt_bias, state_pool, slots, parents, scale, **kwargs)
    return tree_gdn_verify_ref(q, k, v, a, b, A_log, dt_bias, state_pool, slots, parents, scale)


def tree_gdn_commit(state_pool: Tensor, slots: Tensor, ctx, accepted_nodes: Tensor) -> None:
    """state_pool[slots[r]] <- the state after request r's accepted path. Several layers at once:
    state_pool [layers, S, HV, V, K] and `stack_contexts` of their contexts (one launch on the GPU)."""
    if isinstance(ctx, TreeGDNTritonContext):
        tree_gdn_commit_triton(state_pool, slots, ctx, accepted_nodes)
    elif state_pool.dim() == 5:
        for layer, pool in enumerate(state_pool):
            tree_gdn_commit_ref(pool, slots, type(ctx)(*(t[layer] for t in _fields(ctx))), accepted_nodes)
    else:
        tree_gdn_commit_ref(state_pool, slots, ctx, accepted_nodes)


def _fields(ctx) -> list[Tensor]:
    return [getattr(ctx, f.name) for f in dataclasses.fields(ctx)]


def stack_contexts(ctxs: list):
    """Contexts of several layers' verifies (all of one kind) -> one with a leading layer dim."""
    return type(ctxs[0])(*(torch.stack(ts) for ts in zip(*map(_fields, ctxs))))


__all__ = [
    "TreeGDNContext",
    "TreeGDNTritonContext",
    "aligned_ancestor_mask",
    "fused_nodes",
    "stack_contexts",
    "tree_gdn_commit",
    "tree_gdn_commit_ref",
    "tree_gdn_commit_triton",
    "tree_gdn_verify",
    "tree_gdn_verify_ref",
    "tree_gdn_verify_triton",
    "verify_blocks",
]
