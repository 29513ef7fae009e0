"""Tree attention reference and the SGLang mask format."""

import importlib

import pytest
import torch
from tree_helpers import DEVICE, poisoned_outputs, random_parents, root_path, sglang_triton_verify

from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_attention import (
    ancestor_bits,
    sglang_custom_mask_kernel,
    sglang_custom_mask_ref,
    tree_attention,
    tree_attention_ref,
)
from sglang_dflash.kernels.tree_attention.tree_attention import default_splits
from sglang_dflash.kernels.tree_build import ancestors


def test_tree_attention_equals_causal_attention_along_each_root_path():
    gen = torch.Generator().manual_seed(0)
    R, N, HQ, HKV, Dh, T = 2, 9, 6, 2, 16, 12
    q = torch.randn(R, N, HQ, Dh, generator=gen, dtype=torch.float64)
    k_cache, v_cache = (torch.randn(R, T, HKV, Dh, generator=gen, dtype=torch.float64) for _ in range(2))
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen, dtype=torch.float64) for _ in range(2))
    prefix_lens = torch.tensor([7, 12])
    parents = random_parents(R, N, gen)
    out = tree_attention_ref(q, k_cache, v_cache, prefix_lens, k_tree, v_tree, ancestors(parents, N - 1))
    for r in range(R):
        for i in range(N):
            path = root_path(parents, r, i)
            keys = torch.cat([k_cache[r, : prefix_lens[r]], k_tree[r, path]]).repeat_interleave(3, dim=1)
            values = torch.cat([v_cache[r, : prefix_lens[r]], v_tree[r, path]]).repeat_interleave(3, dim=1)
            probs = torch.softmax((q[r, i] * keys).sum(-1) / Dh**0.5, dim=0)  # [path tokens, HQ]
            torch.testing.assert_close(out[r, i], (probs[:, :, None] * values).sum(0))


@pytest.mark.parametrize("impl", ["kernel", "reference"])
def test_sglang_custom_mask_layout(impl):
    """Random trees, odd node counts, prefixes of 0 to past the kernel's block of 1024, more requests than its block of
    128 earlier lengths: the mask by hand, request by request and row by row (the prefix's Trues, then the row's
    ancestors)."""
    make, device = (sglang_custom_mask_kernel, DEVICE) if impl == "kernel" else (sglang_custom_mask_ref, "cpu")
    gen = torch.Generator().manual_seed(1)
    for R, N, top in [(3, 5, 10), (1, 1, 3), (4, 7, 1100), (2, 13, 40), (131, 2, 6)]:
        parents = random_parents(R, N, gen)
        anc = ancestors(parents, N - 1)
        seq_lens = torch.randint(0, top, (R,), generator=gen)
        seq_lens[0] = 0
        with poisoned_outputs():
            mask, indptr = make(anc.to(device), seq_lens.to(device), int(seq_lens.sum()))
        expected, sizes = [], [0]
        for r in range(R):
            s = int(seq_lens[r])
            for i in range(N):
                expected += [True] * s + anc[r, i].tolist()
            sizes.append(sizes[-1] + N * (s + N))
        assert mask.tolist() == expected
        assert indptr.tolist() == sizes and indptr.dtype == torch.int32


