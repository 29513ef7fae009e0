"""DFLASH and DDTREE as speculative algorithms SGLang 0.5.10/0.5.11 can hold where it holds its enum.

`SpeculativeAlgorithm.from_string` (patched by `hooks`) returns these objects. They answer every
`is_*()` question SGLang asks of its enum. `is_eagle()` is True on purpose: SGLang's shared code
then gives our verify pass what EAGLE's gets (TARGET_VERIFY CUDA graphs sized by
`speculative_num_draft_tokens`, the tree `custom_mask` in the attention backends, the hybrid GDN
layers' verify metadata). Side effects, as for EAGLE: radix-cache keys are bigrams, and the
tokenizer reserves EAGLE's extra tokens per request.
"""

from __future__ import annotations

ALGORITHMS = ("DFLASH", "DDTREE")


class DraftTreeAlgorithm:
    """DFLASH (chain of block_size - 1 drafted tokens) or DDTREE (best-budget prefix tree)."""

    def __init__(self, name: str):
        if name not in ALGORITHMS:
            raise ValueError(f"not an sglang-dflash algorithm: {name!r} (have {ALGORITHMS})")
        self.name = self.value = name

    def __repr__(self) -> str:
        return f"<SpeculativeAlgorithm.{self.name} (sglang-dflash)>"

    def __eq__(self, other) -> bool:
        return isinstance(other, DraftTreeAlgorithm) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("sglang-dflash", self.name))

    def is_none(self) -> bool:
        return False

    def is_eagle(self) -> bool:
        return True

    def is_eagle3(self) -> bool:
        return False

    def is_standalone(self) -> bool:
        return False

    def is_ngram(self) -> bool:
        return False

    def supports_spec_v2(self) -> bool:
        return False

    def is_dflash(self) -> bool:
        return self.name == "DFLASH"

    def is_ddtree(self) -> bool:
        return self.name == "DDTREE"

    def create_worker(self, server_args):
        from .worker import worker_class

        return worker_class(self, server_args)
