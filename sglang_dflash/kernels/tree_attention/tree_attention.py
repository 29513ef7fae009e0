"""Triton: attention of N draft-tree tokens over a cached prefix plus the tree (`naive.py`).

FlashAttention-style with the key range split so that one request still fills the GPU: the grid
is (query blocks of BM rows, request x KV head, S prefix splits + 1 tree split), S set by the cache's capacity (so a
CUDA graph holds for any prefix length); each request's prefix is cut, on the device, into as many of them as its own
length calls for (`prefix_splits`), so a cache much longer than the prefix costs about what one of its length does
(H200, R = 1 x 64 nodes over 4096 tokens in a cache of 8x: 25.3 us, was 50.2; benchmarks/RESULTS.md, session 26). Rows are
(node, query head of this KV head's group), so a K/V tile is read once for all G grouped heads.
Each program keeps an online softmax over its keys and writes its output (not normalised), max and sum; the tree
split masks keys with the ancestor mask. A key tile costs few instructions beyond its two dots: scores in base 2
(one FMA and one ex2 a score), the mask as a shift of the row's ancestor word (all ones in prefix splits) (H200,
R = 1 x 16 / 64 nodes over 4096 tokens 20.3 / 24.2 -> 18.7 / 22.4 us, R = 8 x 64 133.3 -> 111.7: the kernel issues
about 20% fewer instructions a tile; benchmarks/RESULTS.md, session 17); no normalisation: the merge divides once.
Dots take bf16/fp16 tiles as they are (fp32 accumulation, probabilities rounded to the input
dtype for the P.V product, as FlashAttention does); fp32 inputs use tf32x3. Under Triton's
interpreter (CPU tests), which cannot run bf16 dots, tiles are converted to float32 first.
A second small kernel merges the partials straight into the [R, N, HQ, Dh] output, in column tiles.
"""

from __future__ import annotations

import math

import torch
import triton
import triton.language as tl
from torch import Tensor

from .. import device as gpu