def test_sglang_custom_mask_drives_sglangs_triton_verify_attention():
    """Our custom_mask / mask_indptr in the installed SGLang's own triton-backend verify attention (`extend_attention_fwd`,
    as its triton backend calls it in target-verify mode: the prefix read from the KV pool through kv_indices, the
    tree's K/V as the extend part), on the tests' device (Triton's interpreter on the CPU): it computes the
    reference's tree attention."""
    pytest.importorskip("sglang")
    try:  # 0.5.23 moved SGLang's Triton attention ops
        from sglang.kernels.ops.attention.extend_attention import extend_attention_fwd
    except ImportError:
        from sglang.srt.layers.attention.triton_ops.extend_attention import extend_attention_fwd

    gen = torch.Generator().manual_seed(3)
    R, N, HQ, HKV, Dh = 2, 7, 4, 2, 16
    seq_lens = torch.tensor([11, 5])
    q = torch.randn(R, N, HQ, Dh, generator=gen)
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen) for _ in range(2))
    pool_k, pool_v = (torch.randn(40, HKV, Dh, generator=gen) for _ in range(2))
    slots = torch.randperm(40, generator=gen)[: int(seq_lens.sum())]  # prefix tokens anywhere in the pool
    per_request = slots.split(seq_lens.tolist())
    k_cache, v_cache = (torch.zeros(R, int(seq_lens.max()), HKV, Dh) for _ in range(2))
    for r, s in enumerate(per_request):
        k_cache[r, : len(s)], v_cache[r, : len(s)] = pool_k[s], pool_v[s]
    anc = ancestors(random_parents(R, N, gen), N - 1)
    q2, k2, v2, pool_k2, pool_v2 = (t.reshape(-1, t.shape[-2], Dh).to(DEVICE) for t in (q, k_tree, v_tree, pool_k, pool_v))
    o = sglang_triton_verify(extend_attention_fwd, q2, k2, v2, pool_k2, pool_v2, slots, seq_lens, anc, Dh**-0.5)
    ref = tree_attention_ref(q.double(), k_cache.double(), v_cache.double(), seq_lens, k_tree.double(), v_tree.double(), anc)
    torch.testing.assert_close(o.cpu().view(R, N, HQ, Dh).double(), ref, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "R,N,HQ,HKV,Dh,T,splits,dtype",
    [
        (1, 1, 1, 1, 16, 5, None, torch.float32),
        (2, 9, 6, 2, 16, 40, 3, torch.float32),
        (3, 17, 4, 4, 32, 70, None, torch.float32),
        (2, 13, 6, 1, 16, 33, 2, torch.bfloat16),
        (1, 70, 2, 1, 16, 20, None, torch.float32),  # tree keys past one 64-key tile (a second ancestor word)
        (1, 5, 2, 1, 128, 24, 2, torch.bfloat16),  # the merge in two 64-column tiles
        (1, 6, 4, 2, 16, 400, 10, torch.float32),  # 11 partials: the merge's loads in two unrolled rounds of 8
    ],
)
def test_tree_attention_triton_matches_reference(R, N, HQ, HKV, Dh, T, splits, dtype, monkeypatch):
    gen = torch.Generator().manual_seed(N + T)
    q = torch.randn(R, N, HQ, Dh, generator=gen).to(dtype)
    k_cache, v_cache = (torch.randn(R, T, HKV, Dh, generator=gen).to(dtype) for _ in range(2))
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen).to(dtype) for _ in range(2))
    prefix_lens = torch.randint(0, T + 1, (R,), generator=gen)
    prefix_lens[0] = T  # one full cache, others shorter (possibly empty)
    anc = ancestors(random_parents(R, N, gen), N - 1)
    ref = tree_attention_ref(q.double(), k_cache.double(), v_cache.double(), prefix_lens, k_tree.double(), v_tree.double(), anc)
    args = [t.to(DEVICE) for t in (q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc)]
    with poisoned_outputs():
        out = tree_attention(*args, splits=splits, BM=16, BN=16)
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(out.cpu().double(), ref, **tol)
    words = ancestor_bits(args[-1])  # the mask packed once, as the engine passes it to every layer
    assert torch.equal(tree_attention(*args[:-1], words, splits=splits, BM=16, BN=16), out)
    if splits is not None:  # (the default split count depends on the SM count too)
        monkeypatch.setattr(gpu, "multiprocessor_count", lambda device: 1)  # a merge grid too large to unroll
        assert torch.equal(tree_attention(*args, splits=splits, BM=16, BN=16), out)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tree_attention_cuts_each_prefix_not_the_cache_capacity(dtype, monkeypatch):
    """By default each request's key tiles (its prefix's, then its tree's) are cut into the splits their count calls
    for (`key_splits`), on the device, whatever the cache's capacity (which sets the grid): with a cache 8x longer than
    the prefixes, poisoned past them, the splits each request uses are those of a cache of the prefixes' own length
    (4, 2 and 1 of the 1x grid's 4 and the 8x grid's 11 here), holding the same maxima and sums, and the output is the
    reference's. The 8x grid's unused splits store nothing (their partials are NaN here), and the merge reads none of
    them."""
    module = importlib.import_module("sglang_dflash.kernels.tree_attention.tree_attention")

    gen = torch.Generator().manual_seed(11)
    R, N, HQ, HKV, Dh, T = 3, 9, 4, 2, 16, 100
    q = torch.randn(R, N, HQ, Dh, generator=gen).to(dtype)
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen).to(dtype) for _ in range(2))
    prefix_lens = torch.tensor([100, 37, 0])
    anc = ancestors(random_parents(R, N, gen), N - 1)
    k_long, v_long = (torch.full((R, 8 * T, HKV, Dh), float("nan"), dtype=dtype) for _ in range(2))
    for t in (k_long, v_long):
        t[:, :T] = torch.randn(R, T, HKV, Dh, generator=gen).to(dtype)
    tiles = 2 * R * HKV  # query blocks of 16 rows (N x G = 18 rows: 2) x requests x KV heads
    assert [default_splits(n, N, tiles, 132, 16) for n in (100, 37, 0, T, 8 * T)] == [4, 2, 1, 4, 11]
    real_partials, real_merge, seen = module.partials, module.merge_partials, []

    def merge(o_part, m, l, used, q):
        seen.append((m.clone(), l.clone(), used.clone()))
        return real_merge(o_part, m, l, used, q)

    poisoned = lambda *a: tuple(t.fill_(float("nan") if t.is_floating_point() else -7) for t in real_partials(*a))  # noqa: E731
    monkeypatch.setattr(module, "partials", poisoned)
    monkeypatch.setattr(module, "merge_partials", merge)
    outs = []
    for cache in (T, 8 * T):
        k_cache, v_cache = k_long[:, :cache].contiguous(), v_long[:, :cache].contiguous()
        args = [t.to(DEVICE) for t in (q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc)]
        outs.append(tree_attention(*args, BM=16, BN=16).cpu())
    (m1, l1, used1), (m8, l8, used8) = [[t.cpu() for t in x] for x in seen]
    assert used1.tolist() == used8.tolist() == [4, 2, 1]
    rows = N * HQ // HKV
    for r, u in enumerate([4, 2, 1]):  # the used splits: the same partials
        for a, b in ((m1, m8), (l1, l8)):
            per = [x.view(x.shape[0], R, HKV, rows)[:, r] for x in (a, b)]
            assert torch.equal(per[0][:u], per[1][:u])
            assert per[0][u:].isnan().all() and per[1][u:].isnan().all()  # never stored
    ref = tree_attention_ref(q.double(), k_long[:, :T].double(), v_long[:, :T].double(), prefix_lens,
                             k_tree.double(), v_tree.double(), anc)  # fmt: skip
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    for out in outs:
        torch.testing.assert_close(out.double(), ref, **tol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_tree_attention_rescales_when_a_later_tile_raises_the_max(dtype):
    """The kernel moves a row's reference max only when a key tile raises it by more than 8 in base 2: with prefix
    keys scaled up along the cache, the largest scaled score grows from about 12 in the first tile to about 190 in
    the last, so a kernel that kept the first tile's reference would overflow its probabilities (e^x past x = 88)
    to inf, as it does with the rescale turned off (checked by hand)."""
    gen = torch.Generator().manual_seed(5)
    R, N, HQ, HKV, Dh, T = 2, 7, 4, 2, 16, 150
    q = torch.randn(R, N, HQ, Dh, generator=gen).to(dtype)
    ramp = torch.linspace(0.05, 60.0, T).view(1, T, 1, 1)  # keys' scale along the cache
    k_cache, v_cache = (
        (torch.randn(R, T, HKV, Dh, generator=gen) * ramp).to(dtype),
        torch.randn(R, T, HKV, Dh, generator=gen).to(dtype),
    )
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen).to(dtype) for _ in range(2))
    prefix_lens = torch.tensor([T, 77])
    anc = ancestors(random_parents(R, N, gen), N - 1)
    ref = tree_attention_ref(q.double(), k_cache.double(), v_cache.double(), prefix_lens, k_tree.double(), v_tree.double(), anc)
    args = [t.to(DEVICE) for t in (q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc)]
    out = tree_attention(*args, splits=2, BM=16, BN=16).cpu().double()
    assert out.isfinite().all()
    tol = dict(rtol=1e-4, atol=1e-4) if dtype == torch.float32 else dict(rtol=3e-2, atol=3e-2)
    torch.testing.assert_close(out, ref, **tol)


