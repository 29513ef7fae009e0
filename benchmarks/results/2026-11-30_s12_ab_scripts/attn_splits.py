"""Session 12: tree attention over 4096 tokens (12 / 2 heads, head dim 256, bf16): prefix splits swept against the
default, and the two kernels apart (the merge's share), same process, CUDA-graph timed (10 calls per graph)."""
import sys

import torch

sys.path.insert(0, ".")
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.ddtree import build_ddtree  # noqa: E402
from sglang_dflash.kernels.tree_attention import ancestor_bits, tree_attention  # noqa: E402
from benchmarks.timing import print_kernel_times  # noqa: E402

HQ, HKV, DH, T = 12, 2, 256, 4096
print(torch.cuda.get_device_name(), flush=True)
for R, N in [(1, 16), (1, 33), (1, 64), (8, 64)]:
    g = torch.Generator(device="cuda").manual_seed(R * 100 + N)
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda").bfloat16()  # noqa: E731
    base = (rnd(R, N, HQ, DH), rnd(R, T, HKV, DH), rnd(R, T, HKV, DH), torch.full((R,), T, device="cuda"),
            rnd(R, N, HKV, DH), rnd(R, N, HKV, DH))
    tree = build_ddtree(torch.randn(R, 15, 64, generator=g, device="cuda") * 2.5, torch.zeros(R, dtype=torch.long, device="cuda"), N - 1)
    bits = ancestor_bits(tree.ancestor_mask)
    ref = tree_attention(*base, bits)
    row = []
    for s in [None, 8, 12, 16, 22, 32, 44, 64]:
        f = lambda s=s: tree_attention(*base, bits, splits=s)  # noqa: E731
        d = ((f().float() - ref.float()).norm() / ref.float().norm()).item()
        row.append(f"{s or 'default'}: {graph_us(f, reps=10):5.1f} (d {d:.0e})")
    print(f"R={R} N={N}: " + " | ".join(row), flush=True)
    print_kernel_times(lambda: tree_attention(*base, bits), reps=20, top=4, title=f"R={R} N={N} kernels, us per call")
