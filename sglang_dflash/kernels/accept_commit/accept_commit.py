"""Triton: a spec-v2 step's commit (`naive.commit_accepted_ref`) in one launch, one program per request.

Shapes: req_to_token int32 / int64 [S, T] (unit stride over T); slots, seq_lens [R]; token_ids long [R, N];
accepted_nodes long [R, P] (node indices along the path from the root, -1 past accept_len); accept_len, bonus
long [R]. Returns tokens long [R, N], accept_lens int32 [R], new_seq_lens long [R]; no host sync (captures in a
CUDA graph).

Column c of a window goes to column j where c is the path's j-th node, else to accept_len + 1 + (the count of
non-path columns before c). The window is loaded whole before it is stored (a barrier between: its columns span several
warps). Path entries past accept_len are ignored (`Acceptance` pads them -1).
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor


@triton.jit
def _commit_accepted_kernel(
    req_to_token,
    table_stride,
    slots,
    seq_lens,
    token_ids,
    accepted_nodes,
    accept_len,
    bonus,
    tokens,
    accept_lens,
    new_seq_lens,
    N,
    P,
    NN: tl.constexpr,
    PP: tl.constexpr,
):
    r = tl.program_id(0).to(tl.int64)
    s = tl.load(seq_lens + r).to(tl.int64)
    a = tl.load(accept_len + r).to(tl.int64)
    c = tl.arange(0, NN)
    cm = c < N
    j = tl.arange(0, PP)
    path = tl.load(accepted_nodes + r * P + j, mask=(j < P) & (j <= a), other=-1)
    hit = (path[None, :] == c[:, None]) & (path[None, :] >= 0)  # [NN, PP]: column c is the path's j-th node
    on = tl.max(hit.to(tl.int32), axis=1) > 0
    at = tl.sum(tl.where(hit, j[None, :], 0), axis=1)
    rest = (cm & ~on).to(tl.int32)
    new_col = tl.where(on, at, a + tl.cumsum(rest, axis=0))  # the k-th non-path column (k from 1) -> a + k
    row = req_to_token + tl.load(slots + r).to(tl.int64) * table_stride + s
    window = tl.load(row + c, mask=cm)
    tl.debug_barrier()  # every warp's columns loaded before any is overwritten (N > 32 spans several warps)
    tl.store(row + new_col, window, mask=cm)

    nxt = tl.load(accepted_nodes + r * P + 1 + c, mask=(c + 1 < P) & (c < a), other=-1)  # path node c + 1
    out = tl.load(token_ids + r * N + tl.maximum(nxt, 0), mask=nxt >= 0, other=0)
    out = tl.where(c == a, tl.load(bonus + r), out)
    tl.store(tokens + r * N + c, out, mask=cm)
    tl.store(accept_lens + r, (a + 1).to(tl.int32))
    tl.store(new_seq_lens + r, s + a + 1)


def commit_accepted(
    req_to_token: Tensor, slots: Tensor, seq_lens: Tensor, token_ids: Tensor, accepted_nodes: Tensor,
    accept_len: Tensor, bonus: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """See the module docstring; the windows of req_to_token are reordered in place."""
    R, N = token_ids.shape
    P = accepted_nodes.shape[1]
    device = token_ids.device
    tokens = torch.empty(R, N, dtype=torch.long, device=device)
    accept_lens = torch.empty(R, dtype=torch.int32, device=device)
    new_seq_lens = torch.empty(R, dtype=torch.long, device=device)
    if R == 0:
        return tokens, accept_lens, new_seq_lens
    assert req_to_token.stride(1) == 1, "req_to_token: unit stride over tokens"
    _commit_accepted_kernel[(R,)](
        req_to_token, req_to_token.stride(0), slots.contiguous(), seq_lens.contiguous(), token_ids.contiguous(),
        accepted_nodes.contiguous(), accept_len.contiguous(), bonus.contiguous(), tokens, accept_lens, new_seq_lens, N, P,
        NN=triton.next_power_of_2(N), PP=triton.next_power_of_2(P),
    )  # fmt: skip
    return tokens, accept_lens, new_seq_lens
