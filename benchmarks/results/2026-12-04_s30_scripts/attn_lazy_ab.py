"""Session 30 call 1: the tree attention's key tile with the mask applied only to tiles that need it and the rescale
done only when a row's max grows by more than 2^8 (FlashAttention-4's lazy rescale), against HEAD 67321c8, in one
process. Copy HEAD's kernel file to `_old.py` first (call1.sh does). Graph-timed, sides alternated three times,
medians; output differences against each other and the float64 reference; then each kernel's eager time (attention
and merge apart) at the issue's case.
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s30_scripts/attn_lazy_ab.py"""

import torch
from sglang_dflash.kernels.tree_attention._old import tree_attention as old_attention  # 67321c8's file, copied

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us, print_kernel_times
from sglang_dflash.kernels.tree_attention import tree_attention, tree_attention_ref


inputs = bta.attention_inputs_at


args, mask = inputs((12, 2, 256), 1, 64, 4096)
graph_us(lambda: tree_attention(*args), reps=10)  # discarded: the first timing in a process runs fast (session 25)
old, new = old_attention(*args).double(), tree_attention(*args).double()
q, kc, vc, pl, kt, vt, _ = (t.double() if t.is_floating_point() else t for t in args)
ref = tree_attention_ref(q, kc, vc, pl, kt, vt, mask)
rel = lambda a, b: ((a - b).norm() / b.norm()).item()  # noqa: E731
print(f"R=1 x 64 over 4096: relative difference old-ref {rel(old, ref):.2e}, new-ref {rel(new, ref):.2e}, "
      f"new-old {rel(new, old):.2e}; max |new - old| {(new - old).abs().max().item():.2e}", flush=True)  # fmt: skip
print("us, graph-timed: HEAD / lazy rescale + mask only where needed")
rows = []
for heads, R, N, prefix in (
    ((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 1, 16, 4096), ((12, 2, 256), 1, 65, 4096),
    ((12, 2, 256), 4, 64, 4096), ((12, 2, 256), 8, 64, 4096), ((12, 2, 256), 1, 64, 600), ((12, 2, 256), 8, 64, 150),
    ((16, 4, 128), 1, 16, 600), ((16, 4, 128), 8, 16, 600), ((16, 4, 128), 1, 16, 4096),
):  # fmt: skip
    a = inputs(heads, R, N, prefix)[0]
    t = alternating_us({"old": lambda: old_attention(*a), "new": lambda: tree_attention(*a)})
    rows.append((heads, R, N, prefix, t["old"], t["new"]))
    print(f"  heads {heads} R={R} N={N} prefix {prefix}: {t['old']:7.2f} / {t['new']:7.2f}", flush=True)
for label, fn in (("HEAD", old_attention), ("lazy", tree_attention)):
    print_kernel_times(lambda fn=fn: fn(*args), reps=20, top=2, title=f"{label} R=1 x 64 over 4096, eager us:")
print("\n| heads | R x N | prefix | HEAD | lazy | change |\n|---|---|---|---|---|---|")
for heads, R, N, prefix, o, n in rows:
    print(f"| {heads[0]}/{heads[1]}, {heads[2]} | {R} x {N} | {prefix} | {o:.2f} | {n:.2f} | {100 * (n / o - 1):+.1f}% |")
