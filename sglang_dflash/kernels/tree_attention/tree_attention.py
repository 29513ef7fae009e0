"""Triton: attention of N draft-tree tokens over a cached prefix plus the tree (`naive.py`).

FlashAttention-style with the key range split so that one request still fills the GPU: the grid
is (query blocks of BM rows, request x KV head, S key splits), S set by the cache's capacity (so a CUDA graph holds
for any prefix length). A request's keys are its prefix's key tiles, then its tree's; on the device they are cut into
as many splits as their count calls for (`key_splits`: the fewest waves of programs, one an SM, times the key tiles a
program takes), so a cache much longer than the prefix costs about what one of its length does (H200, R = 1 x 64
nodes over 4096 tokens in a cache of 8x: 25.3 us, was 50.2; benchmarks/RESULTS.md), and the tree's keys
need no split of their own (R = 8 x 64 nodes over 4096 tokens 110.6 -> 93.6 us, over 150 20.3 -> 16.2, R = 4 x 64 over
4096 57.2 -> 49.6, but R = 1 over 600 14.4 -> 15.2 with the same splits: about 0.35 us of that is the split search on
the device, the old rule's 0.16, and the rest is not in the key loop; benchmarks/RESULTS.md).
Rows are (node, query head of this KV head's group), so a K/V tile is read once for all G grouped heads.
Each program keeps an online softmax over its keys and writes its output (not normalised), max and sum; tree keys
are masked with the ancestor mask. A key tile costs few instructions beyond its two dots: scores in base 2
(one FMA and one ex2 a score), the mask as a shift of the row's ancestor word (H200, R = 1 x 16 / 64 nodes over 4096
tokens 20.3 / 24.2 -> 18.7 / 22.4 us, R = 8 x 64 133.3 -> 111.7: about 20% fewer instructions a tile;
benchmarks/RESULTS.md), and only in tiles that hold a key some row must not see (the tree's, the prefix's last
partial one), and the accumulator rescaled only when a row's max grows by more than 2^8 (FlashAttention-4's lazy
rescale): a prefix tile's path is about 480 instructions a warp where it was 771 (H200, R = 1 x 64 over 4096 tokens
21.7 -> 20.6 us, R = 8 x 64 94.7 -> 89.7, the A6000's 32 x 32 tiles 2-15% faster; benchmarks/RESULTS.md); no
normalisation: the merge divides once.
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
def _online_update(qv, kt, vt, valid, masked, m_i, l_i, acc, qk_scale, FP32_DOTS: tl.constexpr):
    """One key tile into the online softmax; maxima in base-2 units (scores times qk_scale = scale * log2 e), so that
    each probability is one FMA and one ex2 (`tl.exp` adds a denormal guard of three instructions to each). The
    mask `valid` is applied only where `masked` (a tile with a key some row must not see). The reference max m_i
    moves, and acc and l_i are rescaled, only when some row's max grows past it by more than 8 (probabilities then
    stay below 2^8: FlashAttention-4's lazy rescale); most tiles skip the rescale."""
    if FP32_DOTS:  # three tf32 products: fp32 accuracy (plain tf32 is ~1e-3 off)
        s = tl.dot(qv, tl.trans(kt.to(tl.float32)), input_precision="tf32x3")
    else:
        s = tl.dot(qv, tl.trans(kt))
    if masked:
        s = tl.where(valid, s, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(s, axis=1) * qk_scale)
    if tl.max(tl.where(m_new > m_i, m_new - m_i, 0.0), axis=0) > 8.0:
        alpha = tl.math.exp2(m_i - tl.where(m_new == float("-inf"), 0.0, m_new))
        acc, l_i, m_i = acc * alpha[:, None], l_i * alpha, m_new
    p = tl.math.exp2(s * qk_scale - tl.where(m_i == float("-inf"), 0.0, m_i)[:, None])  # rows with no key yet: 0
    if FP32_DOTS:
        acc = acc + tl.dot(p, vt.to(tl.float32), input_precision="tf32x3")
    else:
        acc = acc + tl.dot(p.to(vt.dtype), vt)
    return m_i, l_i + tl.sum(p, axis=1), acc


