"""Triton: Gated DeltaNet verify over draft trees by ancestor gathers, for large shallow trees (DDTree 128-256).

The same outputs as `tree_gdn.tree_gdn_verify_triton` (module docstring there: u, o unrolled along root paths), but
where that kernel solves (I + A) U = R with dense NB x NB products in blocks of nodes (O(N^2) work across blocks),
this one uses that node i needs only its root path (ancestors anc(i), and anc*(i) with i):
    u_i = R_i - sum_{j in anc(i)} c_ij u_j,    c_ij = beta_i e^{G_i - G_j} (k_i . k_j),  R_i = beta_i (v_i - e^{G_i} S0 k_i)
    o_i = e^{G_i} S0 q_i + sum_{j in anc*(i)} e^{G_i - G_j} (q_i . k_j) u_j
(q, k unit, q scaled), the root path read from a table [N, D] (`ancestor_table`, root first, D > depth). Work:
N x depth x (K + V) FMAs. Three launches:
  1. `_coeffs_kernel`, grid (node chunks of NC, request x group of V-heads of one QK head): for each node and each
     slot of its root path, the gathered fp32 dots (k_i . k_j, q_i . k_j, |k_j|^2) once, then for each V-head
     the gates (recomputed from the inputs for the gathered ancestors: no dependence between programs),
     G along the path (a cumulative sum of g: G_j of an ancestor is a prefix of G_i's sum), c_ij and
     e^{G_i - G_j} (q_i . k_j); per node beta, 1/|k|, scale/|q|, G; and R_i into u (S0 k_i by
     tf32 tensor-core dots, as the blocked kernel's in blocks of 16).
  2. `_solve_kernel`, grid (V tile of BV, request x V-head): one step per range of same-depth nodes (a barrier,
     then a gathered load of the ancestors' final u), u_i; the next step's nodes, paths and coefficients are loaded
     before the barrier. The program reads back the u it stored.
  3. `_output_kernel`, grid (node chunks of NC, V tile, request x V-head): q.S0 and o from the root path's u.
Depth d costs one barrier and one gathered load in launch 2: chains and deep trees are for the blocked kernel.
All sums fp32 (FMA); q, k, v, a, b may be bf16. Writes u, G (the blocked kernel's context: `tree_gdn_commit_triton`
takes it) and o, and per-head scratch; nothing to the pool.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu
from .tree_gdn import TreeGDNTritonContext, _dot_tf32_exact_a, _gates, _verify_io


@triton.jit
def _mask_rows(mask, r, rows, N, MASK_R, MASK_N, NN: tl.constexpr):
    """int1 [RB, NN]: rows `rows` of request r's ancestor mask (False past N)."""
    i = tl.arange(0, NN)
    ok = (rows < N)[:, None] & (i < N)[None, :]
    return tl.load(mask + r * MASK_R + rows[:, None] * MASK_N + i[None, :], mask=ok, other=0) != 0


@triton.jit
def _depth_kernel(mask, depths, N, MASK_R, MASK_N, NN: tl.constexpr, RB: tl.constexpr):
    r, rows = tl.program_id(0).to(tl.int64), tl.program_id(1) * RB + tl.arange(0, RB)
    m = _mask_rows(mask, r, rows, N, MASK_R, MASK_N, NN)
    tl.store(depths + r * N + rows, tl.sum(m.to(tl.int32), axis=1) - 1, mask=rows < N)


