from .masks import sglang_custom_mask
from .naive import tree_attention_ref
from .tree_attention import tree_attention

__all__ = ["sglang_custom_mask", "tree_attention", "tree_attention_ref"]
