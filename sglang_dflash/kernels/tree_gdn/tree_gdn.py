"""Triton: Gated DeltaNet verify over draft trees without per-node states, and its commit.

Unrolled along root paths, with G_i = sum of g over the root path of i
and anc*(i) = ancestors of i and i itself:
    S_i = e^{G_i} S0 + sum_{j in anc*(i)} e^{G_i - G_j} u_j k_j^T
    u_i = beta_i (v_i - e^{G_i} S0 k_i - sum_{j in anc(i)} e^{G_i - G_j} (k_j . k_i) u_j)
    o_i = e^{G_i} S0 q_i + sum_{j in anc*(i)} e^{G_i - G_j} (k_j . q_i) u_j
So (I + A) U = R with A_ij = beta_i e^{G_i - G_j} k_i.k_j on strict ancestors and
R_i = beta_i (v_i - e^{G_i} S0 k_i). Nodes of one depth depend only on shallower ones, so the
system is solved one level at a time: each step recomputes every row, U <- R - A U, and a row of level L is final
from step L on (its ancestors are by then; the other rows' terms have exactly zero coefficients). Before that its
value is a partial sum, at most 2^depth times the largest |R| (|A_ij| < 1: unit keys, beta < 1, decay <= 1), far
from overflow. No row select, and the first step outside the loop (`_tree_gdn_fused_kernel`).
In blocks of up to 32 nodes levels are pairs of depths (in larger ones the extra tiles spill registers): a node
i at even depth d with ancestor p at depth d - 1 takes p's equation in,
    u_i = (R_i - A_ip R_p) - sum_{j in anc(p)} (A_ij - A_ip A_pj) u_j,
so depths d - 1 and d depend only on depths < d - 1 (two products before the loop, ceil(D / 2) in it, for a
tree of depth D; every entry is a single product of two bounded ones, no cancellation). (The nilpotent product form
(I - A)(I + A^2)(I + A^4)... needs only log2 D products but cancels catastrophically when keys
align: relative error 7.8e2 on a 40-node chain in the tests.)

verify (`_tree_gdn_fused_kernel`): one launch, one program per (V tile of BV, request x V-head) that,
block by block of NB nodes (NB = 64 on Hopper, 16 on SM86), builds G, A and W itself, subtracts the
terms of the block's ancestors in earlier blocks (final u, stored and read back by the same program)
and solves the levels straight on its tile's right-hand side. A tree of one block compiles without
the cross-block code. ROOT (`verify_blocks`: when it saves padded rows, e.g. 2^k + 1 nodes, which DDTREE
budgets of 2^k give) peels node 0 off first, by fp32 FMA in registers: every other node descends from it,
so the blocks start from the root's state e^{g_0} S0 + u_0 k_0^T instead of S0 (formed chunk by chunk as S0 is
read, never stored), and 65 nodes are the root plus one block of 64, not two.
16-bit q and k enter the dots raw (exact products: 16-bit dots in blocks of 32 or 64, tf32 in blocks of 16),
normalised after.
Writes o and u (per node, fp32, N * HV * V floats per request: at most 2 states for N <= 256 at
K = 128) and G; nothing is written to the pool. The ancestor mask's rows may be padded
(`aligned_ancestor_mask`): with rows 16 bytes apart, and the first column read aligned, Triton may assume them
aligned, and the build spills fewer registers (ptxas, sm_90, 65 nodes: 0.34 KB of stack per thread against 0.57).
commit:
S <- e^{G_l} S0 + sum over the accepted path of e^{G_l - G_j} u_j k_j^T (l its last node), a
rank-(path length) update of each request's slot, in place; one launch can commit several layers
(pool [layers, S, HV, V, K]), which is how the engine commits a step.
All arithmetic fp32 (fp32 sums; fp32 operands' dots as three tf32 products, tf32x3); q, k, v, a, b may be bf16.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu
from ..layer_table import LayerTable
from ..tree_build.naive import ancestors

BLOCK_NODES = 64  # nodes per block on Hopper (one 128-node block needed 384 KB of shared memory, H200 has 227 KB)


def fused_nodes(device: torch.device) -> int:
    """The most nodes a tree may have to be verified in one block on `device`: 64 with Hopper's shared memory, 16
    on SM86 (99 KB). Larger trees are verified block by block, with cross-block terms; the root may go first, alone
    (`verify_blocks`: so on an H200 DDTREE budgets of 63 and 64, 64 and 65 nodes, are both one block)."""
    return BLOCK_NODES if gpu.shared_memory_per_block(device) >= gpu.HOPPER_SHARED else 16


def verify_blocks(num_nodes: int, device: torch.device, block_nodes: int | None = None, peel_root: bool | None = None):
    """(root, NB, blocks): how the verify walks a tree of `num_nodes` on `device`: root 1 when node 0 is peeled off
    first (by default when that saves padded rows: 17, 33, 65 or 129 nodes), then `blocks` blocks of NB nodes (by
    default the fewest nodes >= 16, a power of two, up to `fused_nodes`, that hold the rest in as few blocks)."""

    def plan(n: int) -> tuple[int, int]:  # (padded rows, NB)
        nb = block_nodes or min(fused_nodes(device), max(16, triton.next_power_of_2(n)))
        return triton.cdiv(n, nb) * nb, nb

    (whole, nb), (rest, nb_rest) = plan(num_nodes), plan(num_nodes - 1)
    root = int(rest < whole if peel_root is None else peel_root)
    nb = nb_rest if root else nb
    return root, nb, triton.cdiv(num_nodes - root, nb)


@dataclass(frozen=True)
class TreeGDNTritonContext:
    """What `tree_gdn_commit_triton` needs: u [R, N, HV, V] fp32, G [R, N, HV] fp32 (path sums of g) and
    the raw keys k [R, N, H, K] (normalised again in commit); several layers' as `LayerTable`s (`context_tables`)."""

    u: Tensor | LayerTable
    G: Tensor | LayerTable
    k: Tensor | LayerTable


