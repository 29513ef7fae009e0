"""Session 30 call 5: the attention's merge launch alone (`_merge_kernel` on one call's partials), by rows BR (8,
16), columns BD (64, 128), partials in flight UNROLL (8, 16 or all of them: one round of loads; session 16 went to
16) and warps, against the launch `merge_partials` makes; graph-timed, medians. Outputs checked against the default
launch's (to bf16 rounding: the sum of the weights may round differently in another layout).
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s30_scripts/merge_sweep.py"""

import importlib
import itertools

import torch
import triton

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_attention import tree_attention

mod = importlib.import_module("sglang_dflash.kernels.tree_attention.tree_attention")


def inputs(heads, R, N, prefix):
    return bta.attention_inputs_at(heads, R, N, prefix)[0]


def captured(args):
    """(o_part, m, l, used, default output) of one call."""
    real, seen = mod.partials, []
    mod.partials = lambda *a: seen.append(real(*a)) or seen[-1]
    try:
        out = tree_attention(*args)
    finally:
        mod.partials = real
    return (*seen[0], out)


def launch(o_part, m, l, used, q, BR, BD, UNROLL, warps):
    R, N, HQ, DH = q.shape
    NS, RHKV = m.shape[:2]
    out = torch.empty_like(q)
    grid = (triton.cdiv(m.shape[2], BR), RHKV, DH // BD)
    mod._merge_kernel[grid](
        o_part, m, l, used, out, N, NS, S1=triton.next_power_of_2(NS), HQ=HQ, HKV=RHKV // R, DH=DH, BR=BR, BD=BD,
        UNROLL=UNROLL, num_warps=warps,
    )  # fmt: skip
    return out


print("| case | splits | default merge | whole attention | best: BR, BD, UNROLL, warps | best merge | next 3 |")
print("|---|---|---|---|---|---|---|")
for heads, R, N, prefix in (((12, 2, 256), 1, 64, 4096), ((12, 2, 256), 1, 16, 4096), ((12, 2, 256), 8, 64, 4096),
                            ((16, 4, 128), 1, 16, 600)):  # fmt: skip
    args = inputs(heads, R, N, prefix)
    q = args[0]
    o_part, m, l, used, ref = captured(args)
    whole = graph_us(lambda: tree_attention(*args), reps=10)
    default = graph_us(lambda: mod.merge_partials(o_part, m, l, used, q), reps=10)
    NS = m.shape[0]
    res = []
    S1 = triton.next_power_of_2(NS)
    for BR, BD, UNROLL, warps in itertools.product((8, 16), (64, 128), sorted({min(8, S1), min(16, S1), S1}), (4, 8)):
        if UNROLL * BR * BD // (32 * warps) > 256:  # values in flight a thread
            continue
        try:
            out = launch(o_part, m, l, used, q, BR, BD, UNROLL, warps)
            if not torch.allclose(out.float(), ref.float(), rtol=2e-2, atol=2e-3):
                res.append((float("inf"), (BR, BD, UNROLL, warps, "DIFFERS")))
                continue
            t = graph_us(lambda: launch(o_part, m, l, used, q, BR, BD, UNROLL, warps), reps=10)
            res.append((t, (BR, BD, UNROLL, warps)))
        except Exception as e:  # noqa: BLE001
            res.append((float("inf"), (BR, BD, UNROLL, warps, type(e).__name__)))
    res.sort()
    nxt = "; ".join(f"{c} {t:.2f}" for t, c in res[1:4])
    print(
        f"| {heads} R={R} N={N} prefix {prefix} | {NS} | {default:.2f} | {whole:.2f} | {res[0][1]} | {res[0][0]:.2f} | {nxt} |",
        flush=True,
    )
    bad = [c for t, c in res if t == float("inf")]
    if bad:
        print("   not run / differing:", bad, flush=True)
