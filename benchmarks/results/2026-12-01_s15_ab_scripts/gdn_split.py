"""Prototype (session 15): one-block tree-GDN verify with the tree's solve split from the S0 products.

tri (per request x V-head): G, A, W from k, q, g, beta; T = (I + A)^{-1} by levels on the identity; M = W T.
rhs (per V tile, request x V-head): KS, QS from S0, Rm = beta (v - e^G KS / |k|), U = T Rm, o = e^G QS + M Rm.
Two launches (`verify_split2`) or one (`verify_split1`): tickets give the first R*HV programs the tri role; the
others compute their S0 products, then wait on their head's flag.
"""

import torch
import triton
import triton.language as tl

from sglang_dflash.kernels.tree_gdn.tree_gdn import (
    _dot_split_a,
    _dot_tf32_exact_a,
    _gates,
    _tf32_head,
    _verify_io,
)


@triton.jit
def _tree_coeffs(q, k, a, b, A_log, dt_bias, anc, G_out, T_out, M_out, rh, N, ANC, scale, QK_STRIDE,
                 H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, NB: tl.constexpr, BK: tl.constexpr,
                 PRECISION: tl.constexpr, RAW_DOTS: tl.constexpr):  # fmt: skip
    r, hv = (rh // HV).to(tl.int64), rh % HV
    h = hv // (HV // H)
    i = tl.arange(0, NB)
    ok = i < N
    row = r * N + i
    g, beta = _gates(a, b, A_log, dt_bias, row, ok, hv, HV)
    KK, QK = tl.zeros([NB, NB], tl.float32), tl.zeros([NB, NB], tl.float32)
    kss, qss = tl.zeros([NB], tl.float32), tl.zeros([NB], tl.float32)
    for k0 in range(0, K, BK):
        kc = k0 + tl.arange(0, BK)
        rows = row[:, None] * QK_STRIDE + h * K + kc[None, :]
        kf = tl.load(k + rows, mask=ok[:, None], other=0.0).to(tl.float32)
        qf = tl.load(q + rows, mask=ok[:, None], other=0.0).to(tl.float32)
        kss += tl.sum(kf * kf, axis=1)
        qss += tl.sum(qf * qf, axis=1)
        if RAW_DOTS:
            KK = tl.dot(kf, tl.trans(kf), KK, input_precision="tf32")
            QK = tl.dot(qf, tl.trans(kf), QK, input_precision="tf32")
        else:
            KK = tl.dot(kf, tl.trans(kf), KK, input_precision=PRECISION)
            QK = tl.dot(qf, tl.trans(kf), QK, input_precision=PRECISION)
    am = tl.load(anc + r * N * ANC + i[:, None] * ANC + i[None, :], mask=ok[:, None] & ok[None, :], other=0) != 0
    G = tl.sum(tl.where(am, g[None, :], 0.0), axis=1)
    tl.store(G_out + row * HV + hv, G, mask=ok)
    depth = tl.sum(am.to(tl.int32), axis=1) - 1
    decay = tl.where(am, tl.exp(tl.where(am, G[:, None] - G[None, :], 0.0)), 0.0)
    rk = 1.0 / tl.sqrt(kss + 1e-6)
    rq = scale / tl.sqrt(qss + 1e-6)
    tile = rh.to(tl.int64) * NB * NB + i[:, None] * NB + i[None, :]
    tl.store(M_out + tile, decay * QK * rq[:, None] * rk[None, :])  # W, read back after the solve
    nA = tl.where(i[:, None] == i[None, :], 0.0, -(beta * rk)[:, None] * decay * KK * rk[None, :])
    nA_hi = _tf32_head(nA)
    nA_lo = nA - nA_hi
    X = nA  # T - I: rows at depth s are -A_i - sum_j A_ij X_j, final once their ancestors' are
    for step in range(2, tl.max(depth, axis=0) + 1):
        X = tl.where((depth == step)[:, None], _dot_split_a(nA_hi, nA_lo, X, nA_hi + nA_lo, PRECISION), X)
    tl.debug_barrier()
    W = tl.load(M_out + tile)
    W_hi = _tf32_head(W)
    M = _dot_split_a(W_hi, W - W_hi, X, W, PRECISION)  # W T
    tl.store(T_out + tile, X)
    tl.store(M_out + tile, M)


@triton.jit
def _tree_rhs(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G_out, T_out, M_out, o, u_out, flags, rh, iv, N, ANC,
              scale, QK_STRIDE, V_STRIDE, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
              NB: tl.constexpr, BV: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr, WAIT: tl.constexpr):  # fmt: skip
    r, hv = (rh // HV).to(tl.int64), rh % HV
    h = hv // (HV // H)
    i = tl.arange(0, NB)
    ok = i < N
    row = r * N + i
    vv = iv * BV + tl.arange(0, BV)
    slot = tl.load(slots + r).to(tl.int64)
    state = pool + ((slot * HV + hv) * V + vv[None, :]) * K
    g, beta = _gates(a, b, A_log, dt_bias, row, ok, hv, HV)
    KS, QS = tl.zeros([NB, BV], tl.float32), tl.zeros([NB, BV], tl.float32)
    kss, qss = tl.zeros([NB], tl.float32), tl.zeros([NB], tl.float32)
    for k0 in range(0, K, BK):
        kc = k0 + tl.arange(0, BK)
        rows = row[:, None] * QK_STRIDE + h * K + kc[None, :]
        kf = tl.load(k + rows, mask=ok[:, None], other=0.0).to(tl.float32)
        qf = tl.load(q + rows, mask=ok[:, None], other=0.0).to(tl.float32)
        S0c = tl.load(state + kc[:, None], mask=slot >= 0, other=0.0)
        kss += tl.sum(kf * kf, axis=1)
        qss += tl.sum(qf * qf, axis=1)
        KS = _dot_tf32_exact_a(kf, S0c, KS)
        QS = _dot_tf32_exact_a(qf, S0c, QS)
    am = tl.load(anc + r * N * ANC + i[:, None] * ANC + i[None, :], mask=ok[:, None] & ok[None, :], other=0) != 0
    G = tl.sum(tl.where(am, g[None, :], 0.0), axis=1)
    eG = tl.exp(G)
    rk = 1.0 / tl.sqrt(kss + 1e-6)
    rq = scale / tl.sqrt(qss + 1e-6)
    vt = tl.load(v + row[:, None] * V_STRIDE + hv * V + vv[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
    Rm = beta[:, None] * (vt - (eG * rk)[:, None] * KS)
    out = (eG * rq)[:, None] * QS
    if WAIT:
        while tl.atomic_add(flags + rh, 0, sem="acquire") == 0:
            pass
        tl.debug_barrier()
    tile = rh.to(tl.int64) * NB * NB + i[:, None] * NB + i[None, :]
    T = tl.load(T_out + tile, cache_modifier=".cg")
    M = tl.load(M_out + tile, cache_modifier=".cg")
    T_hi, M_hi = _tf32_head(T), _tf32_head(M)
    U = _dot_split_a(T_hi, T - T_hi, Rm, Rm, PRECISION)  # T - I stored
    out = _dot_split_a(M_hi, M - M_hi, Rm, out, PRECISION)
    otile = (row[:, None] * HV + hv) * V + vv[None, :]
    tl.store(o + otile, out.to(o.dtype.element_ty), mask=ok[:, None])
    tl.store(u_out + otile, U, mask=ok[:, None])


@triton.jit
def _tri_kernel(q, k, a, b, A_log, dt_bias, anc, G_out, T_out, M_out, N, ANC, scale, QK_STRIDE,
                H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, NB: tl.constexpr, BK: tl.constexpr,
                PRECISION: tl.constexpr, RAW_DOTS: tl.constexpr):  # fmt: skip
    _tree_coeffs(q, k, a, b, A_log, dt_bias, anc, G_out, T_out, M_out, tl.program_id(0), N, ANC, scale, QK_STRIDE,
                 H, HV, K, NB, BK, PRECISION, RAW_DOTS)  # fmt: skip


@triton.jit
def _rhs_kernel(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G_out, T_out, M_out, o, u_out, N, ANC, scale,
                QK_STRIDE, V_STRIDE, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr,
                NB: tl.constexpr, BV: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr):  # fmt: skip
    _tree_rhs(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G_out, T_out, M_out, o, u_out, slots,
              tl.program_id(1), tl.program_id(0), N, ANC, scale, QK_STRIDE, V_STRIDE, H, HV, K, V, NB, BV, BK,
              PRECISION, False)  # fmt: skip


@triton.jit
def _fused_kernel(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G_out, T_out, M_out, o, u_out, sync, N, ANC,
                  scale, QK_STRIDE, V_STRIDE, RHV, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr,
                  V: tl.constexpr, NB: tl.constexpr, BV: tl.constexpr, BK: tl.constexpr, PRECISION: tl.constexpr,
                  RAW_DOTS: tl.constexpr):  # fmt: skip
    ticket = tl.atomic_add(sync, 1)
    flags = sync + 1
    if ticket < RHV:
        _tree_coeffs(q, k, a, b, A_log, dt_bias, anc, G_out, T_out, M_out, ticket, N, ANC, scale, QK_STRIDE,
                     H, HV, K, NB, BK, PRECISION, RAW_DOTS)  # fmt: skip
        tl.debug_barrier()
        tl.atomic_xchg(flags + ticket, 1, sem="release")
    else:
        t = ticket - RHV
        _tree_rhs(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G_out, T_out, M_out, o, u_out, flags,
                  t % RHV, t // RHV, N, ANC, scale, QK_STRIDE, V_STRIDE, H, HV, K, V, NB, BV, BK, PRECISION,
                  True)  # fmt: skip


def _setup(q, k, v, a, b, scale, anc):
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    NB = max(16, triton.next_power_of_2(N))
    assert NB <= 64
    q, k, v, scale, raw, G, o, u = _verify_io(q, k, v, scale)
    T = torch.empty(R * HV, NB, NB, device=q.device, dtype=torch.float32)
    M = torch.empty_like(T)
    if anc.stride(2) != 1 or anc.stride(0) != N * anc.stride(1):
        anc = anc.contiguous()
    return R, N, H, K, HV, V, NB, q, k, v, a.contiguous(), b.contiguous(), scale, raw, G, o, u, T, M, anc.view(torch.int8)


def verify_split2(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, scale=None, BV=32, warps=4, tri_warps=4, parts="tr",
                  BK=32, stages=3, tri_BK=32, tri_stages=3):
    R, N, H, K, HV, V, NB, q, k, v, a, b, scale, raw, G, o, u, T, M, anc = _setup(q, k, v, a, b, scale, anc)
    if "t" in parts:
      _tri_kernel[(R * HV,)](q, k, a, b, A_log, dt_bias, anc, G, T, M, N, anc.stride(1), scale, q.stride(1),
                           H=H, HV=HV, K=K, NB=NB, BK=min(tri_BK, K), PRECISION="tf32x3", RAW_DOTS=raw, num_warps=tri_warps,
                           num_stages=tri_stages)
    if "r" in parts:
      _rhs_kernel[(V // BV, R * HV)](q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G, T, M, o, u, N, anc.stride(1),
                                   scale, q.stride(1), v.stride(1), H=H, HV=HV, K=K, V=V, NB=NB, BV=BV, BK=min(BK, K),
                                   PRECISION="tf32x3", num_warps=warps, num_stages=stages)
    return o, u, G


def verify_split1(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, scale=None, BV=32, warps=4, sync=None):
    R, N, H, K, HV, V, NB, q, k, v, a, b, scale, raw, G, o, u, T, M, anc = _setup(q, k, v, a, b, scale, anc)
    if sync is None:
        sync = torch.zeros(1 + R * HV, device=q.device, dtype=torch.int32)
    else:
        sync.zero_()
    _fused_kernel[(R * HV * (1 + V // BV),)](
        q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G, T, M, o, u, sync, N, anc.stride(1), scale, q.stride(1),
        v.stride(1), R * HV, H=H, HV=HV, K=K, V=V, NB=NB, BV=BV, BK=min(32, K), PRECISION="tf32x3", RAW_DOTS=raw,
        num_warps=warps)  # fmt: skip
    return o, u, G
