"""Pure-torch reference: width-W depthwise causal conv1d (+ SiLU) along draft trees.

Node i's window is its W - 1 nearest ancestors (root side first) and itself, continued into
conv_state[slots[r]] (sglang layout [D, W - 1], last column = newest input) above the root:
    y_i = SiLU(sum_w weight[:, w] * window_i[:, w] + bias)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor


def _push(history: Tensor, x: Tensor) -> Tensor:
    """Shift one input x [..., D] into the newest column of history [..., D, W - 1]."""
    return torch.cat([history[..., 1:], x[..., None]], dim=-1)


def tree_causal_conv1d_ref(
    x: Tensor, conv_state: Tensor, weight: Tensor, bias: Tensor | None, slots: Tensor, parents: Tensor, activation: bool = True
) -> Tensor:
    """x [R, N, D] (pre-conv) -> y [R, N, D]; conv_state [S, D, W - 1] is not modified.

    weight [D, W]; bias [D] or None; slots int [R] (negative: zero history); parents long [R, N].
    """
    R, N, D = x.shape
    batch = torch.arange(R, device=x.device)
    root = conv_state[slots.long().clamp_min(0)].to(x.dtype) * (slots >= 0).to(x.dtype)[:, None, None]
    history = root.new_empty(R, N, *root.shape[1:])  # [R, N, D, W - 1]: last W - 1 inputs up to node i
    y = torch.empty_like(x)
    for i in range(N):
        p = parents[:, i]
        before = torch.where((p < 0)[:, None, None], root, history[batch, p.clamp_min(0)])
        window = torch.cat([before, x[:, i, :, None]], dim=-1)  # [R, D, W]
        out = (window * weight.to(x.dtype)).sum(-1) + (0 if bias is None else bias.to(x.dtype))
        y[:, i] = F.silu(out) if activation else out
        history[:, i] = window[..., 1:]
    return y


def tree_conv_commit_ref(conv_state: Tensor, slots: Tensor, x: Tensor, accepted_nodes: Tensor) -> None:
    """conv_state[slots[r]] <- the last W - 1 inputs of (old state, request r's accepted path).

    x [R, N, D] (the pre-conv inputs of verify); accepted_nodes long [R, L + 1] padded -1.
    """
    R = x.shape[0]
    batch = torch.arange(R, device=x.device)
    live = slots >= 0
    history = conv_state[slots.long().clamp_min(0)].to(x.dtype)
    for step in range(accepted_nodes.shape[1]):
        node = accepted_nodes[:, step]
        pushed = _push(history, x[batch, node.clamp_min(0)])
        history = torch.where((node >= 0)[:, None, None], pushed, history)
    conv_state[slots[live].long()] = history[live].to(conv_state.dtype)