def test_tree_attention_fp16_partials_hold_sums_beyond_fp16_range():
    """The partial outputs are not normalised: with fp16 inputs a split's sum of ~100 values near 2,000 is past
    fp16's 65,504, so they must be kept wider; the output itself (about 2,000) is in range."""
    gen = torch.Generator().manual_seed(3)
    R, N, HQ, HKV, Dh, T = 1, 3, 2, 1, 16, 300
    q = (torch.randn(R, N, HQ, Dh, generator=gen) * 0.01).half()  # nearly flat softmax: l ~ a split's length
    k_cache, k_tree = (torch.randn(R, n, HKV, Dh, generator=gen).half() for n in (T, N))
    v_cache, v_tree = ((2000 + 100 * torch.randn(R, n, HKV, Dh, generator=gen)).half() for n in (T, N))
    prefix_lens = torch.tensor([T])
    anc = ancestors(random_parents(R, N, gen), N - 1)
    ref = tree_attention_ref(q.double(), k_cache.double(), v_cache.double(), prefix_lens, k_tree.double(), v_tree.double(), anc)
    args = [t.to(DEVICE) for t in (q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc)]
    out = tree_attention(*args, splits=2, BM=16, BN=16)
    torch.testing.assert_close(out.cpu().double(), ref, rtol=2e-3, atol=0)


