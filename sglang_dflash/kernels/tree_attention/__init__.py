"""Tree attention: `tree_attention` runs the Triton kernel (CUDA; tested on CPU under the
interpreter), `tree_attention_ref` is its reference; `attend_tree` picks the kernel for CUDA
tensors whose head dim is a power of two >= 16 (Qwen3.5/3.6: 256), the reference otherwise.
SGLang's own backends take the trees as `sglang_custom_mask` (a kernel on CUDA, `masks` its reference)."""

from torch import Tensor

from .custom_mask import sglang_custom_mask_kernel
from .masks import sglang_custom_mask, sglang_custom_mask_ref
from .naive import tree_attention_ref
from .tree_attention import ancestor_bits, tree_attention


def attend_tree(
    q: Tensor,
    k_cache: Tensor,
    v_cache: Tensor,
    prefix_lens: Tensor,
    k_tree: Tensor,
    v_tree: Tensor,
    ancestor_mask: Tensor,
    slots: Tensor | None = None,
    window: int | None = None,
    positions: Tensor | None = None,
    table: Tensor | None = None,
    ancestor_words: Tensor | None = None,
) -> Tensor:
    """Shapes as `tree_attention_ref` (the kernel reads the cache rows `slots`, or the pool through `table`, in
    place). ancestor_words: `ancestor_bits(ancestor_mask)`, made once for all layers of a step (the kernel's
    form of the mask; else the kernel's wrapper packs it)."""
    dh = q.shape[-1]
    if not (q.is_cuda and dh >= 16 and dh & (dh - 1) == 0):
        return tree_attention_ref(q, k_cache, v_cache, prefix_lens, k_tree, v_tree, ancestor_mask, slots=slots,
                                  window=window, positions=positions, table=table)  # fmt: skip
    mask = ancestor_mask if ancestor_words is None else ancestor_words  # the kernel packs a bool mask itself
    return tree_attention(q, k_cache, v_cache, prefix_lens, k_tree, v_tree, mask, slots=slots, window=window,
                          positions=positions, table=table)  # fmt: skip


__all__ = [
    "ancestor_bits",
    "attend_tree",
    "sglang_custom_mask",
    "sglang_custom_mask_kernel",
    "sglang_custom_mask_ref",
    "tree_attention",
    "tree_attention_ref",
]
