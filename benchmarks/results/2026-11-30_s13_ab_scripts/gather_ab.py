"""For session 14: the ancestor-gather verify of several source trees, same process, depth bound 15, Qwen3.6-27B
TP=2 heads; the blocked kernel of the first tree beside them. Trees as NAME=PATH (a folder holding `sglang_dflash`),
the first the reference for the outputs' relative difference.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-11-30_s13_ab_scripts/gather_ab.py main=ab/main gdc=ab/gdc
"""

import importlib
import sys

import torch

from benchmarks.ab_trees import load_tree
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us

trees = {}
for name, path in (arg.split("=", 1) for arg in sys.argv[1:]):
    t = load_tree(path)
    trees[name] = (t, importlib.import_module("sglang_dflash.kernels.tree_gdn.tree_gdn_gather"))
print(torch.cuda.get_device_name(), torch.__version__, flush=True)
for R, N, kind in [(1, 129, "ddtree"), (1, 257, "ddtree"), (1, 129, "deep"), (1, 257, "deep"), (8, 129, "ddtree"),
                   (8, 129, "deep")]:  # fmt: skip
    inputs, anc, depth = verify_inputs(R, N, kind)
    first, line = None, []
    for name, (t, g) in trees.items():
        tables = g.ancestor_table(anc, 15)
        o = g.tree_gdn_verify_gather(*inputs[:-1], tables)[0].float()
        first = o if first is None else first
        d = ((o - first).norm() / first.norm()).item()
        us = graph_us(lambda g=g, tables=tables: g.tree_gdn_verify_gather(*inputs[:-1], tables), reps=10)
        line.append(f"{name} {us:6.1f} (d {d:.0e})")
    blocked = next(iter(trees.values()))[0].gdn.tree_gdn_verify_triton
    line.append(f"blocked {graph_us(lambda: blocked(*inputs, ancestor_mask=anc), reps=10):6.1f}")
    print(f"R={R} N={N} {kind} depth {depth}: " + "  ".join(line), flush=True)
