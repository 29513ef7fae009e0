"""models/tp_shard.py: a drafter sharded over W ranks (CPU processes joined by gloo, fp32) drafts the logits of the
whole drafter and writes, into its context cache, exactly its key/value heads of the whole drafter's cache; the
weights and cache per rank shrink by W; drafters whose heads do not split are refused by name."""

from __future__ import annotations

import os
import socket

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from sglang_dflash.models.config import DraftConfig
from sglang_dflash.models.dflash_draft import DFlashDrafter
from sglang_dflash.models.tp_shard import shard_drafter, shard_plan


def drafter_config(heads: int, kv_heads: int, bias: bool, window: int | None) -> DraftConfig:
    return DraftConfig.from_dict(
        dict(hidden_size=48, intermediate_size=40, num_hidden_layers=2, num_attention_heads=heads,
             num_key_value_heads=kv_heads, head_dim=8, vocab_size=60, block_size=6, rms_norm_eps=1e-6,
             rope_theta=10000.0, max_position_embeddings=128, attention_bias=bias,
             layer_types=["sliding_attention", "full_attention"] if window else None, sliding_window=window,
             dflash_config=dict(target_layer_ids=[0, 2], mask_token_id=5))
    )  # fmt: skip


def random_drafter(c: DraftConfig) -> DFlashDrafter:
    torch.manual_seed(0)
    drafter = DFlashDrafter(c).eval()
    for p in drafter.parameters():
        torch.nn.init.normal_(p, std=0.2)
    return drafter


def draft(drafter: DFlashDrafter, embed, head) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Context appended for 3 request slots (two steps each), then one drafter pass: (logits, cache k, cache v)."""
    gen = torch.Generator().manual_seed(1)
    cache = drafter.new_cache(4, 32)
    slots, lens = torch.tensor([2, 0, 3]), torch.tensor([7, 3, 11])
    taps = torch.randn(3, 11, 2 * 48, generator=gen)
    nodes = torch.where(torch.arange(11)[None] < lens[:, None], torch.arange(11), -1)
    drafter.append_context(cache, taps, slots, torch.zeros(3, dtype=torch.long), nodes)
    logits = drafter(cache, torch.tensor([9, 1, 40]), slots, lens, embed, head)
    return logits, cache.k, cache.v


def rank_main(rank: int, world: int, port: int, heads: int, kv_heads: int, bias: bool, window: int | None) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.set_num_threads(1)
    try:
        c = drafter_config(heads, kv_heads, bias, window)
        whole, part = random_drafter(c), random_drafter(c)
        embed, head = torch.nn.Embedding(60, 48), torch.nn.Linear(48, 60, bias=False)
        with torch.no_grad():
            embed.weight.normal_(generator=torch.Generator().manual_seed(2))
            head.weight.normal_(std=0.2, generator=torch.Generator().manual_seed(3))
            expected, k, v = draft(whole, embed, head)

            def all_reduce(x):
                dist.all_reduce(x)
                return x

            shard_drafter(part, rank, world, all_reduce)
            logits, k_part, v_part = draft(part, embed, head)
        torch.testing.assert_close(logits, expected, rtol=1e-5, atol=1e-5)
        if kv_heads % world == 0:  # a contiguous 1/W of the KV heads
            mine = slice(rank * kv_heads // world, (rank + 1) * kv_heads // world)
        else:  # the one head this rank's queries share
            head = rank // (world // kv_heads)
            mine = slice(head, head + 1)
        assert part.kv_heads == mine.stop - mine.start
        torch.testing.assert_close(k_part, k[:, :, mine], rtol=1e-6, atol=1e-6)
        torch.testing.assert_close(v_part, v[:, :, mine], rtol=1e-6, atol=1e-6)
        attn, mlp = part.layers[1].self_attn, part.layers[1].mlp
        assert attn.q_proj.weight.shape == (heads * 8 // world, 48) and attn.o_proj.weight.shape == (48, heads * 8 // world)
        assert attn.k_proj.weight.shape == attn.v_proj.weight.shape == (part.kv_heads * 8, 48)
        assert mlp.gate_proj.weight.shape == mlp.up_proj.weight.shape == (40 // world, 48)
        assert mlp.down_proj.weight.shape == (48, 40 // world)
    finally:
        dist.destroy_process_group()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(
    "world, heads, kv_heads, bias, window",
    [(2, 4, 2, False, None), (2, 6, 2, True, 3), (2, 4, 1, False, None), (4, 8, 2, True, None)],
)
def test_sharded_drafter_equals_the_whole(world, heads, kv_heads, bias, window):
    mp.spawn(rank_main, args=(world, free_port(), heads, kv_heads, bias, window), nprocs=world, join=True)


def test_shard_plan_refuses_what_does_not_split():
    assert shard_plan(drafter_config(4, 2, False, None), 2) is None
    assert shard_plan(drafter_config(8, 2, False, None), 4) is None  # each KV head replicated on 2 ranks
    assert "6 query heads" in shard_plan(drafter_config(6, 3, False, None), 4)
    assert "3 key/value heads" in shard_plan(drafter_config(6, 3, False, None), 2)
    assert "MLP width 40" in shard_plan(drafter_config(6, 3, False, None), 3)
    c = drafter_config(6, 3, False, None)
    with pytest.raises(ValueError, match="cannot be TP-sharded"):
        shard_drafter(random_drafter(c), 0, 4, lambda x: x)
    whole = random_drafter(c)
    shard_drafter(whole, 0, 1, lambda x: x)  # world 1: unchanged
    assert whole.layers[0].self_attn.q_proj.out_features == 6 * 8 and whole.kv_heads == 3
