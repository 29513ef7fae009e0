"""Session 19: a few eager calls of build + greedy accept at R = 8, B = 64 with the 15-deep accepted path (the case of
issue 2's target that is not met), for Nsight Compute: the vocabulary pass, the tree build and the path walk.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s19_scripts/ddtree_once.py
"""

import torch

from benchmarks.bench_ddtree import L, V, deep_draft, deep_target
from sglang_dflash.ddtree import accept_greedy, build_ddtree

R, B = 8, 64
gen = torch.Generator(device="cuda").manual_seed(0)
draft = deep_draft((torch.randn(R, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16), gen)
target = torch.randn(R, B + 1, V, generator=gen, device="cuda").to(torch.bfloat16)
roots = torch.randint(0, V, (R,), generator=gen, device="cuda")
tree = build_ddtree(draft, roots, B)
target = deep_target(tree, target)
for _ in range(3):
    out = accept_greedy(build_ddtree(draft, roots, B, validate=False), target)
torch.cuda.synchronize()
print("accept_len", out.accept_len.tolist())
