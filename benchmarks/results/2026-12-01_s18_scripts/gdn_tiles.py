"""Session 18: the blocked GDN verify (working tree) by V tile (BV) and warps, graph-timed, at R = 1 (latency-bound:
96 programs at BV 32 on 132 SMs) and R = 8 x 64. `once` instead: a few eager calls at R = 1 x 64, for Nsight Compute.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s18_scripts/gdn_tiles.py [once]
"""

import sys

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

if sys.argv[1:] == ["once"]:
    args, mask, depth = verify_inputs(1, 64, "ddtree")
    for _ in range(4):
        tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
    torch.cuda.synchronize()
    sys.exit(print("done"))
cases = [(1, 16, "chain"), (1, 33, "ddtree"), (1, 64, "ddtree"), (1, 65, "ddtree"), (8, 64, "ddtree")]
print(f"{'case':24s}" + "".join(f"{f'BV{bv} w{w}':>10s}" for bv in (16, 32, 64) for w in (2, 4, 8)))
for R, N, kind in cases:
    args, mask, depth = verify_inputs(R, N, kind)
    ref, _ = tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
    cells = []
    for bv in (16, 32, 64):
        for w in (2, 4, 8):
            try:
                f = lambda: tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth, BV=bv, num_warps=w)  # noqa: E731
                o, _ = f()
                d = float((o.float() - ref.float()).norm() / ref.float().norm())
                cells.append(f"{graph_us(f, reps=10):8.1f}{'!' if d > 1e-3 else ' '} ")
            except Exception as e:  # noqa: BLE001  (out of resources: reported, not fatal)
                cells.append(f"{type(e).__name__[:8]:>10s}")
    print(f"{f'R={R} N={N} {kind} d{depth}':24s}" + "".join(cells), flush=True)
