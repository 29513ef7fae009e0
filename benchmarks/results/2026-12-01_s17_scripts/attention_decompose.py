"""Session 17: where the tree attention kernel's time goes at R = 1 (12 / 2 heads, head dim 256, bf16, HEAD's
tiles: 128 x 64, 8 warps, 2 stages). The attention kernel alone (no merge), graph-timed, against the number of
64-key tiles each program walks, with the grid kept to one wave (S prefix splits + the tree split, x 6 row tiles at
N = 64, x 2 at N = 16), so time = launch + fixed (q load, partial store) + tiles x per tile; plus an empty kernel.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s17_scripts/attention_decompose.py
"""

import importlib

import torch
import triton

from benchmarks.kernels.bench_tree_attention import DH, HKV, HQ
from benchmarks.timing import graph_us
from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_attention import ancestor_bits

mod = importlib.import_module("sglang_dflash.kernels.tree_attention.tree_attention")


@triton.jit
def _empty(x):
    pass


def kernel_only(R, N, S, tiles, BM=128, BN=64, warps=8, stages=2, gen=None):
    """A launcher of the attention kernel alone: S splits each of `tiles` BN-key tiles (cache T = S * tiles * BN)."""
    T = S * tiles * BN
    rnd = lambda *s: torch.randn(*s, generator=gen, device="cuda").bfloat16()  # noqa: E731
    q, k_tree, v_tree = rnd(R, N, HQ, DH), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH)
    k_cache, v_cache = rnd(R, max(T, 1), HKV, DH), rnd(R, max(T, 1), HKV, DH)
    plen = torch.full((R,), T, device="cuda")
    tree = build_ddtree(torch.randn(R, 15, 64, generator=gen, device="cuda") * 2.5,
                        torch.zeros(R, dtype=torch.long, device="cuda"), N - 1)  # fmt: skip
    words = ancestor_bits(tree.ancestor_mask)
    G = HQ // HKV
    blocks = triton.cdiv(N * G, BM)
    o_part, m, l = mod.partials(q, HKV, S + 1)
    grid = (blocks, R * HKV, S + 1)

    def run():
        mod._tree_attention_kernel[grid](
            q, k_cache, v_cache, q, plen, k_tree, v_tree, words, q, q, o_part, m, l,
            N, triton.cdiv(N, 64), max(T, 1), tiles * BN, DH**-0.5, R, 0,
            HQ=HQ, HKV=HKV, DH=DH, S=S, BM=BM, BN=BN, FP32_DOTS=False, HAS_SLOTS=False, HAS_TABLE=False, WINDOW=0,
            num_warps=warps, num_stages=stages,
        )  # fmt: skip

    return run, blocks * R * HKV * (S + 1)


def main():
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.zeros(1, device="cuda")
    print(f"empty kernel: {graph_us(lambda: _empty[(1,)](x), reps=10):.2f} us", flush=True)
    print(f"empty kernel, 132 programs: {graph_us(lambda: _empty[(132,)](x), reps=10):.2f} us", flush=True)
    print("R N S tiles programs | kernel us")
    for N, S in [(64, 21), (16, 32), (16, 64)]:
        for tiles in [0, 1, 2, 3, 4, 6, 8]:
            run, progs = kernel_only(1, N, S, tiles, gen=gen)
            print(f"1 {N} {S} {tiles} {progs} | {graph_us(run, reps=10):.2f}", flush=True)
    # HEAD's own launch at N = 64 (22 splits of 3 tiles + the tree split: 138 programs, two waves) and its one-wave
    # neighbours
    for N, S, tiles in [(64, 22, 3), (64, 16, 4), (64, 21, 3), (64, 32, 2), (64, 64, 1)]:
        run, progs = kernel_only(1, N, S, tiles, gen=gen)
        print(f"1 {N} {S} {tiles} {progs} | {graph_us(run, reps=10):.2f}", flush=True)


if __name__ == "__main__":
    main()
