"""For session 14: the ancestor-gather verify's solve steps (step_nodes: the most same-depth nodes a step takes,
the NC its tables are made with), with the solve's BV and warps, at the depth bound 15, Qwen3.6-27B TP=2 heads,
DDTree-shaped trees. Fewer, larger steps: fewer barriers and gathered loads in the solve's chain (session 13, call 5:
the solve was 14.4 of about 43 us at 257 nodes, eager). No spills on sm_90 in any of these (ptxas on the CPU).

    PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_solve_sweep.py
"""

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather

CONFIGS = [(16, 32, 4), (32, 32, 8), (32, 16, 4), (64, 16, 8), (64, 32, 8), (64, 8, 4)]  # step nodes, BV, solve warps
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for R, N, kind in [(1, 129, "ddtree"), (1, 257, "ddtree"), (1, 129, "deep"), (8, 129, "ddtree")]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref, line = None, []
    for step, BV, w in CONFIGS:
        tables = ancestor_table(anc, 15, step)
        run = lambda: tree_gdn_verify_gather(*inputs[:-1], tables, BV=BV, step_nodes=step, solve_warps=w)  # noqa: E731
        o = run()[0].float()
        ref = o if ref is None else ref
        d = ((o - ref).norm() / ref.norm()).item()
        line.append(f"step{step}/BV{BV}/w{w} {graph_us(run, reps=10):6.1f} ({d:.0e})")
    print(f"R={R} N={N} {kind} depth {depth}: " + "  ".join(line), flush=True)
