"""Triton: SGLang's tree-verify `custom_mask` (`masks.sglang_custom_mask_ref`) in one launch.

Shapes: ancestor_mask bool [R, N, N]; seq_lens [R] (prefix lengths) and their sum as a host int. Returns
(custom_mask bool [N * seq_lens_sum + R * N * N], mask_indptr int32 [R + 1]); no host sync.

Grid (R, N): program (r, i) writes row i of request r, seq_lens[r] Trues then the row's ancestor bits, at
N * (seq_lens[0] + ... + seq_lens[r - 1]) + r * N * N + i * (seq_lens[r] + N); the torch reference instead makes
int64 row and column indices for every entry (at 8 x 64 nodes over 4096 tokens, 2.1 M entries per pass).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

BLOCK = 1024  # mask entries a program writes per round
BLOCK_R = 128  # earlier requests' lengths summed per round


# No argument depends on the request count R: one compile serves every batch size (a compile per size is a 0.1-0.2 s
# stall the first time a server's batch reaches it).
@triton.jit
def _custom_mask_kernel(ancestor, seq_lens, mask, indptr, N, NN: tl.constexpr, BLOCK: tl.constexpr, BLOCK_R: tl.constexpr):
    r = tl.program_id(0).to(tl.int64)
    i = tl.program_id(1).to(tl.int64)
    before = tl.zeros([], tl.int64)
    for q0 in range(0, r, BLOCK_R):
        q = q0 + tl.arange(0, BLOCK_R)
        before += tl.sum(tl.load(seq_lens + q, mask=q < r, other=0).to(tl.int64), axis=0)
    s = tl.load(seq_lens + r).to(tl.int64)
    width = s + N
    start = N * before + r * N * N
    row = mask + start + i * width
    ones = tl.full([BLOCK], 1, tl.int8)
    for c0 in range(0, s, BLOCK):
        c = c0 + tl.arange(0, BLOCK)
        tl.store(row + c, ones, mask=c < s)
    j = tl.arange(0, NN)
    bits = tl.load(ancestor + (r * N + i) * N + j, mask=j < N, other=0)
    tl.store(row + s + j, bits, mask=j < N)
    if i == 0:
        tl.store(indptr + r + 1, (start + N * width).to(tl.int32))
        if r == 0:
            tl.store(indptr, 0)


def sglang_custom_mask_kernel(ancestor_mask: Tensor, seq_lens: Tensor, seq_lens_sum: int) -> tuple[Tensor, Tensor]:
    """See the module docstring."""
    R, N, _ = ancestor_mask.shape
    device = ancestor_mask.device
    mask = torch.empty(N * seq_lens_sum + R * N * N, dtype=torch.bool, device=device)
    indptr = torch.empty(R + 1, dtype=torch.int32, device=device)
    if R == 0:
        indptr.zero_()
        return mask, indptr
    _custom_mask_kernel[(R, N)](
        ancestor_mask.contiguous().view(torch.int8), seq_lens.contiguous(), mask.view(torch.int8), indptr, N,
        NN=triton.next_power_of_2(N), BLOCK=BLOCK, BLOCK_R=BLOCK_R,
    )  # fmt: skip
    return mask, indptr
