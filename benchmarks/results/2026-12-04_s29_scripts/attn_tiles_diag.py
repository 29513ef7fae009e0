"""Session 29 diagnosis, one process: where does the one-sequence tree attention (HEAD) lose up to 1.2 us against
4b00535's (tree split of its own) at one request over short prefixes, with the same splits and bit-identical outputs?
4b00535's file is copied first:
    git show 4b00535:sglang_dflash/kernels/tree_attention/tree_attention.py > sglang_dflash/kernels/tree_attention/_old.py
1. Key tiles a program, forced (explicit splits, so no split search on the device), R = 1 x 16 nodes over 4096
   tokens (12 / 2 heads, head dim 256; 2 program groups, at most 130 programs: one wave): old S prefix splits + the
   tree split against HEAD's S' splits of prefix + tree, the same tiles a program. A per-tile cost shows as a slope,
   a per-program one as an offset.
2. The lost cases with the default splits, each kernel's eager CUDA time (attention and merge apart).
Sides alternate three times; medians. PYTHONPATH=$PWD python3 attn_tiles_diag.py"""


import torch
from sglang_dflash.kernels.tree_attention._old import tree_attention as old_attention  # 4b00535's file, copied

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us, print_kernel_times
from sglang_dflash.kernels.tree_attention import tree_attention


def ab(old, new) -> tuple[float, float]:
    t = alternating_us({"old": old, "new": new})
    return t["old"], t["new"]


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


args = inputs((12, 2, 256), 1, 16, 4096)
graph_us(lambda: tree_attention(*args), reps=10)  # discarded: the first timing in a process runs fast (session 25)
print("1. forced tiles a program, R=1 N=16 prefix 4096, us: old (S prefix splits + tree) / HEAD (S' splits)")
args = inputs((12, 2, 256), 1, 16, 4096)
for tiles, s_old, s_new in ((1, 64, 65), (2, 32, 33), (4, 16, 17), (8, 8, 9)):
    o, n = ab(lambda: old_attention(*args, splits=s_old), lambda: tree_attention(*args, splits=s_new))
    d = (old_attention(*args, splits=s_old).float() - tree_attention(*args, splits=s_new).float()).abs().max().item()
    print(f"  {tiles:2d} tiles a program (S {s_old} / {s_new}): {o:7.2f} / {n:7.2f}  ({d:.1e})", flush=True)

print("2. default splits, us: old / HEAD")
cases = (((12, 2, 256), 1, 64, 600), ((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 4, 64, 4096), ((16, 4, 128), 1, 16, 600),
         ((16, 4, 128), 8, 16, 600))  # fmt: skip
for heads, R, N, prefix in cases:
    args = inputs(heads, R, N, prefix)
    o, n = ab(lambda: old_attention(*args), lambda: tree_attention(*args))
    print(f"  heads {heads} R={R} N={N} prefix {prefix}: {o:7.2f} / {n:7.2f}", flush=True)
for heads, R, N, prefix in (cases[0], cases[3]):
    args = inputs(heads, R, N, prefix)
    for label, fn in (("old", old_attention), ("HEAD", tree_attention)):
        print_kernel_times(
            lambda fn=fn: fn(*args), reps=20, top=2, title=f"  {label} heads {heads} R={R} N={N} prefix {prefix}, eager us:"
        )
