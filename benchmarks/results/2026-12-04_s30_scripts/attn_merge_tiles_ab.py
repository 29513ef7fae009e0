"""Session 30 call 6: the merge in tiles of 8 rows for small grids (128 columns from head dim 256; call 5's sweep)
against 49a3828 (16 x 64), the whole attention, in one process. Copy 49a3828's kernel file to `_old.py` first
(call6.sh does). Graph-timed, sides alternated three times, medians; outputs compared.
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s30_scripts/attn_merge_tiles_ab.py"""

import torch
from sglang_dflash.kernels.tree_attention._old import tree_attention as old_attention  # 49a3828's file, copied

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us
from sglang_dflash.kernels.tree_attention import tree_attention


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


a = inputs((12, 2, 256), 1, 64, 4096)
graph_us(lambda: tree_attention(*a), reps=10)  # discarded: the first timing in a process runs fast (session 25)
print("| heads | R x N | prefix | 49a3828 | 8-row merge tiles | change | max abs difference |\n|---|---|---|---|---|---|---|")
for heads, R, N, prefix in (
    ((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 1, 16, 4096), ((12, 2, 256), 1, 65, 4096),
    ((12, 2, 256), 4, 64, 4096), ((12, 2, 256), 8, 64, 4096), ((12, 2, 256), 1, 64, 600),
    ((16, 4, 128), 1, 16, 600), ((16, 4, 128), 8, 16, 600), ((16, 4, 128), 1, 16, 4096),
):  # fmt: skip
    a = inputs(heads, R, N, prefix)
    diff = (tree_attention(*a).float() - old_attention(*a).float()).abs().max().item()
    t = alternating_us({"old": lambda: old_attention(*a), "new": lambda: tree_attention(*a)})
    print(f"| {heads[0]}/{heads[1]}, {heads[2]} | {R} x {N} | {prefix} | {t['old']:.2f} | {t['new']:.2f} | "
          f"{100 * (t['new'] / t['old'] - 1):+.1f}% | {diff:.1e} |", flush=True)  # fmt: skip
