"""Tree causal conv1d verify + commit per layer (issue 3's target: <= 5 us at N = 64).

    PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_conv.py [SGLANG_WHEEL] [--sweep]

Qwen3.6-27B GDN layer at TP=2 per GPU: D = (2 * 16 * 128 + 48 * 128) / 2 = 5120 conv channels,
width 4, bf16 activations and conv state, DDTree-shaped trees. Each timed as 10 calls in one CUDA
graph, median replay / 10. The verify reads the step's window table (`conv_windows`, made once per
step for all 48 GDN layers, as the engine does; its time / 48 is added to the total); commit of a
one-node path, alone and per layer of one launch for all 48 GDN layers (what the engine runs).
Floor: x and y once, the window rows re-read from L2. `--sweep`: the verify at other (BD, BN) tiles.
Peer in the same run (with SGLang 0.5.10.post1's wheel): its tree-mode `causal_conv1d_update` as its GDN backend
calls it in target verify (x [R, D, N] strided, SiLU, retrieve_next_token / _sibling / _parent_token, a conv window
per draft token written to intermediate_conv_window [R + 1, N, D, W - 1]); verify only (SGLang's commit is a copy of
the accepted token's window), with its largest difference from our outputs.
"""

from __future__ import annotations

import argparse
import json
import os

import torch

from benchmarks.kernels.sglang_peers import conv_tree_update
from benchmarks.timing import failure, graph_us
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


def sglang_verify(update, x, state, weight, slots, tree):
    """fn() -> y [R, N, D]: SGLang's tree-mode conv over the same inputs (module docstring)."""
    R, N, _ = x.shape
    windows = torch.empty(R + 1, N, D, W - 1, device=x.device, dtype=x.dtype)
    parents = tree.parents.clamp_min(0).to(torch.int32)
    nxt, sib = tree.next_token.to(torch.int32), tree.next_sibling.to(torch.int32)
    xt, idx = x.transpose(1, 2), slots.to(torch.int32)
    return lambda: update(xt, state, weight, None, "silu", conv_state_indices=idx, intermediate_conv_window=windows,
                          intermediate_state_indices=idx, retrieve_next_token=nxt, retrieve_next_sibling=sib,
                          retrieve_parent_token=parents).transpose(1, 2)  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", nargs="?", help="SGLang 0.5.10.post1's wheel: its tree-mode conv is the peer")
    parser.add_argument("--sweep", action="store_true", help="the verify at other (BD, BN) tiles too")
    args = parser.parse_args()
    update = conv_tree_update(args.wheel) if args.wheel else None
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
        if args.sweep:
            row["sweep_us"] = {f"{bd}x{bn}": round(graph_us(lambda t=(bd, bn): verify(t), reps=10), 2) for bd, bn in SWEEP}
        row["commit_us"] = graph_us(lambda: tree_conv_commit_triton(state, slots, x, accepted), reps=10)
        states, xs = state[None].repeat(LAYERS, 1, 1, 1), x[None].repeat(LAYERS, 1, 1, 1)
        batched = graph_us(lambda: tree_conv_commit_triton(states, slots, xs, accepted), reps=2)
        row["commit_batched_us"] = batched / LAYERS  # the engine's one launch for all GDN layers, per layer
        row["total_us"] = row["verify_us"] + row["windows_per_layer_us"] + row["commit_batched_us"]
        row["floor_us"] = 2 * x.numel() * 2 / 4.2e12 * 1e6
        row["verify_TBps"] = 2 * x.numel() * 2 / row["verify_us"] / 1e6
        if update is not None:
            peer = sglang_verify(update, x, state, weight, slots, tree)
            try:
                row["sglang_max_diff"] = (
                    (verify().float() - peer().float()).abs().max().item()
                )  # ours first: SGLang's may write the state
                row["sglang_verify_us"] = graph_us(peer, reps=10)
            except Exception as e:  # noqa: BLE001 - a peer that does not run here is a result too
                row["sglang_error"] = failure(e)
        rows.append(row)
        print(json.dumps({k: round(v, 2) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
    if os.environ.get("OUT"):
        json.dump(rows, open(os.path.join(os.environ["OUT"], "tree_conv_bench.json"), "w"), indent=1)


if __name__ == "__main__":
    main()
