"""DDTREE and DFLASH_CHAIN as values SGLang can hold where it holds its `SpeculativeAlgorithm`.

`SpeculativeAlgorithm.from_string` returns these objects for our names (the plugin arranges that). They answer
every `is_*()` question SGLang 0.5.10.post1 and 0.5.11 ask of the enum. `is_eagle()` is True on purpose: SGLang's
shared code then gives our verify pass what EAGLE's gets (TARGET_VERIFY CUDA graphs sized by
`speculative_num_draft_tokens`, the tree `custom_mask` in the attention backends, the hybrid GDN layers' verify
metadata). Side effects, as for EAGLE: radix-cache keys are bigrams, and the tokenizer reserves EAGLE's extra
tokens per request. `is_dflash()` is False: that is SGLang's own DFLASH (0.5.11), whose code paths are not ours.
"""

from __future__ import annotations

from .names import ALGORITHMS, DDTREE, DFLASH_CHAIN


class DraftTreeAlgorithm:
    """DFLASH_CHAIN (a chain of up to block_size - 1 drafted tokens) or DDTREE (the best-budget prefix tree)."""

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

    def is_speculative(self) -> bool:
        return True

    def is_eagle(self) -> bool:
        return True

    def is_eagle3(self) -> bool:
        return False

    def is_dflash(self) -> bool:
        return False

    def is_standalone(self) -> bool:
        return False

    def is_ngram(self) -> bool:
        return False

    def supports_spec_v2(self) -> bool:
        return False

    def is_ddtree(self) -> bool:
        return self.name == DDTREE

    def is_chain(self) -> bool:
        return self.name == DFLASH_CHAIN

    def create_worker(self, server_args):
        from .dflash_worker import DDTreeWorker, DFlashWorker

        return DDTreeWorker if self.is_ddtree() else DFlashWorker


def is_ours(algorithm) -> bool:
    """The one algorithm predicate: `algorithm` (a value `SpeculativeAlgorithm.from_string` returned, or server
    arguments after their resolution, whose `speculative_algorithm` is then our canonical name) is served by our
    workers."""
    if isinstance(algorithm, DraftTreeAlgorithm):
        return True
    name = getattr(algorithm, "speculative_algorithm", None)
    return isinstance(name, str) and name in ALGORITHMS
