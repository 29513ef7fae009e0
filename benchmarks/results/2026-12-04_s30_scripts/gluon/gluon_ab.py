"""For the next GPU session (not run): the Gluon prototype (`gluon_attention.py`, BN 64 and 32, P.V waited at once
or deferred) against the package's tree attention with the same splits, R x 64 / 16 / 65 nodes over 4096 tokens,
12 / 2 heads, head dim 256. First the outputs: largest difference to the package's and relative error against the
float64 reference; then graph-timed medians, alternated three times, and each kernel's eager time at R = 1 x 64.
Needs the device image's Triton 3.6.
    PYTHONPATH=$PWD:$PWD/benchmarks/results/2026-12-04_s30_scripts/gluon python3 \\
        benchmarks/results/2026-12-04_s30_scripts/gluon/gluon_ab.py"""

import torch
from gluon_attention import gluon_tree_attention

import benchmarks.kernels.bench_tree_attention as bta
from benchmarks.timing import alternating_us, graph_us, print_kernel_times
from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_attention import tree_attention, tree_attention_ref
from sglang_dflash.kernels.tree_attention.tree_attention import default_splits

SMS = gpu.multiprocessor_count(torch.device("cuda"))
rel = lambda a, b: ((a.double() - b).norm() / b.norm()).item()  # noqa: E731

for R, N in ((1, 64), (1, 16), (1, 65), (8, 64)):
    args, mask = bta.attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))
    S = default_splits(bta.PREFIX, N, -(-N * 6 // 128) * R * 2, SMS, 64)
    q, kc, vc, pl, kt, vt, _ = (t.double() if t.is_floating_point() else t for t in args)
    ref = tree_attention_ref(q, kc, vc, pl, kt, vt, mask)
    ours = tree_attention(*args, splits=S)
    fns = {"package": lambda: tree_attention(*args, splits=S)}
    for BN, defer in ((64, False), (32, False), (64, True), (32, True)):
        name = f"gluon BN={BN}{' defer' if defer else ''}"
        try:
            out = gluon_tree_attention(*args, splits=S, BN=BN, defer_pv=defer)
            torch.cuda.synchronize()
            print(f"R={R} N={N} S={S} {name}: max |gluon - package| {(out.float() - ours.float()).abs().max().item():.2e}, "
                  f"relative error gluon {rel(out, ref):.2e}, package {rel(ours, ref):.2e}", flush=True)  # fmt: skip
            fns[name] = lambda BN=BN, defer=defer: gluon_tree_attention(*args, splits=S, BN=BN, defer_pv=defer)
        except Exception as e:  # noqa: BLE001
            print(f"R={R} N={N} {name}: {type(e).__name__}: {str(e).splitlines()[-1][:300] if str(e) else ''}", flush=True)
    graph_us(fns["package"], reps=10)  # discarded: the first timing in a process runs fast
    t = alternating_us(fns)
    print(f"| R={R} N={N} S={S} | " + " | ".join(f"{k} {v:.2f}" for k, v in t.items()) + " |", flush=True)
    if (R, N) == (1, 64):
        for name, fn in fns.items():
            print_kernel_times(fn, reps=20, top=2, title=f"{name}, eager us:")
