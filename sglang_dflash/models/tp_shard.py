"""Tensor-parallel sharding of a loaded `DFlashDrafter`, in place (Megatron layout, as SGLang's parallel layers).

Rank r of W keeps, per layer: query heads [r HQ/W, (r+1) HQ/W) of q_proj and the matching input columns of o_proj;
the key/value heads those queries read (a contiguous 1/W of them when W divides HKV, else, when HKV divides W, the
single head its queries share, replicated over W / HKV ranks); 1/W of the MLP's intermediate rows (gate, up) and
columns (down). o_proj and down_proj then give partial sums that `all_reduce` adds over the ranks (their biases
added once, after it). fc, the norms, embedding and LM head are untouched (replicated; the taps are full on every
rank). The drafter's context K/V (`new_cache`) then holds only this rank's key/value heads: weights and cache per
GPU both shrink by about W.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from .config import DraftConfig


class ReducedLinear(nn.Module):
    """A row-parallel linear layer: this rank's columns of the weight [out, in / W], partial products summed over
    the ranks by `all_reduce` (in place, returns its argument), then the bias (kept whole on every rank)."""

    def __init__(self, linear: nn.Linear, columns: slice, all_reduce: Callable[[Tensor], Tensor]):
        super().__init__()
        self.weight = nn.Parameter(linear.weight.data[:, columns].contiguous(), requires_grad=False)
        self.bias = linear.bias
        self.all_reduce = all_reduce

    def forward(self, x: Tensor) -> Tensor:
        y = self.all_reduce(torch.nn.functional.linear(x, self.weight))
        return y if self.bias is None else y + self.bias


def shard_plan(c: DraftConfig, world: int) -> str | None:
    """Why the drafter cannot be sharded over `world` ranks (None: it can)."""
    HQ, HKV = c.num_attention_heads, c.num_key_value_heads
    if HQ % world:
        return f"{HQ} query heads do not split over {world} ranks"
    if HKV % world and world % HKV:
        return f"{HKV} key/value heads neither split over nor replicate across {world} ranks"
    if c.intermediate_size % world:
        return f"MLP width {c.intermediate_size} does not split over {world} ranks"
    return None


def rows(linear: nn.Linear, keep: slice) -> None:
    """Keep rows `keep` of a column-parallel linear layer (weight and bias), in place."""
    linear.weight = nn.Parameter(linear.weight.data[keep].contiguous(), requires_grad=False)
    if linear.bias is not None:
        linear.bias = nn.Parameter(linear.bias.data[keep].contiguous(), requires_grad=False)
    linear.out_features = linear.weight.shape[0]


@torch.no_grad()
def shard_drafter(drafter, rank: int, world: int, all_reduce: Callable[[Tensor], Tensor]) -> None:
    """Shard `drafter` (a DFlashDrafter) for rank `rank` of `world`, in place (see the module docstring). Raises
    ValueError with `shard_plan`'s reason if its heads or MLP do not split; world 1 leaves it as it is."""
    c = drafter.config
    if world == 1:
        return
    if (why := shard_plan(c, world)) is not None:
        raise ValueError(f"drafter cannot be TP-sharded: {why}")
    Dh, HQ, HKV, I = c.head_dim, c.num_attention_heads, c.num_key_value_heads, c.intermediate_size
    q = slice(rank * HQ // world * Dh, (rank + 1) * HQ // world * Dh)
    if HKV % world == 0:
        kv = slice(rank * HKV // world * Dh, (rank + 1) * HKV // world * Dh)
    else:  # HKV divides world: every query head of this rank reads KV head rank // (world / HKV)
        head = rank // (world // HKV)
        kv = slice(head * Dh, (head + 1) * Dh)
    mlp = slice(rank * I // world, (rank + 1) * I // world)
    for layer in drafter.layers:
        attn, ff = layer.self_attn, layer.mlp
        rows(attn.q_proj, q)
        rows(attn.k_proj, kv)
        rows(attn.v_proj, kv)
        attn.o_proj = ReducedLinear(attn.o_proj, q, all_reduce)
        rows(ff.gate_proj, mlp)
        rows(ff.up_proj, mlp)
        ff.down_proj = ReducedLinear(ff.down_proj, mlp, all_reduce)
    drafter.kv_heads = (kv.stop - kv.start) // Dh
