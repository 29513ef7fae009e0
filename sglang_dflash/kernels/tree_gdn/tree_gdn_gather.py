"""Triton: Gated DeltaNet verify over draft trees by ancestor gathers, for large shallow trees (DDTree 128-256).

The same outputs as `tree_gdn.tree_gdn_verify_triton` (module docstring there: u, o unrolled along root paths), but
where that kernel solves (I + A) U = R with dense NB x NB products in blocks of nodes (O(N^2) work across blocks),
this one uses that node i needs only its ancestors:
    u_i = R_i - sum_{j in anc(i)} c_ij u_j,      c_ij = beta_i e^{G_i - G_j} (k_i . k_j)  (unit keys)
    o_i = e^{G_i} S0 q_i + sum_{j in anc*(i)} e^{G_i - G_j} (q_i . k_j) u_j
with anc(i) read from a table [N, D] (the root path, root first; D > the tree's depth). Work: N x depth x (K + V)
FMAs. One program per (V tile of BV, request x V-head), in phases separated by barriers (the program reads back what
it stored):
  1. per node: g, beta, |k|, |q| and the raw products k.S0, q.S0 (tf32 tensor-core dots, as the blocked kernel);
  2. G_i = sum of g over the root path (gathered); R_i into u, e^{G_i} S0 q_i into o's fp32 scratch;
  3. the coefficients c_ij and (q_i . k_j) e^{G_i - G_j} per (node, ancestor slot), dots gathered over K;
  4. one depth at a time, nodes of that depth (`levels`: nodes sorted by depth and the offsets), u_i from its
     ancestors' final u;
  5. o_i from its root path's u.
Depth d costs one pass of step 4 (a barrier and a gathered load): chains and deep trees are for the blocked kernel.
All sums fp32 (FMA); q, k, v, a, b may be bf16. Writes u, G (as the blocked kernel: `tree_gdn_commit_triton` takes
them) and o; scratch per request and head, nothing to the pool.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from .tree_gdn import TreeGDNTritonContext, _dot_tf32_exact_a, _gates, _rows


def ancestor_table(ancestor_mask: Tensor, depth: int) -> tuple[Tensor, Tensor, Tensor]:
    """bool [R, N, N] (row i: ancestors of i and i) -> (table int32 [R, N, D] of the root path of each node, root
    first, padded -1, D = next power of two > depth; order int32 [R, N], the nodes by depth (stable); starts int32
    [R, D + 1], where each depth's nodes begin in order). Parents precede children, so a row's set columns are its
    path in depth order. Made once per step, shared by every layer."""
    R, N, _ = ancestor_mask.shape
    D = triton.next_power_of_2(depth + 1)
    m = ancestor_mask.to(torch.int32)
    depths = m.sum(-1) - 1  # [R, N]
    slot = m.cumsum(-1) - 1  # the set column's rank in its row
    cols = torch.arange(N, device=m.device, dtype=torch.int32).expand(R, N, N)
    table = torch.full((R, N, D + 1), -1, device=m.device, dtype=torch.int32)
    table.scatter_(2, torch.where(m > 0, slot, D).long(), torch.where(m > 0, cols, -1))  # unset columns go to D
    order = torch.sort(depths, dim=1, stable=True).indices.to(torch.int32)
    counts = torch.zeros(R, D + 1, device=m.device, dtype=torch.long)
    counts.scatter_add_(1, depths + 1, torch.ones_like(depths))
    return table[..., :D].contiguous(), order, counts.cumsum(1).to(torch.int32)


@triton.jit
def _tree_gdn_gather_kernel(
    q, k, v, a, b, A_log, dt_bias, pool, slots, table, order, starts, G_out, o, u_out, gs, ck, cq, os, N, scale,
    QK_STRIDE, V_STRIDE,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, D: tl.constexpr, NC: tl.constexpr,
    BV: tl.constexpr, BK: tl.constexpr, RAW_DOTS: tl.constexpr,
):  # fmt: skip
    iv, rh = tl.program_id(0), tl.program_id(1)
    r, hv = (rh // HV).to(tl.int64), rh % HV
    h = hv // (HV // H)
    vv = iv * BV + tl.arange(0, BV)
    s = tl.arange(0, D)
    slot = tl.load(slots + r).to(tl.int64)
    state = pool + ((slot * HV + hv) * V + vv[None, :]) * K  # S0 tile, read transposed: [K chunk, BV]
    head = (
        r * HV + hv
    ) * N  # scratch rows of this request and head: gs [.., N, 8] (g, beta, 1/|k|, scale/|q|, G), ck / cq [.., N, D]
    tile = r * N * HV * V + hv * V + vv[None, :]  # + node * HV * V: this program's columns of u / o rows

    # 1. gates, norms, k.S0 and q.S0 (raw keys; normalised in 2)
    for c0 in range(0, N, NC):
        ni = c0 + tl.arange(0, NC)
        ok = ni < N
        row = r * N + ni
        g, beta = _gates(a, b, A_log, dt_bias, row, ok, hv, HV)
        KS, QS = tl.zeros([NC, BV], tl.float32), tl.zeros([NC, BV], tl.float32)
        kss, qss = tl.zeros([NC], tl.float32), tl.zeros([NC], tl.float32)
        for k0 in range(0, K, BK):
            kc = k0 + tl.arange(0, BK)
            rows = row[:, None] * QK_STRIDE + h * K + kc[None, :]
            kf = tl.load(k + rows, mask=ok[:, None], other=0.0).to(tl.float32)
            qf = tl.load(q + rows, mask=ok[:, None], other=0.0).to(tl.float32)
            S0c = tl.load(state + kc[:, None], mask=slot >= 0, other=0.0)
            kss += tl.sum(kf * kf, axis=1)
            qss += tl.sum(qf * qf, axis=1)
            if RAW_DOTS:
                KS = _dot_tf32_exact_a(kf, S0c, KS)
                QS = _dot_tf32_exact_a(qf, S0c, QS)
            else:
                KS = tl.dot(kf, S0c, KS, input_precision="tf32x3")
                QS = tl.dot(qf, S0c, QS, input_precision="tf32x3")
        rk = 1.0 / tl.sqrt(kss + 1e-6)
        rq = scale / tl.sqrt(qss + 1e-6)
        tl.store(gs + (head + ni) * 8, g, mask=ok)
        tl.store(gs + (head + ni) * 8 + 1, beta, mask=ok)
        tl.store(gs + (head + ni) * 8 + 2, rk, mask=ok)
        tl.store(gs + (head + ni) * 8 + 3, rq, mask=ok)
        # S0 k and S0 q of the unit (scaled) vectors; 2 applies e^{G_i}
        tl.store(u_out + tile + ni[:, None] * HV * V, rk[:, None] * KS, mask=ok[:, None])
        tl.store(os + tile + ni[:, None] * HV * V, rq[:, None] * QS, mask=ok[:, None])
    tl.debug_barrier()

    # 2. G_i over the root path; R_i = beta_i (v_i - e^{G_i} S0 k_i), o's S0 part e^{G_i} S0 q_i
    for c0 in range(0, N, NC):
        ni = c0 + tl.arange(0, NC)
        ok = ni < N
        path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)
        G = tl.sum(tl.load(gs + (head + path) * 8, mask=path >= 0, other=0.0), axis=1)
        tl.store(G_out + (r * N + ni) * HV + hv, G, mask=ok & (iv == 0))
        tl.store(gs + (head + ni) * 8 + 4, G, mask=ok)
        beta = tl.load(gs + (head + ni) * 8 + 1, mask=ok, other=0.0)
        eG = tl.exp(G)
        at = tile + ni[:, None] * HV * V
        vt = tl.load(v + (r * N + ni)[:, None] * V_STRIDE + hv * V + vv[None, :], mask=ok[:, None], other=0.0)
        KS = tl.load(u_out + at, mask=ok[:, None], other=0.0)
        tl.store(u_out + at, beta[:, None] * (vt.to(tl.float32) - eG[:, None] * KS), mask=ok[:, None])
        tl.store(os + at, eG[:, None] * tl.load(os + at, mask=ok[:, None], other=0.0), mask=ok[:, None])
    tl.debug_barrier()

    # 3. per (node, path slot j): ck = beta_i e^{G_i - G_j} k_i.k_j (strict ancestors), cq = e^{G_i - G_j} q_i.k_j
    for c0 in range(0, N, NC):
        ni = c0 + tl.arange(0, NC)
        ok = ni < N
        path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)
        on = path >= 0
        kk, qk = tl.zeros([NC, D], tl.float32), tl.zeros([NC, D], tl.float32)
        for k0 in range(0, K, BK):
            kc = k0 + tl.arange(0, BK)
            ki = tl.load(k + (r * N + ni)[:, None] * QK_STRIDE + h * K + kc[None, :], mask=ok[:, None], other=0.0)
            qi = tl.load(q + (r * N + ni)[:, None] * QK_STRIDE + h * K + kc[None, :], mask=ok[:, None], other=0.0)
            kj = tl.load(k + (r * N + path)[:, :, None] * QK_STRIDE + h * K + kc[None, None, :], mask=on[:, :, None],
                         other=0.0).to(tl.float32)  # fmt: skip
            kk += tl.sum(ki.to(tl.float32)[:, None, :] * kj, axis=2)
            qk += tl.sum(qi.to(tl.float32)[:, None, :] * kj, axis=2)
        Gi = tl.load(gs + (head + ni) * 8 + 4, mask=ok, other=0.0)
        beta = tl.load(gs + (head + ni) * 8 + 1, mask=ok, other=0.0)
        rk = tl.load(gs + (head + ni) * 8 + 2, mask=ok, other=0.0)
        rq = tl.load(gs + (head + ni) * 8 + 3, mask=ok, other=0.0)
        Gj = tl.load(gs + (head + path) * 8 + 4, mask=on, other=0.0)
        rkj = tl.load(gs + (head + path) * 8 + 2, mask=on, other=0.0)
        w = tl.where(on, tl.exp(tl.where(on, Gi[:, None] - Gj, 0.0)) * rkj, 0.0)  # G_i - G_j <= 0
        strict = on & (path != ni[:, None])
        at = (head + ni[:, None]) * D + s[None, :]
        tl.store(ck + at, tl.where(strict, (beta * rk)[:, None] * w * kk, 0.0), mask=ok[:, None])
        tl.store(cq + at, rq[:, None] * w * qk, mask=ok[:, None])
    tl.debug_barrier()

    # 4. u one depth at a time: depth-d nodes take their ancestors' final u
    for d in range(1, D):
        lo = tl.load(starts + r * (D + 1) + d)
        hi = tl.load(starts + r * (D + 1) + d + 1)
        for c0 in range(lo, hi, NC):
            li = c0 + tl.arange(0, NC)
            ok = li < hi
            ni = tl.load(order + r * N + li, mask=ok, other=0)
            path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)
            c = tl.load(ck + (head + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=0.0)
            uj = tl.load(u_out + tile[:, None, :] + path[:, :, None] * HV * V, mask=(c != 0.0)[:, :, None], other=0.0)
            at = tile + ni[:, None] * HV * V
            tl.store(u_out + at, tl.load(u_out + at, mask=ok[:, None]) - tl.sum(c[:, :, None] * uj, axis=1),
                     mask=ok[:, None])  # fmt: skip
        tl.debug_barrier()

    # 5. o_i = e^{G_i} S0 q_i + sum over its root path
    for c0 in range(0, N, NC):
        ni = c0 + tl.arange(0, NC)
        ok = ni < N
        path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)
        c = tl.load(cq + (head + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=0.0)
        uj = tl.load(u_out + tile[:, None, :] + path[:, :, None] * HV * V, mask=(path >= 0)[:, :, None], other=0.0)
        at = tile + ni[:, None] * HV * V
        out = tl.load(os + at, mask=ok[:, None], other=0.0) + tl.sum(c[:, :, None] * uj, axis=1)
        tl.store(o + at, out.to(o.dtype.element_ty), mask=ok[:, None])


def tree_gdn_verify_gather(
    q: Tensor,
    k: Tensor,
    v: Tensor,
    a: Tensor,
    b: Tensor,
    A_log: Tensor,
    dt_bias: Tensor,
    state_pool: Tensor,
    slots: Tensor,
    tables: tuple[Tensor, Tensor, Tensor],
    scale: float | None = None,
    BV: int = 32,
    NC: int = 16,
    num_warps: int = 4,
) -> tuple[Tensor, TreeGDNTritonContext]:
    """As `tree_gdn.tree_gdn_verify_triton` (shapes of `naive.tree_gdn_verify_ref`), the tree given as
    `ancestor_table(ancestor_mask, depth)` (made once per step for all layers). Returns o and the commit's context."""
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    table, order, starts = tables
    D = table.shape[2]
    if V % BV or HV % H or table.shape[:2] != (R, N):
        raise ValueError(f"need V % BV == 0, HV % H == 0 and a table [R, N, D], got V={V}, BV={BV}, {tuple(table.shape)}")
    q, k, v = _rows(q), _rows(k), _rows(v)
    if q.stride(1) != k.stride(1):
        q, k = q.contiguous(), k.contiguous()
    device, f32 = q.device, dict(device=q.device, dtype=torch.float32)
    scale = K**-0.5 if scale is None else scale
    G = torch.empty(R, N, HV, **f32)
    o = torch.empty(R, N, HV, V, device=device, dtype=v.dtype)
    u = torch.empty(R, N, HV, V, **f32)
    raw = q.dtype in (torch.bfloat16, torch.float16) and k.dtype == q.dtype
    _tree_gdn_gather_kernel[(V // BV, R * HV)](
        q, k, v, a.contiguous(), b.contiguous(), A_log, dt_bias, state_pool, slots, table, order, starts, G, o, u,
        torch.empty(R, HV, N, 8, **f32), torch.empty(R, HV, N, D, **f32), torch.empty(R, HV, N, D, **f32),
        torch.empty(R, N, HV, V, **f32), N, scale, q.stride(1), v.stride(1),
        H=H, HV=HV, K=K, V=V, D=D, NC=NC, BV=BV, BK=min(32, K), RAW_DOTS=raw, num_warps=num_warps,
    )  # fmt: skip
    return o, TreeGDNTritonContext(u=u, G=G, k=k)
