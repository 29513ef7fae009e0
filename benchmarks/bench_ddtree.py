"""Draft-tree build + greedy acceptance on the GPU, CUDA-graph timed (issue 2's benchmark).

    python benchmarks/bench_ddtree.py [--out DIR]

For R requests, L = 15 depths, vocabulary 248,320 (Qwen3.6), budget B (N = B + 1 nodes), bf16
logits as an LM head produces them. Three target cases: random verify logits (the walk stops at the
root or soon after: the shallow case); mid, the walk forced down the first MID_DEPTH depths of the deep path
below (a realistic accept); and deep logits, the same with the argmax of every node on the
root path of a depth-L node forced to that path's next token (the walk reaches depth L: the worst
case for accept_greedy; its tree is built from draft logits with one boosted token per depth so that
it has a depth-L chain). Stages, each captured in its own CUDA graph and timed by
triton.testing.do_bench (median of replays):
  vocab   draft_log_probs: top-B and logsumexp over the draft logits    [R, L, V] read
  tree    build_ddtree_from_top_k: beams, global top-B, DraftTree tensors
  cond    build_conditional_tree (Triton on CUDA): the same from COND_K candidates a depth and parent-to-child
          scores (DFlash2's selector, DSpark's Markov head), its inputs random
  argmax  the target's argmax over all verify logits                    [R, N, V] read
          (kernels.vocab.argmax; torch.argmax beside it as a second peer): the previous accept path
  walk    walk_tree: the acceptance rule given the target tokens (with argmax: the previous path)
  accept  kernels.tree_walk.greedy_walk: the argmax of the accepted path's rows only, at most
          L + 1 per request (one launch), random, mid and deep logits
  total   build_ddtree + accept_greedy in one graph, random, mid and deep logits (accept_greedy takes
          greedy_walk from R * N >= ddtree.PATH_WALK_ROWS rows, argmax + walk below)
The peer, in the same run: the reference's host-side heap (GPU top-k, copy to host, best-first
heap, visibility matrix row by row, copy back), R = 1, wall clock. Floors, over the copy bandwidth
measured in the same run: `all` the bytes of the two logits tensors (what build + the all-rows argmax
read), `path` the draft logits plus the target rows on the deep walk's path (L + 1 per request).
"""

from __future__ import annotations

import argparse
import dataclasses
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
from sglang_dflash.conditional_tree import build_conditional_tree  # noqa: E402
from sglang_dflash.ddtree import (  # noqa: E402
    DraftTree,
    accept_greedy,
    build_ddtree,
    build_ddtree_from_top_k,
    draft_log_probs,
    walk_tree,
)
from sglang_dflash.kernels import vocab  # noqa: E402
from sglang_dflash.kernels.tree_build import tree_build  # noqa: E402
from sglang_dflash.kernels.tree_walk import greedy_walk  # noqa: E402

V, L = 248_320, 15
# The mid case's accepted depth. DDTree's mean tokens a round (accepted + bonus) are 8-11 on the paper's math and
# code sets with Qwen3, less on chat (the DDTree paper, section 3): 6 accepted depths is a middling accept.
MID_DEPTH = 6
COND_K = 16  # candidates per depth of the conditional build (DFlash2's released selector_top_k)
ACCEPTANCE_FIELDS = ("accept_len", "accepted_nodes", "bonus_tokens")


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


