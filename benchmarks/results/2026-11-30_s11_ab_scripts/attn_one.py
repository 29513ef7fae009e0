"""One tree attention at R=1, N=64 over a 4096-token prefix (12 / 2 heads, head dim 256, bf16), a few times: for ncu."""
import torch

from sglang_dflash.ddtree import build_ddtree
from sglang_dflash.kernels.tree_attention import ancestor_bits, tree_attention

R, N, HQ, HKV, DH, T = 1, 64, 12, 2, 256, 4096
g = torch.Generator(device="cuda").manual_seed(0)
rnd = lambda *s: torch.randn(*s, generator=g, device="cuda").bfloat16()  # noqa: E731
q, kc, vc, kt, vt = rnd(R, N, HQ, DH), rnd(R, T, HKV, DH), rnd(R, T, HKV, DH), rnd(R, N, HKV, DH), rnd(R, N, HKV, DH)
tree = build_ddtree(torch.randn(R, 15, 64, generator=g, device="cuda") * 2.5, torch.zeros(R, dtype=torch.long, device="cuda"), N - 1)
bits = ancestor_bits(tree.ancestor_mask)
for _ in range(3):
    tree_attention(q, kc, vc, torch.full((R,), T, device="cuda"), kt, vt, bits)
torch.cuda.synchronize()
