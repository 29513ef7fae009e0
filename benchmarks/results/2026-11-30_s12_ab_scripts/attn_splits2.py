"""Session 12 call 6: the one-wave split rule (default_splits) against the old two-wave rule, same process:
target shapes (12 / 2 heads, head dim 256) and drafter shapes (16 / 4 and 8 / 2 heads, head dim 128, 16 tokens)."""
import sys

import torch
import triton

sys.path.insert(0, ".")
from benchmarks.timing import graph_us  # noqa: E402
from sglang_dflash.ddtree import build_ddtree  # noqa: E402
from sglang_dflash.kernels.tree_attention import ancestor_bits, tree_attention  # noqa: E402
from sglang_dflash.kernels.tree_attention.tree_attention import default_splits  # noqa: E402

print(torch.cuda.get_device_name(), flush=True)
for HQ, HKV, DH, T, R, N in [(12, 2, 256, 4096, 1, 16), (12, 2, 256, 4096, 1, 33), (12, 2, 256, 4096, 1, 64),
                             (12, 2, 256, 4096, 8, 16), (12, 2, 256, 4096, 8, 64), (12, 2, 256, 4096, 4, 64),
                             (12, 2, 256, 16384, 1, 64), (16, 4, 128, 4096, 1, 16), (8, 2, 128, 4096, 1, 16),
                             (16, 4, 128, 1024, 1, 16), (16, 4, 128, 4096, 8, 16)]:
    g = torch.Generator(device="cuda").manual_seed(R * 100 + N)
    rnd = lambda *s: torch.randn(*s, generator=g, device="cuda").bfloat16()  # noqa: E731
    base = (rnd(R, N, HQ, DH), rnd(R, T, HKV, DH), rnd(R, T, HKV, DH), torch.full((R,), T, device="cuda"),
            rnd(R, N, HKV, DH), rnd(R, N, HKV, DH))
    tree = build_ddtree(torch.randn(R, 15, 64, generator=g, device="cuda") * 2.5, torch.zeros(R, dtype=torch.long, device="cuda"), N - 1)
    bits = ancestor_bits(tree.ancestor_mask)
    tiles = triton.cdiv(N * HQ // HKV, 128) * R * HKV
    old = max(1, min(triton.cdiv(T, 256), triton.cdiv(264, tiles)))
    new = default_splits(T, tiles, 132)
    ref = tree_attention(*base, bits, splits=old)
    f_new = lambda: tree_attention(*base, bits)  # noqa: E731
    d = ((f_new().float() - ref.float()).norm() / ref.float().norm()).item()
    t_old = graph_us(lambda: tree_attention(*base, bits, splits=old), reps=10)
    t_new = graph_us(f_new, reps=10)
    print(f"{HQ}/{HKV} heads dh {DH} T {T} R={R} N={N}: old rule {old} splits {t_old:6.1f} us | new rule {new} splits {t_new:6.1f} us (d {d:.0e})", flush=True)
