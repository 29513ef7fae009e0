"""Prototype for a GPU session (written in session 15, checked on the CPU only): the tree attention with TMA loads.

The package's `kernels/tree_attention/tree_attention.py` loads K/V tiles by pointers (cp.async with 2 stages), at
128 x 64 tiles and 8 warps, which Triton 3.6 never warp-specialises on Hopper (its pass wants 4 warps and no
else branches; RESULTS, session 15). Here, for the engine's contiguous per-request cache only (no slots, table or
window):
- the prefix splits read K/V through device-side tensor descriptors (`tl.make_tensor_descriptor`) made per program
  over this request's rows up to the split's end, so rows past it come back as zeros, as the masked loads' did; and
  Q through one over a copy with each (request, KV head)'s rows packed ([R, HKV, N * G, DH], made per call), since
  Triton's Hopper warp specialisation takes only TMA loads into the loop's dots;
- the tree split is a second launch of the same kernel (TREE), so no program branches between the two kinds;
- the loop may ask for warp specialisation (WS: `tl.range(..., warp_specialize=True)`);
- the partials are the package's (`partials`), merged by its merge kernel (`merge_partials`).
Three launches (four with the Q copy) where the package's takes two. `tree_attention_tma` has the package's
signature for this case.

    TRITON_INTERPRET=1 python3 benchmarks/results/2026-12-01_s15_ab_scripts/tree_attention_tma.py   # CPU check
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_attention.tree_attention import (
    _INTERPRET,
    _online_update,
    ancestor_bits,
    default_splits,
    merge_partials,
    partials,
)


@triton.jit
def _attention_kernel(
    q, k_src, v_src, prefix_lens, anc, o_out, m_out, l_out, N, NW, T, CHUNK, scale, PART0,
    HQ: tl.constexpr, HKV: tl.constexpr, DH: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    FP32_DOTS: tl.constexpr, TREE: tl.constexpr, TMA: tl.constexpr, WS: tl.constexpr,
):  # fmt: skip
    """Prefix split `split` (keys [split * CHUNK, ...) of k_src [R, T, HKV, DH]) or, with TREE, the tree's N keys
    (k_src [R, N, HKV, DH], through the ancestor bits) of query rows pid_m * BM ... of (request, KV head) rh: normalised
    partial output, max and sum at partial index PART0 + split."""
    pid_m, rh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = pid_m * BM + tl.arange(0, BM)
    live = rows < N * G
    node, head = rows // G, hkv * G + rows % G
    dd = tl.arange(0, DH)
    if TMA:  # q packed by the wrapper as [R, HKV, N * G, DH]: this program's rows are one box
        qd = tl.make_tensor_descriptor(q + rh.to(tl.int64) * N * G * DH, shape=[N * G, DH], strides=[DH, 1],
                                       block_shape=[BM, DH])  # fmt: skip
        qv = qd.load([pid_m * BM, 0])
    else:
        qv = tl.load(q + ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :], mask=live[:, None], other=0.0)
    if FP32_DOTS:
        qv = qv.to(tl.float32)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DH], tl.float32)
    if TREE:
        rows_per_request, start, stop = N, 0, N
    else:
        rows_per_request, start = T, split * CHUNK
        stop = tl.minimum(start + CHUNK, tl.load(prefix_lens + r).to(tl.int32))
    src = r * rows_per_request * HKV * DH
    if TMA:  # this request's rows below `stop`: the rest reads as zeros (at least one row: an empty split's is unused)
        rows_seen = tl.maximum(stop, 1)
        kd = tl.make_tensor_descriptor(k_src + src, shape=[rows_seen, HKV * DH], strides=[HKV * DH, 1], block_shape=[BN, DH])
        vd = tl.make_tensor_descriptor(v_src + src, shape=[rows_seen, HKV * DH], strides=[HKV * DH, 1], block_shape=[BN, DH])
    for n0 in tl.range(start, stop, BN, warp_specialize=WS):
        keys = n0 + tl.arange(0, BN)
        ok = keys < stop
        if TMA:
            kt = kd.load([n0, hkv * DH])
            vt = vd.load([n0, hkv * DH])
        else:
            kv = src + (keys[:, None] * HKV + hkv) * DH + dd[None, :]
            kt = tl.load(k_src + kv, mask=ok[:, None], other=0.0)
            vt = tl.load(v_src + kv, mask=ok[:, None], other=0.0)
        seen = live[:, None] & ok[None, :]
        if TREE:
            word = tl.load(anc + (r * N + node) * NW + n0 // 64, mask=live, other=0)
            seen = seen & (((word[:, None] >> (keys % 64).to(tl.int64)[None, :]) & 1) != 0)
        m_i, l_i, acc = _online_update(qv, kt, vt, seen, m_i, l_i, acc, scale, FP32_DOTS)
    part = ((PART0 + split) * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows
    o_part = acc / tl.where(l_i > 0, l_i, 1.0)[:, None]
    tl.store(o_out + part[:, None] * DH + dd[None, :], o_part.to(o_out.dtype.element_ty), mask=live[:, None])
    tl.store(m_out + part, m_i, mask=live)
    tl.store(l_out + part, l_i, mask=live)


def _scratch(size: int, alignment: int, stream):
    return torch.empty(size, dtype=torch.int8, device="cpu" if _INTERPRET else "cuda")


def tree_attention_tma(q, k_cache, v_cache, prefix_lens, k_tree, v_tree, ancestor_mask, scale=None, splits=None,
                       BM=64, BN=64, num_warps=4, num_stages=2, tma=True, ws=False, tree_BM=None, tree_warps=None):  # fmt: skip
    """As the package's `tree_attention` for a contiguous cache k_cache, v_cache [R, T, HKV, DH] (no slots, table or
    window). tma: K/V through tensor descriptors; ws: the key loop warp-specialised (Hopper wants 4 warps)."""
    R, N, HQ, DH = q.shape
    T, HKV = k_cache.shape[1], k_cache.shape[2]
    G = HQ // HKV
    words = ancestor_bits(ancestor_mask) if ancestor_mask.dtype == torch.bool else ancestor_mask.contiguous()
    triton.set_allocator(_scratch)  # device-side descriptors live in global scratch
    blocks = triton.cdiv(N * G, BM)
    if splits is None:
        splits = default_splits(T, blocks * R * HKV, gpu.multiprocessor_count(q.device), BN)
    chunk = triton.cdiv(triton.cdiv(T, splits), BN) * BN
    o_part, m, l = partials(q, HKV, splits + 1)
    q = q.contiguous()
    q_rows = q.view(R, N, HKV, G, DH).transpose(1, 2).contiguous() if tma else q  # each (request, KV head)'s rows packed
    common = dict(HQ=HQ, HKV=HKV, DH=DH, BN=BN, FP32_DOTS=_INTERPRET or q.dtype == torch.float32)
    scale = DH**-0.5 if scale is None else scale
    _attention_kernel[(blocks, R * HKV, splits)](
        q_rows, k_cache.contiguous(), v_cache.contiguous(), prefix_lens, words, o_part, m, l, N, triton.cdiv(N, 64), T, chunk,
        scale, 0, BM=BM, TREE=False, TMA=tma, WS=ws, num_warps=num_warps, num_stages=num_stages, **common,
    )  # fmt: skip
    tree_BM = tree_BM or BM
    _attention_kernel[(triton.cdiv(N * G, tree_BM), R * HKV, 1)](
        q, k_tree.contiguous(), v_tree.contiguous(), prefix_lens, words, o_part, m, l, N, triton.cdiv(N, 64), T, N,
        scale, splits, BM=tree_BM, TREE=True, TMA=False, WS=False, num_warps=tree_warps or num_warps, num_stages=1,
        **common,
    )  # fmt: skip
    return merge_partials(o_part, m, l, q)

if __name__ == "__main__":  # CPU check against the float64 reference (TRITON_INTERPRET=1)
    from sglang_dflash.ddtree import build_ddtree
    from sglang_dflash.kernels.tree_attention import tree_attention_ref

    gen = torch.Generator().manual_seed(0)
    for R, N, HQ, HKV, DH, T, lens, splits, BM, BN in [
        (2, 9, 4, 2, 32, 100, (100, 37), 3, 16, 16),
        (1, 17, 6, 2, 64, 70, (64,), 2, 32, 32),
        (3, 5, 2, 1, 16, 33, (1, 33, 20), 4, 16, 16),
    ]:  # fmt: skip
        rnd = lambda *s: torch.randn(*s, generator=gen)  # noqa: E731
        q, k_tree, v_tree = rnd(R, N, HQ, DH), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH)
        k_cache, v_cache = rnd(R, T, HKV, DH), rnd(R, T, HKV, DH)
        prefix_lens = torch.tensor(lens)
        poisoned = v_cache.clone()  # rows past each prefix: never to reach o
        for r, n in enumerate(lens):
            poisoned[r, n:] = float("nan")
        anc = build_ddtree(rnd(R, 4, 5), torch.zeros(R, dtype=torch.long), N - 1).ancestor_mask
        ref = tree_attention_ref(*(t.double() for t in (q, k_cache, v_cache)), prefix_lens, k_tree.double(),
                                 v_tree.double(), anc)  # fmt: skip
        for tma in (False, True):
            out = tree_attention_tma(q, k_cache, poisoned, prefix_lens, k_tree, v_tree, anc, splits=splits, BM=BM, BN=BN,
                                     tma=tma)  # fmt: skip
            err = ((out.double() - ref).norm() / ref.norm()).item()
            print(f"R={R} N={N} T={T} lens={lens} tma={tma}: rel err {err:.1e}")
            assert err < 1e-5, err