def test_tree_attention_reads_cache_rows_through_slots():
    """A pool of cache rows read at `slots` (one negative, indexed from the end as torch does)
    equals the gathered cache, in the kernel and in the reference."""
    gen = torch.Generator().manual_seed(5)
    R, N, HQ, HKV, Dh, T, rows = 3, 7, 4, 2, 16, 21, 5
    q = torch.randn(R, N, HQ, Dh, generator=gen)
    k_pool, v_pool = (torch.randn(rows, T, HKV, Dh, generator=gen) for _ in range(2))
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen) for _ in range(2))
    prefix_lens = torch.tensor([T, 9, 14])
    slots = torch.tensor([3, -1, 0])
    anc = ancestors(random_parents(R, N, gen), N - 1)
    gathered = tree_attention_ref(
        q.double(), k_pool[slots].double(), v_pool[slots].double(), prefix_lens, k_tree.double(), v_tree.double(), anc
    )
    in_place = tree_attention_ref(
        q.double(), k_pool.double(), v_pool.double(), prefix_lens, k_tree.double(), v_tree.double(), anc, slots=slots
    )
    torch.testing.assert_close(in_place, gathered)
    args = [t.to(DEVICE) for t in (q, k_pool, v_pool, prefix_lens, k_tree, v_tree, anc)]
    with poisoned_outputs():
        out = tree_attention(*args, slots=slots.to(DEVICE), splits=2, BM=16, BN=16)
    torch.testing.assert_close(out.cpu().double(), gathered, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("window", [None, 5])
def test_tree_attention_reads_a_token_pool_through_a_page_table(window):
    """k_cache, v_cache as token pools [P, HKV, Dh] read through a page table (SGLang's req_to_token layout:
    int32, rows of `slots`, one negative; a column slice of a wider table, so its rows are strided) equal the
    gathered dense cache, in the kernel and in the reference; pool entries no table row names are poisoned."""
    gen = torch.Generator().manual_seed(11)
    R, N, HQ, HKV, Dh, T, rows, P = 3, 6, 4, 2, 16, 19, 5, 150
    q = torch.randn(R, N, HQ, Dh, generator=gen)
    k_pool, v_pool = (torch.randn(P, HKV, Dh, generator=gen) for _ in range(2))
    wide = torch.randperm(P, generator=gen)[: rows * (T + 4)].view(rows, T + 4).to(torch.int32)
    table = wide[:, :T]  # strided rows, contiguous columns
    unused = torch.ones(P, dtype=torch.bool)
    unused[table.flatten().long()] = False
    k_pool[unused], v_pool[unused] = float("nan"), float("nan")  # never read
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen) for _ in range(2))
    prefix_lens = torch.tensor([T, 8, 13])
    slots = torch.tensor([2, -1, 0])
    anc = ancestors(random_parents(R, N, gen), N - 1)
    positions = prefix_lens[:, None] + anc.sum(-1) - 1
    extra = dict(window=window, positions=positions) if window else {}
    dense = table[slots].long()
    k_dense, v_dense = torch.nan_to_num(k_pool[dense]), torch.nan_to_num(v_pool[dense])  # [R, T, HKV, Dh]
    gathered = tree_attention_ref(
        q.double(), k_dense.double(), v_dense.double(), prefix_lens, k_tree.double(), v_tree.double(), anc, **extra
    )
    paged = tree_attention_ref(
        q.double(), k_pool.double(), v_pool.double(), prefix_lens, k_tree.double(), v_tree.double(), anc,
        slots=slots, table=table, **extra,
    )  # fmt: skip
    torch.testing.assert_close(paged, gathered)
    args = [t.to(DEVICE) for t in (q, k_pool, v_pool, prefix_lens, k_tree, v_tree, anc)]
    extra = {k: v.to(DEVICE) if torch.is_tensor(v) else v for k, v in extra.items()}
    with poisoned_outputs():
        out = tree_attention(*args, slots=slots.to(DEVICE), table=table.to(DEVICE), splits=2, BM=16, BN=16, **extra)
    torch.testing.assert_close(out.cpu().double(), gathered, rtol=1e-4, atol=1e-4)


