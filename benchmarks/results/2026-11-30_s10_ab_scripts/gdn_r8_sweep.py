"""Tree-GDN verify at R = 8 (and 4), N = 64, by warps and V tile: whether wider tiles pay once the grid fills the GPU."""
import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.dirname(__file__))
from gdn_ablate import base, inputs  # noqa: E402

from benchmarks.timing import graph_us  # noqa: E402

for R, N, kind in [(8, 64, "ddtree"), (4, 64, "ddtree"), (8, 16, "chain"), (1, 64, "ddtree")]:
    args, kw, depth = inputs(R, N, kind, "cuda")
    line = f"R={R} N={N} {kind} depth {depth}:"
    for warps, BV in ((4, 32), (8, 32), (4, 64), (8, 64), (4, 16)):
        t = graph_us(lambda: base.tree_gdn_verify_triton(*args, **kw, BV=BV, num_warps=warps), reps=10)
        line += f" w{warps}/BV{BV} {t:.1f}"
    print(line, flush=True)
