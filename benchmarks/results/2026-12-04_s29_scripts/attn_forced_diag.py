"""Session 29 call 2: the cases the one-sequence attention (HEAD) loses against 4b00535's (call 1: 0.6-1.2 us at one
request over 600 tokens, the drafter's shape most), with the default splits and with the same splits forced (no
split search on the device): if the forced pair still differs, the search is not the cause. old (S prefix splits +
the tree split) / HEAD (S' splits of prefix + tree), graph-timed, sides alternated three times, medians; then each
kernel's eager time of the forced pair. Copy 4b00535's file to `_old.py` first (call2.sh does)."""


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
print("us: old / HEAD, default splits, then forced (old S prefix splits + tree / HEAD S')")
for heads, R, N, prefix, s_old, s_new in (
    ((12, 2, 256), 1, 64, 600, 5, 6), ((16, 4, 128), 1, 16, 600, 5, 6), ((16, 4, 128), 8, 16, 600, 4, 4),
    ((16, 4, 128), 1, 16, 4096, 32, 33),
):  # fmt: skip
    args = inputs(heads, R, N, prefix)
    d = ab(lambda: old_attention(*args), lambda: tree_attention(*args))
    f = ab(lambda: old_attention(*args, splits=s_old), lambda: tree_attention(*args, splits=s_new))
    print(f"  heads {heads} R={R} N={N} prefix {prefix}: {d[0]:6.2f} / {d[1]:6.2f};  forced S {s_old} / {s_new}: "
          f"{f[0]:6.2f} / {f[1]:6.2f}", flush=True)  # fmt: skip
    for label, fn, s in (("old", old_attention, s_old), ("HEAD", tree_attention, s_new)):
        print_kernel_times(lambda fn=fn, s=s: fn(*args, splits=s), reps=20, top=2, title=f"    {label} forced S {s}, eager us:")
