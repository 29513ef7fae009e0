from .naive import ancestors, merge_pattern, select_prefixes_ref
from .tree_build import MAX_TRITON_BUDGET, tree_build

__all__ = ["MAX_TRITON_BUDGET", "ancestors", "merge_pattern", "select_prefixes_ref", "tree_build"]
