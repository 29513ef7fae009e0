"""Helpers shared by the kernel tests: devices, poisoned outputs, random trees, GDN inputs and SGLang's verify
attention."""

import contextlib
import os
from unittest import mock

import torch

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


@contextlib.contextmanager
def poisoned_outputs():
    """torch.empty returns garbage that no correct output equals (e.g. -7 for a parent index)."""
    real = torch.empty

    def empty(*size, dtype=None, device=None, **kw):
        t = real(*size, dtype=dtype, device=device, **kw)
        return t.fill_(True if t.dtype == torch.bool else -7)

    torch.empty = empty
    try:
        yield
    finally:
        torch.empty = real


def random_parents(R: int, N: int, gen: torch.Generator, chain: bool = False, max_depth: int | None = None) -> torch.Tensor:
    """Long [R, N], -1 at the root: a chain, or each node's parent drawn among the earlier nodes above max_depth."""
    if chain:
        return (torch.arange(N) - 1).expand(R, N).clone()
    parents = torch.full((R, N), -1)
    if max_depth is None:
        for i in range(1, N):
            parents[:, i] = torch.randint(0, i, (R,), generator=gen)
        return parents
    depth = torch.zeros(R, N, dtype=torch.long)
    for r in range(R):
        for i in range(1, N):
            open_ = torch.nonzero(depth[r, :i] < max_depth)[:, 0]
            p = open_[torch.randint(len(open_), (1,), generator=gen)]
            parents[r, i], depth[r, i] = p, depth[r, p] + 1
    return parents


def root_path(parents: torch.Tensor, r: int, i: int) -> list[int]:
    path = [i]
    while parents[r, path[-1]] > 0:
        path.append(parents[r, path[-1]].item())
    return ([0] if i != 0 else []) + path[::-1]


def accepted_paths(parents: torch.Tensor, width: int, gen: torch.Generator | None = None) -> torch.Tensor:
    """Long [R, width]: each request's root path, to a random node (gen) or else to its last node,
    cut to `width` nodes and padded -1 (the layout of `Acceptance.accepted_nodes`)."""
    R, N = parents.shape
    accepted = torch.full((R, width), -1)
    for r in range(R):
        end = torch.randint(0, N, (1,), generator=gen).item() if gen is not None else N - 1
        path = root_path(parents, r, end)[:width]
        accepted[r, : len(path)] = torch.tensor(path)
    return accepted


def sglang_triton_verify(extend, q, k_tree, v_tree, pool_k, pool_v, kv_indices, seq_lens, anc, scale):
    """o [R * N, HQ, Dh] (on DEVICE): SGLang's triton backend's target-verify attention (its `extend_attention_fwd`,
    passed in) of q [R * N, HQ, Dh] over each request's prefix, seq_lens [R] tokens at pool_k / pool_v slots
    kv_indices (the requests' concatenated), and its tree, k_tree / v_tree [R * N, HKV, Dh] seen through the ancestor
    mask anc [R, N, N] as our `sglang_custom_mask` lays it out for SGLang."""
    from sglang_dflash.kernels.tree_attention import sglang_custom_mask

    R, N = anc.shape[:2]
    seq_lens = seq_lens.cpu()
    custom_mask, mask_indptr = sglang_custom_mask(anc, seq_lens, int(seq_lens.sum()))
    qo_indptr = torch.arange(0, (R + 1) * N, N, dtype=torch.int32)
    kv_indptr = torch.cat([torch.zeros(1, dtype=torch.int32), seq_lens.cumsum(0).to(torch.int32)])
    o = torch.empty(q.shape, device=DEVICE)
    indices = [t.to(DEVICE) for t in (qo_indptr, kv_indptr, kv_indices, custom_mask)]
    # SGLang's kernel leaves its fp32 dots at Triton's default precision, TF32 on a GPU (about 2e-3 off): IEEE here,
    # an fp32 oracle on the GPU as under the interpreter (the setting is part of Triton's compile key)
    with mock.patch.dict(os.environ, {"TRITON_F32_DEFAULT": "ieee"}):
        extend(q, k_tree, v_tree, o, pool_k, pool_v, *indices, True, mask_indptr.to(DEVICE), N, 1.0, 1.0, scale)
    return o


def gdn_inputs(R, N, H, HV, K, V, pool_size, gen, dtype=torch.float64):
    rnd = lambda *s: torch.randn(*s, generator=gen, dtype=dtype)  # noqa: E731
    return dict(
        q=rnd(R, N, H, K),
        k=rnd(R, N, H, K),
        v=rnd(R, N, HV, V),
        a=rnd(R, N, HV),
        b=rnd(R, N, HV),
        A_log=rnd(HV) * 0.5,
        dt_bias=rnd(HV) * 0.5,
        state_pool=rnd(pool_size, HV, V, K) * 0.3,
    )


def hybrid_backend(cls, full, linear, full_attn_layers):
    """SGLang's HybridLinearAttnBackend `cls` over the backends `full` and `linear`, without its constructor
    (0.5.23's reads set-up attributes of both that the forward never uses)."""
    backend = object.__new__(cls)
    backend.full_attn_layers, backend.full_attn_backend, backend.linear_attn_backend = list(full_attn_layers), full, linear
    backend.attn_backend_list = [full, linear]
    return backend