@triton.jit
def _online_update(qv, kt, vt, valid, m_i, l_i, acc, qk_scale, FP32_DOTS: tl.constexpr):
    """One key tile into the online softmax; maxima in base-2 units (scores times qk_scale = scale * log2 e), so that
    each probability is one FMA and one ex2 (`tl.exp` adds a denormal guard of three instructions to each)."""
    if FP32_DOTS:  # three tf32 products: fp32 accuracy (plain tf32 is ~1e-3 off)
        s = tl.dot(qv, tl.trans(kt.to(tl.float32)), input_precision="tf32x3")
    else:
        s = tl.dot(qv, tl.trans(kt))
    s = tl.where(valid, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # rows with no key yet
    p = tl.math.exp2(s * qk_scale - m_safe[:, None])
    alpha = tl.math.exp2(m_i - m_safe)
    if FP32_DOTS:
        acc = acc * alpha[:, None] + tl.dot(p, vt.to(tl.float32), input_precision="tf32x3")
    else:
        acc = acc * alpha[:, None] + tl.dot(p.to(vt.dtype), vt)
    return m_new, l_i * alpha + tl.sum(p, axis=1), acc


@triton.jit
def _tree_attention_kernel(
    q, k_cache, v_cache, slots, prefix_lens, k_tree, v_tree, anc, positions, table, o_out, m_out, l_out, used_out,
    N, NW, T, TILES, SMS, qk_scale, CACHE_ROWS, TABLE_STRIDE,
    HQ: tl.constexpr, HKV: tl.constexpr, DH: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    FP32_DOTS: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_TABLE: tl.constexpr, WINDOW: tl.constexpr,
    AUTO_SPLITS: tl.constexpr, TREE_FIRST: tl.constexpr,
):  # fmt: skip
    """Grid (query blocks, R x HKV, S + 1). Each request's prefix is cut into its first `_used_splits` prefix splits
    (into used_out [R], for the merge); a program of a prefix split past them loads and stores nothing. TREE_FIRST:
    the tree split's programs are the grid's first (z = 0), not its last."""
    pid_m, rh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    if TREE_FIRST:
        split = tl.where(split == 0, S, split - 1)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = pid_m * BM + tl.arange(0, BM)
    live = rows < N * G
    node, head = rows // G, hkv * G + rows % G
    dd = tl.arange(0, DH)
    # q first: a load that waited for the split count took the latency of the prefix length's load
    qv = tl.load(q + ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :], mask=live[:, None], other=0.0)
    tree = split == S
    plen = tl.load(prefix_lens + r).to(tl.int32)
    used = _used_splits(plen, TILES, SMS, S, BN, AUTO_SPLITS)
    tl.store(used_out + r, used, mask=(pid_m == 0) & (hkv == 0) & (split == 0))
    stored = live & (tree | (split < used))
    if FP32_DOTS:
        qv = qv.to(tl.float32)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DH], tl.float32)
    # One loop for both kinds of split (two loops, one per branch, made ptxas serialise the wgmma: C7515).
    # Prefix splits: keys [split * chunk, ...) of the cache, seen by every row, in whole key tiles. The tree split
    # (split == S): the N tree keys, seen through the ancestor mask.
    row = r
    if HAS_SLOTS:
        row = tl.load(slots + r).to(tl.int64)
        row = tl.where(row < 0, row + CACHE_ROWS, row)  # torch's negative indexing
    chunk = tl.cdiv(tl.cdiv(plen, used), BN) * BN
    start = tl.where(tree, 0, split * chunk)
    stop = tl.where(tree, N, tl.minimum(split * chunk + chunk, plen))
    if WINDOW > 0:  # a row at position p sees keys > p - WINDOW: skip what no row of this block sees
        qpos = tl.load(positions + r * N + node, mask=live, other=0).to(tl.int32)
        first = tl.min(tl.where(live, qpos, 2147483647), axis=0) - WINDOW + 1
        start = tl.where(tree, start, tl.maximum(start, first))
    k_src, v_src = tl.where(tree, k_tree, k_cache), tl.where(tree, v_tree, v_cache)
    first_tok = tl.where(tree, r * N, row * T)
    cols = tl.arange(0, BN)
    for n0 in range(start, stop, BN):
        keys = n0 + cols
        ok = keys < stop
        if HAS_TABLE:  # page size 1: token t of this row sits at pool index table[row, t]
            tok = tl.load(table + row * TABLE_STRIDE + keys, mask=ok & (not tree), other=0).to(tl.int64)
            tok = tl.where(tree, r * N + keys, tok)
        else:
            tok = first_tok + keys
        kv = (tok[:, None] * HKV + hkv) * DH + dd[None, :]
        kt = tl.load(k_src + kv, mask=ok[:, None], other=0.0)
        vt = tl.load(v_src + kv, mask=ok[:, None], other=0.0)
        # the ancestor bits of this tile's keys: one word per row (BN divides 64), all ones in a prefix split; a 2-D
        # byte-mask load here made ptxas serialise the wgmma (C7515). Dead rows (>= N * G) are never stored.
        word = tl.load(anc + (r * N + node) * NW + n0 // 64, mask=live & tree, other=-1) >> (n0 % 64)
        seen = ok[None, :] & (((word[:, None] >> cols.to(tl.int64)[None, :]) & 1) != 0)
        if WINDOW > 0:
            seen = seen & ((qpos[:, None] - keys[None, :] < WINDOW) | tree)
        m_i, l_i, acc = _online_update(qv, kt, vt, seen, m_i, l_i, acc, qk_scale, FP32_DOTS)
    part = (split * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows
    # not normalised: the merge divides once by the weighted sum of the l's (bf16 or fp32, `partials`: magnitudes
    # up to l times those of v)
    tl.store(o_out + part[:, None] * DH + dd[None, :], acc.to(o_out.dtype.element_ty), mask=stored[:, None])
    # maxima back in natural-log units for the merge: its exponentials in base 2 made it slower on an H200 (R = 1 x 16
    # nodes over 4096 keys, the whole attention 21.4 against 18.7 us), though it has fewer instructions
    tl.store(m_out + part, m_i * 0.6931471805599453, mask=stored)
    tl.store(l_out + part, l_i, mask=stored)


@triton.jit
def _split_weight(m, mx):
    """A partial's weight in the merge: e^(m - mx), its max m against the row's max mx; 0 for a split that saw no key
    (m = -inf)."""
    return tl.where(m == float("-inf"), 0.0, tl.exp(m - mx))


@triton.jit
def _merge_kernel(
    o_part, m, l, used_splits, out, N, NS, S1: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr, DH: tl.constexpr,
    BR: tl.constexpr, BD: tl.constexpr, UNROLL: tl.constexpr,
):  # fmt: skip
    """NS = S + 1 partials (outputs not normalised) [NS, R * HKV, N * G, (DH)] -> out [R, N, HQ, DH] (S1 >= NS a
    power of two), per (BR rows, request x KV head, BD columns), of which request r's are its first used_splits[r]
    and the last (the tree split); the tree split always has a key (the node), so every row has a finite maximum."""
    blk, rh, dblk = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = blk * BR + tl.arange(0, BR)
    live = rows < N * G
    dd = dblk * BD + tl.arange(0, BD)
    used = tl.load(used_splits + r)
    split = tl.arange(0, S1)
    part = (split[:, None] * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows[None, :]  # [S1, BR]
    # loaded alongside `used`, then masked by it (a mask on the loads would wait for it): unused splits hold garbage
    have = (split[:, None] < NS) & live[None, :]
    mine = ((split < used) | (split == NS - 1))[:, None] & have
    ms = tl.where(mine, tl.load(m + part, mask=have, other=float("-inf")), float("-inf"))
    mx = tl.max(ms, axis=0)
    den = tl.sum(_split_weight(ms, mx[None, :]) * tl.where(mine, tl.load(l + part, mask=have, other=0.0), 0.0), axis=0)
    num = tl.zeros([BR, BD], tl.float32)
    for s0 in range(0, used + 1, UNROLL):  # UNROLL independent loads in flight: one latency per UNROLL splits
        for j in tl.static_range(UNROLL):
            sp = tl.where(s0 + j == used, NS - 1, s0 + j)  # the used prefix splits, then the tree split
            p = (sp * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows
            ok = live & (s0 + j <= used)
            # the split's weight from its own max and sum, as in den (a masked sum over the splits per split
            # instead took 2 us more of the whole attention on an H200: R = 1 x 16 / 64 nodes over 4096 keys
            # 22.3 / 25.6 against 20.2 / 23.8 us, same outputs)
            ws = _split_weight(tl.load(m + p, mask=ok, other=float("-inf")), mx)
            tile = tl.load(o_part + p[:, None] * DH + dd[None, :], mask=ok[:, None], other=0.0)
            num += ws[:, None] * tile.to(tl.float32)
    node, head = rows // G, hkv * G + rows % G
    dst = ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :]
    den = tl.where(live, den, 1.0)  # dead rows: nothing stored
    tl.store(out + dst, (num / den[:, None]).to(out.dtype.element_ty), mask=live[:, None])


@triton.jit
def prefix_splits(T, tiles, sms, BN):
    """Prefix splits for `tiles` (query blocks x requests x KV heads) over T keys (BN-key tiles) on `sms` SMs, on the
    device (T a request's prefix length) or the host (`default_splits`: T the cache's capacity, the grid). About two
    waves of programs, slices of at least 256 keys; where that leaves less than one wave (short prefixes, few tiles),
    slices of at least two key tiles, about one wave. H200, 12 / 2 heads, head dim 256 (benchmarks/RESULTS.md,
    session 12), R = 1 over 4096 tokens with 16 / 33 / 64 nodes: 25.8 / 26.7 / 28.3 us at the two-wave rule's 16
    splits, 22.3 / 22.8 / 25.6 at 32 / 32 / 22; one wave also where the two-wave rule fills the GPU lost (R = 4 x 64
    nodes 71.4 against 68.6 us, the drafter's 16 / 4 heads at R = 8 65.7 against 56.6). Integer arithmetic only, and
    min / max, which Triton compiles: the same code runs on Python ints."""
    splits = max(1, min((T + 255) // 256, (2 * sms + tiles - 1) // tiles))
    if (splits + 1) * tiles < sms:
        keys = (T + BN - 1) // BN
        per = max(2, (keys * tiles + sms - 1) // sms)
        splits = max(1, (keys + per - 1) // per)  # an empty prefix (T = 0) too: the kernel divides by it
    return splits


@triton.jit
def _used_splits(plen, tiles, sms, S: tl.constexpr, BN: tl.constexpr, AUTO: tl.constexpr):
    """The prefix splits a prefix of plen keys is cut into: `prefix_splits`(plen), at most the grid's S (AUTO), or S."""
    used = S
    if AUTO:
        used = min(prefix_splits(plen, tiles, sms, BN), S)
    return used


def default_splits(T: int, tiles: int, sms: int, BN: int) -> int:
    """The grid's prefix splits for a cache of capacity T: `prefix_splits` on the host."""
    return prefix_splits.fn(T, tiles, sms, BN)


def ancestor_bits(mask: Tensor) -> Tensor:
    """bool [R, N, N] -> int64 [R, N, ceil(N / 64)]: bit j of word w of row i is mask[:, i, 64 w + j]."""
    R, N, _ = mask.shape
    NW = triton.cdiv(N, 64)
    padded = torch.nn.functional.pad(mask, (0, NW * 64 - N)).view(R, N, NW, 64).to(torch.int64)
    return (padded << torch.arange(64, device=mask.device)).sum(-1)  # distinct bits: the sum is their OR


def tree_attention(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    prefix_lens: Tensor,
    k_tree: Tensor,
    v_tree: Tensor,
    ancestor_mask: Tensor,
    scale: float | None = None,
    slots: Tensor | None = None,
    window: int | None = None,
    positions: Tensor | None = None,
    splits: int | None = None,
    BM: int | None = None,
    BN: int | None = None,
    num_warps: int | None = None,
    num_stages: int | None = None,
    table: Tensor | None = None,
) -> Tensor:
    """As `naive.tree_attention_ref`: q [R, N, HQ, Dh]; k_cache, v_cache [R, T, HKV, Dh] (the first
    prefix_lens[r] valid), or [rows, T, HKV, Dh] read at rows `slots` [R] (negative: from the end,
    as torch indexes), without gathering them; k_tree, v_tree [R, N, HKV, Dh]; ancestor_mask bool [R, N, N], or
    `ancestor_bits` of it (int64 [R, N, ceil(N / 64)]: made once, it serves every layer of a step).
    table int [rows, T] (rows may be strided, columns contiguous: e.g. a column slice of SGLang's
    req_to_token): k_cache, v_cache are token pools [P, HKV, Dh] and prefix token t of row slots[r] (or r) is
    at pool index table[row, t]; T, the table's width, bounds the prefix lengths.
    window (with positions long [R, N], the queries' positions): a prefix key at position t is seen
    only from positions p with p - t < window (sliding-window layers).
    splits: prefix slices, each request's prefix cut into all of them. Default: `default_splits`(T) in the grid (a
    launch that depends on T alone is CUDA-graph safe), of which each request's prefix takes `prefix_splits` of its
    own length, on the device."""
    R, N, HQ, DH = q.shape
    words = ancestor_bits(ancestor_mask) if ancestor_mask.dtype == torch.bool else ancestor_mask.contiguous()
    if words.shape != (R, N, triton.cdiv(N, 64)) or words.dtype != torch.int64:
        raise ValueError(f"ancestor_mask: bool [R, N, N] or int64 words [R, N, ceil(N / 64)], got {tuple(ancestor_mask.shape)}")
    if table is not None and table.stride(1) != 1:
        raise ValueError("the table's columns must be contiguous")
    T, HKV = (table.shape[1], k_cache.shape[1]) if table is not None else (k_cache.shape[1], k_cache.shape[2])
    G = HQ // HKV
    if window is not None and positions is None:
        raise ValueError("a window needs the queries' positions")
    # Hopper: 128-row x 64-key tiles, 2 stages (31 us at N = 64 over 4096 keys on an H200; 64 x 32 with
    # 3 stages took 49, 64 x 64 with 3 stages needs 232 KB). SM86 (99 KB): 32 x 32, no pipelining.
    big = gpu.shared_memory_per_block(q.device) >= gpu.HOPPER_SHARED
    BM, BN = BM or (128 if big else 32), BN or (64 if big else 32)
    if 64 % BN:
        raise ValueError(f"BN={BN} must divide 64 (a tile's ancestor bits are one word)")
    blocks = triton.cdiv(N * G, BM)
    sms, auto = gpu.multiprocessor_count(q.device), splits is None
    if auto:
        splits = default_splits(T, blocks * R * HKV, sms, BN)
    o_part, m, l, used = partials(q, HKV, splits + 1)
    _tree_attention_kernel[(blocks, R * HKV, splits + 1)](
        q.contiguous(), k_cache, v_cache, q if slots is None else slots, prefix_lens,
        k_tree.contiguous(), v_tree.contiguous(), words,
        q if positions is None else positions.contiguous(), q if table is None else table, o_part, m, l, used,
        N, triton.cdiv(N, 64), T, blocks * R * HKV, sms, (DH**-0.5 if scale is None else scale) * math.log2(math.e),
        k_cache.shape[0] if table is None else table.shape[0], 0 if table is None else table.stride(0),
        HQ=HQ, HKV=HKV, DH=DH, S=splits, BM=BM, BN=BN, FP32_DOTS=gpu.INTERPRET or q.dtype == torch.float32,
        HAS_SLOTS=slots is not None, HAS_TABLE=table is not None, WINDOW=window or 0, AUTO_SPLITS=auto,
        # the tree's few programs first: behind a grid's unused prefix splits they started late (H200, R = 1 x 64 over
        # 4096 tokens in a cache of 8x: 28.6 -> 25.3 us); last where they are many (R = 8: 110.3 against 113.3)
        TREE_FIRST=4 * blocks * R * HKV <= sms,
        num_warps=num_warps or (8 if DH >= 128 else 4), num_stages=num_stages or (2 if big else 1),
    )  # fmt: skip
    return merge_partials(o_part, m, l, used, q)


def partials(q: Tensor, HKV: int, NS: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Buffers of NS partial results per query row of q [R, N, HQ, DH] (rows grouped by KV head): outputs
    [NS, R * HKV, N * G, DH], not normalised, in bf16 for bf16 q (half the bytes between the two kernels, and one more
    rounding of the size of the output's own), else fp32 (a sum of up to a split's length of values overflows fp16);
    maxima and sums [NS, R * HKV, N * G] fp32; and int32 [R], the prefix splits each request's prefix is cut into
    (the first of the NS - 1; the last partial is the tree's)."""
    R, N, HQ, DH = q.shape
    parts = (NS, R * HKV, N * (HQ // HKV))
    o_part = torch.empty(*parts, DH, device=q.device, dtype=q.dtype if q.dtype == torch.bfloat16 else torch.float32)
    return (
        o_part,
        torch.empty(parts, device=q.device, dtype=torch.float32),
        torch.empty(parts, device=q.device, dtype=torch.float32),
        torch.empty(R, device=q.device, dtype=torch.int32),
    )


def merge_partials(o_part: Tensor, m: Tensor, l: Tensor, used: Tensor, q: Tensor) -> Tensor:
    """The attention output [R, N, HQ, DH] (q's shape and dtype) from `partials`' buffers, filled (`_merge_kernel`)."""
    R, N, HQ, DH = q.shape
    NS, RHKV = m.shape[:2]
    out = torch.empty_like(q)
    BR, BD = 16, min(64, DH)
    grid = (triton.cdiv(m.shape[2], BR), RHKV, DH // BD)
    # A small merge grid waits on its loads: 8 partials in flight per program (H200, N = 64 over 4096 keys: R = 1
    # 30.1 -> 28.2 us in all); a large one hides the latency by itself and keeps its registers (R = 8: 132.0 / 134.6).
    unroll = min(8, NS) if grid[0] * grid[1] * grid[2] <= 2 * gpu.multiprocessor_count(q.device) else 1
    _merge_kernel[grid](
        o_part, m, l, used, out, N, NS, S1=triton.next_power_of_2(NS), HQ=HQ, HKV=RHKV // R, DH=DH, BR=BR, BD=BD,
        UNROLL=unroll, num_warps=4,
    )  # fmt: skip
    return out
