"""greedy_walk by lookahead rows per round: random target logits (the walk stops at the root), deep (the draft's
first-child chain to depth 15: every lookahead row used) and sibling (a path through second children wherever a node
has two: every lookahead row wasted). Same process, CUDA-graph timed."""
import os
import sys

import torch

sys.path.insert(0, os.getcwd())
from benchmarks.bench_ddtree import L, V, deep_draft, deep_target  # noqa: E402
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.ddtree import build_ddtree, walk_tree_ref  # noqa: E402
from sglang_dflash.kernels.tree_walk import greedy_walk  # noqa: E402


def sibling_target(tree, target):
    """target whose argmax leads from the root through the second child of every node that has two (else the
    first), down to a leaf."""
    forced = target.clone()
    for r in range(tree.parents.shape[0]):
        parents = tree.parents[r].tolist()
        cur = 0
        while True:
            kids = [i for i, p in enumerate(parents) if p == cur]
            if not kids:
                break
            nxt = kids[1] if len(kids) > 1 else kids[0]
            forced[r, cur, tree.token_ids[r, nxt]] = 100.0
            cur = nxt
    return forced


gen = torch.Generator(device="cuda").manual_seed(3)
for R, B in [(8, 64), (1, 64)]:
    draft = (torch.randn(R, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
    target = torch.randn(R, B + 1, V, generator=gen, device="cuda").to(torch.bfloat16)
    roots = torch.zeros(R, dtype=torch.long, device="cuda")
    tree = build_ddtree(deep_draft(draft, gen), roots, B)
    cases = {"random": target, "deep": deep_target(tree, target), "sibling": sibling_target(tree, target)}
    for name, t in cases.items():
        ref = walk_tree_ref(tree.token_ids, tree.parents, tree.depths, tree.ancestor_mask, t.argmax(-1), tree.max_depth)
        line = f"R={R} B={B} {name:8s} accept_len {ref[0].float().mean().item():4.1f}:"
        for la in (1, 2, 3, 4):
            f = lambda: greedy_walk(tree.token_ids, tree.parents, t, tree.max_depth, lookahead=la)  # noqa: E731
            got = f()
            same = all(torch.equal(a, b) for a, b in zip(got, ref))
            line += f" LA{la} {graph_us(f):6.1f}{'' if same else ' MISMATCH'}"
        print(line, flush=True)
