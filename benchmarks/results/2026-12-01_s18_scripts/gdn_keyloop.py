"""For session 19: the blocked GDN verify (HEAD) by its key loop's BK and num_stages, graph-timed, at R = 1 and 8;
`once R N` instead: a few eager calls, for Nsight Compute.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s18_scripts/gdn_keyloop.py [once R N]

Why: with the 16-bit key-loop dots (session 18) ptxas spills far less at small BK. sm_90a, R = 8 x 64: BK 64 / 1
stage (the default) 296 B of spill stores, about 6,570 instructions executed a thread (static count plus the loops'
extra iterations: key loop 780 x 2, level loop 259 x 5 at depth 6); BK 32 260 B, about 6,480; BK 16 24 B, about
6,190. R = 1 x 64: BK 64 40 B, BK 16 8 B. With gdn_fast_gates.patch, R = 8 x 64: BK 64 80 B, about 6,040; BK 16 28 B,
about 5,710.
"""

import sys

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

if sys.argv[1:2] == ["once"]:
    R, N = int(sys.argv[2]), int(sys.argv[3])
    args, mask, depth = verify_inputs(R, N, "ddtree")
    for _ in range(4):
        tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
    torch.cuda.synchronize()
    sys.exit(print("done", R, N))
configs = [(None, None), (64, 2), (32, 1), (32, 2), (16, 1), (16, 2)]
cases = [(1, 33, "ddtree"), (1, 64, "ddtree"), (1, 65, "ddtree"), (8, 64, "ddtree"), (8, 65, "ddtree"), (8, 65, "deep")]
print(f"{'case':24s}" + "".join(f"{'default' if bk is None else f'BK{bk} s{st}':>10s}" for bk, st in configs))
for R, N, kind in cases:
    args, mask, depth = verify_inputs(R, N, kind)
    ref, _ = tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
    cells = []
    for bk, st in configs:
        try:
            f = lambda: tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth, BK=bk, num_stages=st)  # noqa: E731
            o, _ = f()
            d = float((o.float() - ref.float()).norm() / ref.float().norm())
            cells.append(f"{graph_us(f, reps=10):8.1f}{'!' if d > 1e-3 else ' '} ")
        except Exception as e:  # noqa: BLE001  (out of resources: reported, not fatal)
            cells.append(f"{type(e).__name__[:8]:>10s}")
    print(f"{f'R={R} N={N} {kind} d{depth}':24s}" + "".join(cells), flush=True)
