"""Triton: attention of N draft-tree tokens over a cached prefix plus the tree (`naive.py`).

FlashAttention-style with the key range split so that one request still fills the GPU: the grid
is (query blocks of BM rows, request x KV head, S prefix splits + 1 tree split). Rows are
(node, query head of this KV head's group), so a K/V tile is read once for all G grouped heads.
Each program keeps an online softmax over its keys and writes (acc, max, sum); the tree split
masks keys with the ancestor mask. The partials are merged in torch (a few small kernels).
Tiles are converted to float32 before the dots (tf32 on the GPU): Triton's interpreter cannot
check bf16 dots, so bf16 tensor-core dots wait for a GPU run that validates them.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _online_update(qv, kt, vt, valid, m_i, l_i, acc, scale):
    s = tl.where(valid, tl.dot(qv, tl.trans(kt.to(qv.dtype))) * scale, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1))
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet
    p = tl.exp(s - m_safe[:, None])
    alpha = tl.exp(m_i - m_safe)
    acc = acc * alpha[:, None] + tl.dot(p, vt.to(tl.float32))
    return m_new, l_i * alpha + tl.sum(p, axis=1), acc


@triton.jit
def _tree_attention_kernel(
    q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc, acc_out, m_out, l_out,
    N, T, CHUNK, scale,
    HQ: tl.constexpr, HKV: tl.constexpr, DH: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
):  # fmt: skip
    pid_m, rh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = pid_m * BM + tl.arange(0, BM)
    live = rows < N * G
    node, head = rows // G, hkv * G + rows % G
    dd = tl.arange(0, DH)
    qv = tl.load(q + ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :], mask=live[:, None], other=0.0)
    qv = qv.to(tl.float32)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DH], tl.float32)
    if split < S:  # a slice of the prefix: every row sees all of it
        stop = tl.minimum(split * CHUNK + CHUNK, tl.load(prefix_lens + r).to(tl.int32))  # int32 like the tree branch
        for n0 in range(split * CHUNK, stop, BN):
            keys = n0 + tl.arange(0, BN)
            ok = keys < stop
            kv = ((r * T + keys[:, None]) * HKV + hkv) * DH + dd[None, :]
            kt = tl.load(k_cache + kv, mask=ok[:, None], other=0.0)
            vt = tl.load(v_cache + kv, mask=ok[:, None], other=0.0)
            m_i, l_i, acc = _online_update(qv, kt, vt, live[:, None] & ok[None, :], m_i, l_i, acc, scale)
    else:  # the tree block: ancestors and itself
        for n0 in range(0, N, BN):
            keys = n0 + tl.arange(0, BN)
            ok = keys < N
            kv = ((r * N + keys[:, None]) * HKV + hkv) * DH + dd[None, :]
            kt = tl.load(k_tree + kv, mask=ok[:, None], other=0.0)
            vt = tl.load(v_tree + kv, mask=ok[:, None], other=0.0)
            seen = tl.load(anc + (r * N + node[:, None]) * N + keys[None, :], mask=live[:, None] & ok[None, :], other=0) != 0
            m_i, l_i, acc = _online_update(qv, kt, vt, seen, m_i, l_i, acc, scale)
    part = (split * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows
    tl.store(acc_out + part[:, None] * DH + dd[None, :], acc, mask=live[:, None])
    tl.store(m_out + part, m_i, mask=live)
    tl.store(l_out + part, l_i, mask=live)


def tree_attention(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    prefix_lens: Tensor,
    k_tree: Tensor,
    v_tree: Tensor,
    ancestor_mask: Tensor,
    scale: float | None = None,
    splits: int | None = None,
    BM: int = 64,
    BN: int = 32,
) -> Tensor:
    """As `naive.tree_attention_ref`: q [R, N, HQ, Dh]; k_cache, v_cache [R, T, HKV, Dh] (the first
    prefix_lens[r] valid); k_tree, v_tree [R, N, HKV, Dh]; ancestor_mask bool [R, N, N].
    splits: prefix slices (default: enough programs for ~2 waves on 132 SMs; fixed by T, not by
    the prefix lengths, so the launch is CUDA-graph safe)."""
    R, N, HQ, DH = q.shape
    T, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    blocks = triton.cdiv(N * G, BM)
    if splits is None:
        splits = max(1, min(triton.cdiv(T, 256), triton.cdiv(264, blocks * R * HKV)))
    chunk = triton.cdiv(triton.cdiv(T, splits), BN) * BN
    parts = (splits + 1, R * HKV, N * G)
    acc = torch.empty(*parts, DH, device=q.device, dtype=torch.float32)
    m = torch.empty(parts, device=q.device, dtype=torch.float32)
    l = torch.empty(parts, device=q.device, dtype=torch.float32)
    _tree_attention_kernel[(blocks, R * HKV, splits + 1)](
        q.contiguous(), k_cache, v_cache, prefix_lens, k_tree.contiguous(), v_tree.contiguous(),
        ancestor_mask.contiguous().view(torch.int8), acc, m, l,
        N, T, chunk, DH**-0.5 if scale is None else scale,
        HQ=HQ, HKV=HKV, DH=DH, S=splits, BM=BM, BN=BN, num_warps=8 if DH >= 128 else 4,
    )  # fmt: skip
    # Merge the splits: weights exp(m_s - max_s m); the tree split always has a key (the node).
    weight = torch.exp(m - m.amax(0))
    out = (acc * weight[..., None]).sum(0) / (l * weight).sum(0)[..., None]  # [R * HKV, N * G, DH]
    return out.view(R, HKV, N, G, DH).permute(0, 2, 1, 3, 4).reshape(R, N, HQ, DH).to(q.dtype)
