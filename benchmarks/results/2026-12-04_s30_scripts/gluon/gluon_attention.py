"""Prototype, prepared in session 30 (compiled for sm_90a on the CPU machine with Triton 3.6.0, never run): the tree
attention's key loop in Gluon (`triton.experimental.gluon`, in the device image's Triton 3.6), with the next tile's
q.k product issued as an asynchronous wgmma before this tile's softmax, so that the tensor cores work while the
softmax runs (FlashAttention-3's intra-warpgroup overlap), which Triton's `tl.dot` does not do. K and V tiles come
by cp.async into two slots each, K one tile further ahead than V.

Same inputs and partial outputs as `sglang_dflash.kernels.tree_attention.tree_attention` for the engine's contiguous
cache (k_cache, v_cache [R, T, HKV, DH], no slots, table or window), bf16, BM = 128 rows x BN = 64 or 32 keys,
DH = 256, 8 warps; each request's key tiles (prefix, then tree) cut into S splits, all used (pass `splits`, as
`default_splits` gives them; the benchmark's prefixes fill the cache, so the package's per-request split count is
the same). The merge is the package's `merge_partials`. The lazy rescale and the mask only where needed as in the
package's kernel (session 30)."""

from __future__ import annotations

import math

import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia import hopper
from triton.experimental.gluon.language.nvidia.ampere import async_copy as cp


@gluon.jit
def _issue_kv(dst, base_cache, base_tree, t, stop, prefix_tiles, plen, N, r, T, hkv, HKV: gl.constexpr,
              DH: gl.constexpr, BN: gl.constexpr, LD: gl.constexpr):  # fmt: skip
    """cp.async of key tile t's rows (the prefix's tiles, then the tree's) of K or V into the shared slot dst, one
    commit group (an empty one for t >= stop, past the split); rows past the prefix / tree are zero-filled."""
    tree = t >= prefix_tiles
    n0 = gl.where(tree, t - prefix_tiles, t) * BN
    keys = n0 + gl.arange(0, BN, layout=gl.SliceLayout(1, LD))
    ok = (keys < gl.where(tree, N, plen)) & (t < stop)
    tok = gl.where(tree, r * N + keys, r * T + keys).to(gl.int64)
    dd = gl.arange(0, DH, layout=gl.SliceLayout(0, LD))
    offs = (tok[:, None] * HKV + hkv) * DH + dd[None, :]
    cp.async_copy_global_to_shared(dst, gl.where(tree, base_tree, base_cache) + offs, mask=ok[:, None])
    cp.commit_group()


