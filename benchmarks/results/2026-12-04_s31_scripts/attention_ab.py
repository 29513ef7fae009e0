"""Session 31: the working tree's tree attention against an older kernel file copied to `_old.py` beside it (call8.sh
and next_call1.sh say how), the whole attention in one process, over the cache (as the bench) and through a token
table 8x the prefix (as a server reads it). Graph-timed, sides alternated three times, medians; outputs compared.
Call 8: the merge's first loads before the split count (`merge_peel.patch`) against f27707e.
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s31_scripts/attention_ab.py OLD_LABEL NEW_LABEL"""

import sys

import torch

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us
from sglang_dflash.kernels.tree_attention import _old, tree_attention


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


def calls(a, table: bool):
    """(old, new) calls of the attention on a, over the cache or through an 8x token table (`bta.pool_call`'s)."""
    if not table:
        return (lambda: _old.tree_attention(*a)), (lambda: tree_attention(*a))
    q, kc, vc, pl, kt, vt, w = a
    R, T = q.shape[0], kc.shape[1]
    tab = torch.zeros(R, 8 * T, dtype=torch.int32, device=q.device)
    tab[:, :T] = torch.arange(R * T, dtype=torch.int32, device=q.device).view(R, T)
    pk, pv, sl = kc.reshape(R * T, *kc.shape[2:]), vc.reshape(R * T, *vc.shape[2:]), torch.arange(R, device=q.device)
    return tuple(lambda f=f: f(q, pk, pv, pl, kt, vt, w, slots=sl, table=tab) for f in (_old.tree_attention, tree_attention))


a = inputs((12, 2, 256), 1, 64, 4096)
graph_us(lambda: tree_attention(*a), reps=10)  # discarded: the first timing in a process runs fast (session 25)
print(f"| heads | R x N | prefix | read | {sys.argv[1]} | {sys.argv[2]} | change | max abs difference |")
print("|---|---|---|---|---|---|---|---|", flush=True)
for heads, R, N, prefix, table in (
    ((12, 2, 256), 1, 64, 4096, False), ((12, 2, 256), 1, 16, 4096, False), ((12, 2, 256), 1, 65, 4096, False),
    ((12, 2, 256), 4, 64, 4096, False), ((12, 2, 256), 8, 64, 4096, False), ((12, 2, 256), 1, 64, 600, False),
    ((12, 2, 256), 1, 64, 4096, True), ((12, 2, 256), 8, 64, 4096, True),
    ((16, 4, 128), 1, 16, 600, False), ((16, 4, 128), 8, 16, 600, False), ((16, 4, 128), 1, 16, 4096, False),
):  # fmt: skip
    a = inputs(heads, R, N, prefix)
    old, new = calls(a, table)
    diff = (new().float() - old().float()).abs().max().item()
    t = alternating_us({"old": old, "new": new})
    print(f"| {heads[0]}/{heads[1]}, {heads[2]} | {R} x {N} | {prefix} | {'8x table' if table else 'cache'} | "
          f"{t['old']:.2f} | {t['new']:.2f} | {100 * (t['new'] / t['old'] - 1):+.1f}% | {diff:.1e} |", flush=True)  # fmt: skip
