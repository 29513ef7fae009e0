from .naive import walk_tree_ref
from .tree_walk import tree_walk

__all__ = ["tree_walk", "walk_tree_ref"]
