"""Session 30 call 2: the tree attention merged in its own launch where the grid is one wave (each program merges
its share of its query block's rows after a barrier among the block's splits), against HEAD 67321c8 and against
the same working tree with the separate merge launch (the SM count patched to 131 so the grid is not one wave; the
default splits passed explicitly, so the kernels do the same work). All three with the lazy rescale except HEAD.
Copy HEAD's kernel file to `_old.py` first (call2.sh does). Graph-timed, sides alternated three times, medians; the
outputs of the two merges compared bit for bit; then each kernel's eager time at the issue's case.
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s30_scripts/attn_fused_ab.py"""

import torch
from sglang_dflash.kernels.tree_attention._old import tree_attention as old_attention  # 67321c8's file, copied

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us, print_kernel_times
from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_attention import tree_attention
from sglang_dflash.kernels.tree_attention.tree_attention import default_splits

SMS = gpu.multiprocessor_count(torch.device("cuda"))


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


def separate(args, S):
    """The working tree's kernel with the merge as a second launch: SMS - 1 SMs seen, S splits given."""
    real = gpu.multiprocessor_count
    gpu.multiprocessor_count = lambda device: SMS - 1
    try:
        return tree_attention(*args, splits=S)
    finally:
        gpu.multiprocessor_count = real


def default_s(heads, R, N, prefix):
    HQ, HKV, DH = heads
    BM, BN = 128, 64
    return default_splits(prefix, N, -(-N * HQ // HKV // BM) * R * HKV, SMS, BN)


args = inputs((12, 2, 256), 1, 64, 4096)
graph_us(lambda: tree_attention(*args), reps=10)  # discarded: the first timing in a process runs fast (session 25)
print("us, graph-timed: HEAD / fused merge (default) / separate merge (same splits); bits equal fused vs separate")
rows = []
for heads, R, N, prefix in (
    ((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 1, 16, 4096), ((12, 2, 256), 1, 65, 4096),
    ((12, 2, 256), 4, 64, 4096), ((12, 2, 256), 8, 64, 4096), ((12, 2, 256), 1, 64, 600), ((12, 2, 256), 8, 64, 150),
    ((16, 4, 128), 1, 16, 600), ((16, 4, 128), 8, 16, 600), ((16, 4, 128), 1, 16, 4096),
):  # fmt: skip
    a, S = inputs(heads, R, N, prefix), default_s(heads, R, N, prefix)
    same = torch.equal(tree_attention(*a, splits=S), separate(a, S))
    t = alternating_us({"old": lambda: old_attention(*a), "fused": lambda: tree_attention(*a), "sep": lambda: separate(a, S)})
    rows.append((heads, R, N, prefix, S, t["old"], t["fused"], t["sep"], same))
    print(f"  heads {heads} R={R} N={N} prefix {prefix} S={S}: {t['old']:7.2f} / {t['fused']:7.2f} / {t['sep']:7.2f}"
          f"  equal {same}", flush=True)  # fmt: skip
for label, fn in (("HEAD", lambda: old_attention(*args)), ("fused", lambda: tree_attention(*args))):
    print_kernel_times(fn, reps=20, top=2, title=f"{label} R=1 x 64 over 4096, eager us:")
print(
    "\n| heads | R x N | prefix | splits | HEAD | fused merge | separate merge | bits equal |\n|---|---|---|---|---|---|---|---|"
)
for heads, R, N, prefix, S, o, f, sp, same in rows:
    print(f"| {heads[0]}/{heads[1]}, {heads[2]} | {R} x {N} | {prefix} | {S} | {o:.2f} | {f:.2f} | {sp:.2f} | {same} |")
