"""Session 18: the blocked GDN verify (working tree) by V tile (BV) and warps, graph-timed, at R = 1 (latency-bound:
96 programs at BV 32 on 132 SMs) and R = 8 x 64. `once` instead: a few eager calls at R = 1 x 64, for Nsight Compute.
`once` and `sweep` serve gdn_keyloop.py too.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s18_scripts/gdn_tiles.py [once]
"""

import sys

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton


def once(R: int, N: int) -> None:
    """A few eager calls of the verify of R DDTree-shaped trees of N nodes."""
    args, mask, depth = verify_inputs(R, N, "ddtree")
    for _ in range(4):
        tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
    torch.cuda.synchronize()
    print("done", R, N)


def sweep(cases: list[tuple[int, int, str]], configs: list[tuple[str, dict]]) -> None:
    """A table: per case (R, N, kind), the verify's us with each config's keyword arguments; `!` where the output is
    more than 1e-3 off the default call's, the exception's name where the launch fails (out of resources)."""
    print(f"{'case':24s}" + "".join(f"{label:>10s}" for label, _ in configs))
    for R, N, kind in cases:
        args, mask, depth = verify_inputs(R, N, kind)
        ref, _ = tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
        cells = []
        for _, kw in configs:
            try:
                f = lambda: tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth, **kw)  # noqa: B023, E731
                o, _ = f()
                d = float((o.float() - ref.float()).norm() / ref.float().norm())
                cells.append(f"{graph_us(f, reps=10):8.1f}{'!' if d > 1e-3 else ' '} ")
            except Exception as e:  # noqa: BLE001  (out of resources: reported, not fatal)
                cells.append(f"{type(e).__name__[:8]:>10s}")
        print(f"{f'R={R} N={N} {kind} d{depth}':24s}" + "".join(cells), flush=True)


if __name__ == "__main__":
    if sys.argv[1:] == ["once"]:
        sys.exit(once(1, 64))
    cases = [(1, 16, "chain"), (1, 33, "ddtree"), (1, 64, "ddtree"), (1, 65, "ddtree"), (8, 64, "ddtree")]
    sweep(cases, [(f"BV{bv} w{w}", dict(BV=bv, num_warps=w)) for bv in (16, 32, 64) for w in (2, 4, 8)])