def deep_draft(draft: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """Draft logits with one token per depth boosted: the tree then holds a chain down to depth L."""
    R, depths, vocab_size = draft.shape
    boosted = torch.randint(0, vocab_size, (R, depths, 1), generator=gen, device=draft.device)
    return draft.scatter_add(2, boosted, torch.full((R, depths, 1), 30.0, device=draft.device, dtype=draft.dtype))


def deep_target(tree: DraftTree, target: torch.Tensor, depth: int | None = None) -> torch.Tensor:
    """target with the argmax of each node on the root path of the (first) deepest node set to the next
    node's token (value 100, above any randn entry): the greedy walk accepts that whole path, or its first `depth`
    draft nodes (then, almost surely, the random argmax of the next row matches no child)."""
    deepest = tree.depths.argmax(1)
    rows = torch.arange(target.shape[0], device=target.device)
    on_path = tree.ancestor_mask[rows, deepest]  # [R, N]: the path, root and deepest node included
    on_path[:, 0] = False  # the root has no parent to force
    if depth is not None:
        on_path &= tree.depths <= depth
    r, i = on_path.nonzero(as_tuple=True)
    forced = target.clone()
    forced[r, tree.parents[r, i], tree.token_ids[r, i]] = 100.0
    return forced


def check_against_cpu(gen: torch.Generator) -> bool:
    """The GPU tree and acceptance equal the CPU ones (float32 logits: no ties; bf16 target logits,
    random and deep, through greedy_walk: ties to the smaller index)."""
    logits = torch.randn(8, L, V, generator=gen, device="cuda") * 4
    target = torch.randn(8, 65, V, generator=gen, device="cuda")
    roots = torch.arange(8, device="cuda")
    gpu = build_ddtree(logits, roots, 64)
    cpu = build_ddtree(logits.cpu(), roots.cpu(), 64)
    same = all(
        torch.equal(getattr(gpu, f).cpu(), getattr(cpu, f))
        for f in ("token_ids", "parents", "ancestor_mask", "next_token", "next_sibling")
    )
    deep = build_ddtree(deep_draft(logits, gen), roots, 64)
    deep_logits = deep_target(deep, target)
    for tree, t in ((gpu, target), (gpu, target.bfloat16()), (deep, deep_logits), (deep, deep_logits.bfloat16())):
        a, b = accept_greedy(tree, t), accept_greedy(cpu_tree(tree), t.cpu())
        same &= all(torch.equal(x.cpu(), y) for x, y in ((getattr(a, f), getattr(b, f)) for f in ACCEPTANCE_FIELDS))
    return same and bool((accept_greedy(deep, deep_logits).accept_len == L).all())


def cpu_tree(tree: DraftTree) -> DraftTree:
    fields = {f.name: getattr(tree, f.name) for f in dataclasses.fields(tree)}
    return DraftTree(**{k: v.cpu() if torch.is_tensor(v) else v for k, v in fields.items()})


def profile(gen: torch.Generator) -> None:
    """Per-kernel CUDA time of one eager build + accept (R = 8); sweeps of the tree build's num_warps, the
    vocabulary pass's chunk width and the deep walk's programs per request."""
    for B in (16, 64, 256):
        draft = (torch.randn(8, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
        target = torch.randn(8, B + 1, V, generator=gen, device="cuda").to(torch.bfloat16)
        roots = torch.zeros(8, dtype=torch.long, device="cuda")
        step = lambda: accept_greedy(build_ddtree(draft, roots, B, validate=False), target)  # noqa: E731
        print_kernel_times(step, reps=10, top=14, title=f"--- R=8 B={B}: per-kernel CUDA time, us per step")
        logp, ids = draft_log_probs(draft, B)
        sweep = {w: graph_us(lambda: tree_build(logp, ids, roots, B, num_warps=w)) for w in (1, 2, 4, 8, 16)}
        print(f"tree build num_warps sweep (us): {sweep}", flush=True)
        sweep = {c: graph_us(lambda: vocab.draft_log_probs(draft, B, chunk=c)) for c in (128, 256, 512, 1024)}
        print(f"vocabulary pass chunk sweep (us): {sweep}", flush=True)
        deep = build_ddtree(deep_draft(draft, gen), roots, B)
        target_deep = deep_target(deep, target)
        walk = lambda p: greedy_walk(deep.token_ids, deep.parents, target_deep, deep.max_depth, programs=p)  # noqa: E731
        print(f"deep walk programs-per-request sweep (us): { {p: graph_us(lambda: walk(p)) for p in (4, 8, 16)} }")


def path_walk(tree: DraftTree, target: torch.Tensor):
    return greedy_walk(tree.token_ids, tree.parents, target, tree.max_depth)


def conditional_inputs(R: int, B: int, gen: torch.Generator) -> tuple:
    """A DFlash2-like head's inputs to `build_conditional_tree`: COND_K candidates per depth (its released top-K),
    random log-scores normalised over them."""
    cand = torch.randint(0, V, (R, L, COND_K), generator=gen, device="cuda")
    first = torch.log_softmax(torch.randn(R, COND_K, generator=gen, device="cuda") * 3, -1)
    step = torch.log_softmax(torch.randn(R, L - 1, COND_K, COND_K, generator=gen, device="cuda") * 3, -1)
    return cand, first, step


def bench_case(R: int, B: int, gen: torch.Generator, bw: float) -> dict:
    """One (R, B) row: every stage graph-timed, the floors, and the heap peer at R = 1."""
    N = B + 1
    draft = (torch.randn(R, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
    target = torch.randn(R, N, V, generator=gen, device="cuda").to(torch.bfloat16)
    roots = torch.randint(0, V, (R,), generator=gen, device="cuda")
    logp, ids = draft_log_probs(draft, B)
    tree = build_ddtree(draft, roots, B)
    tokens = target.argmax(-1)
    draft_deep = deep_draft(draft, gen)
    tree_deep = build_ddtree(draft_deep, roots, B)
    target_deep = deep_target(tree_deep, target)
    target_mid = deep_target(tree_deep, target, MID_DEPTH)
    cond = conditional_inputs(R, B, gen)
    accepted, accepted_deep = accept_greedy(tree, target).accept_len, accept_greedy(tree_deep, target_deep).accept_len
    accepted_mid = accept_greedy(tree_deep, target_mid).accept_len
    row = dict(
        R=R,
        B=B,
        N=N,
        vocab_us=graph_us(lambda: draft_log_probs(draft, B)),
        tree_us=graph_us(lambda: build_ddtree_from_top_k(logp, ids, roots, B)),
        cond_tree_us=graph_us(lambda: build_conditional_tree(*cond, roots, B, validate=False)),
        argmax_us=graph_us(lambda: vocab.argmax(target)),
        argmax_torch_us=graph_us(lambda: target.argmax(-1)),
        walk_us=graph_us(lambda: walk_tree(tree, tokens)),
        accept_us=graph_us(lambda: path_walk(tree, target)),
        accept_deep_us=graph_us(lambda: path_walk(tree_deep, target_deep)),
        accept_mid_us=graph_us(lambda: path_walk(tree_deep, target_mid)),
        total_us=graph_us(lambda: accept_greedy(build_ddtree(draft, roots, B, validate=False), target)),
        total_deep_us=graph_us(lambda: accept_greedy(build_ddtree(draft_deep, roots, B, validate=False), target_deep)),
        total_mid_us=graph_us(lambda: accept_greedy(build_ddtree(draft_deep, roots, B, validate=False), target_mid)),
        floor_us=(draft.numel() + target.numel()) * 2 / bw * 1e6,
        floor_path_us=(draft.numel() + R * (int(tree_deep.depths.max()) + 1) * V) * 2 / bw * 1e6,
        peer_r1_us=peer_us(draft, B) if R == 1 else None,
        max_depth=int(tree.depths.max()),
        max_depth_deep=int(tree_deep.depths.max()),
        mean_accept_len=accepted.float().mean().item(),
        mean_accept_len_deep=accepted_deep.float().mean().item(),
        mean_accept_len_mid=accepted_mid.float().mean().item(),
    )
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT", "."), help="directory for ddtree_bench.json")
    ap.add_argument("--requests", default="1,8,32")
    ap.add_argument("--budgets", default="16,64,256")
    ap.add_argument(
        "--profile",
        action="store_true",
        help="also print per-kernel times (R=8) and sweeps: tree build num_warps, vocabulary chunk, walk programs",
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
    print(f"\n{result['device']}, torch {torch.__version__}, copy {bw / 1e12:.2f} TB/s")
    print(f"GPU tree and acceptance == CPU: {gpu_equals_cpu}")
    print_table(rows)


def print_table(rows: list[dict]) -> None:
    print(
        "                             |        build         | previous accept |     accept_greedy      |"
        "     build + accept     |    floor    |\n"
        "   R     B  accepted         |  vocab   tree   cond |  argmax   walk  |   rand     mid    deep |"
        "   rand     mid    deep |   all  path | peer(R=1 heap)\n"
        f"   [us, medians; accepted: mean accepted length, random / mid (first {MID_DEPTH} depths) / deep logits]"
    )
    for r in rows:
        peer = f"{r['peer_r1_us']:9.0f}" if r["peer_r1_us"] is not None else "        -"
        print(
            f"{r['R']:4d} {r['B']:5d} {r['mean_accept_len']:4.1f} / {r['mean_accept_len_mid']:4.1f} /"
            f" {r['mean_accept_len_deep']:4.1f} | {r['vocab_us']:6.1f} {r['tree_us']:6.1f} {r['cond_tree_us']:6.1f} |"
            f"  {r['argmax_us']:6.1f} {r['walk_us']:6.1f}  | {r['accept_us']:6.1f}  {r['accept_mid_us']:6.1f}"
            f" {r['accept_deep_us']:6.1f} | {r['total_us']:6.1f}  {r['total_mid_us']:6.1f} {r['total_deep_us']:6.1f} |"
            f" {r['floor_us']:5.1f} {r['floor_path_us']:5.1f} | {peer}"
        )


if __name__ == "__main__":
    main()
