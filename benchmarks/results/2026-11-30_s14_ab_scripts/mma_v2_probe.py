"""For session 15's first GPU call (written in session 14, not run: no device time left). The blocked tree-GDN verify
as Triton builds it by default on an H200 (wgmma: operands through shared memory, a barrier per level of the solve)
against the Ampere-style mma.sync build (DISABLE_MMA_V3=1, set for the whole process: run this twice, with and
without), and the gather kernel the same way. ptxas / nvdisasm on the CPU machine (Triton 3.8, sm_90a), 64 nodes:
81 barriers, 72 HGMMA, 248 B of stack with wgmma; 56 barriers, 320 HMMA, 208 B with mma.sync (65 nodes: 336 against
208 B).

    [DISABLE_MMA_V3=1] PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s14_ab_scripts/mma_v2_probe.py
"""

import os

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import gather_tables
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton
from sglang_dflash.kernels.tree_gdn.tree_gdn_gather import tree_gdn_verify_gather

tag = "mma.sync" if os.environ.get("DISABLE_MMA_V3") == "1" else "wgmma"
for R, N, kind in [(1, 64, "ddtree"), (1, 65, "ddtree"), (1, 16, "chain"), (8, 64, "ddtree"), (4, 64, "ddtree")]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    run = lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)  # noqa: E731
    o = run()[0].float()
    print(f"{tag} R={R} N={N} {kind} depth {depth}: {graph_us(run, reps=10):6.1f} us  (|o| {o.norm().item():.6e})", flush=True)
for R, N in [(1, 129), (1, 257), (8, 129)]:  # the gather kernel (its S0 products are tf32 dots too)
    inputs, anc, depth = verify_inputs(R, N, "ddtree")
    tables = gather_tables(anc, 15)
    run = lambda: tree_gdn_verify_gather(*inputs[:-1], tables)  # noqa: E731
    o = run()[0].float()
    print(f"{tag} gather R={R} N={N}: {graph_us(run, reps=10):6.1f} us  (|o| {o.norm().item():.6e})", flush=True)