@gluon.jit
def _softmax_tile(s, t, prefix_tiles, plen, N, anc, r, node, live, NW, m_i, l_i, qk_scale, BN: gl.constexpr,
                  S_LAYOUT: gl.constexpr, O_LAYOUT: gl.constexpr):  # fmt: skip
    """Tile t's scores s [BM, BN] into the online softmax (base-2 maxima; mask only where needed; lazy rescale):
    returns (p bf16 as the P.V product's register operand, m_i, l_i, grow, alpha): where grow, the caller multiplies
    the accumulator's rows by alpha (in O_LAYOUT) before adding this tile's P.V."""
    tree = t >= prefix_tiles
    n0 = gl.where(tree, t - prefix_tiles, t) * BN
    if tree | (n0 + BN > plen):
        cols = gl.arange(0, BN, layout=gl.SliceLayout(0, S_LAYOUT))
        ok = (n0 + cols) < gl.where(tree, N, plen)
        word = gl.load(anc + (r * N + node) * NW + n0 // 64, mask=live & tree, other=-1) >> (n0 % 64)
        seen = ok[None, :] & (((word[:, None] >> cols.to(gl.int64)[None, :]) & 1) != 0)
        s = gl.where(seen, s, float("-inf"))
    m_new = gl.maximum(m_i, gl.max(s, axis=1) * qk_scale)
    grow = gl.max(gl.where(m_new > m_i, m_new - m_i, 0.0), axis=0) > 8.0
    alpha = gl.full([s.shape[0]], 1.0, gl.float32, layout=gl.SliceLayout(1, S_LAYOUT))
    if grow:
        alpha = gl.exp2(m_i - gl.where(m_new == float("-inf"), 0.0, m_new))
        l_i = l_i * alpha
        m_i = m_new
    p = gl.exp2(s * qk_scale - gl.where(m_i == float("-inf"), 0.0, m_i)[:, None])
    l_i = l_i + gl.sum(p, axis=1)
    p = gl.convert_layout(p.to(gl.bfloat16), gl.DotOperandLayout(0, O_LAYOUT, 2))
    return p, m_i, l_i, grow, gl.convert_layout(alpha, gl.SliceLayout(1, O_LAYOUT))


@gluon.jit
def _gluon_tree_attention_kernel(
    q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc, o_out, m_out, l_out, N, NW, T, qk_scale,
    HQ: gl.constexpr, HKV: gl.constexpr, DH: gl.constexpr, S: gl.constexpr, BM: gl.constexpr, BN: gl.constexpr,
    WARPS: gl.constexpr, DEFER_PV: gl.constexpr,
):  # fmt: skip
    """Grid (query blocks, R x HKV, S), as the package's kernel with every split used. DEFER_PV: tile t's P.V runs
    on while tile t+1's loads are awaited, its q.k issued and its softmax computed (waited with q.k(t+2)); else it
    is waited at once."""
    LD: gl.constexpr = gl.BlockedLayout([1, 8], [4, 8], [WARPS, 1], [1, 0])  # 16-byte vectors along DH
    SMEM: gl.constexpr = gl.NVMMASharedLayout(swizzle_byte_width=128, element_bitwidth=16, rank=2)
    S_LAYOUT: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, BN, 16])
    O_LAYOUT: gl.constexpr = gl.NVMMADistributedLayout(version=[3, 0], warps_per_cta=[WARPS, 1], instr_shape=[16, DH, 16])
    G: gl.constexpr = HQ // HKV
    pid_m, rh, split = gl.program_id(0), gl.program_id(1), gl.program_id(2)
    r, hkv = (rh // HKV).to(gl.int64), rh % HKV
    plen = gl.load(prefix_lens + r).to(gl.int32)
    prefix_tiles = gl.cdiv(plen, BN)
    tiles = prefix_tiles + gl.cdiv(N, BN)
    chunk = gl.cdiv(tiles, S)
    start = split * chunk
    stop = gl.minimum(start + chunk, tiles)

    # q block [BM, DH] into shared memory (rows: node x the KV head's G query heads)
    rows_ld = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, LD))
    dd_ld = gl.arange(0, DH, layout=gl.SliceLayout(0, LD))
    live_ld = rows_ld < N * G
    q_off = ((r * N + rows_ld // G) * HQ + hkv * G + rows_ld % G) * DH
    q_s = gl.allocate_shared_memory(
        gl.bfloat16, [BM, DH], SMEM, gl.load(q + q_off[:, None] + dd_ld[None, :], mask=live_ld[:, None], other=0.0)
    )
    k_s = gl.allocate_shared_memory(gl.bfloat16, [2, BN, DH], SMEM)
    v_s = gl.allocate_shared_memory(gl.bfloat16, [2, BN, DH], SMEM)
    hopper.fence_async_shared()

    rows = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, S_LAYOUT))
    live = rows < N * G
    node = rows // G
    m_i = gl.full([BM], float("-inf"), gl.float32, layout=gl.SliceLayout(1, S_LAYOUT))
    l_i = gl.zeros([BM], gl.float32, layout=gl.SliceLayout(1, S_LAYOUT))
    acc = gl.zeros([BM, DH], gl.float32, layout=O_LAYOUT)
    s_zero = gl.zeros([BM, BN], gl.float32, layout=S_LAYOUT)

    if start < stop:
        # K(x) is issued 1.5 tiles ahead of its q.k product (into slot (x - s) % 2, once q.k(x - 2) is done). V(x) is
        # issued once P.V(x - 2) is done: at the end of tile x - 2, or with DEFER_PV after tile x - 1's softmax.
        # Commit groups in order: K(s), K(s+1), V(s), [V(s+1)], K(s+2), then per tile t: K(t+3), V(t+2); with
        # DEFER_PV: V(t+1), K(t+3).
        _issue_kv(k_s.index(0), k_cache, k_tree, start, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
        _issue_kv(k_s.index(1), k_cache, k_tree, start + 1, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
        _issue_kv(v_s.index(0), v_cache, v_tree, start, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
        if DEFER_PV:
            cp.wait_group(2)  # K(s)
        else:
            _issue_kv(v_s.index(1), v_cache, v_tree, start + 1, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
            cp.wait_group(3)  # K(s)
        hopper.fence_async_shared()
        gl.thread_barrier()
        s_tok = hopper.warpgroup_mma(q_s, k_s.index(0).permute((1, 0)), s_zero, use_acc=False, is_async=True)
        s = hopper.warpgroup_mma_wait(0, deps=[s_tok])
        gl.thread_barrier()  # both warpgroups' q.k(s) done: K(s+2) into its slot
        _issue_kv(k_s.index(0), k_cache, k_tree, start + 2, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
        if DEFER_PV:
            acc_tok = hopper.warpgroup_mma_init(acc)
            p = gl.zeros([BM, BN], gl.bfloat16, layout=gl.DotOperandLayout(0, O_LAYOUT, 2))
            for t in range(start, stop):
                slot = (t - start) % 2
                nxt = (t + 1 - start) % 2
                cp.wait_group(2)  # K(t+1); V(t) and K(t+2) may be pending
                hopper.fence_async_shared()
                gl.thread_barrier()
                s_tok = hopper.warpgroup_mma(q_s, k_s.index(nxt).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                p_next, m_i, l_i, grow, alpha = _softmax_tile(s, t, prefix_tiles, plen, N, anc, r, node, live, NW, m_i,
                                                               l_i, qk_scale, BN, S_LAYOUT, O_LAYOUT)  # fmt: skip
                s, acc, p = hopper.warpgroup_mma_wait(0, deps=[s_tok, acc_tok, p])  # q.k(t+1) and P.V(t-1)
                p = p_next
                gl.thread_barrier()  # every warpgroup's P.V(t-1) and q.k(t+1) done: their slots are free
                _issue_kv(v_s.index(nxt), v_cache, v_tree, t + 1, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
                _issue_kv(k_s.index(nxt), k_cache, k_tree, t + 3, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
                if grow:
                    acc = acc * alpha[:, None]
                cp.wait_group(3)  # V(t)
                hopper.fence_async_shared()
                gl.thread_barrier()
                acc_tok = hopper.warpgroup_mma(p, v_s.index(slot), acc, is_async=True)
            acc, p = hopper.warpgroup_mma_wait(0, deps=[acc_tok, p])
        else:
            for t in range(start, stop):
                slot = (t - start) % 2
                nxt = (t + 1 - start) % 2
                # K(t+1) and V(t) resident: the two groups committed after them (K(t+2), V(t+1)) may be pending
                cp.wait_group(2)
                hopper.fence_async_shared()
                gl.thread_barrier()
                s_tok = hopper.warpgroup_mma(q_s, k_s.index(nxt).permute((1, 0)), s_zero, use_acc=False, is_async=True)
                p, m_i, l_i, grow, alpha = _softmax_tile(s, t, prefix_tiles, plen, N, anc, r, node, live, NW, m_i, l_i,
                                                          qk_scale, BN, S_LAYOUT, O_LAYOUT)  # fmt: skip
                if grow:
                    acc = acc * alpha[:, None]
                s = hopper.warpgroup_mma_wait(0, deps=[s_tok])  # the tensor cores ran it during the softmax
                gl.thread_barrier()  # every warpgroup's q.k(t+1) done before its slot is refilled
                _issue_kv(k_s.index(nxt), k_cache, k_tree, t + 3, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
                o_tok = hopper.warpgroup_mma(p, v_s.index(slot), acc, is_async=True)
                acc = hopper.warpgroup_mma_wait(0, deps=[o_tok])
                gl.thread_barrier()
                _issue_kv(v_s.index(slot), v_cache, v_tree, t + 2, stop, prefix_tiles, plen, N, r, T, hkv, HKV, DH, BN, LD)
        cp.wait_group(0)

    part = (split * gl.num_programs(1) + rh).to(gl.int64) * N * G
    rows_o = pid_m * BM + gl.arange(0, BM, layout=gl.SliceLayout(1, O_LAYOUT))
    dd_o = gl.arange(0, DH, layout=gl.SliceLayout(0, O_LAYOUT))
    stored = rows_o < N * G
    gl.store(o_out + (part + rows_o)[:, None] * DH + dd_o[None, :], acc.to(gl.bfloat16), mask=stored[:, None])
    gl.store(m_out + part + rows, m_i * 0.6931471805599453, mask=live)
    gl.store(l_out + part + rows, l_i, mask=live)


def gluon_tree_attention(q, k_cache, v_cache, prefix_lens, k_tree, v_tree, words, splits: int, scale=None, BN=64, defer_pv=False):
    """As the package's `tree_attention` (contiguous cache, bf16, packed ancestor words, explicit splits). ptxas,
    sm_90a, P.V waited at once / deferred (defer_pv): BN 64 255 registers, 200 / 276 bytes of spill stores, 197 KB
    shared; BN 32 235 / 249 registers, no spills, 131 KB."""
    from sglang_dflash.kernels.tree_attention.tree_attention import merge_partials, partials

    R, N, HQ, DH = q.shape
    T, HKV = k_cache.shape[1], k_cache.shape[2]
    BM, WARPS = 128, 8
    blocks = triton.cdiv(N * (HQ // HKV), BM)
    o_part, m, l, used = partials(q, HKV, splits)
    used.fill_(splits)
    _gluon_tree_attention_kernel[(blocks, R * HKV, splits)](
        q.contiguous(), k_cache, v_cache, prefix_lens, k_tree.contiguous(), v_tree.contiguous(), words, o_part, m, l,
        N, triton.cdiv(N, 64), T, (DH**-0.5 if scale is None else scale) * math.log2(math.e),
        HQ=HQ, HKV=HKV, DH=DH, S=splits, BM=BM, BN=BN, WARPS=WARPS, DEFER_PV=defer_pv, num_warps=WARPS,
    )  # fmt: skip
    return merge_partials(o_part, m, l, used, q)
