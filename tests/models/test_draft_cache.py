"""The drafter's context cache as a token pool read through a page table (`DraftCache`), on CPU: the layout the
SGLang worker uses (entries at the target's KV slots, SGLang's int32 req_to_token as the table) drafts exactly as
the dense cache, and after a prefix-cache hit (a new request's table row reuses another request's KV slots for its
prefix) extending only the suffix drafts exactly as computing the whole context. Sliding-window layers included."""

from __future__ import annotations

import pytest
import torch
from model_helpers import save_tiny_target, tiny_target_config

from sglang_dflash.init_draft import init_draft

LIN, FULL = "linear_attention", "full_attention"


@pytest.fixture(scope="module")
def drafter(tmp_path_factory):
    root = tmp_path_factory.mktemp("draft_cache")
    save_tiny_target(root / "target", tiny_target_config(layer_types=(LIN, LIN, LIN, FULL)))
    return init_draft(root / "target", root / "draft", num_layers=2, block_size=8, taps=3, sliding_window=6)


def test_paged_pool_and_prefix_hit_draft_as_the_dense_cache(drafter):
    c, gen = drafter.config, torch.Generator().manual_seed(0)
    assert "sliding_attention" in c.layer_types and c.sliding_window == 6
    L, T, P, hit = 20, 32, 100, 12  # context length, table width, pool entries, prefix-cache hit length
    taps = torch.randn(1, L, len(c.target_layer_ids) * c.hidden_size, generator=gen)
    embed = torch.nn.Embedding(c.vocab_size, c.hidden_size)
    head = torch.nn.Linear(c.hidden_size, c.vocab_size, bias=False)

    def draft(cache, slot):
        return drafter(cache, torch.tensor([5]), torch.tensor([slot]), torch.tensor([L]), embed, head)

    dense = drafter.new_cache(2, T)
    drafter.append_context(dense, taps, torch.tensor([1]), torch.tensor([0]), torch.arange(L)[None])
    expected = draft(dense, 1)

    table = torch.zeros(3, T, dtype=torch.int32)  # SGLang's req_to_token: request slot -> KV slot per position
    kv_slots = torch.randperm(P, generator=gen).to(torch.int32)
    table[1] = kv_slots[:T]
    paged = drafter.new_cache(3, T, table=table, pool_size=P)
    drafter.append_context(paged, taps, torch.tensor([1]), torch.tensor([0]), torch.arange(L)[None])
    torch.testing.assert_close(draft(paged, 1), expected)

    table[2, :hit], table[2, hit:] = table[1, :hit], kv_slots[T : 2 * T - hit]  # the radix cache's prefix, then new slots
    drafter.append_context(paged, taps[:, hit:], torch.tensor([2]), torch.tensor([hit]), torch.arange(L - hit)[None])
    torch.testing.assert_close(draft(paged, 2), expected)
    assert not torch.equal(draft(paged, 0), expected)  # slot 0 has no context: the check can fail


def test_block_masks_built_once_per_layer_kind(tmp_path, monkeypatch):
    """A drafter pass builds each distinct in-block mask (causal or not, sliding window or not) once and hands every
    layer of that kind the same one; each layer's equals the mask it would build itself."""
    from sglang_dflash.models.dflash_draft import DraftAttention

    save_tiny_target(tmp_path / "target", tiny_target_config(layer_types=(LIN, FULL)))
    drafter = init_draft(tmp_path / "target", tmp_path / "draft", num_layers=4, block_size=8, taps=2, sliding_window=6)
    c = drafter.config
    kinds = {attn.mask_key for attn in (layer.self_attn for layer in drafter.layers)}
    assert len(kinds) == 2 < c.num_hidden_layers  # sliding-causal and full-bidirectional layers, repeated
    built, seen = [], []
    block_mask, forward = DraftAttention.block_mask, DraftAttention.forward
    monkeypatch.setattr(DraftAttention, "block_mask", lambda self, pos: built.append(self.mask_key) or block_mask(self, pos))
    monkeypatch.setattr(
        DraftAttention, "forward", lambda self, x, pos, *a: seen.append((self, pos, a[-1][0])) or forward(self, x, pos, *a)
    )
    cache = drafter.new_cache(1, 32)
    drafter.append_context(cache, torch.randn(1, 10, 2 * c.hidden_size), torch.tensor([0]), torch.tensor([0]),
                           torch.arange(10)[None])  # fmt: skip
    embed, head = torch.nn.Embedding(c.vocab_size, c.hidden_size), torch.nn.Linear(c.hidden_size, c.vocab_size)
    drafter(cache, torch.tensor([5]), torch.tensor([0]), torch.tensor([10]), embed, head)
    assert sorted(built) == sorted(kinds) and len(seen) == c.num_hidden_layers
    for attn, pos, mask in seen:
        assert torch.equal(mask, attn.visible(pos, pos, in_block=True))
