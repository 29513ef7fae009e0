from .masks import sglang_custom_mask
from .naive import tree_attention_ref

__all__ = ["sglang_custom_mask", "tree_attention_ref"]
