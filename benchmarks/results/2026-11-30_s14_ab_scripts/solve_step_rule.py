"""Session 14, call 2: the gather verify's solve step (16 nodes, 4 warps: the default; 32 nodes at 8 or 4 warps) on
the shapes call 1's sweep left open (deep 256-node trees, R = 2 and 4), depth bound 15, Qwen3.6-27B TP=2 heads.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s14_ab_scripts/solve_step_rule.py
"""

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather

CONFIGS = [(16, 4), (32, 8), (32, 4)]  # step nodes, solve warps (BV 32)
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for R, N, kind in [(1, 256, "ddtree"), (1, 256, "deep"), (1, 257, "deep"), (1, 192, "ddtree"), (1, 192, "deep"),
                   (1, 160, "ddtree"), (2, 129, "ddtree"), (2, 257, "ddtree"), (4, 257, "ddtree")]:  # fmt: skip
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref, line = None, []
    for step, w in CONFIGS:
        tables = ancestor_table(anc, 15, step)
        run = lambda: tree_gdn_verify_gather(*inputs[:-1], tables, step_nodes=step, solve_warps=w)  # noqa: E731
        o = run()[0].float()
        ref = o if ref is None else ref
        d = ((o - ref).norm() / ref.norm()).item()
        line.append(f"step{step}/w{w} {graph_us(run, reps=10):6.1f} ({d:.0e})")
    print(f"R={R} N={N} {kind} depth {depth}: " + "  ".join(line), flush=True)
