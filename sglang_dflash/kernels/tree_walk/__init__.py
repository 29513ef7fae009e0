from .naive import walk_tree_ref
from .path_argmax import greedy_walk
from .tree_walk import tree_walk

__all__ = ["greedy_walk", "tree_walk", "walk_tree_ref"]