@triton.jit
def _softplus(x, NATIVE: tl.constexpr):
    """log(1 + e^x); NATIVE (compiled, not interpreted): by ex2.approx and lg2.approx (one MUFU instruction each,
    relative error about 2^-22; tl.log is a polynomial of about 20 instructions, evaluated for 16 nodes a thread in the
    blocked verify's column layout). With the gates after the key loop, H200, verify, us: R = 1 x 64 12.4 -> 11.8,
    R = 8 x 64 41.0 -> 37.6 (benchmarks/RESULTS.md)."""
    if NATIVE:
        y = 1.0 + tl.math.exp2(x * 1.4426950408889634)
        lg2 = tl.inline_asm_elementwise("lg2.approx.ftz.f32 $0, $1;", "=f,f", [y], dtype=tl.float32, is_pure=True, pack=1)
        return tl.where(x > 20.0, x, lg2 * 0.6931471805599453)
    else:
        return tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))


@triton.jit
def _l2norm_rows(x):
    return x * (1.0 / tl.sqrt(tl.sum(x * x, axis=1) + 1e-6))[:, None]


@triton.jit
def _gate_inputs(a, b, A_log, dt_bias, row, ok, hv, HV: tl.constexpr):
    """What `_gate_values` takes, as loaded: a, b [NB] of the nodes at token indices row (ok = real nodes; 0
    elsewhere), A_log and dt_bias of V-head hv. A caller may issue these loads early and convert them where it needs
    the gates."""
    av = tl.load(a + row * HV + hv, mask=ok, other=0.0)
    return av, tl.load(b + row * HV + hv, mask=ok, other=0.0), tl.load(A_log + hv), tl.load(dt_bias + hv)


@triton.jit
def _gate_values(av, bv, A_log, dt_bias, ok, NATIVE: tl.constexpr):
    """(g, beta) [NB] from `_gate_inputs`' loads; NATIVE: `_softplus`'s."""
    av, bv = av.to(tl.float32), bv.to(tl.float32)
    g = -tl.exp(A_log.to(tl.float32)) * _softplus(av + dt_bias.to(tl.float32), NATIVE)
    return tl.where(ok, g, 0.0), tl.where(ok, 1.0 / (1.0 + tl.exp(-bv)), 0.0)


@triton.jit
def _gates(a, b, A_log, dt_bias, row, ok, hv, HV: tl.constexpr, NATIVE: tl.constexpr):
    """(g, beta) [NB] of the nodes at token indices row (ok = real nodes); NATIVE: `_softplus`'s."""
    av, bv, A, dt = _gate_inputs(a, b, A_log, dt_bias, row, ok, hv, HV)
    return _gate_values(av, bv, A, dt, ok, NATIVE)


@triton.jit
def _tf32_head(x):
    """x with its low 13 mantissa bits cleared: exact in tf32, and x - head is exact in fp32."""
    return (x.to(tl.int32, bitcast=True) & -8192).to(tl.float32, bitcast=True)


@triton.jit
def _dot_tf32_exact_a(a, b, acc):
    """acc + a @ b for fp32 a whose values are exact in tf32 (e.g. widened bf16) and any fp32 b: b split
    into a tf32 head and its remainder, two tf32 products (a's low part, tf32x3's third, is zero)."""
    hi = _tf32_head(b)
    return tl.dot(a, hi, tl.dot(a, b - hi, acc, input_precision="tf32"), input_precision="tf32")


@triton.jit
def _dot16(a, b, acc, NATIVE: tl.constexpr):
    """acc + a @ b for 16-bit a and b (products exact in fp32, fp32 sums): a 16-bit dot; without NATIVE (Triton's
    interpreter cannot run them) the same as an fp32 one."""
    if NATIVE:
        return tl.dot(a, b, acc)
    else:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc, input_precision="ieee")


@triton.jit
def _dot_raw_a(a, b, acc, NATIVE: tl.constexpr):
    """acc + a @ b for 16-bit a and fp32 b, at fp32 accuracy. bf16 a: b split into three bf16 parts (24 significant
    bits, as fp32's, and fp32's range), three bf16 dots, smallest part first: half the shared-memory bytes of tf32
    operands, at bf16 tensor-core rate (benchmarks/RESULTS.md: faster in the blocked verify's blocks of
    32 and 64, slower in the gather verify and in blocks of 16). fp16 a (fp16 parts of b could overflow): `_dot_tf32_exact_a`."""
    if a.dtype == tl.bfloat16:
        b1 = b.to(tl.bfloat16)
        r1 = b - b1.to(tl.float32)
        b2 = r1.to(tl.bfloat16)
        b3 = (r1 - b2.to(tl.float32)).to(tl.bfloat16)
        return _dot16(a, b1, _dot16(a, b2, _dot16(a, b3, acc, NATIVE), NATIVE), NATIVE)
    else:
        return _dot_tf32_exact_a(a.to(tl.float32), b, acc)


