"""Session 17: the blocked tree-GDN verify at R = 8 x 64 nodes (DDTree-shaped and deep trees), by V columns per
program, warps, key columns a step (BK) and stages, graph-timed, outputs against the default configuration's. At
R = 8 the default (BV 64, 4 warps) spills 1.1 KB a thread on sm_90 (ptxas): is the R = 8 case bound by that?

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s17_scripts/gdn_r8_configs.py
"""

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

for R, N, kind in [(8, 64, "ddtree"), (8, 64, "deep"), (4, 64, "ddtree"), (1, 64, "ddtree")]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref = tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)[0].float()
    line = []
    for BV, warps, BK, stages in [(None, None, None, None), (32, 4, None, None), (64, 4, None, None), (64, 8, None, None),
                                  (64, 4, 32, 1), (64, 4, 32, 2), (32, 4, 32, 1), (64, 4, 16, 1)]:  # fmt: skip
        cfg = dict(BV=BV, num_warps=warps, BK=BK, num_stages=stages)
        f = lambda cfg=cfg: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth, **cfg)  # noqa: E731
        try:
            d = (f()[0].float() - ref).abs().max().item()
            line.append(f"BV{BV}/w{warps}/BK{BK}/s{stages} {graph_us(f, reps=10):.1f} (d {d:.0e})")
        except Exception as e:  # noqa: BLE001
            line.append(f"BV{BV}/w{warps}/BK{BK}/s{stages} fail {type(e).__name__}")
    print(f"R={R} N={N} {kind} (depth {depth}): " + "  ".join(line), flush=True)
