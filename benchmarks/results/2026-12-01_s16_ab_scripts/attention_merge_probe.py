"""Session 16: where the tree attention's time goes at R = 1 (the issue's 15 us target at N = 64 over 4096 tokens):
per-kernel CUDA time of the attention and its merge (eager profile), then the merge kernel alone on the same
partials, graph-timed, by rows / columns per program, partials in flight and warps (outputs compared).

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s16_ab_scripts/attention_merge_probe.py
"""

import importlib

import torch
import triton

from benchmarks.kernels.bench_tree_attention import attention_inputs
from benchmarks.timing import graph_us, print_kernel_times
from sglang_dflash.kernels.tree_attention import tree_attention

mod = importlib.import_module("sglang_dflash.kernels.tree_attention.tree_attention")  # the package's name is the function

for R, N in [(1, 16), (1, 64), (8, 64)]:
    args, _ = attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))
    print_kernel_times(lambda: tree_attention(*args), reps=20, top=3, title=f"\nR={R} N={N}: per-kernel CUDA time (us):")
    print(f"graph-timed whole: {graph_us(lambda: tree_attention(*args), reps=10):.1f} us", flush=True)
    seen = {}
    merge = mod.merge_partials
    mod.merge_partials = lambda o, m, l, q: seen.setdefault("p", (o, m, l, q)) and merge(o, m, l, q)
    ref = tree_attention(*args)
    mod.merge_partials = merge
    o_part, m, l, q = seen["p"]
    NS, RHKV, rows = m.shape
    DH = q.shape[-1]
    print(f"partials: {NS} x {RHKV} x {rows} rows, {o_part.numel() * o_part.element_size() / 1e6:.1f} MB")
    line = [f"as launched {graph_us(lambda: merge(o_part, m, l, q), reps=10):.1f}"]
    for BR, BD, unroll, warps in [(16, 64, 8, 4), (16, 64, 16, 4), (16, 128, 8, 4), (16, 256, 8, 8), (32, 64, 8, 4),
                                  (8, 64, 8, 4), (8, 128, 8, 4), (8, 256, 4, 4), (4, 256, 8, 4), (16, 64, 4, 4)]:  # fmt: skip
        out = torch.empty_like(q)
        grid = (triton.cdiv(rows, BR), RHKV, DH // BD)
        u = min(unroll, NS)

        def run(out=out, grid=grid, BR=BR, BD=BD, u=u, warps=warps):
            mod._merge_kernel[grid](o_part, m, l, out, N, NS, S1=triton.next_power_of_2(NS), HQ=q.shape[2],
                                    HKV=RHKV // R, DH=DH, BR=BR, BD=BD, UNROLL=u, num_warps=warps)  # fmt: skip

        try:
            t = graph_us(run, reps=10)
            ok = torch.equal(out, ref)
            line.append(f"BR{BR}/BD{BD}/u{u}/w{warps} {t:.1f}{'' if ok else ' DIFF'}")
        except Exception as e:  # noqa: BLE001
            line.append(f"BR{BR}/BD{BD}/u{u}/w{warps} fail {type(e).__name__}")
    print("merge alone, us: " + "  ".join(line), flush=True)
