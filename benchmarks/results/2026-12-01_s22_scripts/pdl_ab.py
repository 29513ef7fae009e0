"""Session 22: programmatic dependent launch (PDL) on and off in one process, graph-timed.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s22_scripts/pdl_ab.py

`kernels.device.PDL` is flipped between rounds (off, on, off, on; the median of each side's rounds is printed).
Cases: build + accept (bench_ddtree's total, one call a graph) at R = 8, B = 64 (random / mid / deep target logits)
and R = 1, B = 64; the tree attention over 4096 tokens at R = 1 x 16, 1 x 64, 8 x 64, ten calls a graph as
bench_tree_attention times it ("back to back": each call's attention also follows the previous call's merge), and
one call a graph behind a non-PDL torch kernel (as in the engine, where a GEMM comes first).
"""

from __future__ import annotations

import statistics

import torch

from benchmarks.bench_ddtree import L, MID_DEPTH, V, deep_draft, deep_target
from benchmarks.kernels.bench_tree_attention import attention_inputs
from benchmarks.timing import graph_us
from sglang_dflash.ddtree import accept_greedy, build_ddtree
from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_attention import tree_attention


def cases(gen):
    out = {}
    for R in (8, 1):
        B = 64
        draft = (torch.randn(R, L, V, generator=gen, device="cuda") * 4).to(torch.bfloat16)
        target = torch.randn(R, B + 1, V, generator=gen, device="cuda").to(torch.bfloat16)
        roots = torch.randint(0, V, (R,), generator=gen, device="cuda")
        deep = deep_draft(draft, gen)
        tree_deep = build_ddtree(deep, roots, B)
        t_deep, t_mid = deep_target(tree_deep, target), deep_target(tree_deep, target, MID_DEPTH)
        step = lambda d, t, roots=roots: lambda: accept_greedy(build_ddtree(d, roots, B, validate=False), t)  # noqa: E731
        out[f"build+accept R={R} B=64 random"] = (step(draft, target), 1)
        if R == 8:
            out[f"build+accept R={R} B=64 mid"] = (step(deep, t_mid), 1)
            out[f"build+accept R={R} B=64 deep"] = (step(deep, t_deep), 1)
    tail = torch.zeros(1024, device="cuda")
    for R, N in ((1, 16), (1, 64), (8, 64)):
        args, _ = attention_inputs(R, N, gen)
        out[f"attention R={R} N={N} back to back"] = ((lambda a=args: tree_attention(*a)), 10)
        out[f"attention R={R} N={N} after a torch op"] = ((lambda a=args: (tail.add_(1), tree_attention(*a))), 1)
    return out


def main() -> None:
    gen = torch.Generator(device="cuda").manual_seed(0)
    todo = cases(gen)
    results = {name: {False: [], True: []} for name in todo}
    outputs = {}
    for rnd, on in enumerate((False, True, False, True)):
        gpu.PDL = on
        for name, (fn, reps) in todo.items():
            res = fn()
            if "build" in name:  # the same acceptance either way
                key = tuple(x.cpu() for x in (res.accept_len, res.accepted_nodes, res.bonus_tokens))
            else:
                key = (res[1] if isinstance(res, tuple) else res).float().cpu()
            if name in outputs:
                assert all(torch.equal(a, b) for a, b in zip(outputs[name], key)) if "build" in name else torch.equal(outputs[name], key), name
            outputs[name] = key
            results[name][on].append(graph_us(fn, reps=reps))
        print(f"round {rnd} (PDL {'on' if on else 'off'}) done", flush=True)
    print(f"\n{'case':45s} {'PDL off':>9s} {'PDL on':>9s}   (us, median of 2 rounds each; outputs equal)")
    for name, r in results.items():
        print(f"{name:45s} {statistics.median(r[False]):9.1f} {statistics.median(r[True]):9.1f}   rounds off {r[False]} on {r[True]}".replace("), (", "; "))


if __name__ == "__main__":
    main()
