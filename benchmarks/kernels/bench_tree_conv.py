"""Tree causal conv1d verify + commit per layer (issue 3's target: <= 5 us at N = 64).

    PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_conv.py

Qwen3.6-27B GDN layer at TP=2 per GPU: D = (2 * 16 * 128 + 48 * 128) / 2 = 5120 conv channels,
width 4, bf16 activations and conv state, DDTree-shaped trees. Each timed as 10 calls in one CUDA
graph, median replay / 10. The verify reads the step's window table (`conv_windows`, made once per
step for all 48 GDN layers, as the engine does; its time / 48 is added to the total); commit of a
one-node path, alone and per layer of one launch for all 48 GDN layers (what the engine runs).
Floor: x and y once, the window rows re-read from L2. `--sweep`: the verify at other (BD, BN) tiles.
"""

from __future__ import annotations

import json
import os
import sys

import torch

from benchmarks.timing import graph_us
from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_conv.tree_conv import (
    conv_tiles,
    conv_windows,
    tree_causal_conv1d_triton,
    tree_conv_commit_triton,
)

D, W = 5120, 4
LAYERS = 48  # GDN layers of Qwen3.6-27B
SWEEP = [(32, 16), (64, 8), (64, 16), (64, 32), (64, 64), (128, 16)]  # (BD, BN)


def main() -> None:
    dev = "cuda"
    gen = torch.Generator(device=dev).manual_seed(0)
    rows = []
    for R, N in [(1, 16), (1, 64), (8, 64), (32, 64)]:
        x = torch.randn(R, N, D, generator=gen, device=dev).bfloat16()
        state = torch.randn(R + 1, D, W - 1, generator=gen, device=dev).bfloat16()
        weight = torch.randn(D, W, generator=gen, device=dev).bfloat16()
        slots = torch.arange(R, device=dev)
        tree = build_ddtree(
            torch.randn(R, 15, 64, generator=gen, device=dev) * 2.5, torch.zeros(R, dtype=torch.long, device=dev), N - 1
        )
        accepted = torch.full((R, 16), -1, device=dev, dtype=torch.long)
        accepted[:, 0] = 0
        windows = conv_windows(tree.parents, W)
        row = dict(R=R, N=N, tiles=conv_tiles(N, D))
        verify = lambda tiles=None: tree_causal_conv1d_triton(
            x, state, weight, None, slots, tree.parents, windows=windows, tiles=tiles
        )  # noqa: E731
        row["verify_us"] = graph_us(verify, reps=10)
        row["windows_per_layer_us"] = graph_us(lambda: conv_windows(tree.parents, W), reps=10) / LAYERS
        if "--sweep" in sys.argv:
            row["sweep_us"] = {f"{bd}x{bn}": round(graph_us(lambda t=(bd, bn): verify(t), reps=10), 2) for bd, bn in SWEEP}
        row["commit_us"] = graph_us(lambda: tree_conv_commit_triton(state, slots, x, accepted), reps=10)
        states, xs = state[None].repeat(LAYERS, 1, 1, 1), x[None].repeat(LAYERS, 1, 1, 1)
        batched = graph_us(lambda: tree_conv_commit_triton(states, slots, xs, accepted), reps=2)
        row["commit_batched_us"] = batched / LAYERS  # the engine's one launch for all GDN layers, per layer
        row["total_us"] = row["verify_us"] + row["windows_per_layer_us"] + row["commit_batched_us"]
        row["floor_us"] = 2 * x.numel() * 2 / 4.2e12 * 1e6
        row["verify_TBps"] = 2 * x.numel() * 2 / row["verify_us"] / 1e6
        rows.append(row)
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    if os.environ.get("OUT"):
        json.dump(rows, open(os.path.join(os.environ["OUT"], "tree_conv_bench.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