@triton.jit
def _dot_split_a(a_hi, a_lo, b, acc, PRECISION: tl.constexpr):
    """acc + a @ b with a = a_hi + a_lo split once by the caller (`_tf32_head`, e.g. before a loop): for tf32x3, three
    tf32 products, smallest first, accumulated in place; otherwise one product at PRECISION."""
    if PRECISION == "tf32x3":
        hi = _tf32_head(b)
        acc = tl.dot(a_lo, hi, tl.dot(a_hi, b - hi, acc, input_precision="tf32"), input_precision="tf32")
        return tl.dot(a_hi, hi, acc, input_precision="tf32")
    else:
        return tl.dot(a_hi + a_lo, b, acc, input_precision=PRECISION)


@triton.jit
def _earlier_blocks(Rm, out, q, k, u_out, G, tree, base, row, ni, ok, Gi, beta, rk, rq, b0, N, ANC, hv, h, vv, QK_STRIDE,
                    HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, NB: tl.constexpr, BK: tl.constexpr,
                    PRECISION: tl.constexpr, RAW_DOTS: tl.constexpr):  # fmt: skip
    """A block's terms from its ancestors in earlier blocks (nodes < b0; their G and u final, stored by this
    program): the right-hand side Rm loses beta (decay k.k_j) u_j, the outputs gain (decay q.k_j) u_j. The dots
    run on raw rows BK key columns at a time and are normalised after, as the block's own (rk, rq: the block's
    inverse key norms and scaled inverse query norms), so that shared memory holds chunks, not whole rows."""
    i = tl.arange(0, NB)
    for c0 in range(0, b0, NB):
        nj = c0 + i
        okj = nj < N
        rowj = base + nj
        KK, QK = tl.zeros([NB, NB], tl.float32), tl.zeros([NB, NB], tl.float32)
        kssj = tl.zeros([NB], tl.float32)
        for k0 in range(0, K, BK):
            kc = k0 + tl.arange(0, BK)
            ki = tl.load(k + row[:, None] * QK_STRIDE + h * K + kc[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            qi = tl.load(q + row[:, None] * QK_STRIDE + h * K + kc[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            kj = tl.load(k + rowj[:, None] * QK_STRIDE + h * K + kc[None, :], mask=okj[:, None], other=0.0).to(tl.float32)
            kssj += tl.sum(kj * kj, axis=1)
            if RAW_DOTS:
                KK += tl.dot(ki, tl.trans(kj), input_precision="tf32")
                QK += tl.dot(qi, tl.trans(kj), input_precision="tf32")
            else:
                KK += tl.dot(ki, tl.trans(kj), input_precision=PRECISION)
                QK += tl.dot(qi, tl.trans(kj), input_precision=PRECISION)
        rkj = 1.0 / tl.sqrt(kssj + 1e-6)
        am = tl.load(tree + ni[:, None] * ANC + nj[None, :], mask=ok[:, None] & okj[None, :], other=0) != 0
        Gj = tl.load(G + rowj * HV + hv, mask=okj, other=0.0)
        decay = (
            tl.where(am, tl.math.exp2(tl.where(am, (Gi[:, None] - Gj[None, :]) * 1.4426950408889634, 0.0)), 0.0) * rkj[None, :]
        )
        uj = tl.load(u_out + (rowj[:, None] * HV + hv) * V + vv[None, :], mask=okj[:, None], other=0.0)
        Rm -= tl.dot((beta * rk)[:, None] * decay * KK, uj, input_precision=PRECISION)
        out += tl.dot(rq[:, None] * decay * QK, uj, input_precision=PRECISION)
    return Rm, out


@triton.jit
def _root(q, k, v, a, b, A_log, dt_bias, state, slot, G_out, o, u_out, row, hv, h, vv, iv, scale, QK_STRIDE, V_STRIDE,
          HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BV: tl.constexpr, BK: tl.constexpr,
          NATIVE: tl.constexpr):  # fmt: skip
    """Node 0 (token row `row`) alone by fp32 FMA: stores its o, u (and G = g, by the first V tile); returns
    (g, 1 / |k|, u [BV]), from which its descendants' state e^g S0 + u k^T is formed."""
    g, beta = _gates(a, b, A_log, dt_bias, row, True, hv, HV, NATIVE)
    ks, qs = tl.zeros([BV], tl.float32), tl.zeros([BV], tl.float32)
    kss, qss, qk = 0.0, 0.0, 0.0
    for k0 in range(0, K, BK):
        kc = k0 + tl.arange(0, BK)
        kr = tl.load(k + row * QK_STRIDE + h * K + kc).to(tl.float32)
        qr = tl.load(q + row * QK_STRIDE + h * K + kc).to(tl.float32)
        S0c = tl.load(state + kc[:, None], mask=slot >= 0, other=0.0)
        ks += tl.sum(S0c * kr[:, None], axis=0)
        qs += tl.sum(S0c * qr[:, None], axis=0)
        kss += tl.sum(kr * kr, axis=0)
        qss += tl.sum(qr * qr, axis=0)
        qk += tl.sum(qr * kr, axis=0)
    rk, rq = 1.0 / tl.sqrt(kss + 1e-6), scale / tl.sqrt(qss + 1e-6)
    eg = tl.exp(g)
    u = beta * (tl.load(v + row * V_STRIDE + hv * V + vv).to(tl.float32) - eg * rk * ks)
    tile = (row * HV + hv) * V + vv
    tl.store(o + tile, (eg * rq * qs + rq * rk * qk * u).to(o.dtype.element_ty))
    tl.store(u_out + tile, u)
    tl.store(G_out + row * HV + hv, g, mask=iv == 0)
    return g, rk, u


@triton.jit
def _tree_gdn_fused_kernel(
    q, k, v, a, b, A_log, dt_bias, pool, slots, anc, G_out, o, u_out, ANC, scale, QK_STRIDE, V_STRIDE,
    NODES: tl.constexpr, H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, NB: tl.constexpr,
    BV: tl.constexpr,
    PRECISION: tl.constexpr, RAW_DOTS: tl.constexpr, BK: tl.constexpr, BLOCKS: tl.constexpr, PAIRED: tl.constexpr,
    ROOT: tl.constexpr, WIDE: tl.constexpr, NATIVE: tl.constexpr,
):  # fmt: skip
    """A whole tree per (V tile, request x V-head), one launch, blocks of NB nodes in node order: per block G,
    A and W, the terms of its earlier-block ancestors (`_earlier_blocks`, none for a tree of one block), the
    level-by-level solve of (I + A) U = R straight on this tile's right-hand side, o = e^G S0 q + W U (with ROOT,
    e^{G - g_0} S_root q + W U).
    RAW_DOTS (16-bit q, k): q.k and k.k as dots on the raw values (exact products, fp32 sums), with WIDE 16-bit dots
    and the S0 products by `_dot_raw_a`, else tf32 dots and `_dot_tf32_exact_a`; otherwise tf32x3 (PRECISION).
    WIDE (blocks of 32 or 64, `tree_gdn_verify_triton`): those 16-bit dots and the decay in base 2. NATIVE: compiled,
    not interpreted (16-bit dots, inline PTX).
    NODES, the tree's node count N, is compiled in (one build per N; a server runs one): the row masks of a whole
    block fold away (H200: 63 or 40 nodes 11.1 / 11.4 us instead of 14.0 / 14.1, R = 8 x 64 36.2 instead of 37.3;
    benchmarks/RESULTS.md). BLOCKS (N - ROOT > NB) compiles the cross-block code in: then every program
    stores G and its tile of u, which its later blocks read back. ROOT: node 0 first, alone (`_root`), then blocks
    from node 1 that start from the root's state."""
    iv, rh = tl.program_id(0), tl.program_id(1)
    r, hv = (rh // HV).to(tl.int64), rh % HV
    h = hv // (HV // H)
    i = tl.arange(0, NB)
    vv = iv * BV + tl.arange(0, BV)
    # Nodes are counted from ROOT (node 0 alone first, or not): node i is token row base + i and mask row / column
    # ROOT + i. anc starts at column ROOT (aligned by `aligned_ancestor_mask`; an offset added here would tell the
    # compiler the rows are unaligned: 1.2 KB of spills per thread against 0.5 at 65 nodes on sm_90, first version);
    # its rows are ANC >= N bytes apart.
    base = r * NODES + ROOT
    tree = anc + base * ANC
    slot = tl.load(slots + r).to(tl.int64)
    state = pool + ((slot * HV + hv) * V + vv[None, :]) * K  # S0 tile, read transposed: [K chunk, BV]
    if ROOT:
        g0, rk0, u0 = _root(q, k, v, a, b, A_log, dt_bias, state, slot, G_out, o, u_out, base - 1, hv, h, vv, iv, scale,
                            QK_STRIDE, V_STRIDE, HV, K, V, BV, BK, NATIVE)  # fmt: skip
        eg0 = tl.exp(g0)
    N: tl.constexpr = NODES - ROOT
    for b0 in range(0, N, NB):
        ni = b0 + i
        ok = ni < N
        row = base + ni
        # After the root the gates' loads go before the key loop (the gates are formed after it); without a root,
        # after it. H200, verify, us, before -> after the root (benchmarks/RESULTS.md): R = 1 x 33
        # 13.8 -> 12.7, 65 16.0 -> 13.8 (13 deep 20.5 -> 17.5), 129 46.2 -> 40.0, R = 8 x 65 49.5 -> 48.0; without a
        # root R = 8 x 64 37.6 -> 38.8 and the 16-node chain 6.6 -> 6.9 (more spills), R = 1 x 64 11.8 -> 11.7.
        if ROOT:
            a_raw, b_raw, A_raw, dt_raw = _gate_inputs(a, b, A_log, dt_bias, row, ok, hv, HV)
        # q.k, k.k, q.S0 and k.S0 on the raw rows, BK key columns at a time (few live registers),
        # normalised after: (q_i . k_j) / (|q_i| |k_j|) is the dot of the unit vectors.
        KK, QK = tl.zeros([NB, NB], tl.float32), tl.zeros([NB, NB], tl.float32)
        KS, QS = tl.zeros([NB, BV], tl.float32), tl.zeros([NB, BV], tl.float32)
        kss, qss = tl.zeros([NB], tl.float32), tl.zeros([NB], tl.float32)
        for k0 in range(0, K, BK):
            kc = k0 + tl.arange(0, BK)
            rows = row[:, None] * QK_STRIDE + h * K + kc[None, :]
            kr = tl.load(k + rows, mask=ok[:, None], other=0.0)
            qr = tl.load(q + rows, mask=ok[:, None], other=0.0)
            kf, qf = kr.to(tl.float32), qr.to(tl.float32)
            S0c = tl.load(state + kc[:, None], mask=slot >= 0, other=0.0)
            if ROOT:  # the root's state e^{g_0} S0 + u_0 k_0^T (k_0 unit): every other node starts from it
                k0c = tl.load(k + (base - 1) * QK_STRIDE + h * K + kc).to(tl.float32) * rk0
                S0c = eg0 * S0c + k0c[:, None] * u0[None, :]
            kss += tl.sum(kf * kf, axis=1)
            qss += tl.sum(qf * qf, axis=1)
            if RAW_DOTS and WIDE:
                KK = _dot16(kr, tl.trans(kr), KK, NATIVE)
                QK = _dot16(qr, tl.trans(kr), QK, NATIVE)
                KS = _dot_raw_a(kr, S0c, KS, NATIVE)
                QS = _dot_raw_a(qr, S0c, QS, NATIVE)
            elif RAW_DOTS:
                KK = tl.dot(kf, tl.trans(kf), KK, input_precision="tf32")
                QK = tl.dot(qf, tl.trans(kf), QK, input_precision="tf32")
                KS = _dot_tf32_exact_a(kf, S0c, KS)
                QS = _dot_tf32_exact_a(qf, S0c, QS)
            else:
                KK = tl.dot(kf, tl.trans(kf), KK, input_precision=PRECISION)
                QK = tl.dot(qf, tl.trans(kf), QK, input_precision=PRECISION)
                KS = tl.dot(kf, S0c, KS, input_precision=PRECISION)
                QS = tl.dot(qf, S0c, QS, input_precision=PRECISION)
        if not ROOT:
            a_raw, b_raw, A_raw, dt_raw = _gate_inputs(a, b, A_log, dt_bias, row, ok, hv, HV)
        g, beta = _gate_values(a_raw, b_raw, A_raw, dt_raw, ok, NATIVE)
        am = tl.load(tree + ni[:, None] * ANC + ni[None, :], mask=ok[:, None] & ok[None, :], other=0) != 0
        G = tl.sum(tl.where(am, g[None, :], 0.0), axis=1)
        if ROOT:
            G += g0
        if BLOCKS:
            for c0 in range(0, b0, NB):  # path sums over ancestors in earlier blocks
                nj = c0 + i
                gj, _ = _gates(a, b, A_log, dt_bias, base + nj, nj < N, hv, HV, NATIVE)
                amj = tl.load(tree + ni[:, None] * ANC + nj[None, :], mask=ok[:, None] & (nj < N)[None, :], other=0) != 0
                G += tl.sum(tl.where(amj, gj[None, :], 0.0), axis=1)
        tl.store(G_out + row * HV + hv, G, mask=ok & ((iv == 0) | BLOCKS))
        depth = tl.sum(am.to(tl.int32), axis=1) - 1  # ancestors inside the block
        rk = 1.0 / tl.sqrt(kss + 1e-6)
        rq = scale / tl.sqrt(qss + 1e-6)
        if WIDE:  # e^x as 2^(x log2 e) (ex2.approx.ftz, without tl.exp's denormal guard), the keys' norms folded in
            G2 = G * 1.4426950408889634
            decay = tl.where(am, tl.math.exp2(tl.where(am, G2[:, None] - G2[None, :], 0.0)), 0.0) * rk[None, :]
            W = decay * QK * rq[:, None]  # o's in-tree weights e^{G_i - G_j} q_i.k_j
            nA = tl.where(i[:, None] == i[None, :], 0.0, -(beta * rk)[:, None] * decay * KK)  # -A
        else:  # (the form above made the 16-node chain slower: 6.8 -> 7.0 us on an H200)
            decay = tl.where(am, tl.exp(tl.where(am, G[:, None] - G[None, :], 0.0)), 0.0)  # G_i - G_j <= 0
            W = decay * QK * rq[:, None] * rk[None, :]
            nA = tl.where(i[:, None] == i[None, :], 0.0, -(beta * rk)[:, None] * decay * KK * rk[None, :])
        if ROOT:  # decay from the state the block starts from: the root's
            eG = tl.exp(G - g0)
        else:
            eG = tl.exp(G)
        vt = tl.load(v + row[:, None] * V_STRIDE + hv * V + vv[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
        Rm = beta[:, None] * (vt - (eG * rk)[:, None] * KS)
        out = (eG * rq)[:, None] * QS
        if BLOCKS:
            Rm, out = _earlier_blocks(Rm, out, q, k, u_out, G_out, tree, base, row, ni, ok, G, beta, rk, rq, b0, N, ANC,
                                      hv, h, vv, QK_STRIDE, HV, K, V, NB, BK, PRECISION, RAW_DOTS)  # fmt: skip
        if PAIRED:  # a row at even depth takes in the equation of its ancestor p one level up (module docstring)
            par = am & ((depth % 2 == 0)[:, None] & (depth[None, :] == depth[:, None] - 1))
            nAp = tl.where(par, nA, 0.0)
            nAp_hi = _tf32_head(nAp)
            Rm = _dot_split_a(nAp_hi, nAp - nAp_hi, Rm, Rm, PRECISION)
            nA = _dot_split_a(nAp_hi, nAp - nAp_hi, nA, tl.where(par, 0.0, nA), PRECISION)
        level = (depth + PAIRED) // (1 + PAIRED)  # rows of one level depend only on lower levels
        nA_hi = _tf32_head(nA)
        nA_lo = nA - nA_hi
        # Step 1 outside the loop: Triton then converts the loop-invariant A operands to the dot layout once, here (in
        # the loop it converted them at every level, 64 shuffles and 64 selects a thread). No row select of the
        # level (module docstring): it cost a layout conversion through shared memory and two barriers a level.
        # Level loop at 64 nodes, SASS: 133 instructions a step, against 302 (BV 64: 235 / 422). H200, verify, us:
        # R = 8 x 64 nodes 48.1 -> 43.6, 65 deep 79.0 -> 72.0, R = 1 x 65 deep 23.2 -> 21.5, but R = 1 x 64 14.2 ->
        # 14.5 and the 16-node chain 6.9 -> 7.2 (benchmarks/RESULTS.md).
        U = _dot_split_a(nA_hi, nA_lo, Rm, Rm, PRECISION)
        for step in range(2, tl.max(level, axis=0) + 1):
            U = _dot_split_a(nA_hi, nA_lo, U, Rm, PRECISION)
        W_hi = _tf32_head(W)
        out = _dot_split_a(W_hi, W - W_hi, U, out, PRECISION)
        otile = (row[:, None] * HV + hv) * V + vv[None, :]
        tl.store(o + otile, out.to(o.dtype.element_ty), mask=ok[:, None])
        tl.store(u_out + otile, U, mask=ok[:, None])
        if BLOCKS:
            tl.debug_barrier()  # later blocks read this block's G and u back


@triton.jit(do_not_specialize=["R"])  # one compile for every request count R
def _tree_gdn_commit_kernel(
    pool, slots, u, G, k, k_like, accepted, N, LA, NUM_SLOTS, R, K_ROW,
    H: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, LP: tl.constexpr, BV: tl.constexpr,
    PRECISION: tl.constexpr, TABLE: tl.constexpr,
):  # fmt: skip
    """Per (V tile, request x V-head, layer): pool [layers, S, HV, V, K]; u/G/k with the same leading layer dim, or
    (TABLE) int64 [layers] tables of each layer's u, G and k (`LayerTable`; k_like: a k, for its dtype). k's rows
    are K_ROW elements apart."""
    iv, rh, layer = tl.program_id(0), tl.program_id(1), tl.program_id(2).to(tl.int64)
    r, hv = rh // HV, rh % HV
    h = hv // (HV // H)
    pool += layer * NUM_SLOTS * HV * V * K
    if TABLE:
        u = tl.load(u + layer).to(tl.pointer_type(tl.float32))
        G = tl.load(G + layer).to(tl.pointer_type(tl.float32))
        k = tl.load(k + layer).to(tl.pointer_type(k_like.dtype.element_ty))
    else:
        u += layer * R * N * HV * V
        G += layer * R * N * HV
        k += layer * R * N * K_ROW
    # Every load at once, masked by the slot (a branch on it first made the state's load wait for the slot's and the
    # path's for it: H200, per layer of a 48-layer commit, R = 8 x 64 7.71 -> 7.52 us, R = 1 1.08 -> 1.06;
    # benchmarks/RESULTS.md).
    slot = tl.load(slots + r)
    live = slot >= 0
    t = tl.arange(0, LP)
    node = tl.load(accepted + r.to(tl.int64) * LA + t, mask=t < LA, other=-1)
    kk = tl.arange(0, K)
    vv = iv * BV + tl.arange(0, BV)
    ptr = pool + ((tl.maximum(slot, 0).to(tl.int64) * HV + hv) * V + vv[:, None]) * K + kk[None, :]
    S0 = tl.load(ptr, mask=live, other=0.0)
    on = (node >= 0) & live
    row = r.to(tl.int64) * N + tl.where(on, node, 0)
    last = tl.max(tl.where(on, t, -1), axis=0)
    Gp = tl.load(G + row * HV + hv, mask=on, other=0.0)
    kn = _l2norm_rows(tl.load(k + row[:, None] * K_ROW + h * K + kk[None, :], mask=on[:, None], other=0.0).to(tl.float32))
    up = tl.load(u + (row[:, None] * HV + hv) * V + vv[None, :], mask=on[:, None], other=0.0)
    G_last = tl.sum(tl.where(t == last, Gp, 0.0), axis=0)
    w = tl.where(on, tl.exp(G_last - Gp), 0.0)
    S = tl.exp(G_last) * S0 + tl.dot(tl.trans(up * w[:, None]), kn, input_precision=PRECISION)
    tl.store(ptr, S, mask=live)


def _rows(t: Tensor) -> Tensor:
    """t [R, N, heads, D] with each row's heads packed (a split of a wider projection is fine), else a copy."""
    packed = t.stride(3) == 1 and t.stride(2) == t.shape[3] and t.stride(0) == t.shape[1] * t.stride(1)
    return t if packed else t.contiguous()


def _verify_io(q: Tensor, k: Tensor, v: Tensor, scale: float | None):
    """What both verify wrappers launch with: q, k, v read in place where their rows are packed (`_rows`; q and k
    sharing one row stride), the scale (default K**-0.5), whether q.k dots may take the raw 16-bit values, and the
    outputs G [R, N, HV] fp32, o [R, N, HV, V] in v's dtype, u [R, N, HV, V] fp32."""
    R, N, _, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    q, k, v = _rows(q), _rows(k), _rows(v)
    if q.stride(1) != k.stride(1):
        q, k = q.contiguous(), k.contiguous()
    f32 = dict(device=q.device, dtype=torch.float32)
    G, u = torch.empty(R, N, HV, **f32), torch.empty(R, N, HV, V, **f32)
    o = torch.empty(R, N, HV, V, device=q.device, dtype=v.dtype)
    raw = q.dtype in (torch.bfloat16, torch.float16) and k.dtype == q.dtype
    return q, k, v, K**-0.5 if scale is None else scale, raw, G, o, u


def tree_gdn_verify_triton(
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
    ancestor_mask: Tensor | None = None,
    max_depth: int | None = None,
    BV: int | None = None,
    precision: str = "tf32x3",
    num_warps: int | None = None,
    block_nodes: int | None = None,
    paired: bool | None = None,
    peel_root: bool | None = None,
    BK: int | None = None,
    num_stages: int | None = None,
    max_registers: int | None = None,
) -> tuple[Tensor, TreeGDNTritonContext]:
    """Outputs o [R, N, HV, V] (v's dtype) of every node of R trees, state_pool untouched.

    Shapes as `naive.tree_gdn_verify_ref`. ancestor_mask bool [R, N, N] and max_depth (a bound on
    tree depth) can be passed once per step and shared by all layers; otherwise they are
    derived from parents (max_depth = N - 1). precision: tl.dot's input_precision: "tf32x3"
    (three tf32 tensor-core products, about fp32 accuracy) by default; "ieee" is fp32 FMA and
    measured 34x slower on an H200 (905 vs 27 us at N = 64); "tf32" is 2x faster, ~1e-3 error.
    One launch for any N: the root alone if peel_root, then blocks of NB nodes (block_nodes) in node order
    (`_tree_gdn_fused_kernel`; both default to `verify_blocks`'s choice). paired: the level loop
    takes two depths per product (module docstring), or one. Default: paired in blocks of up to 32 nodes (on an
    H200, a 16-node chain 7.3 us against 8.7), one depth per product in blocks of 64, where the pairing's extra
    64 x 64 tiles spill registers (16.9 against 18.3 us at 64 nodes, depth 4; 81.4 against 83.4 at R = 8, depth
    15). ancestor_mask may have padded rows (`aligned_ancestor_mask`; the mask derived here when none is passed is
    aligned). Blocks of 32 and 64 compute their own decay in base 2 and, for 16-bit q and k, the key loop's dots in
    16 bits (`_dot_raw_a`). H200, verify, us, same run: R = 1 x 33 nodes 15.2 -> 14.1, 64 14.4 -> 12.4, R = 8 x 65
    58.1 -> 51.5; in blocks of 16 both were slower (the 16-node chain 6.8 -> 7.1), so those (SM86's too) keep tl.exp
    and tf32 dots. The cross-block terms (`_earlier_blocks`) take the base-2 decay in blocks of every size (two blocks
    of 64 on an H200, R = 1 x 129, base 2 in and across blocks: 48.6 -> 47.1; not timed on SM86).
    max_registers: ptxas's register cap a thread (Triton's maxnreg), 0 for none, by default `register_cap`'s.
    q, k, v may be views into one projection (rows of packed heads): they are read in place.
    """
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    root, NB, blocks = verify_blocks(N, q.device, block_nodes, peel_root)
    BV = BV or min(V, 32 if blocks > 1 else _default_tile(q.device, R * HV * triton.cdiv(V, 32)))
    if V % BV or HV % H:
        raise ValueError(f"need V % BV == 0 and HV % H == 0, got V={V}, BV={BV}, H={H}, HV={HV}")
    max_depth = N - 1 if max_depth is None else max_depth
    if ancestor_mask is None:
        ancestor_mask = aligned_ancestor_mask(ancestors(parents, max_depth), first=root)
    warps = num_warps or 4
    default_bk, default_stages = key_loop(NB, blocks)
    BK, num_stages = min(BK or default_bk, K), num_stages or default_stages
    q, k, v, scale, raw, G, o, u = _verify_io(q, k, v, scale)
    a, b = a.contiguous(), b.contiguous()
    if ancestor_mask.stride(2) != 1 or ancestor_mask.stride(0) != N * ancestor_mask.stride(1):
        ancestor_mask = ancestor_mask.contiguous()
    anc = ancestor_mask.view(torch.int8)[..., root:]  # the kernel reads the mask from its first non-root column
    grid = (V // BV, R * HV)
    _tree_gdn_fused_kernel[grid](
        q, k, v, a, b, A_log, dt_bias, state_pool, slots, anc, G, o, u, anc.stride(1), scale, q.stride(1), v.stride(1),
        NODES=N, H=H, HV=HV, K=K, V=V, NB=NB, BV=BV, PRECISION=precision, RAW_DOTS=raw, BK=BK, BLOCKS=blocks > 1,
        PAIRED=int(NB <= 32 if paired is None else paired), ROOT=root, WIDE=NB >= 32,
        NATIVE=not gpu.INTERPRET, num_warps=warps, num_stages=num_stages,
        maxnreg=register_cap(NB, blocks, warps, grid[0] * grid[1], q.device) if max_registers is None else max_registers or None,
    )  # fmt: skip
    return o, TreeGDNTritonContext(u=u, G=G, k=k)


def register_cap(NB: int, blocks: int, warps: int, programs: int, device: torch.device) -> int | None:
    """ptxas's register cap for the verify of trees of `blocks` blocks of NB nodes, `programs` programs of `warps` warps:
    for one block of up to 32 (and a root), the most that lets one more program share an SM (65,536 registers), where
    that takes a wave of programs off; None (ptxas's choice) otherwise. At 4 warps that is 168: blocks of 16 then
    build without spills (uncapped: 213 registers on sm_90a, 194 on sm_86), blocks of 32 with 140-184 bytes a thread.
    H200, verify, us, uncapped -> 168 (benchmarks/RESULTS.md): R = 8 x 16-node chains 17.9 -> 13.0,
    R = 32 56.3 -> 47.4, R = 8 x 17 nodes 23.0 -> 16.1, R = 8 x 33 34.9 -> 25.9, R = 16 x 33 57.5 -> 52.4 (but R = 16 x
    32 38.2 -> 39.4). Not for blocks of 64 (1,244 bytes of spills at R = 8 x 64: 37.6 -> 54.4) nor SM86's blocks of 16
    with cross-block terms (52 bytes at 64 nodes, untimed)."""
    sms, threads = gpu.multiprocessor_count(device), 32 * warps
    per_sm = 65536 // (threads * 256)  # programs an SM holds at ptxas's most, 255 registers
    if NB > 32 or blocks > 1 or triton.cdiv(programs, (per_sm + 1) * sms) >= triton.cdiv(programs, per_sm * sms):
        return None
    return 65536 // ((per_sm + 1) * threads) // 8 * 8


def key_loop(NB: int, blocks: int) -> tuple[int, int]:
    """(BK, num_stages) of the verify's key loops for blocks of NB nodes: 64 columns a step, not pipelined, for blocks
    of 64 nodes and trees of several blocks; 32 columns, three stages (Triton's default), for one block of 16 or 32.
    H200, verify, us, (64, 1) against (32, 3): R = 1 x 64 nodes 14.1 against 16.5, 65 nodes 18.4 / 20.7, R = 8 x 64
    48.2 / 54.6 (depth 15: 58.8 / 68.5), a 100-node chain 101.8 / 113.9, 65 nodes in blocks of 16 (SM86's) 34.8 /
    39.1; the 16-node chain 7.6 against 6.9."""
    return (64, 1) if NB >= BLOCK_NODES or blocks > 1 else (32, 3)


def _default_tile(device: torch.device, programs_at_32: int) -> int:
    """V columns per verify program of a one-block tree: 64 on Hopper once 32-column tiles would make more than two
    programs per SM (the tree's q.k products and solve are then done half as often: R = 4 x 64 nodes 29.1 us
    against 39.5 on an H200, R = 8 54.5 against 62.4), else 32 (R = 1 x 64 nodes: 16.4 against 19.9)."""
    hopper = gpu.shared_memory_per_block(device) >= gpu.HOPPER_SHARED
    return 64 if hopper and programs_at_32 > 2 * gpu.multiprocessor_count(device) else 32


def aligned_ancestor_mask(mask: Tensor, first: int | None = None) -> Tensor:
    """The same bool [R, N, N] mask as a view whose rows are a multiple of 16 bytes apart and whose column `first`,
    the first the verify reads (1 where it peels the root off, else 0; default: `verify_blocks`' choice on the mask's
    device), starts each row at a multiple of 16 bytes (a copy into a padded buffer, unless it already is so), so that
    Triton may assume the verify kernel's mask rows aligned: made once per step. (At 65 nodes on sm_90 ptxas gives
    0.57 KB of stack per thread unaligned, 0.34 aligned; on an H200 an earlier build of the kernel, reading column 0
    of a mask aligned at column 1, took 75.9 us against 49.4.)"""
    R, N, _ = mask.shape
    first = verify_blocks(N, mask.device)[0] if first is None else first
    rows_ok = mask.stride(2) == 1 and mask.stride(1) % 16 == 0 and mask.stride(0) == N * mask.stride(1)
    if rows_ok and (mask.data_ptr() + first) % 16 == 0:
        return mask
    shift = -first % 16
    padded = torch.zeros(R, N, triton.cdiv(N + shift, 16) * 16, dtype=mask.dtype, device=mask.device)
    padded[..., shift : shift + N] = mask
    return padded[..., shift : shift + N]


def tree_gdn_commit_triton(
    state_pool: Tensor, slots: Tensor, ctx: TreeGDNTritonContext, accepted_nodes: Tensor, BV: int | None = None
) -> None:
    """state_pool[slots[r]] <- the state after request r's accepted path (accepted_nodes long
    [R, L + 1] from the root, padded -1); slots[r] < 0 is left untouched. Several layers in one
    launch: state_pool [layers, S, HV, V, K] with a context of `stack_contexts` (leading layer dim) or of
    `context_tables` (each field a `LayerTable`: the layers' own tensors, read where they are). BV: V columns a program,
    32 or V if smaller (a V of 16 once launched no program, so committed nothing)."""
    layered = state_pool.dim() == 5
    pool = state_pool if layered else state_pool[None]
    table = isinstance(ctx.u, LayerTable)
    if table:
        u, G, k = ctx.u.ptrs, ctx.G.ptrs, ctx.k.ptrs
        (R, N, HV, V), (H, K), k_like, count = ctx.u.like.shape, ctx.k.like.shape[2:], ctx.k.like, len(ctx.u)
        packed = k_like.stride(3) == 1 and k_like.stride(2) == K and k_like.stride(0) == N * k_like.stride(1)
        if not (ctx.u.like.is_contiguous() and ctx.G.like.is_contiguous() and packed):
            raise ValueError("a context table needs contiguous u and G, and k in rows of packed heads")
        k_row = k_like.stride(1)
    else:
        u, G, k = (t.contiguous() if layered else t[None].contiguous() for t in (ctx.u, ctx.G, ctx.k))
        (count, R, N, HV, V), (H, K), k_like = u.shape, k.shape[3:], k
        k_row = H * K
    layers, S = pool.shape[:2]
    if not pool.is_contiguous() or count != layers:
        raise ValueError(f"need a contiguous pool and a context per layer, got pool {list(pool.shape)}, {count} contexts")
    BV = BV or min(32, V)
    if V % BV:
        raise ValueError(f"need V % BV == 0, got V={V}, BV={BV}")
    LA = accepted_nodes.shape[1]
    _tree_gdn_commit_kernel[(V // BV, R * HV, layers)](
        pool, slots, u, G, k, k_like, accepted_nodes.contiguous(), N, LA, S, R, k_row,
        H=H, HV=HV, K=K, V=V, LP=max(16, triton.next_power_of_2(LA)), BV=BV, PRECISION="tf32x3", TABLE=table,
        num_warps=4,
    )  # fmt: skip


def context_tables(ctxs: list[TreeGDNTritonContext]) -> TreeGDNTritonContext:
    """Several layers' verify contexts as one whose fields are `LayerTable`s, for a commit of all of them in one
    launch without stacking them (no copy; the contexts must live until the commit)."""
    return TreeGDNTritonContext(*(LayerTable.of([getattr(c, f) for c in ctxs]) for f in ("u", "G", "k")))
