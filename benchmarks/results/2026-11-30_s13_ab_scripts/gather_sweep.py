"""Session 13: the ancestor-gather GDN verify's tables per step (`gather_tables`: two launches), and its tiling (NC
nodes per tile and per solve step, BV columns, warps) at the depth bound 15, Qwen3.6-27B TP=2 heads, DDTree-shaped
trees; per-kernel times for the default tiling.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_sweep.py
"""

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us, print_kernel_times
from sglang_dflash.kernels.tree_build import ancestors
from sglang_dflash.kernels.tree_gdn import gather_tables
from sglang_dflash.kernels.tree_gdn.naive import ancestor_table_ref
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather

for R, N in [(1, 129), (1, 257), (8, 129), (8, 257)]:
    mask = ancestors(verify_inputs(R, N, "ddtree", heads=(2, 1, 16, 16))[0][-1], 15)  # its parents' ancestor mask
    same = all(torch.equal(a, b) for a, b in zip(gather_tables(mask, 15), ancestor_table_ref(mask, 15)))
    print(f"tables R={R} N={N}: {graph_us(lambda: gather_tables(mask, 15), reps=10):6.1f} us per step (two launches), "
          f"torch reference {graph_us(lambda: ancestor_table_ref(mask, 15), reps=10):6.1f}; equal: {same}", flush=True)

CONFIGS = [(16, 32, 4), (16, 32, 8), (16, 16, 4), (32, 32, 8), (32, 16, 4), (32, 16, 8), (64, 16, 8)]
for R, N, kind in [(1, 129, "ddtree"), (1, 257, "ddtree"), (1, 129, "deep"), (8, 129, "ddtree")]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref = None
    line = []
    for NC, BV, w in CONFIGS:
        tables = ancestor_table(anc, 15, NC)
        run = lambda: tree_gdn_verify_gather(*inputs[:-1], tables, BV=BV, NC=NC, num_warps=w)  # noqa: E731
        o, _ = run()
        ref = o if ref is None else ref
        d = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        line.append(f"NC{NC}/BV{BV}/w{w} {graph_us(run, reps=10):6.1f} ({d:.0e})")
    print(f"R={R} N={N} {kind} depth {depth}: " + "  ".join(line), flush=True)
    tables = ancestor_table(anc, 15)
    print_kernel_times(lambda: tree_gdn_verify_gather(*inputs[:-1], tables), reps=20, top=4, title=f"R={R} N={N} {kind} default")
