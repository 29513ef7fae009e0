"""Kernels for tree verification, each beside its pure-torch reference (fla layout: <op>/naive.py).

Contracts (shapes, semantics): each function's docstring.
"""

from .tree_attention import sglang_custom_mask, tree_attention_ref
from .tree_conv import tree_causal_conv1d, tree_causal_conv1d_ref, tree_conv_commit, tree_conv_commit_ref
from .tree_gdn import TreeGDNContext, tree_gdn_commit, tree_gdn_commit_ref, tree_gdn_verify, tree_gdn_verify_ref

__all__ = [
    "TreeGDNContext",
    "sglang_custom_mask",
    "tree_attention_ref",
    "tree_causal_conv1d",
    "tree_causal_conv1d_ref",
    "tree_conv_commit",
    "tree_conv_commit_ref",
    "tree_gdn_commit",
    "tree_gdn_commit_ref",
    "tree_gdn_verify",
    "tree_gdn_verify_ref",
]
