"""Session 11: tree attention tiles for small trees (N = 16, 17, 33) at R = 1 and 8 over 4096 tokens: the default
(128 x 64 tiles, 8 warps) against 64 x 64 tiles with 4 warps, same process, CUDA-graph timed."""
import sys

import torch

sys.path.insert(0, ".")
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.ddtree import build_ddtree  # noqa: E402
from sglang_dflash.kernels.tree_attention import ancestor_bits, tree_attention  # noqa: E402

HQ, HKV, DH, T = 12, 2, 256, 4096
print(torch.cuda.get_device_name(), flush=True)
for R, N in [(1, 16), (1, 17), (1, 33), (8, 16), (8, 17), (8, 33), (1, 64)]:
    g = torch.Generator(device="cuda").manual_seed(R * 100 + N)
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda").bfloat16()  # noqa: E731
    base = (rnd(R, N, HQ, DH), rnd(R, T, HKV, DH), rnd(R, T, HKV, DH), torch.full((R,), T, device="cuda"),
            rnd(R, N, HKV, DH), rnd(R, N, HKV, DH))
    tree = build_ddtree(torch.randn(R, 15, 64, generator=g, device="cuda") * 2.5, torch.zeros(R, dtype=torch.long, device="cuda"), N - 1)
    bits = ancestor_bits(tree.ancestor_mask)
    ref = tree_attention(*base, bits)
    row = []
    for kw in [{}, dict(BM=64, BN=64, num_warps=4), dict(BM=64, BN=64, num_warps=4, num_stages=3), dict(BM=32, BN=64, num_warps=4)]:
        f = lambda kw=kw: tree_attention(*base, bits, **kw)  # noqa: E731
        d = ((f().float() - ref.float()).norm() / ref.float().norm()).item()
        row.append(f"{kw or 'default'}: {graph_us(f, reps=10):6.1f} (d {d:.0e})")
    print(f"R={R} N={N}: " + " | ".join(row), flush=True)
