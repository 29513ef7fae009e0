"""Session 13, call 6: the ancestor-gather verify with its dots once per QK head (ab/new) against once per V-head
(ab/old = HEAD), same process, and the blocked kernel beside them at R > 1 (gather_tables' rule), depth bound 15.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_coeffs_ab.py
"""

import importlib

import torch

from benchmarks.ab_trees import load_tree
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us

trees = {}
for name in ("old", "new"):
    t = load_tree(f"ab/{name}")
    trees[name] = (t, importlib.import_module("sglang_dflash.kernels.tree_gdn.tree_gdn_gather"))
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for R, N, kind in [(1, 129, "ddtree"), (1, 257, "ddtree"), (1, 129, "deep"), (4, 129, "ddtree"), (8, 129, "ddtree"),
                   (8, 257, "ddtree")]:  # fmt: skip
    inputs, anc, depth = verify_inputs(R, N, kind)
    outs, times = {}, {}
    for name, (t, g) in trees.items():
        tables = g.ancestor_table(anc, 15)
        outs[name] = g.tree_gdn_verify_gather(*inputs[:-1], tables)[0].float()
        times[name] = graph_us(lambda g=g, tables=tables: g.tree_gdn_verify_gather(*inputs[:-1], tables), reps=10)
    blocked = trees["new"][0].gdn.tree_gdn_verify_triton
    times["blocked"] = graph_us(lambda: blocked(*inputs, ancestor_mask=anc), reps=10)
    d = ((outs["new"] - outs["old"]).norm() / outs["old"].norm()).item()
    print(f"R={R} N={N} {kind} depth {depth}: gather old {times['old']:6.1f}  new {times['new']:6.1f} (d {d:.0e})  "
          f"blocked {times['blocked']:6.1f} us", flush=True)
