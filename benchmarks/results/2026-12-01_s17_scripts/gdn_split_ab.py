"""Session 17: the one-block tree-GDN verify as one launch (the solve in every V tile, HEAD) against two (the solve
once per request x V-head, then each V tile: `split=True`), by V tile, graph-timed, outputs compared.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s17_scripts/gdn_split_ab.py
"""

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

print("case | fused (default tile) | split BV 32 | split BV 64 | split BV 128  (us; d: max |o - fused|)")
for R, N, kind in [(1, 64, "ddtree"), (2, 64, "ddtree"), (4, 64, "ddtree"), (8, 64, "ddtree"), (8, 64, "deep"),
                   (4, 64, "deep"), (8, 32, "ddtree"), (16, 64, "ddtree"), (8, 16, "chain"), (1, 16, "chain")]:  # fmt: skip
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref = tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth, split=False)[0].float()
    line = [f"{graph_us(lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth, split=False), reps=10):.1f}"]
    for BV in (32, 64, 128):
        f = lambda BV=BV: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth, split=True, BV=BV)  # noqa: E731
        try:
            d = (f()[0].float() - ref).abs().max().item()
            line.append(f"{graph_us(f, reps=10):.1f} (d {d:.0e})")
        except Exception as e:  # noqa: BLE001
            line.append(f"fail {type(e).__name__}")
    print(f"R={R} N={N} {kind} (depth {depth}) | " + " | ".join(line), flush=True)