@triton.jit
def _ancestor_table_kernel(
    mask, depths, table, order, items, N, T, MASK_R, MASK_N,
    NN: tl.constexpr, D: tl.constexpr, DD: tl.constexpr, NC: tl.constexpr, TT: tl.constexpr, RB: tl.constexpr,
):  # fmt: skip
    r, rows = tl.program_id(0).to(tl.int64), tl.program_id(1) * RB + tl.arange(0, RB)
    i = tl.arange(0, NN)
    s = tl.arange(0, D)
    at = table + (r * N + rows[:, None]) * D
    tl.store(at + s[None, :], tl.full([RB, D], -1, tl.int32), mask=(rows < N)[:, None])
    tl.debug_barrier()
    # a row's set columns are its root path: each path node goes to the slot of its depth
    dep = tl.load(depths + r * N + i, mask=i < N, other=DD)
    m = _mask_rows(mask, r, rows, N, MASK_R, MASK_N, NN)
    tl.store(at + dep[None, :], tl.broadcast_to(i[None, :], [RB, NN]), mask=m & (dep < D)[None, :])
    if tl.program_id(1) == 0:  # the solve's node order and steps
        key = tl.sort(dep * NN + i)  # by depth, then node: stable
        tl.store(order + r * N + i, key % NN, mask=i < N)
        d = tl.arange(0, DD)
        count = tl.sum((dep[:, None] == d[None, :]).to(tl.int32), axis=0)  # [DD]: nodes per depth
        start = tl.cumsum(count, axis=0) - count  # depth d's nodes are order[start[d]:start[d] + count[d]]
        steps = tl.where((d >= 1) & (d < D), (count + NC - 1) // NC, 0)
        last = tl.cumsum(steps, axis=0)  # the steps of depths up to d
        t = tl.arange(0, TT)
        # step t's depth: the first d >= 1 whose last step is past t (D: none, t is past every step)
        lev = 1 + tl.sum(((last[None, :] <= t[:, None]) & (d[None, :] >= 1) & (d[None, :] < D)).to(tl.int32), axis=1)
        one = d[None, :] == lev[:, None]  # [TT, DD]: one-hot of step t's depth, to read per-depth values at it
        start_t = tl.sum(tl.where(one, start[None, :], 0), axis=1)
        before_t = tl.sum(tl.where(one, (last - steps)[None, :], 0), axis=1)  # the steps of shallower depths
        first = start_t + (t - before_t) * NC
        end = tl.minimum(first + NC, start_t + tl.sum(tl.where(one, count[None, :], 0), axis=1))
        live = lev < D
        row = items + (r * (T + 1) + t) * 2
        tl.store(row, tl.where(live, first, N), mask=t < T)
        tl.store(row + 1, tl.where(live, end, N), mask=t < T)
        total = tl.sum(steps, axis=0)
        tl.store(items + (r * (T + 1) + T) * 2 + tl.arange(0, 2), tl.full([2], 0, tl.int32) + total)


class GatherTables(NamedTuple):
    """A step's trees as the ancestor-gather verify reads them (`ancestor_table`). Parents precede children, so a
    mask row's set columns are its root path in depth order."""

    table: Tensor  # int32 [R, N, D]: each node's root path, root first, padded -1; D = next power of two > depth, >= 2
    order: Tensor  # int32 [R, N]: the nodes by depth, stable
    # int32 [R, N // step_nodes + D + 1, 2]: the solve's steps, each up to step_nodes nodes of one depth as a range of
    # `order`, depth 1 first, then empty ranges [N, N], and [r, -1] the number of steps twice
    items: Tensor
    step_nodes: int  # the most nodes of one solve step


def ancestor_table(ancestor_mask: Tensor, depth: int, NC: int = 16) -> GatherTables:
    """bool [R, N, N] (row i: ancestors of i and i; rows may be padded, as `aligned_ancestor_mask`'s) -> the
    `GatherTables` of those trees, solve steps of up to NC nodes. depth: at least the trees' (as `ancestors`'
    max_depth; not checked, which would sync: deeper paths are cut). Two launches over blocks of mask rows (each node's
    depth, then each path node at its depth's slot; the first program also orders the nodes and cuts the steps), no
    host sync (CUDA-graph safe); made once per step, shared by every layer. Reference: `naive.ancestor_table_ref`."""
    R, N, _ = ancestor_mask.shape
    D = max(2, triton.next_power_of_2(depth + 1))  # 2 for a lone root: one (empty) depth of steps
    if ancestor_mask.stride(2) != 1:
        ancestor_mask = ancestor_mask.contiguous()
    m = ancestor_mask.view(torch.int8)
    dev = ancestor_mask.device
    T = N // NC + D  # an upper bound on the steps: sum over depths of ceil(count / NC)
    table = torch.empty(R, N, D, device=dev, dtype=torch.int32)
    order = torch.empty(R, N, device=dev, dtype=torch.int32)
    items = torch.empty(R, T + 1, 2, device=dev, dtype=torch.int32)
    NN = triton.next_power_of_2(N)
    RB = max(1, 8192 // NN)  # mask rows per program
    grid = (R, triton.cdiv(N, RB))
    depths = torch.empty(R, N, device=dev, dtype=torch.int32)
    _depth_kernel[grid](m, depths, N, m.stride(0), m.stride(1), NN=NN, RB=RB, num_warps=4)
    _ancestor_table_kernel[grid](
        m, depths, table, order, items, N, T, m.stride(0), m.stride(1),
        NN=NN, D=D, DD=triton.next_power_of_2(D + 1), NC=NC, TT=triton.next_power_of_2(T), RB=RB, num_warps=4,
    )  # fmt: skip
    return GatherTables(table, order, items, NC)


@triton.jit
def _s0_rows(x, rows, ok, state, slot, NC: tl.constexpr, BV: tl.constexpr, K: tl.constexpr, BK: tl.constexpr,
             RAW_DOTS: tl.constexpr):  # fmt: skip
    """[NC, BV]: the rows of x at offsets `rows` [NC] (raw: not normalised) times the S0 tile at `state` ([K, BV]
    read transposed), by tf32 tensor-core dots (`_dot_tf32_exact_a` for 16-bit x, else tf32x3; the blocked kernel's
    bf16 split was slower here: benchmarks/RESULTS.md)."""
    acc = tl.zeros([NC, BV], tl.float32)
    for k0 in range(0, K, BK):
        kc = k0 + tl.arange(0, BK)
        xf = tl.load(x + rows[:, None] + kc[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
        S0c = tl.load(state + kc[:, None], mask=slot >= 0, other=0.0)
        if RAW_DOTS:
            acc = _dot_tf32_exact_a(xf, S0c, acc)
        else:
            acc = tl.dot(xf, S0c, acc, input_precision="tf32x3")
    return acc


@triton.jit
def _coeffs_kernel(
    q, k, v, a, b, A_log, dt_bias, pool, slots, table, G_out, gs, ck, cq, u_out, N, scale, QK_STRIDE, V_STRIDE,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, D: tl.constexpr, NC: tl.constexpr,
    BK: tl.constexpr, BVR: tl.constexpr, RAW_DOTS: tl.constexpr, HVB: tl.constexpr, NATIVE: tl.constexpr,
):  # fmt: skip
    c, rh = tl.program_id(0), tl.program_id(1)
    r, hb = (rh // (HV // HVB)).to(tl.int64), rh % (HV // HVB)  # V-heads hb * HVB .. + HVB, all of QK head h
    h = hb * HVB // (HV // H)
    ni = c * NC + tl.arange(0, NC)
    ok = ni < N
    s = tl.arange(0, D)
    path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)  # root first
    on = path >= 0
    # the dots of QK head h, shared by this program's HVB V-heads
    kk, qk = tl.zeros([NC, D], tl.float32), tl.zeros([NC, D], tl.float32)
    kssj, kss, qss = tl.zeros([NC, D], tl.float32), tl.zeros([NC], tl.float32), tl.zeros([NC], tl.float32)
    for k0 in range(0, K, BK):
        kc = k0 + tl.arange(0, BK)
        own = (r * N + ni)[:, None] * QK_STRIDE + h * K + kc[None, :]
        ki = tl.load(k + own, mask=ok[:, None], other=0.0).to(tl.float32)
        qi = tl.load(q + own, mask=ok[:, None], other=0.0).to(tl.float32)
        kj = tl.load(k + (r * N + path)[:, :, None] * QK_STRIDE + h * K + kc[None, None, :], mask=on[:, :, None],
                     other=0.0).to(tl.float32)  # fmt: skip
        kk += tl.sum(ki[:, None, :] * kj, axis=2)
        qk += tl.sum(qi[:, None, :] * kj, axis=2)
        kssj += tl.sum(kj * kj, axis=2)
        kss += tl.sum(ki * ki, axis=1)
        qss += tl.sum(qi * qi, axis=1)
    depth = tl.sum(on.to(tl.int32), axis=1) - 1
    strict = on & (s[None, :] < depth[:, None])
    rk, rq = 1.0 / tl.sqrt(kss + 1e-6), scale / tl.sqrt(qss + 1e-6)
    rkj = 1.0 / tl.sqrt(kssj + 1e-6)
    slot = tl.load(slots + r).to(tl.int64)
    for hv in range(hb * HVB, (hb + 1) * HVB):
        g, _ = _gates(a, b, A_log, dt_bias, r * N + path, on, hv, HV, NATIVE)  # [NC, D], 0 past the path
        Gp = tl.cumsum(g, axis=1)  # G of each path node (prefix sums); the last live slot is node i's own
        Gi = tl.sum(tl.where(s[None, :] == depth[:, None], Gp, 0.0), axis=1)
        _, beta = _gates(a, b, A_log, dt_bias, r * N + ni, ok, hv, HV, NATIVE)
        w = tl.where(on, tl.exp(tl.where(on, Gi[:, None] - Gp, 0.0)) * rkj, 0.0)  # G_i - G_j <= 0
        at = ((r * HV + hv) * N + ni[:, None]) * D + s[None, :]
        tl.store(ck + at, tl.where(strict, (beta * rk)[:, None] * w * kk, 0.0), mask=ok[:, None])
        tl.store(cq + at, rq[:, None] * w * qk, mask=ok[:, None])
        row = ((r * HV + hv) * N + ni) * 4
        tl.store(gs + row, beta, mask=ok)
        tl.store(gs + row + 1, rk, mask=ok)
        tl.store(gs + row + 2, rq, mask=ok)
        tl.store(gs + row + 3, Gi, mask=ok)
        tl.store(G_out + (r * N + ni) * HV + hv, Gi, mask=ok)
        # R_i = beta_i (v_i - e^{G_i} S0 k_i) into u, all V columns, BVR at a time
        scale_k = beta * tl.exp(Gi) * rk
        for v0 in range(0, V, BVR):
            vv = v0 + tl.arange(0, BVR)
            KS = _s0_rows(k, (r * N + ni) * QK_STRIDE + h * K, ok, pool + ((slot * HV + hv) * V + vv[None, :]) * K,
                          slot, NC, BVR, K, BK, RAW_DOTS)  # fmt: skip
            vt = tl.load(v + (r * N + ni)[:, None] * V_STRIDE + hv * V + vv[None, :], mask=ok[:, None], other=0.0)
            Rm = beta[:, None] * vt.to(tl.float32) - scale_k[:, None] * KS
            tl.store(u_out + ((r * N + ni)[:, None] * HV + hv) * V + vv[None, :], Rm, mask=ok[:, None])


@triton.jit
def _solve_kernel(
    table, order, items, ck, u_out, N, T,
    HV: tl.constexpr, V: tl.constexpr, D: tl.constexpr, NC: tl.constexpr, BV: tl.constexpr,
):  # fmt: skip
    iv, rh = tl.program_id(0), tl.program_id(1)
    r, hv = (rh // HV).to(tl.int64), rh % HV
    vv = iv * BV + tl.arange(0, BV)
    head = (r * HV + hv) * N
    tile = r * N * HV * V + hv * V + vv[None, :]  # + node * HV * V: this program's columns of a u row (R_i there)
    # One step per range of same-depth nodes (`ancestor_table`'s items): u_i from its ancestors' final u. A step's
    # nodes, paths and coefficients do not depend on u: the next step's are loaded before this one's barrier.
    steps = tl.load(items + (r * (T + 1) + T) * 2)
    ni, path, cij = _step(items, order, table, ck, r, 0, head, N, T, D, NC)
    for it in range(0, steps):
        ni_next, path_next, c_next = _step(items, order, table, ck, r, it + 1, head, N, T, D, NC)
        tl.debug_barrier()
        uj = tl.load(u_out + tile[:, None, :] + path[:, :, None] * HV * V, mask=(cij != 0.0)[:, :, None], other=0.0)
        at = tile + ni[:, None] * HV * V
        live = (ni >= 0)[:, None]
        tl.store(u_out + at, tl.load(u_out + at, mask=live) - tl.sum(cij[:, :, None] * uj, axis=1), mask=live)
        ni, path, cij = ni_next, path_next, c_next


@triton.jit
def _step(items, order, table, ck, r, it, head, N, T, D: tl.constexpr, NC: tl.constexpr):
    """(nodes [NC] (-1: none), their root paths [NC, D], coefficients [NC, D]) of solve step `it` (none past T)."""
    lo = tl.load(items + (r * (T + 1) + it) * 2, mask=it < T, other=0)
    hi = tl.load(items + (r * (T + 1) + it) * 2 + 1, mask=it < T, other=0)
    li = lo + tl.arange(0, NC)
    ok = li < hi
    ni = tl.load(order + r * N + li, mask=ok, other=-1)
    s = tl.arange(0, D)
    path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)
    cij = tl.load(ck + (head + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=0.0)
    return ni, path, cij


@triton.jit
def _output_kernel(
    q, pool, slots, table, gs, cq, u_out, o, N, QK_STRIDE,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, D: tl.constexpr, NC: tl.constexpr,
    BV: tl.constexpr, BK: tl.constexpr, RAW_DOTS: tl.constexpr,
):  # fmt: skip
    c, iv, rh = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    r, hv = (rh // HV).to(tl.int64), rh % HV
    h = hv // (HV // H)
    vv = iv * BV + tl.arange(0, BV)
    s = tl.arange(0, D)
    ni = c * NC + tl.arange(0, NC)
    ok = ni < N
    slot = tl.load(slots + r).to(tl.int64)
    state = pool + ((slot * HV + hv) * V + vv[None, :]) * K
    QS = _s0_rows(q, (r * N + ni) * QK_STRIDE + h * K, ok, state, slot, NC, BV, K, BK, RAW_DOTS)
    head = (r * HV + hv) * N
    rq = tl.load(gs + (head + ni) * 4 + 2, mask=ok, other=0.0)
    eG = tl.exp(tl.load(gs + (head + ni) * 4 + 3, mask=ok, other=0.0))
    path = tl.load(table + (r * N + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=-1)
    cqj = tl.load(cq + (head + ni[:, None]) * D + s[None, :], mask=ok[:, None], other=0.0)
    tile = r * N * HV * V + hv * V + vv[None, :]
    uj = tl.load(u_out + tile[:, None, :] + path[:, :, None] * HV * V, mask=(path >= 0)[:, :, None], other=0.0)
    out = (eG * rq)[:, None] * QS + tl.sum(cqj[:, :, None] * uj, axis=1)
    tl.store(o + tile + ni[:, None] * HV * V, out.to(o.dtype.element_ty), mask=ok[:, None])


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
    tables: GatherTables,
    scale: float | None = None,
    BV: int | None = None,
    NC: int = 16,
    num_warps: int = 4,
    heads_per_program: int | None = None,
    solve_warps: int | None = None,
) -> tuple[Tensor, TreeGDNTritonContext]:
    """As `tree_gdn.tree_gdn_verify_triton` (shapes of `naive.tree_gdn_verify_ref`), the tree given as
    `ancestor_table(ancestor_mask, depth)` (made once per step for all layers). Returns o and the commit's context.
    BV: V columns per program of the solve and the output (default 32, or V below). NC: nodes per gathered tile of
    the first and last launches. solve_warps: the solve's warps, by default 8 for steps of 32 nodes or more
    (`tables.step_nodes`; H200, R = 1 x 256 nodes, 32-node steps: 36.3 us at 8 warps, 37.6 at 4), else num_warps.
    heads_per_program: V-heads of one QK head per program of the first launch, which computes their shared dots
    once: 1, or HV // H once the grid fills two waves by QK heads (H200, 129 / 257 nodes, HV // H = 3 against 1:
    R = 1 35.8 / 47.2 against 29.5 / 43.6 us, fewer programs doing more each; R = 4 58.6 against 61.8; R = 8 117.9 /
    207.1 against 127.0 / 230.1)."""
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    BV = BV or min(32, V)
    table, order, items, step_nodes = tables
    T, D = items.shape[1] - 1, table.shape[2]
    if V % BV or HV % H or table.shape[:2] != (R, N) or T != N // step_nodes + D:
        raise ValueError(
            f"need V % BV == 0, HV % H == 0 and tables of [R, N] = [{R}, {N}] nodes with N // step_nodes + D steps, "
            f"got V={V}, BV={BV}, table {tuple(table.shape)}, {T} steps of up to {step_nodes} nodes"
        )
    solve_warps = solve_warps or (8 if step_nodes >= 32 else num_warps)
    q, k, v, scale, raw, G, o, u = _verify_io(q, k, v, scale)
    f32 = dict(device=q.device, dtype=torch.float32)
    gs, ck, cq = torch.empty(R, HV, N, 4, **f32), torch.empty(R, HV, N, D, **f32), torch.empty(R, HV, N, D, **f32)
    common = dict(H=H, HV=HV, K=K, D=D, BK=min(32, K))
    chunks = triton.cdiv(N, NC)
    if heads_per_program is None:  # all of a QK head's V-heads in one program once that fills two waves
        heads_per_program = HV // H if chunks * R * H >= 2 * gpu.multiprocessor_count(q.device) else 1
    if (HV // H) % heads_per_program:
        raise ValueError(f"heads_per_program must divide HV // H = {HV // H}, got {heads_per_program}")
    _coeffs_kernel[(chunks, R * HV // heads_per_program)](
        q, k, v, a.contiguous(), b.contiguous(), A_log, dt_bias, state_pool, slots, table, G, gs, ck, cq, u, N, scale,
        q.stride(1), v.stride(1), V=V, NC=NC, BVR=min(V, 64), RAW_DOTS=raw, HVB=heads_per_program,
        NATIVE=not gpu.INTERPRET, num_warps=num_warps, **common,
    )  # fmt: skip
    _solve_kernel[(V // BV, R * HV)](
        table, order, items, ck, u, N, T, HV=HV, V=V, D=D, NC=step_nodes, BV=BV, num_warps=solve_warps
    )
    _output_kernel[(chunks, V // BV, R * HV)](
        q, state_pool, slots, table, gs, cq, u, o, N, q.stride(1), V=V, NC=NC, BV=BV, RAW_DOTS=raw,
        num_warps=num_warps, **common,
    )  # fmt: skip
    return o, TreeGDNTritonContext(u=u, G=G, k=k)
