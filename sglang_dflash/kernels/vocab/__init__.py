from .argmax import argmax
from .draft_topk import chunk_width, draft_log_probs
from .naive import LOGP_FLOOR, argmax_ref, draft_log_probs_ref

__all__ = ["LOGP_FLOOR", "argmax", "argmax_ref", "chunk_width", "draft_log_probs", "draft_log_probs_ref"]
