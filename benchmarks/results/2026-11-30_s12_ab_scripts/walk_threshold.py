"""Session 12 call 8: accept_greedy's two GPU paths at small R x N (the PATH_WALK_ROWS threshold): the one-launch
path walk against the all-rows argmax + walk_tree, with the walk stopping at the root, at 6 depths and at 15."""
import sys

import torch

sys.path.insert(0, ".")
from benchmarks.bench_ddtree import deep_draft, deep_target  # noqa: E402
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.ddtree import build_ddtree, walk_tree  # noqa: E402
from sglang_dflash.kernels import vocab  # noqa: E402
from sglang_dflash.kernels.tree_walk import greedy_walk  # noqa: E402

V, L = 248_320, 15
print(torch.cuda.get_device_name(), flush=True)
for R in (1, 2, 4, 8):
    for B in (16, 32, 64):
        gen = torch.Generator(device="cuda").manual_seed(R * 1000 + B)
        draft = deep_draft((torch.randn(R, L, V, generator=gen, device="cuda") * 4).bfloat16(), gen)
        tree = build_ddtree(draft, torch.zeros(R, dtype=torch.long, device="cuda"), B)
        target = torch.randn(R, B + 1, V, generator=gen, device="cuda").bfloat16()
        rows = {"root": target, "mid": deep_target(tree, target, 6), "deep": deep_target(tree, target)}
        all_rows = graph_us(lambda: walk_tree(tree, vocab.argmax(target)), reps=10)
        path = {k: graph_us(lambda t=t: greedy_walk(tree.token_ids, tree.parents, t, tree.max_depth), reps=10) for k, t in rows.items()}
        print(f"R={R} B={B} rows {R * (B + 1)}: all-rows {all_rows:5.1f} | path root {path['root']:5.1f} mid {path['mid']:5.1f} deep {path['deep']:5.1f}", flush=True)
