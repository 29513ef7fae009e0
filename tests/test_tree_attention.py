"""Tree attention reference and the SGLang mask format."""

import torch
from tree_helpers import random_parents, root_path

from sglang_dflash.kernels.tree_attention import sglang_custom_mask, tree_attention_ref
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


def test_sglang_custom_mask_layout():
    gen = torch.Generator().manual_seed(1)
    R, N = 3, 5
    parents = random_parents(R, N, gen)
    anc = ancestors(parents, N - 1)
    seq_lens = torch.tensor([4, 0, 9])
    mask, indptr = sglang_custom_mask(anc, seq_lens, int(seq_lens.sum()))
    expected = []
    for r in range(R):
        s = int(seq_lens[r])
        for i in range(N):
            expected += [True] * s + anc[r, i].tolist()
    assert mask.tolist() == expected
    assert indptr.tolist() == [0, 5 * 9, 5 * 9 + 5 * 5, 5 * 9 + 5 * 5 + 5 * 14]
