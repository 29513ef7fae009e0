"""A spec-v2 step's commit of the accepted paths: `commit_accepted` runs the Triton kernel on CUDA (tested on CPU
under the interpreter), `commit_accepted_ref` is its reference (and the CPU path)."""

from torch import Tensor

from .accept_commit import commit_accepted as commit_accepted_kernel
from .naive import commit_accepted_ref, committed_tokens_ref, front_accepted_slots_ref


def commit_accepted(
    req_to_token: Tensor, slots: Tensor, seq_lens: Tensor, token_ids: Tensor, accepted_nodes: Tensor,
    accept_len: Tensor, bonus: Tensor,
) -> tuple[Tensor, Tensor, Tensor]:  # fmt: skip
    """Shapes as `commit_accepted_ref`: one launch on CUDA, the torch reference elsewhere."""
    commit = commit_accepted_kernel if token_ids.is_cuda else commit_accepted_ref
    return commit(req_to_token, slots, seq_lens, token_ids, accepted_nodes, accept_len, bonus)


__all__ = ["commit_accepted", "commit_accepted_kernel", "commit_accepted_ref", "committed_tokens_ref",
           "front_accepted_slots_ref"]  # fmt: skip
