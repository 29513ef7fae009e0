"""The blocked GDN verify with k.S0 and q.S0 as one product on stacked [k; q] rows (three bf16 products a key chunk
instead of six; ab/stack2: the rows joined in registers, ab/stack3: loaded stacked), against HEAD (ab/main), same
process, verify only. PYTHONPATH=$PWD python3 gdn_stack_ab.py ab/main ab/stack2 ab/stack3"""

import sys

from benchmarks.ab_trees import load_tree
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us

trees = {t: load_tree(t).gdn for t in sys.argv[1:]}
for R, N, kind in ((1, 64, "ddtree"), (8, 64, "ddtree")):
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref = None
    cols = []
    for name, gdn in trees.items():
        f = lambda gdn=gdn: gdn.tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)  # noqa: E731
        o = f()[0].float()
        ref = o if ref is None else ref
        cols.append(f"{name} {graph_us(f, reps=10):6.2f} (d {((o - ref).norm() / ref.norm()).item():.0e})")
    print(f"R={R} N={N} {kind} depth {depth} | " + "  ".join(cols), flush=True)
