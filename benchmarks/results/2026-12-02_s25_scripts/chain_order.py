"""Session 25, call 6: the 16-node chain's verify, HEAD (ab/main) against the NODES argument (ab/new), alternated
new-first over three rounds, to tell a real difference from an order effect (calls 3 and 5: main 6.6, new 7.0 us)."""

import importlib
import sys

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us


def load(path):
    for m in [m for m in sys.modules if m.startswith("sglang_dflash")]:
        del sys.modules[m]
    sys.path.insert(0, path)
    mod = importlib.import_module("sglang_dflash.kernels.tree_gdn.tree_gdn")
    sys.path.remove(path)
    return mod


trees = {"new": load("ab/new"), "main": load("ab/main")}
args, mask, depth = verify_inputs(1, 16, "chain", "cuda")
for rnd in range(3):
    print(
        rnd,
        "  ".join(
            f"{n} {graph_us(lambda t=t: t.tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth), reps=10):5.2f}"
            for n, t in trees.items()
        ),
        flush=True,
    )
