"""Session 16, call 3: where the ancestor-gather GDN verify overtakes the blocked one just above a block (call 1:
gather 23.0 against 37.2 us at R = 1 x 80, 67.8 against 146.5 at R = 8 x 80; the docstring's 65 nodes: 22.3 against
18.4). Verify only, us, DDTree-shaped trees, both kernels on the same inputs, outputs compared.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s16_ab_scripts/gather_threshold.py
"""

import torch

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import solve_step_nodes
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import ancestor_table, tree_gdn_verify_gather

print("R N depth | blocked gather | max |diff| of the outputs")
for R in (1, 4, 8):
    for N in (33, 64, 65, 66, 72):
        inputs, anc, depth = verify_inputs(R, N, "ddtree")
        blocked = lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)  # noqa: E731
        tables = ancestor_table(anc, 15, solve_step_nodes(R, N))
        gather = lambda: tree_gdn_verify_gather(*inputs[:-1], tables)  # noqa: E731
        diff = (blocked()[0].float() - gather()[0].float()).abs().max().item()
        tb, tg = graph_us(blocked, reps=10), graph_us(gather, reps=10)
        print(f"{R} {N} {depth} | {tb:.1f} {tg:.1f} | {diff:.2e}", flush=True)
torch.cuda.synchronize()
