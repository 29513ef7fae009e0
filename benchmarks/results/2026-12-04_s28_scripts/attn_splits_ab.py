"""Session 28 A/B, one process: the tree attention with the tree's key tiles after the prefix's in one sequence cut
into splits (no split of the tree's own) against HEAD's, copied first:
    git show 4b00535:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_head.py
Qwen3.6-27B TP=2 shapes (12 / 2 heads, head dim 256, bf16), DDTree trees; prefixes of 4096 tokens
(issue 3's case) and of 150 / 600 (the server's), read straight and through a token pool 8x as wide (as a server
calls it); also the drafter's shape (16 query / 4 KV heads, head dim 128, 16 nodes over 600). Sides alternate
three times; medians; max |out - HEAD's|. PYTHONPATH=$PWD python3 attn_splits_ab.py"""

import os
import statistics

import torch
from sglang_dflash.kernels.tree_attention._head import tree_attention as head_attention  # HEAD's file, copied

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_attention import tree_attention


def pool_call(inputs: tuple, attention):
    """`bench_tree_attention.pool_call` with the attention function given: the caches as one token pool."""
    q, k_cache, v_cache, prefix_lens, k_tree, v_tree, words = inputs
    R, P = q.shape[0], k_cache.shape[1]
    table = torch.zeros(R, 8 * P, dtype=torch.int32, device=q.device)
    table[:, :P] = torch.arange(R * P, dtype=torch.int32, device=q.device).view(R, P)
    pool_k, pool_v = k_cache.reshape(R * P, *k_cache.shape[2:]), v_cache.reshape(R * P, *v_cache.shape[2:])
    slots = torch.arange(R, device=q.device)
    return lambda: attention(q, pool_k, pool_v, prefix_lens, k_tree, v_tree, words, slots=slots, table=table)


def ab(fn, head) -> tuple[float, float]:
    times = {"head": [], "new": []}
    for _ in range(3):
        times["head"].append(head())
        times["new"].append(fn())
    return statistics.median(times["head"]), statistics.median(times["new"])


print("tree attention, us: HEAD / the tree's keys as the last key tiles of the split sequence")
for heads in ((12, 2, 256), (16, 4, 128)):
    bta.HQ, bta.HKV, bta.DH = heads
    cases = ((1, 16, 4096), (1, 64, 4096), (8, 64, 4096), (1, 64, 150), (8, 64, 150), (1, 64, 600), (8, 64, 600), (32, 64, 600))
    drafter = ((1, 16, 600), (8, 16, 600))
    if os.environ.get("QUICK") == "1":  # the cases call 7 lost, and issue 3's
        cases, drafter = ((1, 64, 4096), (1, 64, 150), (1, 64, 600)), ((1, 16, 600),)
    for R, N, prefix in cases if heads[2] == 256 else drafter:
        bta.PREFIX = prefix
        args, _ = bta.attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))
        heads_fns = (lambda args=args: head_attention(*args), pool_call(args, head_attention))
        for (label, fn), head in zip(
            (("cache", lambda args=args: tree_attention(*args)), ("pool", pool_call(args, tree_attention))), heads_fns
        ):
            diff = (fn().float() - head().float()).abs().max().item()
            t = ab(lambda fn=fn: graph_us(fn, reps=10), lambda head=head: graph_us(head, reps=10))
            print(
                f"heads {heads} R={R:2d} N={N} prefix {prefix:4d} {label:5s}: {t[0]:7.2f} / {t[1]:7.2f}  ({diff:.1e})", flush=True
            )
