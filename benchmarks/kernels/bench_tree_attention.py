"""Tree attention per layer over a 4096-token prefix (issue 3's target: <= 15 us at N = 64).

    PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_attention.py [SGLANG_WHEEL] [--sweep]

The ancestor mask is passed packed (`ancestor_bits`), made once outside the timed call, as the engine makes it
once per step for every layer.

Qwen3.6-27B full-attention layer at TP=2 per GPU: 12 query heads, 2 KV heads, head dim 256,
bf16. Peers in the same run, each with its relative error against the float64 reference, as ours:
- SGLang 0.5.10.post1's triton backend in target-verify mode (`extend_attention_fwd` with the custom mask), from
  its wheel (`sglang_peers.py`);
- FlashInfer's paged prefill with the custom mask (backend "fa2"), what SGLang's flashinfer backend runs there,
  where `flashinfer` imports (install its wheel and apache-tvm-ffi's from .whl/gpu into /tmp/site, --no-deps);
- torch's scaled_dot_product_attention with the boolean tree mask over prefix + tree (the generic masked path).
Ours also as a server calls it (`ours_pool`): the prefix read from a token pool through a req_to_token-like table 8x
as wide as the prefix (SGLang's is as wide as the context length), each request's prefix cut into splits by its own
length (benchmarks/RESULTS.md).
Each timed as 10 calls in one CUDA graph, median replay / 10.
"""

from __future__ import annotations

import argparse
import json
import os

import torch
import torch.nn.functional as F

from benchmarks.kernels.sglang_peers import flashinfer_verify_attention, triton_verify_attention
from benchmarks.timing import failure, graph_us, print_kernel_times
from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_attention import ancestor_bits, sglang_custom_mask, tree_attention, tree_attention_ref

HQ, HKV, DH, PREFIX = 12, 2, 256, 4096


def attention_inputs(R: int, N: int, gen: torch.Generator, dev: str = "cuda") -> tuple[tuple, torch.Tensor]:
    """(tree_attention's arguments, the bool ancestor mask [R, N, N]) for R DDTree-shaped trees of N nodes over a
    PREFIX-token cache: random bf16 q, cache and tree K/V drawn from gen, prefix lengths int64 (as SGLang's seq_lens),
    and the mask packed into bit words as the engine passes it (once per step, for every layer)."""
    rnd = lambda *s: torch.randn(*s, generator=gen, device=dev).bfloat16()  # noqa: E731
    q, k_tree, v_tree = rnd(R, N, HQ, DH), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH)
    k_cache, v_cache = rnd(R, PREFIX, HKV, DH), rnd(R, PREFIX, HKV, DH)
    prefix_lens = torch.full((R,), PREFIX, device=dev)
    tree = build_ddtree(
        torch.randn(R, 15, 64, generator=gen, device=dev) * 2.5, torch.zeros(R, dtype=torch.long, device=dev), N - 1
    )
    return (q, k_cache, v_cache, prefix_lens, k_tree, v_tree, ancestor_bits(tree.ancestor_mask)), tree.ancestor_mask


def attention_inputs_at(heads: tuple[int, int, int], R: int, N: int, prefix: int) -> tuple[tuple, torch.Tensor]:
    """`attention_inputs` on CUDA at heads (HQ, HKV, DH) over `prefix` tokens, seeded by R and N, as the A/B scripts
    in results/ take them. Sets the module's shapes, so later calls see them too."""
    global HQ, HKV, DH, PREFIX
    (HQ, HKV, DH), PREFIX = heads, prefix
    return attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))


def sweep(dev: str = "cuda") -> None:
    """R = 1, N = 64 over the 4096-token prefix: ours by tile sizes, warps, pipeline stages and prefix splits."""
    args, _ = attention_inputs(1, 64, torch.Generator(device=dev).manual_seed(1), dev)
    print_kernel_times(lambda: tree_attention(*args), reps=20, top=4, title="per-kernel CUDA time, R=1 N=64 (us):")
    for BM, BN, warps, stages, splits in [
        (64, 32, 8, 3, None), (64, 64, 8, 3, None), (64, 64, 8, 2, None), (128, 32, 8, 3, None), (128, 64, 8, 2, None),
        (64, 64, 4, 3, None), (64, 32, 8, 3, 32), (64, 64, 8, 3, 32), (64, 64, 8, 3, 8), (32, 64, 4, 3, None),
    ]:  # fmt: skip
        cfg = dict(BM=BM, BN=BN, num_warps=warps, num_stages=stages, splits=splits)
        try:
            t = f"{graph_us(lambda: tree_attention(*args, **cfg), reps=10):8.1f} us"
        except Exception as e:  # noqa: BLE001 - a configuration that does not fit is a result too
            t = f"failed: {failure(e, 120)}"
        print(f"sweep R=1 N=64: {cfg}: {t}", flush=True)


