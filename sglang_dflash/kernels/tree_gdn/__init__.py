"""Gated DeltaNet along draft trees: `tree_gdn_verify` / `tree_gdn_commit` run the Triton kernels on
CUDA tensors whose head dims are powers of two >= 16 (Qwen3.5/3.6: 128), the pure-torch references
otherwise; a context from one goes to its own commit. Two verify kernels: the blocked one (`tree_gdn.py`) for
chains and small trees, the ancestor-gather one (`tree_gdn_gather.py`) for large shallow trees, chosen once per
step by `gather_tables` (`verify_step_inputs`: what either takes)."""

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
from .tree_gdn_gather import GatherTables, ancestor_table, tree_gdn_verify_gather

GATHER_MIN_NODES = 66  # from here trees (not chains) take the ancestor-gather verify: `gather_tables`
WIDE_STEP_MIN_NODES = 160  # from here one request's gather solve takes 32-node steps: `solve_step_nodes`


def uses_gather(num_nodes: int, max_depth: int) -> bool:
    """Whether `gather_tables` picks the ancestor-gather verify (on CUDA) for trees of num_nodes nodes no deeper than
    max_depth: not for chains (max_depth = num_nodes - 1), from GATHER_MIN_NODES nodes, where the blocked kernel needs
    a second block after the root. H200, verify per layer (HV = 24, K = V = 128, DDTree trees, depth bound 15), gather
    against blocked (benchmarks/RESULTS.md): R = 1 x 66 22.5 / 41.8 us, 72 21.8 / 41.4, 80 23.0 / 37.2, 97 26.1 /
    43.4; R = 4 x 66 37.2 / 105.3; R = 8 x 66 63.5 / 160.2, 80 67.8 / 146.5 (an earlier run: N = 129 29.9 / 51.3,
    N = 257 39.5 / 140.7). Below, the blocked kernel: R = 1 x 33 20.4 / 15.2, 64 21.4 / 14.2, 65 22.3 / 18.4; R = 4
    x 65 37.8 / 32.1; R = 8 x 64 61.9 / 48.3, 65 63.8 / 64.8 (a tie). Measured on an H200 only (SM86's blocks hold
    16 nodes)."""
    return max_depth < num_nodes - 1 and num_nodes >= GATHER_MIN_NODES


def solve_step_nodes(num_requests: int, num_nodes: int) -> int:
    """The most same-depth nodes one step of the ancestor-gather solve takes: 32 for one request's tree of
    WIDE_STEP_MIN_NODES nodes or more (fewer steps, so fewer barriers in the solve's chain), else 16. H200, verify per
    layer (HV = 24, depth bound 15), 32-node steps (8 warps) against 16: R = 1 x 160 / 192 / 256 / 257 nodes 28.8 /
    31.9 / 36.3 / 43.0 against 31.2 / 34.3 / 40.2 / 45.7 us (the last two deep: depth 11, 12); mixed at 129 (28.9 /
    33.5 against 29.9 / 31.8, DDTree / depth 15); lost once the solve's grid fills the GPU (R = 4 x 257 114.4
    against 109.6, R = 8 x 129 124.7 against 119.6)."""
    return 32 if num_requests == 1 and num_nodes >= WIDE_STEP_MIN_NODES else 16


def gather_tables(ancestor_mask: Tensor, max_depth: int) -> GatherTables | None:
    """The ancestor-gather verify's tables (`ancestor_table`, steps of `solve_step_nodes`) for the trees of
    ancestor_mask bool [R, N, N] (no node deeper than max_depth) where that kernel is the faster one (`uses_gather`),
    else None (the blocked kernel). Made once per step, passed to every layer's `tree_gdn_verify`; the choice depends
    on shapes only (CUDA-graph safe)."""
    R, N, _ = ancestor_mask.shape
    if not ancestor_mask.is_cuda or not uses_gather(N, max_depth):
        return None
    return ancestor_table(ancestor_mask, max_depth, solve_step_nodes(R, N))


def verify_step_inputs(ancestor_mask: Tensor, max_depth: int) -> dict:
    """`tree_gdn_verify`'s per-step keyword arguments for the trees of ancestor_mask bool [R, N, N] (no node deeper
    than max_depth), made once for every layer: the ancestor-gather kernel's tables (`gather_tables`), or the blocked
    kernel's mask with aligned rows (`aligned_ancestor_mask`) and the depth bound."""
    tables = gather_tables(ancestor_mask, max_depth)
    if tables is not None:
        return {"tables": tables}
    return {"ancestor_mask": aligned_ancestor_mask(ancestor_mask), "max_depth": max_depth}


def tree_gdn_verify(q, k, v, a, b, A_log, dt_bias, state_pool, slots, parents, scale=None, tables=None, **kwargs):
    """Outputs [R, N, HV, V] of every node of R trees and a context for `tree_gdn_commit`; the
    pool is not modified. Shapes: `naive.tree_gdn_verify_ref`. tables: `gather_tables`'s (the ancestor-gather
    kernel), or None (the blocked kernel, its keyword arguments in kwargs)."""
    K, V = q.shape[-1], v.shape[-1]
    if q.is_cuda and all(d >= 16 and d & (d - 1) == 0 for d in (K, V)):
        if tables is not None:
            return tree_gdn_verify_gather(q, k, v, a, b, A_log, dt_bias, state_pool, slots, tables, scale)
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
    "GatherTables",
    "TreeGDNContext",
    "TreeGDNTritonContext",
    "aligned_ancestor_mask",
    "fused_nodes",
    "gather_tables",
    "solve_step_nodes",
    "uses_gather",
    "verify_step_inputs",
    "stack_contexts",
    "tree_gdn_commit",
    "tree_gdn_commit_ref",
    "tree_gdn_commit_triton",
    "tree_gdn_verify",
    "tree_gdn_verify_ref",
    "tree_gdn_verify_triton",
    "verify_blocks",
]
