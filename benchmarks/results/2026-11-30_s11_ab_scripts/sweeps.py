"""Session 11 config sweeps (same process, CUDA-graph timed): tree-GDN verify at R = 8 / 4 x 64 nodes by (BV, warps),
and tree attention at N = 64 / 16 over 4096 tokens by (splits, BM, BN, warps, stages)."""
import sys

import torch

sys.path.insert(0, ".")
from benchmarks.kernels.bench_tree_gdn import verify_inputs  # noqa: E402
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.ddtree import build_ddtree  # noqa: E402
from sglang_dflash.kernels.tree_attention import ancestor_bits, tree_attention  # noqa: E402
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton  # noqa: E402

print(torch.cuda.get_device_name(), flush=True)
for R, N, kind in [(8, 64, "ddtree"), (8, 65, "ddtree"), (4, 64, "ddtree"), (1, 65, "ddtree")]:
    args, mask, depth = verify_inputs(R, N, kind)
    ref, _ = tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth)
    for BV, warps in [(None, None), (64, 4), (128, 4), (128, 8), (32, 4), (64, 8)]:
        try:
            f = lambda: tree_gdn_verify_triton(*args, ancestor_mask=mask, max_depth=depth, BV=BV, num_warps=warps)  # noqa: E731
            d = ((f()[0].float() - ref.float()).norm() / ref.float().norm()).item()
            print(f"gdn R={R} N={N} {kind} depth {depth}: BV={BV} warps={warps}: {graph_us(f, reps=10):7.1f} us (d {d:.0e})", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"gdn R={R} N={N}: BV={BV} warps={warps}: {type(e).__name__}: {str(e)[:120]}", flush=True)

HQ, HKV, DH, T = 12, 2, 256, 4096
for R, N in [(1, 64), (1, 16), (8, 64)]:
    g = torch.Generator(device="cuda").manual_seed(R * 100 + N)
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda").bfloat16()  # noqa: E731
    base = (rnd(R, N, HQ, DH), rnd(R, T, HKV, DH), rnd(R, T, HKV, DH), torch.full((R,), T, device="cuda"),
            rnd(R, N, HKV, DH), rnd(R, N, HKV, DH))
    tree = build_ddtree(torch.randn(R, 15, 64, generator=g, device="cuda") * 2.5, torch.zeros(R, dtype=torch.long, device="cuda"), N - 1)
    bits = ancestor_bits(tree.ancestor_mask)
    ref = tree_attention(*base, bits)
    for kw in [{}, dict(splits=8), dict(splits=12), dict(splits=24), dict(splits=32), dict(BM=64, BN=64, num_warps=4),
               dict(BM=64, BN=64, num_warps=4, splits=32), dict(BM=128, BN=32, num_stages=3), dict(BM=64, BN=64, num_warps=8),
               dict(BM=128, BN=64, num_stages=1)]:
        try:
            f = lambda kw=kw: tree_attention(*base, bits, **kw)  # noqa: E731
            d = ((f().float() - ref.float()).norm() / ref.float().norm()).item()
            print(f"attn R={R} N={N} {kw}: {graph_us(f, reps=10):7.1f} us (d {d:.0e})", flush=True)
        except Exception as e:  # noqa: BLE001
            print(f"attn R={R} N={N} {kw}: {type(e).__name__}: {str(e)[:120]}", flush=True)