def pool_call(inputs: tuple):
    """tree_attention on inputs as a server hands them: the R caches as one token pool [R * PREFIX, HKV, DH], read at
    table[slots[r], t] (int32, 8 * PREFIX wide, zero past each prefix)."""
    q, k_cache, v_cache, prefix_lens, k_tree, v_tree, words = inputs
    R = q.shape[0]
    table = torch.zeros(R, 8 * PREFIX, dtype=torch.int32, device=q.device)
    table[:, :PREFIX] = torch.arange(R * PREFIX, dtype=torch.int32, device=q.device).view(R, PREFIX)
    pool_k, pool_v = k_cache.reshape(R * PREFIX, HKV, DH), v_cache.reshape(R * PREFIX, HKV, DH)
    slots = torch.arange(R, device=q.device)
    return lambda: tree_attention(q, pool_k, pool_v, prefix_lens, k_tree, v_tree, words, slots=slots, table=table)


def peer(row: dict, name: str, make, ref: torch.Tensor) -> None:
    """row[name] (us) and row[name + "_rel_err"] (against the float64 reference) of the call make() returns; a peer
    that cannot be built or run here leaves row[name + "_error"] instead."""
    try:
        fn = make()
        row[f"{name}_rel_err"] = ((fn().double() - ref).norm() / ref.norm()).item()
        row[name] = graph_us(fn, reps=10)
    except Exception as e:  # noqa: BLE001 - a peer that does not run here is a result too
        row[f"{name}_error"] = failure(e)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", nargs="?", help="SGLang 0.5.10.post1's wheel: its triton backend's verify is a peer")
    parser.add_argument("--sweep", action="store_true", help="ours by tiles, warps, stages and splits instead")
    args = parser.parse_args()
    if args.sweep:
        sweep()
        return
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    rows = []
    for R, N in [(1, 16), (1, 64), (8, 64)]:
        inputs, anc = attention_inputs(R, N, gen, dev)
        q, k_cache, v_cache, prefix_lens, k_tree, v_tree, _ = inputs
        ref = tree_attention_ref(q.double(), k_cache.double(), v_cache.double(), prefix_lens, k_tree.double(),
                                 v_tree.double(), anc)  # fmt: skip
        row = dict(R=R, N=N)
        # Floor: the prefix K/V read once (q, the tree K/V and the output are < 2% of it) at 4.2 TB/s.
        kv_bytes = (k_cache.numel() + v_cache.numel()) * 2
        row["floor_us"] = kv_bytes / 4.2e12 * 1e6
        peer(row, "ours", lambda: lambda: tree_attention(*inputs), ref)
        if "ours" in row:
            row["ours_TBps"] = kv_bytes / row["ours"] / 1e6
        peer(row, "ours_pool", lambda: pool_call(inputs), ref)
        keys = torch.cat([k_cache, k_tree], 1).transpose(1, 2).repeat_interleave(HQ // HKV, 1)
        values = torch.cat([v_cache, v_tree], 1).transpose(1, 2).repeat_interleave(HQ // HKV, 1)
        mask = torch.cat([torch.ones(R, N, PREFIX, dtype=torch.bool, device=dev), anc], 2)[:, None]
        sdpa = lambda: F.scaled_dot_product_attention(q.transpose(1, 2), keys, values, attn_mask=mask).transpose(1, 2)  # noqa: E731
        peer(row, "sdpa_masked", lambda: sdpa, ref)
        custom_mask, mask_indptr = sglang_custom_mask(anc, prefix_lens, R * PREFIX)
        if args.wheel:
            peer(row, "sglang_triton", lambda: triton_verify_attention(args.wheel, q, k_cache, v_cache, k_tree, v_tree,
                                                                       custom_mask, mask_indptr), ref)  # fmt: skip
        peer(row, "flashinfer", lambda: flashinfer_verify_attention(q, k_cache, v_cache, k_tree, v_tree, custom_mask), ref)
        rows.append(row)
        print(json.dumps({k: round(v, 4) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    print("\n R   N | ours  TB/s | ours, 8x table | SGLang triton | FlashInfer fa2 | SDPA masked | floor   [us per layer]")
    for r in rows:
        cell = lambda k: f"{r[k]:8.1f}" if k in r else "       -"  # noqa: E731
        tbps = f"{r['ours_TBps']:5.2f}" if "ours_TBps" in r else "    -"
        print(f"{r['R']:2d} {r['N']:3d} | {cell('ours')} {tbps} | {cell('ours_pool'):>14} | {cell('sglang_triton')} | "
              f"{cell('flashinfer')} | {cell('sdpa_masked')} | {r['floor_us']:5.1f}")  # fmt: skip
    if os.environ.get("OUT"):
        json.dump(rows, open(os.path.join(os.environ["OUT"], "tree_attention_bench.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
