"""Session 26: does settle() remove the first-case effect? The 16-node chain's verify (HEAD), timed first after
settle(), then after a 64-node tree and an R = 8 x 64 verify, three rounds."""
import sglang_dflash
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us, settle
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

print(sglang_dflash.__file__)
settle()
cases = {n: verify_inputs(R, N, kind) for n, (R, N, kind) in {"chain16": (1, 16, "chain"), "tree64": (1, 64, "ddtree"), "r8x64": (8, 64, "ddtree")}.items()}
def t(name):
    args, mask, depth = cases[name]
    return graph_us(lambda: tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth), reps=10)
print("first: chain16", round(t("chain16"), 2), flush=True)
for rnd in range(3):
    print(rnd, "  ".join(f"{n} {t(n):6.2f}" for n in ("tree64", "r8x64", "chain16")), flush=True)
