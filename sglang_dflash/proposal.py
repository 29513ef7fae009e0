"""A drafter's proposal for one step, in its format's own way: the chain (DFLASH) or the tree (DDTREE) to verify.

| format  | chain                                              | tree, scoring "conditional"                  |
|---------|----------------------------------------------------|----------------------------------------------|
| dflash  | each depth's argmax                                | (none: DDTree's per-depth marginals)         |
| dflash2 | the selector's walk: each depth's best candidate   | selector scores of each candidate given the  |
|         | given the token before                             | candidate before (`selector_scores`)         |
| dspark  | each depth's argmax of its logits plus the Markov  | the Markov head's bias among each depth's    |
|         | bias of the token before                           | top-budget tokens, given the token before    |

A conditional score is log q(c_d | c_{d-1}) over the depth's K candidates plus log P(the depth's token is among
them), the K's mass under the depth's marginals: so heads that add nothing (zero bias) give DDTree's tree exactly, and
a depth whose K candidates are unlikely is as costly to extend as in DDTree. Scoring "marginal" (and DSpark's rnn
head, whose bias depends on the whole path) gives DDTree's tree of the per-depth logits. Whatever is proposed, the
target's verify decides what is emitted.

Shapes: R requests, D depths (`config.num_depths`), V vocabulary, K candidates per depth, B budget.
"""

from __future__ import annotations

import torch
from torch import Tensor

from .conditional_tree import build_conditional_tree
from .ddtree import DraftTree, build_ddtree, draft_log_probs
from .dflash import chain_tree, greedy_chain
from .models.draft_heads import chain_predecessors, selector_scores

SCORINGS = ("conditional", "marginal")


def propose(drafter, cache, roots: Tensor, slots: Tensor, seq_lens: Tensor, embed, lm_head, algo: str, budget: int,
            scoring: str = "conditional") -> DraftTree:  # fmt: skip
    """One drafter pass from roots [R] (at request slots / lengths [R]) -> the chain (algo "dflash", D + 1 nodes) or
    the tree (algo "ddtree", budget + 1 nodes) to verify."""
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {SCORINGS}, got {scoring!r}")
    if not uses_heads(drafter.config, algo, scoring):  # the logits are all it needs
        return draft(drafter, None, drafter(cache, roots, slots, seq_lens, embed, lm_head), roots, algo, budget, scoring)
    hidden = drafter.hidden(cache, roots, slots, seq_lens, embed)
    return draft(drafter, hidden, drafter.logits(hidden, lm_head), roots, algo, budget, scoring)


def uses_heads(config, algo: str, scoring: str = "conditional") -> bool:
    """Whether the draft of `algo` reads a conditional head (and so the drafter's hidden rows, not its logits alone)."""
    if config.format == "dflash":
        return False
    return algo == "dflash" or not (scoring == "marginal" or config.markov_head_type == "rnn")


def draft(drafter, hidden: Tensor | None, logits: Tensor, roots: Tensor, algo: str, budget: int,
          scoring: str = "conditional") -> DraftTree:  # fmt: skip
    """The chain or tree of one drafter pass: hidden [R, D, H] (None where `uses_heads` is False) and logits
    [R, D, V]; a chain drafts every one of the D depths given (pass fewer rows for a shorter chain)."""
    if algo == "dflash":
        if not uses_heads(drafter.config, algo, scoring):
            return greedy_chain(logits, roots)
        chain = selector_chain if drafter.config.format == "dflash2" else markov_chain
        return chain_tree(chain(drafter, hidden, logits, roots), roots)
    if not uses_heads(drafter.config, algo, scoring):
        return build_ddtree(logits, roots, budget, validate=False)
    heads = selector_heads if drafter.config.format == "dflash2" else markov_heads
    cand, first, step = heads(drafter, hidden, logits, roots, budget)
    return build_conditional_tree(cand, first, step, roots, budget, validate=False)


def selector_heads(drafter, hidden: Tensor, logits: Tensor, roots: Tensor, budget: int):
    """DFlash2: each depth's top selector_top_k tokens and their selector log-scores plus the depth's log-mass, given
    the anchor at depth 1 and each candidate of the depth before later -> (cand [R, D, K], first [R, K],
    step [R, D - 1, K, K])."""
    logp, cand, mass = _candidates(logits, drafter.config.selector_top_k)
    edge = drafter.candidate_selector.edge_scores(hidden, cand, chain_predecessors(roots, cand))
    scores = selector_scores(logp, edge) + mass[:, :, None, None]  # [R, D, K, K]; depth 1's rows all the anchor's
    return cand, scores[:, 0, 0], scores[:, 1:]


def selector_chain(drafter, hidden: Tensor, logits: Tensor, roots: Tensor) -> Tensor:
    """DFlash2's greedy walk -> tokens [R, D]: at each depth the candidate of best selector score after the token
    chosen before (the anchor at depth 1)."""
    unary, cand = logits.topk(drafter.config.selector_top_k, dim=-1)
    prev, out = roots, []
    for d in range(cand.shape[1]):
        edge = drafter.candidate_selector.edge_scores(hidden[:, d : d + 1], cand[:, d : d + 1], prev[:, None, None])
        best = (unary[:, d] + edge[:, 0, 0]).argmax(-1)
        prev = cand[:, d].gather(1, best[:, None])[:, 0]
        out.append(prev)
    return torch.stack(out, 1)


def markov_heads(drafter, hidden: Tensor, logits: Tensor, roots: Tensor, budget: int):
    """DSpark (vanilla or gated head): each depth's top-K tokens of its logits (K = min(budget, V)), scored by the
    logits plus the Markov bias of the token before, normalised over the K, plus the depth's log-mass -> (cand, first,
    step) as `selector_heads`."""
    logp, cand, mass = _candidates(logits, min(budget, logits.shape[-1]))
    head = drafter.markov_head
    bias, _ = head.bias_at(roots, hidden[:, 0], cand[:, 0])  # [R, K]
    first = torch.log_softmax(logp[:, 0] + bias.float(), -1) + mass[:, 0, None]
    bias = head.bias_matrix(cand[:, :-1], hidden[:, 1:], cand[:, 1:])  # [R, D - 1, K(parent), K]
    step = torch.log_softmax(logp[:, 1:, None] + bias.float(), -1) + mass[:, 1:, None, None]
    return cand, first, step


def _candidates(logits: Tensor, k: int) -> tuple[Tensor, Tensor, Tensor]:
    """Each depth's top-k tokens as DDTree picks them -> (their log-probabilities [R, D, k], ids [R, D, k], the
    log-mass of the k [R, D], at most 0: float32 rounding puts a peaked row's a few 1e-6 above it, and a score above 0
    would let a child outscore its parent)."""
    logp, cand = draft_log_probs(logits, k)
    return logp, cand, logp.logsumexp(-1).clamp_max(0.0)


def markov_chain(drafter, hidden: Tensor, logits: Tensor, roots: Tensor) -> Tensor:
    """DSpark's greedy draft -> tokens [R, D]: each depth's argmax of its logits plus the Markov bias of the token
    drafted before (the anchor at depth 1), the head's state carried along (rnn)."""
    head, prev, out = drafter.markov_head, roots, []
    state = head.init_state(hidden[:, 0])
    for d in range(logits.shape[1]):
        bias, state = head.bias(prev, hidden[:, d], state)
        prev = (logits[:, d] + bias.float()).argmax(-1)
        out.append(prev)
    return torch.stack(out, 1)
