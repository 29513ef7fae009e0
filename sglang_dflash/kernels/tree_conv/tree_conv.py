"""Triton: depthwise causal conv1d (+ SiLU) over draft trees, and its commit.

verify: one program per (channel tile of BD, node tile of BN, request). Node i's window is
itself and its W - 1 nearest ancestors (`conv_windows`, a table made once per step from the
parent pointers); above the root it continues into conv_state[slots[r]] (last column = newest
input). conv_state is only read.
commit: conv_state[slots[r]] <- the last W - 1 inputs of (old state, accepted path), read fully
before it is written, by the program that owns that tile. Shapes as in `naive.py`.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from torch import Tensor

from ..layer_table import LayerTable


@triton.jit
def _tree_conv_kernel(
    x, conv_state, weight, bias, slots, windows, y, N, D,
    W: tl.constexpr, BN: tl.constexpr, BD: tl.constexpr, HAS_BIAS: tl.constexpr, SILU: tl.constexpr,
):  # fmt: skip
    idt, r = tl.program_id(0), tl.program_id(2).to(tl.int64)
    n = tl.program_id(1) * BN + tl.arange(0, BN)
    nm = n < N
    d = idt * BD + tl.arange(0, BD)
    dm = d < D
    both = nm[:, None] & dm[None, :]
    slot = tl.load(slots + r).to(tl.int64)
    state = conv_state + slot * D * (W - 1)

    acc = tl.load(x + (r * N + n[:, None]) * D + d[None, :], mask=both, other=0.0).to(tl.float32)
    acc = acc * tl.load(weight + d * W + (W - 1), mask=dm, other=0.0).to(tl.float32)[None, :]
    for m in tl.static_range(1, W):  # the window's entries are independent loads: no walk up the parents
        up = tl.load(windows + (r * N + n) * (W - 1) + (m - 1), mask=nm, other=0)  # node, or -(steps above the root)
        from_x = tl.load(x + (r * N + up[:, None]) * D + d[None, :], mask=both & (up >= 0)[:, None], other=0.0)
        col = W - 1 + up  # above the root: the state's columns, newest last
        from_state = tl.load(state + d[None, :] * (W - 1) + col[:, None], mask=both & (up < 0)[:, None] & (slot >= 0), other=0.0)
        value = tl.where((up >= 0)[:, None], from_x.to(tl.float32), from_state.to(tl.float32))
        acc += value * tl.load(weight + d * W + (W - 1 - m), mask=dm, other=0.0).to(tl.float32)[None, :]
    if HAS_BIAS:
        acc += tl.load(bias + d, mask=dm, other=0.0).to(tl.float32)[None, :]
    if SILU:
        acc = acc / (1.0 + tl.exp(-acc))
    tl.store(y + (r * N + n[:, None]) * D + d[None, :], acc.to(y.dtype.element_ty), mask=both)


@triton.jit(do_not_specialize=["R"])  # one compile for every request count R
def _tree_conv_commit_kernel(
    conv_state, slots, x, x_like, accepted, N, D, LA, S, R, X_ROW,
    W: tl.constexpr, WP: tl.constexpr, LP: tl.constexpr, BD: tl.constexpr, TABLE: tl.constexpr,
):  # fmt: skip
    """Per (channel tile, request, layer): conv_state [layers, S, D, W - 1]; x [layers, R, N, D], or (TABLE) an
    int64 [layers] table of each layer's x (`LayerTable`; x_like: one x, for its dtype). x's rows are X_ROW apart."""
    idt, r, layer = tl.program_id(0), tl.program_id(1).to(tl.int64), tl.program_id(2).to(tl.int64)
    conv_state += layer * S * D * (W - 1)
    if TABLE:
        x = tl.load(x + layer).to(tl.pointer_type(x_like.dtype.element_ty))
    else:
        x += layer * R * N * X_ROW
    slot = tl.load(slots + r).to(tl.int64)
    if slot >= 0:
        d = idt * BD + tl.arange(0, BD)
        dm = d < D
        j = tl.arange(0, LP)
        path = tl.load(accepted + r * LA + j, mask=j < LA, other=-1)
        P = tl.sum((path >= 0).to(tl.int32), axis=0)
        state = conv_state + slot * D * (W - 1)
        cols = tl.arange(0, WP)
        old = tl.load(state + d[:, None] * (W - 1) + cols[None, :], mask=dm[:, None] & (cols < W - 1)[None, :], other=0.0)
        tl.debug_barrier()  # every column is read before any is written
        for c in tl.static_range(W - 1):
            back = W - 2 - c  # 0: the newest input
            node = tl.sum(tl.where(j == P - 1 - back, path, 0), axis=0)
            from_x = tl.load(x + (r * N + node) * X_ROW + d, mask=dm & (back < P), other=0.0).to(tl.float32)
            from_old = tl.sum(tl.where(cols[None, :] == c + P, old.to(tl.float32), 0.0), axis=1)  # old column c + P
            value = tl.where(back < P, from_x, from_old)
            tl.store(state + d * (W - 1) + c, value.to(conv_state.dtype.element_ty), mask=dm)


def conv_windows(parents: Tensor, W: int) -> Tensor:
    """Long [R, N, W - 1]: for m = 1 .. W - 1, node i's m-th ancestor, or -(steps above the root) once
    the window leaves the tree (then state column W - 1 - steps). One table per step serves every
    conv layer; graph-safe."""
    cur = torch.arange(parents.shape[1], device=parents.device).expand_as(parents)
    above = torch.zeros_like(parents)
    table = []
    for _ in range(W - 1):
        cur = torch.where(cur >= 0, parents.gather(1, cur.clamp(min=0)), -1)
        above = torch.where(cur >= 0, 0, above + 1)
        table.append(torch.where(cur >= 0, cur, -above))
    return torch.stack(table, dim=-1)


def tree_causal_conv1d_triton(
    x: Tensor,
    conv_state: Tensor,
    weight: Tensor,
    bias: Tensor | None,
    slots: Tensor,
    parents: Tensor,
    activation: bool = True,
    windows: Tensor | None = None,
    tiles: tuple[int, int] | None = None,
) -> Tensor:
    """x [R, N, D] (pre-conv) -> y [R, N, D], conv_state [S, D, W - 1] untouched. windows: `conv_windows`
    of the step's trees, computed here if not given. tiles: (BD, BN) channels x nodes per program,
    default `conv_tiles`."""
    R, N, D = x.shape
    W = weight.shape[1]
    windows = conv_windows(parents, W) if windows is None else windows
    y = torch.empty_like(x)
    BD, BN = tiles or conv_tiles(N, D)
    _tree_conv_kernel[(triton.cdiv(D, BD), triton.cdiv(N, BN), R)](
        x.contiguous(), conv_state, weight.contiguous(), weight if bias is None else bias, slots, windows.contiguous(), y, N, D,
        W=W, BN=BN, BD=BD, HAS_BIAS=bias is not None, SILU=activation,
    )  # fmt: skip
    return y


def conv_tiles(N: int, D: int) -> tuple[int, int]:
    """(BD, BN): 64 channels x up to 16 nodes per program, so that one request's tree already spreads over
    a few hundred programs (latency-bound: each program's window loads depend on its table loads)."""
    return min(64, triton.next_power_of_2(D)), min(16, triton.next_power_of_2(N))


def tree_conv_commit_triton(conv_state: Tensor, slots: Tensor, x: Tensor | LayerTable, accepted_nodes: Tensor) -> None:
    """conv_state[slots[r]] <- the last W - 1 inputs of (old state, accepted path); slots < 0 untouched.
    Several layers in one launch: conv_state [layers, S, D, W - 1] and x [layers, R, N, D], or a `LayerTable` of
    the layers' own x [R, N, D] (rows of D contiguous channels, read where they are)."""
    layered = conv_state.dim() == 4
    state = conv_state if layered else conv_state[None]
    layers, S, D, W = state.shape[0], state.shape[1], state.shape[2], state.shape[3] + 1
    table = isinstance(x, LayerTable)
    if table:
        xs, x_like, count = x.ptrs, x.like, len(x)
        if x_like.stride(2) != 1 or x_like.stride(0) != x_like.shape[1] * x_like.stride(1):
            raise ValueError(f"a layer table of x needs rows of contiguous channels, got strides {x_like.stride()}")
    else:
        xs = (x if layered else x[None]).contiguous()
        x_like, count = xs[0], xs.shape[0]
    R, N, x_row = x_like.shape[0], x_like.shape[1], x_like.stride(1)
    if not state.is_contiguous() or count != layers or x_like.shape[2] != D:
        raise ValueError(f"need a contiguous state and inputs per layer, got state {list(state.shape)}, x {list(x_like.shape)}")
    LA = accepted_nodes.shape[1]
    BD = min(256, triton.next_power_of_2(D))
    _tree_conv_commit_kernel[(triton.cdiv(D, BD), R, layers)](
        state, slots, xs, x_like, accepted_nodes.contiguous(), N, D, LA, S, R, x_row,
        W=W, WP=triton.next_power_of_2(W - 1), LP=triton.next_power_of_2(LA), BD=BD, TABLE=table,
    )  # fmt: skip
