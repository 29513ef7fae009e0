"""Session 22 (prepared, untimed): programmatic dependent launch for the GDN layer's kernels, off / on in one process.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s22_scripts/gdn_pdl_ab.py   # with gdn_pdl.patch applied

`kernels.device.PDL` flipped between rounds (off, on, off, on; medians of each side's two rounds), Qwen3.6-27B TP=2
shapes (HV 24, H 8, K = V = 128; conv 5,120 channels, width 4), DDTree trees of 64 nodes, R = 1 and 8:
  verify x10     tree_gdn_verify_triton, ten calls a graph (issue 3's benchmark; with PDL each call overlaps the
                 previous one's end, which a layer does not: read it with the next line)
  layer x48      48 x [a torch kernel standing in for the in-projection GEMM (not PDL), tree conv, GDN verify] in
                 one graph: us a layer (the conv -> verify boundary is the one PDL can shorten in the server)
  commit         the batched commit of 48 layers (one launch; a torch kernel before it): us a layer
"""

from __future__ import annotations

import statistics

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_conv.tree_conv import conv_windows, tree_causal_conv1d_triton
from sglang_dflash.kernels.tree_gdn.tree_gdn import context_tables, tree_gdn_commit_triton, tree_gdn_verify_triton

CONV_D, CONV_W, LAYERS = 5120, 4, 48
DEV = "cuda"


def cases():
    out = {}
    for R in (1, 8):
        inputs, anc, _ = verify_inputs(R, 64, "ddtree", DEV)
        q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
        gen = torch.Generator(device=DEV).manual_seed(R)
        x = torch.randn(R, 64, CONV_D, generator=gen, device=DEV).bfloat16()
        state = torch.randn(R + 1, CONV_D, CONV_W - 1, generator=gen, device=DEV).bfloat16()
        weight = torch.randn(CONV_D, CONV_W, generator=gen, device=DEV).bfloat16()
        windows = conv_windows(parents, CONV_W)
        stand_in = torch.zeros(1 << 20, device=DEV)
        verify = lambda i=inputs, m=anc: tree_gdn_verify_triton(*i, ancestor_mask=m)  # noqa: E731

        def layers(i=inputs, m=anc, x=x, state=state, weight=weight, slots=slots, windows=windows, s=stand_in):
            for _ in range(LAYERS):
                s.add_(1.0)
                tree_causal_conv1d_triton(x, state, weight, None, slots, None, windows=windows)
                tree_gdn_verify_triton(*i, ancestor_mask=m)

        ctx = verify()[1]
        pools = torch.zeros(LAYERS, *pool.shape, device=DEV)
        accepted = torch.full((R, 16), -1, device=DEV, dtype=torch.long)
        accepted[:, :4] = torch.tensor([0, 1, 2, 3], device=DEV)  # (nodes 1-3 need not be a path for timing)
        table = context_tables([ctx] * LAYERS)
        commit = lambda p=pools, t=table, a=accepted, s=slots, z=stand_in: (z.add_(1.0), tree_gdn_commit_triton(p, s, t, a))  # noqa: E731
        out[f"R={R} N=64 verify x10"] = (verify, 10, 1)
        out[f"R={R} N=64 layer x48 (conv + verify)"] = (layers, 1, LAYERS)
        out[f"R={R} N=64 commit, 48 layers"] = (commit, 1, LAYERS)
    return out


def main() -> None:
    todo = cases()
    results = {name: {False: [], True: []} for name in todo}
    for rnd, on in enumerate((False, True, False, True)):
        gpu.PDL = on
        for name, (fn, reps, per) in todo.items():
            results[name][on].append(graph_us(fn, reps=reps) / per)
        print(f"round {rnd} (PDL {'on' if on else 'off'}) done", flush=True)
    print(f"\n{'case':40s} {'PDL off':>9s} {'PDL on':>9s}   (us a call / a layer, median of 2 rounds each)")
    for name, r in results.items():
        print(f"{name:40s} {statistics.median(r[False]):9.2f} {statistics.median(r[True]):9.2f}   off {r[False]} on {r[True]}")


if __name__ == "__main__":
    main()