def test_sliding_window_over_the_prefix():
    """window + positions: the query at position p sees the prefix keys among p - window + 1 .. p (the last `window`
    positions, its own included). Kernel and reference against SDPA with that mask, set one query at a time
    (`models.layers.masked_attention`)."""
    from sglang_dflash.models.layers import masked_attention

    gen = torch.Generator().manual_seed(9)
    R, N, HQ, HKV, Dh, T, window = 2, 6, 4, 2, 16, 40, 7
    q = torch.randn(R, N, HQ, Dh, generator=gen)
    k_cache, v_cache = (torch.randn(R, T, HKV, Dh, generator=gen) for _ in range(2))
    k_tree, v_tree = (torch.randn(R, N, HKV, Dh, generator=gen) for _ in range(2))
    prefix_lens = torch.tensor([T, 23])
    anc = ancestors(random_parents(R, N, gen), N - 1)
    positions = prefix_lens[:, None] + anc.sum(-1) - 1  # root at the prefix length, + depth
    see_prefix = torch.zeros(R, N, T, dtype=torch.bool)
    for r in range(R):
        for i in range(N):
            see_prefix[r, i, positions[r, i] - window + 1 : prefix_lens[r]] = True  # p >= prefix_lens[r] > window
    # by hand: request 1's root sits at position 23 (its prefix's length), so it sees prefix keys 17 .. 22
    assert see_prefix[1, 0].nonzero().flatten().tolist() == [17, 18, 19, 20, 21, 22]
    expected = masked_attention(
        q.double(), torch.cat([k_cache, k_tree], 1).double(), torch.cat([v_cache, v_tree], 1).double(),
        torch.cat([see_prefix, anc], 2), Dh**-0.5,
    )  # fmt: skip
    assert not see_prefix[0, 0, : T - window + 1].any()  # the window hides part of the prefix
    ref = tree_attention_ref(
        q.double(), k_cache.double(), v_cache.double(), prefix_lens, k_tree.double(), v_tree.double(), anc,
        window=window, positions=positions,
    )  # fmt: skip
    torch.testing.assert_close(ref, expected)
    args = [t.to(DEVICE) for t in (q, k_cache, v_cache, prefix_lens, k_tree, v_tree, anc)]
    with poisoned_outputs():
        out = tree_attention(*args, window=window, positions=positions.to(DEVICE), splits=3, BM=16, BN=16)
    torch.testing.assert_close(out.cpu().double(), expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("T", [0, 1, 100, 600, 4096, 40000])
@pytest.mark.parametrize("groups", [1, 2, 6, 40, 48, 192, 400])
def test_default_splits(T, groups):
    """The split count minimises waves x (2 + key tiles a split) over every count up to half the tiles (at least 2
    tiles a split) whose programs take at most 4 waves, ties to fewer splits."""
    sms, BN, N = 132, 64, 64
    tiles = -(-T // BN) + 1
    cost = lambda z: -(-z * groups // sms) * (2 + -(-tiles // z))  # noqa: E731
    splits = default_splits(T, N, groups, sms, BN)
    allowed = [z for z in range(1, max(1, (tiles + 1) // 2) + 1) if -(-z * groups // sms) <= 4] or [1]
    assert splits in allowed or splits == 1
    assert cost(splits) == min(cost(z) for z in allowed)
    assert splits == min(z for z in allowed if cost(z) == cost(splits))


def test_default_splits_of_measured_cases():
    """H200 (132 SMs), 12 / 2 heads, head dim 256, 128-row blocks (benchmarks/RESULTS.md): one wave of 22
    splits at R = 1 x 64 nodes over 4096 tokens (6 groups), 5 splits (240 programs) at R = 8, 2 at R = 8 over 150."""
    assert default_splits(4096, 64, 6, 132, 64) == 22
    assert default_splits(4096, 64, 48, 132, 64) == 5
    assert default_splits(150, 64, 48, 132, 64) == 2
    assert default_splits(0, 64, 6, 132, 64) == 1
