"""Session 30 call 4: the lazy rescale + mask-only-where-needed key tile with the tiles the wrapper picks on an A6000
(SM86: BM = BN = 32, 8 warps for head dim >= 128, no pipelining), run on the H200 (no A6000 here: a hint of what
a per-tile block reduction costs at small tiles, not an A6000 figure), against HEAD 67321c8 with the same tiles.
Copy HEAD's kernel file to `_old.py` first (call4.sh does). Graph-timed, alternated three times, medians.
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s30_scripts/attn_sm86_tiles_ab.py"""

import torch
from sglang_dflash.kernels.tree_attention._old import tree_attention as old_attention  # 67321c8's file, copied

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us
from sglang_dflash.kernels.tree_attention import tree_attention

SM86 = dict(BM=32, BN=32, num_warps=8, num_stages=1)


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


a = inputs((12, 2, 256), 1, 64, 4096)
graph_us(lambda: tree_attention(*a, **SM86), reps=10)  # discarded: the first timing in a process runs fast
print("| heads | R x N | prefix | HEAD, SM86 tiles | lazy, SM86 tiles | change |\n|---|---|---|---|---|---|")
for heads, R, N, prefix in (
    ((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 1, 16, 4096), ((12, 2, 256), 8, 64, 4096), ((12, 2, 256), 1, 64, 600),
    ((16, 4, 128), 1, 16, 600), ((16, 4, 128), 8, 16, 600),
):  # fmt: skip
    a = inputs(heads, R, N, prefix)
    t = alternating_us({"old": lambda: old_attention(*a, **SM86), "new": lambda: tree_attention(*a, **SM86)})
    print(f"| {heads[0]}/{heads[1]}, {heads[2]} | {R} x {N} | {prefix} | {t['old']:.2f} | {t['new']:.2f} | "
          f"{100 * (t['new'] / t['old'] - 1):+.1f}% |", flush=True)  # fmt: skip
