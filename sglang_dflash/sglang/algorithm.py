"""DDTREE and DFLASH_CHAIN as values SGLang can hold where it holds its `SpeculativeAlgorithm`.

`SpeculativeAlgorithm.from_string` returns these objects for our names (the plugin arranges that). They answer
every `is_*()` question SGLang 0.5.11 asks of the enum. `is_eagle()` is True on purpose: SGLang's
shared code then gives our verify pass what EAGLE's gets (TARGET_VERIFY CUDA graphs sized by
`speculative_num_draft_tokens`, the tree `custom_mask` in the attention backends, the hybrid GDN layers' verify
metadata). Side effects, as for EAGLE: radix-cache keys are bigrams, and the tokenizer reserves EAGLE's extra
tokens per request. `is_dflash()` is False: that is SGLang's own DFLASH (0.5.11), whose code paths are not ours.
"""

from __future__ import annotations

from .names import ALGORITHMS, DDTREE, DFLASH_CHAIN, resolved


class DraftTreeAlgorithm:
    """DFLASH_CHAIN (a chain of up to block_size - 1 drafted tokens) or DDTREE (the best-budget prefix tree)."""

    sglang_dflash = True  # `is_ours`

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
        """0.5.11 asks under its overlap scheduler only, the one that serves ours (`create_worker`)."""
        return True

    def is_ddtree(self) -> bool:
        return self.name == DDTREE

    def is_chain(self) -> bool:
        return self.name == DFLASH_CHAIN

    def create_worker(self, server_args):
        """The spec-v2 worker on 0.5.11's schema, which 0.5.11 runs under its overlap scheduler only."""
        refuse_non_overlap(server_args)
        from .ddtree_worker_v2_0511 import DDTreeWorkerV2For0511

        return DDTreeWorkerV2For0511


def refuse_non_overlap(args) -> None:
    """SGLang 0.5.11 runs spec v2, ours' only schema, under its overlap scheduler only (its non-overlap path is spec v1,
    which upstream deleted)."""
    if args.disable_overlap_schedule:
        from .server_args import ServerArgsError

        raise ServerArgsError(
            f"--speculative-algorithm {args.speculative_algorithm} on SGLang 0.5.11 runs under the overlap scheduler "
            "only: drop --disable-overlap-schedule (SGLang 0.5.23 runs it either way)"
        )


def registered_spec_class():
    """SGLang 0.5.23's form of our values: a `CustomSpecAlgo` (its registry's duck type of the enum) for
    `SpeculativeAlgorithm.register`. Unlike `DraftTreeAlgorithm` it answers is_eagle() False: 0.5.23 hangs EAGLE's
    draft model, draft KV pool and MTP sizing on that question. What ours needs of EAGLE's path there (the tree
    verify input of the captured TARGET_VERIFY graphs) the plugin hooks add; the scheduler asks every algorithm for
    a future map, whether it relays top-k and whether it carries draft hidden states."""
    from sglang.srt.speculative.spec_registry import CustomSpecAlgo

    class DraftTreeSpecAlgo(CustomSpecAlgo):
        sglang_dflash = True  # `is_ours`

        def __repr__(self) -> str:
            return f"<SpeculativeAlgorithm.{self.name} (sglang-dflash)>"

        def is_ddtree(self) -> bool:
            return self.name == DDTREE

        def is_chain(self) -> bool:
            return self.name == DFLASH_CHAIN

        def has_draft_kv(self) -> bool:
            return False  # the drafter's context K/V is counted per KV-cache token (memory_plan), not per step

        def need_topk(self) -> bool:
            return False

        def carries_draft_hidden_states(self) -> bool:
            return False

        def create_future_map(self, device, req_to_token_pool, needs_cpu_seq_lens=True, needs_confidence_relay=False):
            from sglang.srt.managers.overlap_utils import FutureMap

            return FutureMap(device, self, req_to_token_pool, needs_cpu_seq_lens, needs_confidence_relay)

    return DraftTreeSpecAlgo


def worker_factory(server_args):
    """`SpeculativeAlgorithm.register`'s factory: the spec-v2 worker class (0.5.23)."""
    from .ddtree_worker_v2 import DDTreeWorkerV2

    return DDTreeWorkerV2


def is_ours(algorithm) -> bool:
    """The one algorithm predicate: `algorithm` (a value `SpeculativeAlgorithm.from_string` returned, or server
    arguments after their resolution, whose `speculative_algorithm` is then our canonical name) is served by our
    workers."""
    if getattr(type(algorithm), "sglang_dflash", False) is True:  # DraftTreeAlgorithm, or the registered class
        return True
    name = getattr(resolved(algorithm), "speculative_algorithm", None)
    return isinstance(name, str) and name in ALGORITHMS
