"""Draft-tree build + greedy acceptance on the GPU, CUDA-graph timed (issue 2's benchmark).

    python benchmarks/bench_ddtree.py [--out DIR]

For R requests, L = 15 depths, vocabulary 248,320 (Qwen3.6), budget B (N = B + 1 nodes), bf16
logits as an LM head produces them. Stages, each captured in its own CUDA graph and timed by
triton.testing.do_bench (median of replays):
  vocab  draft_log_probs: top-B and logsumexp over the draft logits    [R, L, V] read
  tree   build_ddtree_from_top_k: beams, global top-B, DraftTree tensors
  argmax the target's argmax over the verify logits                    [R, N, V] read
         (kernels.vocab.argmax; torch.argmax beside it as a second peer)
  walk   walk_tree: the acceptance rule given the target tokens
  total  build_ddtree + accept_greedy in one graph
The peer, in the same run: the reference's host-side heap (GPU top-k, copy to host, best-first
heap, visibility matrix row by row, copy back), R = 1, wall clock. The floor is the bytes of the
two logits tensors over the copy bandwidth measured in the same run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch
import triton

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from reference_heap import heap_tree_tensors  # noqa: E402

from benchmarks.timing import graph_us, print_kernel_times  # noqa: E402
from sglang_dflash.ddtree import (  # noqa: E402
    accept_greedy,
    build_ddtree,
    build_ddtree_from_top_k,
    draft_log_probs,
    walk_tree,
)
from sglang_dflash.kernels import vocab  # noqa: E402
from sglang_dflash.kernels.tree_build import tree_build  # noqa: E402

V, L = 248_320, 15


def copy_bandwidth() -> float:
    """Device-to-device copy bandwidth in bytes/s, counting bytes read and written."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = triton.testing.do_bench(lambda: dst.copy_(src), warmup=20, rep=200, return_mode="median")
    return 2 * src.numel() / (ms * 1e-3)


def peer_us(draft_logits: torch.Tensor, budget: int, repeats: int = 15) -> float:
    times = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        heap_tree_tensors(draft_logits[0], budget)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e6)
    return statistics.median(times)


def check_against_cpu(gen: torch.Generator) -> bool:
    """The GPU tree and acceptance equal the CPU ones (float32 logits: no ties)."""
    logits = torch.randn(8, L, V, generator=gen, device="cuda") * 4
    target = torch.randn(8, 65, V, generator=gen, device="cuda")
    roots = torch.arange(8, device="cuda")
    gpu = build_ddtree(logits, roots, 64)
    cpu = build_ddtree(logits.cpu(), roots.cpu(), 64)
    same = all(
        torch.equal(getattr(gpu, f).cpu(), getattr(cpu, f))
        for f in ("token_ids", "parents", "ancestor_mask", "next_token", "next_sibling")
    )
    a, b = accept_greedy(gpu, target), accept_greedy(cpu, target.cpu())
    return same and torch.equal(a.accepted_nodes.cpu(), b.accepted_nodes) and torch.equal(a.bonus_tokens.cpu(), b.bonus_tokens)


def profile(gen: torch.Generator) -> None:
    """Per-kernel CUDA time of one eager build + accept (R = 8), and the tree build's num_warps sweep."""
    for B in (16, 64, 256):
        draft = (torch.randn(8, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
        target = torch.randn(8, B + 1, V, generator=gen, device="cuda").to(torch.bfloat16)
        roots = torch.zeros(8, dtype=torch.long, device="cuda")
        step = lambda: accept_greedy(build_ddtree(draft, roots, B, validate=False), target)  # noqa: E731
        print_kernel_times(step, reps=10, top=14, title=f"--- R=8 B={B}: per-kernel CUDA time, us per step")
        logp, ids = draft_log_probs(draft, B)
        sweep = {w: graph_us(lambda: tree_build(logp, ids, roots, B, num_warps=w)) for w in (1, 2, 4, 8)}
        print(f"tree build num_warps sweep (us): {sweep}", flush=True)


def bench_case(R: int, B: int, gen: torch.Generator, bw: float) -> dict:
    """One (R, B) row: every stage graph-timed, the floor, and the heap peer at R = 1."""
    N = B + 1
    draft = (torch.randn(R, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
    target = torch.randn(R, N, V, generator=gen, device="cuda").to(torch.bfloat16)
    roots = torch.randint(0, V, (R,), generator=gen, device="cuda")
    logp, ids = draft_log_probs(draft, B)
    tree = build_ddtree(draft, roots, B)
    tokens = target.argmax(-1)
    return dict(
        R=R,
        B=B,
        N=N,
        vocab_us=graph_us(lambda: draft_log_probs(draft, B)),
        tree_us=graph_us(lambda: build_ddtree_from_top_k(logp, ids, roots, B)),
        argmax_us=graph_us(lambda: vocab.argmax(target)),
        argmax_torch_us=graph_us(lambda: target.argmax(-1)),
        walk_us=graph_us(lambda: walk_tree(tree, tokens)),
        total_us=graph_us(lambda: accept_greedy(build_ddtree(draft, roots, B, validate=False), target)),
        floor_us=(draft.numel() + target.numel()) * 2 / bw * 1e6,
        peer_r1_us=peer_us(draft, B) if R == 1 else None,
        max_depth=int(tree.depths.max()),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="directory for ddtree_bench.json")
    ap.add_argument("--requests", default="1,8,32")
    ap.add_argument("--budgets", default="16,64,256")
    ap.add_argument(
        "--profile", action="store_true", help="also print per-kernel times (R=8) and a num_warps sweep of the tree build"
    )
    args = ap.parse_args()
    if args.profile:
        profile(torch.Generator(device="cuda").manual_seed(1))
    gen = torch.Generator(device="cuda").manual_seed(0)
    bw = copy_bandwidth()
    gpu_equals_cpu = check_against_cpu(gen)
    rows = []
    for R in map(int, args.requests.split(",")):
        for B in map(int, args.budgets.split(",")):
            rows.append(bench_case(R, B, gen, bw))
            print(json.dumps(rows[-1]), flush=True)
            torch.cuda.empty_cache()

    result = dict(
        device=torch.cuda.get_device_name(),
        torch=torch.__version__,
        triton=triton.__version__,
        copy_bandwidth_TBps=bw / 1e12,
        gpu_equals_cpu=gpu_equals_cpu,
        rows=rows,
    )
    with open(os.path.join(args.out, "ddtree_bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(f"\n{result['device']}, torch {torch.__version__}, copy {bw / 1e12:.2f} TB/s, GPU tree == CPU tree: {gpu_equals_cpu}")
    print("   R     B |  vocab   tree  argmax  walk |  total  floor | peer(R=1 heap)   [us, medians]")
    for r in rows:
        peer = f"{r['peer_r1_us']:9.0f}" if r["peer_r1_us"] is not None else "        -"
        print(
            f"{r['R']:4d} {r['B']:5d} | {r['vocab_us']:6.1f} {r['tree_us']:6.1f} {r['argmax_us']:6.1f} {r['walk_us']:5.1f} |"
            f" {r['total_us']:6.1f} {r['floor_us']:6.1f} | {peer}"
        )


if __name__ == "__main__":
    main()
