"""Tree-GDN verify: the default V tile against 32 columns, where the default picks 64 (R >= 4) and where it does not."""
import os
import sys

sys.path.insert(0, os.getcwd())
sys.path.insert(0, os.path.dirname(__file__))
from gdn_ablate import base, inputs  # noqa: E402

from benchmarks.timing import graph_us  # noqa: E402

for R, N, kind in [(8, 64, "ddtree"), (4, 64, "ddtree"), (8, 16, "chain"), (8, 16, "ddtree"), (2, 64, "ddtree"), (1, 64, "ddtree"), (4, 65, "ddtree")]:
    args, kw, depth = inputs(R, N, kind, "cuda")
    o1, _ = base.tree_gdn_verify_triton(*args, **kw)
    o2, _ = base.tree_gdn_verify_triton(*args, **kw, BV=32)
    d = float(((o1.float() - o2.float()).norm() / o2.float().norm()))
    t1 = graph_us(lambda: base.tree_gdn_verify_triton(*args, **kw), reps=10)
    t2 = graph_us(lambda: base.tree_gdn_verify_triton(*args, **kw, BV=32), reps=10)
    print(f"R={R} N={N} {kind} depth {depth}: default {t1:.1f} us, BV=32 {t2:.1f} us (rel diff {d:.0e})", flush=True)
