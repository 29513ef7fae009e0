"""The tree-verify inputs SGLang's attention backends take (`EagleVerifyInput`).

`custom_mask`: bool, per request row-major [N x (seq_len + N)], requests concatenated; True =
may attend: every prefix column, and in the draft block each row's ancestors and itself (the
triton backend reads only the block, at row * (seq_len + N) + seq_len + col; flashinfer takes
the whole mask). `mask_indptr`: cumulative sizes of those blocks, starting at 0.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .custom_mask import sglang_custom_mask_kernel


def sglang_custom_mask(ancestor_mask: Tensor, seq_lens: Tensor, seq_lens_sum: int) -> tuple[Tensor, Tensor]:
    """Shapes as `sglang_custom_mask_ref`: one launch on CUDA (`custom_mask`), the torch reference elsewhere."""
    make = sglang_custom_mask_kernel if ancestor_mask.is_cuda else sglang_custom_mask_ref
    return make(ancestor_mask, seq_lens, seq_lens_sum)


def sglang_custom_mask_ref(ancestor_mask: Tensor, seq_lens: Tensor, seq_lens_sum: int) -> tuple[Tensor, Tensor]:
    """ancestor_mask bool [R, N, N]; seq_lens long [R] (prefix lengths) and their sum as a host int
    (the output size, as SGLang passes it) -> (custom_mask bool [N * seq_lens_sum + R * N * N],
    mask_indptr int32 [R + 1]). No host sync."""
    R, N, _ = ancestor_mask.shape
    device = ancestor_mask.device
    row_len = seq_lens.long() + N
    sizes = N * row_len
    mask_indptr = torch.cat([torch.zeros(1, device=device, dtype=torch.long), sizes.cumsum(0)])
    total = N * seq_lens_sum + R * N * N
    r = torch.repeat_interleave(torch.arange(R, device=device), sizes, output_size=total)
    local = torch.arange(total, device=device) - mask_indptr[r]
    row, col = local // row_len[r], local % row_len[r]
    block_col = col - seq_lens[r]
    in_block = ancestor_mask[r, row, block_col.clamp_min(0)]
    return (block_col < 0) | in_block, mask_indptr.to(torch.int32)
