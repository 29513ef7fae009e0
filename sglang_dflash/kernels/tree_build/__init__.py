from .naive import ancestors, merge_pattern, select_conditional_prefixes_ref, select_prefixes_ref
from .tree_build import MAX_TRITON_BUDGET, conditional_fits, conditional_tree_build, tree_build

__all__ = [
    "MAX_TRITON_BUDGET",
    "ancestors",
    "conditional_fits",
    "conditional_tree_build",
    "merge_pattern",
    "select_conditional_prefixes_ref",
    "select_prefixes_ref",
    "tree_build",
]
