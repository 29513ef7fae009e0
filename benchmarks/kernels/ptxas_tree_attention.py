"""Registers, spills and ptxas's performance warnings of the tree-attention builds, on a machine without a GPU.

    python benchmarks/kernels/ptxas_tree_attention.py [--sm 90|86] [--nodes 16,64,65] [--bm 128 --bn 64 ...]

The kernel as `tree_attention` launches it (tile sizes, warps and stages as the wrapper picks them on an H200 or
an A6000, or as given), at Qwen3.6-27B's TP=2 full-attention shapes (12 query heads, 2 KV heads, head dim 256)
over a 4096-token prefix. Warning C7515 means ptxas serialised the wgmma instructions (Hopper's tensor-core
pipeline). It came from the ancestor mask loaded as a [BM, BN] byte tile inside the key loop (and
from a second key loop): the kernel now reads one bit word per row and tile, in one loop, and builds without it.
"""

from __future__ import annotations

import argparse
import os

import torch
from ptxas_tree_gdn import ptxas_report, recorded_launches

from sglang_dflash.kernels.tree_attention import tree_attention

HQ, HKV, DH, PREFIX = 12, 2, 256, 4096


def launch(sm: int, N: int, **config):
    """(kernel, args, kwargs) of the attention launch, as the wrapper makes it on that GPU."""
    e, bf16 = torch.empty, torch.bfloat16
    with recorded_launches(sm) as seen:
        q, cache, tree = e(1, N, HQ, DH, dtype=bf16), e(1, PREFIX, HKV, DH, dtype=bf16), e(1, N, HKV, DH, dtype=bf16)
        tree_attention(q, cache, cache, torch.tensor([PREFIX]), tree, tree, torch.zeros(1, N, N, dtype=torch.bool), **config)
    return seen[0]  # the attention kernel; the merge kernel follows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sm", type=int, choices=(86, 90), default=90)
    p.add_argument("--nodes", type=lambda s: [int(x) for x in s.split(",")], default=[16, 64, 65])
    for name in ("bm", "bn", "warps", "stages"):
        p.add_argument(f"--{name}", type=int, default=None, help="default: the wrapper's")
    args = p.parse_args()
    config = dict(BM=args.bm, BN=args.bn, num_warps=args.warps, num_stages=args.stages)
    for N in args.nodes:
        kernel, a, kw = launch(args.sm, N, **config)
        shared, info, warnings = ptxas_report(kernel, a, kw, args.sm)
        tiles = f"BM={kw['BM']} BN={kw['BN']} {kw['num_warps']} warps {kw['num_stages']} stages"
        print(f"sm_{args.sm} N={N} {tiles}: shared {shared} B; {info}; {warnings or 'no performance warning'}", flush=True)


if __name__ == "__main__":
    if os.environ.get("TRITON_INTERPRET") == "1":
        raise SystemExit("run without TRITON_INTERPRET: the kernels must be compiled, not interpreted")
    main()
