"""The blocked GDN verify's key loop at 128 columns a step (never timed: session 19 rejected it on ptxas's spills
alone) against the default (64, one stage), same process, on the tree given (default: the repository's).
PYTHONPATH=$PWD python3 gdn_bk.py [tree]"""

import sys

from benchmarks.ab_trees import load_tree
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us

gdn = load_tree(sys.argv[1] if len(sys.argv) > 1 else ".").gdn
for R, N, kind in ((1, 64, "ddtree"), (1, 64, "deep"), (8, 64, "ddtree"), (1, 32, "ddtree")):
    inputs, anc, depth = verify_inputs(R, N, kind)
    cols = []
    for bk, stages in ((None, None), (128, 1), (64, 2)):
        f = lambda: gdn.tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth, BK=bk, num_stages=stages)  # noqa: E731
        cols.append(f"BK {bk or 'default'} / {stages or 'default'}: {graph_us(f, reps=10):6.2f}")
    print(f"R={R} N={N} {kind:6s} depth {depth:2d} | " + "  ".join(cols), flush=True)