@triton.jit
def _tree_attention_kernel(
    q, k_cache, v_cache, slots, prefix_lens, k_tree, v_tree, anc, positions, table, o_out, m_out, l_out, used_out,
    N, NW, T, TILES, SMS, qk_scale, CACHE_ROWS, TABLE_STRIDE,
    HQ: tl.constexpr, HKV: tl.constexpr, DH: tl.constexpr, S: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr,
    FP32_DOTS: tl.constexpr, HAS_SLOTS: tl.constexpr, HAS_TABLE: tl.constexpr, WINDOW: tl.constexpr,
    AUTO_SPLITS: tl.constexpr,
):  # fmt: skip
    """Grid (query blocks, R x HKV, S). A request's keys are its prefix's key tiles, then the tree's; they are cut into
    its first `_used_splits` splits (into used_out [R], for the merge) of whole tiles, so one split may end the
    prefix and take the tree's keys too; a program of a split past them loads and stores nothing."""
    pid_m, rh, split = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = pid_m * BM + tl.arange(0, BM)
    live = rows < N * G
    node, head = rows // G, hkv * G + rows % G
    dd = tl.arange(0, DH)
    # q first: a load that waited for the split count took the latency of the prefix length's load
    qv = tl.load(q + ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :], mask=live[:, None], other=0.0)
    plen = tl.load(prefix_lens + r).to(tl.int32)
    prefix_tiles = tl.cdiv(plen, BN)
    tiles = prefix_tiles + tl.cdiv(N, BN)
    used = _used_splits(tiles, TILES, SMS, S, AUTO_SPLITS)
    tl.store(used_out + r, used, mask=(pid_m == 0) & (hkv == 0) & (split == 0))
    stored = live & (split < used)
    if FP32_DOTS:
        qv = qv.to(tl.float32)
    m_i = tl.full([BM], float("-inf"), tl.float32)
    l_i = tl.zeros([BM], tl.float32)
    acc = tl.zeros([BM, DH], tl.float32)
    row = r
    if HAS_SLOTS:
        row = tl.load(slots + r).to(tl.int64)
        row = tl.where(row < 0, row + CACHE_ROWS, row)  # torch's negative indexing
    chunk = tl.cdiv(tiles, used)
    start, stop = split * chunk, tl.minimum(split * chunk + chunk, tiles)
    if WINDOW > 0:  # a row at position p sees keys > p - WINDOW: skip the prefix tiles no row of this block sees
        qpos = tl.load(positions + r * N + node, mask=live, other=0).to(tl.int32)
        first = tl.min(tl.where(live, qpos, 2147483647), axis=0) - WINDOW + 1
        start = tl.maximum(start, tl.minimum(tl.maximum(first, 0) // BN, prefix_tiles))
    cols = tl.arange(0, BN)
    # One loop over both kinds of key tile (two loops, one per kind, made ptxas serialise the wgmma: C7515): prefix
    # tiles, seen by every row, then the tree's N keys, seen through the ancestor mask.
    for t in range(start, stop):
        tree = t >= prefix_tiles
        n0 = tl.where(tree, t - prefix_tiles, t) * BN
        keys = n0 + cols
        ok = keys < tl.where(tree, N, plen)
        if HAS_TABLE:  # page size 1: token t of this row sits at pool index table[row, t]
            tok = tl.load(table + row * TABLE_STRIDE + keys, mask=ok & (not tree), other=0).to(tl.int64)
        else:
            tok = row * T + keys
        tok = tl.where(tree, r * N + keys, tok)
        kv = (tok[:, None] * HKV + hkv) * DH + dd[None, :]
        kt = tl.load(tl.where(tree, k_tree, k_cache) + kv, mask=ok[:, None], other=0.0)
        vt = tl.load(tl.where(tree, v_tree, v_cache) + kv, mask=ok[:, None], other=0.0)
        # the ancestor bits of this tile's keys: one word per row (BN divides 64), all ones in a prefix tile; a 2-D
        # byte-mask load here made ptxas serialise the wgmma (C7515). Dead rows (>= N * G) are never stored.
        word = tl.load(anc + (r * N + node) * NW + n0 // 64, mask=live & tree, other=-1) >> (n0 % 64)
        seen = ok[None, :] & (((word[:, None] >> cols.to(tl.int64)[None, :]) & 1) != 0)
        if WINDOW > 0:
            seen = seen & ((qpos[:, None] - keys[None, :] < WINDOW) | tree)
        masked = tree | (n0 + BN > plen) | (WINDOW > 0)  # a key some row must not see
        m_i, l_i, acc = _online_update(qv, kt, vt, seen, masked, m_i, l_i, acc, qk_scale, FP32_DOTS)
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
    """NS = S partials (outputs not normalised) [NS, R * HKV, N * G, (DH)] -> out [R, N, HQ, DH] (S1 >= NS a power
    of two), per (BR rows, request x KV head, BD columns), of which request r's are its first used_splits[r]; one of
    them saw the node's own key, so every row has a finite maximum."""
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
    mine = (split < used)[:, None] & have
    ms = tl.where(mine, tl.load(m + part, mask=have, other=float("-inf")), float("-inf"))
    mx = tl.max(ms, axis=0)
    den = tl.sum(_split_weight(ms, mx[None, :]) * tl.where(mine, tl.load(l + part, mask=have, other=0.0), 0.0), axis=0)
    num = tl.zeros([BR, BD], tl.float32)
    for s0 in range(0, used, UNROLL):  # UNROLL independent loads in flight: one latency per UNROLL splits
        for j in tl.static_range(UNROLL):
            p = ((s0 + j) * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows
            ok = live & (s0 + j < used)
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
def key_splits(tiles, groups, sms):
    """How many splits `tiles` key tiles are cut into, for `groups` programs a split (query blocks x requests x KV
    heads) on `sms` SMs, one program an SM: the count z that minimises waves(z) x (2 + ceil(tiles / z)), a program's
    time in key tiles (about 2 tiles' worth fixed: H200, 12 / 2 heads, head dim 256, 2.8 us a tile and about 5 fixed;
    benchmarks/RESULTS.md), taking at each number of waves from 1 to 4 the most splits that many hold,
    with at least 2 tiles a split where there are 2, and of those as few as take as many tiles each; ties to fewer
    waves. Run on the device (a request's key tiles: its prefix's, then its tree's) and on the host
    (`default_splits`: the cache's capacity, for the grid); integer arithmetic and min / max only, which Triton
    compiles: the same code runs on Python ints."""
    most = max(1, (tiles + 1) // 2)
    best, best_z = -1, 1
    for waves in range(1, 5):
        z = min(max(1, waves * sms // groups), most)
        per = (tiles + z - 1) // z
        z = max(1, (tiles + per - 1) // per)  # the fewest splits of that many tiles each (no empty split)
        cost = ((z * groups + sms - 1) // sms) * (2 + per)
        if (best < 0) | (cost < best):
            best, best_z = cost, z
    return best_z


@triton.jit
def _used_splits(tiles, groups, sms, S: tl.constexpr, AUTO: tl.constexpr):
    """The splits a request's `tiles` key tiles are cut into: `key_splits`, at most the grid's S (AUTO), or S."""
    used = S
    if AUTO:
        used = min(key_splits(tiles, groups, sms), S)
    return used


def default_splits(T: int, N: int, groups: int, sms: int, BN: int) -> int:
    """The grid's splits for a cache of capacity T and trees of N nodes (`key_splits` of their BN-key tiles, on the
    host)."""
    return key_splits.fn(triton.cdiv(T, BN) + triton.cdiv(N, BN), groups, sms)


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
    splits: key slices, each request's key tiles (prefix, then tree) cut into all of them. Default: `default_splits`
    in the grid (a launch that depends on T and N alone is CUDA-graph safe), of which each request takes as many as
    `key_splits` gives for its own key tiles, on the device."""
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
        splits = default_splits(T, N, blocks * R * HKV, sms, BN)
    o_part, m, l, used = partials(q, HKV, splits)
    _tree_attention_kernel[(blocks, R * HKV, splits)](
        q.contiguous(), k_cache, v_cache, q if slots is None else slots, prefix_lens,
        k_tree.contiguous(), v_tree.contiguous(), words,
        q if positions is None else positions.contiguous(), q if table is None else table, o_part, m, l, used,
        N, triton.cdiv(N, 64), T, blocks * R * HKV, sms, (DH**-0.5 if scale is None else scale) * math.log2(math.e),
        k_cache.shape[0] if table is None else table.shape[0], 0 if table is None else table.stride(0),
        HQ=HQ, HKV=HKV, DH=DH, S=splits, BM=BM, BN=BN, FP32_DOTS=gpu.INTERPRET or q.dtype == torch.float32,
        HAS_SLOTS=slots is not None, HAS_TABLE=table is not None, WINDOW=window or 0, AUTO_SPLITS=auto,
        num_warps=num_warps or (8 if DH >= 128 else 4), num_stages=num_stages or (2 if big else 1),
    )  # fmt: skip
    return merge_partials(o_part, m, l, used, q)


def partials(q: Tensor, HKV: int, NS: int) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Buffers of NS partial results per query row of q [R, N, HQ, DH] (rows grouped by KV head): outputs
    [NS, R * HKV, N * G, DH], not normalised, in bf16 for bf16 q (half the bytes between the two kernels, and one more
    rounding of the size of the output's own), else fp32 (a sum of up to a split's length of values overflows fp16);
    maxima and sums [NS, R * HKV, N * G] fp32; and int32 [R], the splits each request's keys are cut into (its
    first partials)."""
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
