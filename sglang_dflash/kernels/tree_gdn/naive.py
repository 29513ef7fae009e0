"""Pure-torch reference: Gated DeltaNet (Qwen3.5/3.6) recurrence along draft trees.

Per V-head h (QK head h // (HV // H)), state S in sglang's layout [V, K]:
    g = -exp(A_log) * softplus(a + dt_bias),  beta = sigmoid(b)
    q, k L2-normalised (eps 1e-6 inside the sqrt), q scaled by `scale` (default K**-0.5)
    S <- exp(g) S;  u = beta (v - S k);  S <- S + u k^T;  o = S q
On a tree, node i starts from its parent's state (node 0 from the pooled state of its request).
Written for clarity, in any float dtype (float64 for tests); the Triton kernels are checked
against these functions.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor


@dataclass(frozen=True)
class TreeGDNContext:
    """What commit needs from verify: per-node normalised keys, values and gates.

    k [R, N, HV, K], v [R, N, HV, V], g and beta [R, N, HV], all in the compute dtype.
    """

    k: Tensor
    v: Tensor
    g: Tensor
    beta: Tensor


def l2norm(x: Tensor, eps: float = 1e-6) -> Tensor:
    return x * torch.rsqrt((x * x).sum(-1, keepdim=True) + eps)


def gdn_gates(a: Tensor, b: Tensor, A_log: Tensor, dt_bias: Tensor) -> tuple[Tensor, Tensor]:
    """(g, beta) from the raw gate inputs a, b [..., HV] and per-head A_log, dt_bias [HV]."""
    g = -torch.exp(A_log.to(a.dtype)) * F.softplus(a + dt_bias.to(a.dtype))
    return g, torch.sigmoid(b)


def gdn_step(S: Tensor, k: Tensor, v: Tensor, g: Tensor, beta: Tensor) -> Tensor:
    """One recurrence step for a batch of states S [..., V, K] with k [..., K], v [..., V], g, beta [...]."""
    S = S * torch.exp(g)[..., None, None]
    u = beta[..., None] * (v - torch.einsum("...vk,...k->...v", S, k))
    return S + u[..., :, None] * k[..., None, :]


def tree_gdn_verify_ref(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor,
    b: Tensor,
    A_log: Tensor,
    dt_bias: Tensor,
    state_pool: Tensor,
    slots: Tensor,
    parents: Tensor,
    scale: float | None = None,
    dtype: torch.dtype = torch.float32,
) -> tuple[Tensor, TreeGDNContext]:
    """Outputs of every node of R trees, without touching state_pool.

    q, k [R, N, H, K]; v [R, N, HV, V]; a, b [R, N, HV]; A_log, dt_bias [HV];
    state_pool [S, HV, V, K]; slots int [R] (a negative slot starts from a zero state);
    parents long [R, N], topological, parents[:, 0] == -1.
    Returns o [R, N, HV, V] in v's dtype and the context for `tree_gdn_commit_ref`.
    """
    R, N, H, K = q.shape
    HV = v.shape[2]
    scale = K**-0.5 if scale is None else scale
    group = HV // H
    q = (l2norm(q.to(dtype)) * scale).repeat_interleave(group, dim=2)
    k = l2norm(k.to(dtype)).repeat_interleave(group, dim=2)
    vv = v.to(dtype)
    g, beta = gdn_gates(a.to(dtype), b.to(dtype), A_log, dt_bias)
    batch = torch.arange(R, device=q.device)

    root = state_pool[slots.long().clamp_min(0)].to(dtype) * (slots >= 0).to(dtype)[:, None, None, None]
    states = root.new_empty(R, N, *root.shape[1:])  # per-node states: fine for a reference
    o = vv.new_empty(R, N, HV, vv.shape[-1])
    for i in range(N):
        p = parents[:, i]
        S_parent = torch.where((p < 0)[:, None, None, None], root, states[batch, p.clamp_min(0)])
        states[:, i] = gdn_step(S_parent, k[:, i], vv[:, i], g[:, i], beta[:, i])
        o[:, i] = torch.einsum("rhvk,rhk->rhv", states[:, i], q[:, i])
    return o.to(v.dtype), TreeGDNContext(k=k, v=vv, g=g, beta=beta)


def tree_gdn_commit_ref(state_pool: Tensor, slots: Tensor, ctx: TreeGDNContext, accepted_nodes: Tensor) -> None:
    """state_pool[slots[r]] <- the state after request r's accepted path (replayed from the pool).

    accepted_nodes long [R, L + 1]: node indices from the root, padded -1. Requests with
    slots[r] < 0 are left untouched.
    """
    R = accepted_nodes.shape[0]
    batch = torch.arange(R, device=accepted_nodes.device)
    live = slots >= 0
    S = state_pool[slots.long().clamp_min(0)].to(ctx.k.dtype)
    for step in range(accepted_nodes.shape[1]):
        node = accepted_nodes[:, step]
        n = node.clamp_min(0)
        S_next = gdn_step(S, ctx.k[batch, n], ctx.v[batch, n], ctx.g[batch, n], ctx.beta[batch, n])
        S = torch.where((node >= 0)[:, None, None, None], S_next, S)
    state_pool[slots[live].long()] = S[live].to(state_pool.dtype)


def ancestor_table_ref(ancestor_mask: Tensor, depth: int, NC: int = 16) -> tuple[Tensor, Tensor, Tensor]:
    """bool [R, N, N] (row i: ancestors of i and i) -> (table int32 [R, N, D]: the root path of each node, root first,
    padded -1, D = next power of two > depth, at least 2; order int32 [R, N]: the nodes by depth, stable; items int32
    [R, N // NC + D + 1, 2]: the solve's steps, each up to NC nodes of one depth as a range of `order`, depth 1 first,
    then empty ranges, and [r, -1, 0] the number of steps). Parents precede children, so a row's set columns are
    its path in depth order. depth: at least the trees' (as `ancestors`' max_depth; not checked, which would sync).
    The reference of `tree_gdn_gather.ancestor_table` (one Triton launch where this is some forty torch ops)."""
    R, N, _ = ancestor_mask.shape
    D = max(2, 1 << depth.bit_length())  # 2 for a lone root: one (empty) depth of steps
    dev = ancestor_mask.device
    m = ancestor_mask.to(torch.int32)
    depths = m.sum(-1) - 1  # [R, N]
    slot = m.cumsum(-1) - 1  # the set column's rank in its row
    cols = torch.arange(N, device=dev, dtype=torch.int32).expand(R, N, N)
    table = torch.full((R, N, D + 1), -1, device=dev, dtype=torch.int32)
    table.scatter_(2, torch.where(m > 0, slot, D).long(), torch.where(m > 0, cols, -1))  # unset columns go to D
    order = torch.sort(depths, dim=1, stable=True).indices.to(torch.int32)
    counts = torch.zeros(R, D + 1, device=dev, dtype=torch.long)
    counts.scatter_add_(1, depths + 1, torch.ones_like(depths))
    starts = counts.cumsum(1)  # [R, D + 1]: depth d's nodes are order[starts[d]:starts[d + 1]]
    steps = (counts[:, 2:] + NC - 1) // NC  # [R, D - 1]: steps of depths 1 .. D - 1
    last = steps.cumsum(1)
    T = N // NC + D  # an upper bound on the steps: sum over depths of ceil(count / NC)
    t = torch.arange(T, device=dev).expand(R, T).contiguous()
    level = torch.searchsorted(last, t, right=True)  # index into depths 1 .. D - 1; D - 1: past the last step
    live = level < D - 1
    lv = level.clamp(max=D - 2)
    first = starts.gather(1, lv + 1) + (t - (last.gather(1, lv) - steps.gather(1, lv))) * NC
    end = torch.minimum(first + NC, starts.gather(1, lv + 2))
    items = torch.stack([torch.where(live, first, N), torch.where(live, end, N)], -1)
    count = torch.stack([last[:, -1], last[:, -1]], -1)[:, None]
    return table[..., :D].contiguous(), order, torch.cat([items, count], 1).to(torch.int32)
