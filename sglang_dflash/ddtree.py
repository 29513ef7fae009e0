"""Draft trees for DDTree: building, tree tensors, acceptance walks.

Batched over R requests. Plain torch on the CPU (the references in `kernels/*/naive.py`); on CUDA
tensors the hot steps run Triton kernels from `kernels/`. Nothing here syncs with the host per
node: for fixed shapes `build_ddtree` and the acceptance walks launch a fixed set of kernels, so
they capture in a CUDA graph (validation that needs the host is skipped while capturing).

Shapes: R requests, L draft depths, V vocabulary, B = budget, N = B + 1 tree nodes (node 0 is the
root: the bonus / last verified token, depth 0).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from functools import partial

import torch
from torch import Tensor

from .kernels import vocab
from .kernels.tree_build import MAX_TRITON_BUDGET, ancestors, select_prefixes_ref, tree_build
from .kernels.tree_walk import greedy_walk, tree_walk, walk_tree_ref
from .kernels.vocab import LOGP_FLOOR, chunk_width

__all__ = [
    "LOGP_FLOOR",
    "Acceptance",
    "DraftTree",
    "accept_greedy",
    "accept_sampling",
    "build_ddtree",
    "build_ddtree_from_top_k",
    "count_prefixes",
    "draft_log_probs",
    "sample_tokens",
    "tree_from_parents",
    "walk_tree",
]


@dataclass(frozen=True)
class DraftTree:
    """R draft trees of N nodes each, nodes in topological order (parents[:, i] < i).

    token_ids, parents, depths, positions, next_token, next_sibling: long [R, N].
    ancestor_mask: bool [R, N, N], row i = ancestors of i and i itself.
    next_token / next_sibling: first child / next sibling, -1 if none (EAGLE verify layout).
    positions: depths until `placed(seq_lens)` adds each request's sequence length.
    max_depth: L, the deepest a node may be; sizes `Acceptance.accepted_nodes` as [R, L + 1].
    """

    token_ids: Tensor
    parents: Tensor
    depths: Tensor
    ancestor_mask: Tensor
    positions: Tensor
    next_token: Tensor
    next_sibling: Tensor
    max_depth: int

    @property
    def num_requests(self) -> int:
        return self.token_ids.shape[0]

    @property
    def num_nodes(self) -> int:
        return self.token_ids.shape[1]

    def placed(self, seq_lens: Tensor) -> "DraftTree":
        """The same tree with positions = seq_lens[r] + depth (seq_lens: long [R], the root's position)."""
        if seq_lens.shape != (self.num_requests,):
            raise ValueError(f"seq_lens must have shape [{self.num_requests}], got {list(seq_lens.shape)}")
        return dataclasses.replace(self, positions=seq_lens.to(self.depths)[:, None] + self.depths)

    def rows(self, index: Tensor) -> "DraftTree":
        """The trees of requests `index` (long [R'], repeats allowed), in that order."""
        tensors = [f.name for f in dataclasses.fields(self) if f.name != "max_depth"]
        return dataclasses.replace(self, **{name: getattr(self, name)[index] for name in tensors})

    def prefix(self, n: int) -> "DraftTree":
        """The first n nodes of each tree (a tree: the order is topological). Of `build_ddtree`'s tree, numbered by
        descending score, that is the tree of budget n - 1. No host sync."""
        if not 1 <= n <= self.num_nodes:
            raise ValueError(f"prefix: n={n} not in [1, {self.num_nodes}]")
        inside = lambda links: torch.where(links < n, links, -1)  # noqa: E731 (children and siblings come later)
        return DraftTree(
            token_ids=self.token_ids[:, :n],
            parents=self.parents[:, :n],
            depths=self.depths[:, :n],
            ancestor_mask=self.ancestor_mask[:, :n, :n],
            positions=self.positions[:, :n],
            next_token=inside(self.next_token[:, :n]),
            next_sibling=inside(self.next_sibling[:, :n]),
            max_depth=self.max_depth,
        )


@dataclass(frozen=True)
class Acceptance:
    """Result of walking R trees against the target.

    accept_len: long [R], accepted draft nodes (root excluded).
    accepted_nodes: long [R, L + 1], node indices of the accepted path, starting with 0, padded -1.
    bonus_tokens: long [R], the target's token at the last accepted node.
    """

    accept_len: Tensor
    accepted_nodes: Tensor
    bonus_tokens: Tensor


def tree_from_parents(token_ids: Tensor, parents: Tensor, max_depth: int) -> DraftTree:
    """Complete a DraftTree from node tokens and parent pointers (both long [R, N], topological,
    parents[:, 0] == -1), no node deeper than max_depth."""
    R, N = parents.shape
    device = parents.device
    idx = torch.arange(N, device=device).expand(R, N)
    ancestor_mask = ancestors(parents, max_depth)
    depths = ancestor_mask.sum(-1) - 1

    # First child: the smallest child index. Next sibling: the next node in (parent, index) order
    # if it has the same parent (a stable sort keeps indices ascending within one parent).
    child_parent = torch.where(parents < 0, N, parents)
    next_token = torch.full((R, N + 1), N, device=device).scatter_reduce(1, child_parent, idx, "amin")[:, :N]
    sorted_parents, order = torch.sort(child_parent, dim=1, stable=True)
    following = torch.cat([order[:, 1:], torch.full((R, 1), -1, device=device)], dim=1)
    same = torch.cat([sorted_parents[:, 1:] == sorted_parents[:, :-1], torch.zeros(R, 1, dtype=torch.bool, device=device)], dim=1)
    next_sibling = torch.empty_like(parents).scatter_(1, order, torch.where(same & (sorted_parents < N), following, -1))
    return DraftTree(
        token_ids=token_ids,
        parents=parents,
        depths=depths,
        ancestor_mask=ancestor_mask,
        positions=depths.clone(),
        next_token=torch.where(next_token == N, -1, next_token),
        next_sibling=next_sibling,
        max_depth=max_depth,
    )


def count_prefixes(vocab_size: int, depth: int) -> int:
    """Number of non-empty token prefixes of length <= depth over a vocabulary."""
    return sum(vocab_size**d for d in range(1, depth + 1))


def draft_log_probs(draft_logits: Tensor, k: int, with_lse: bool = False) -> tuple[Tensor, ...]:
    """Top-k log-probabilities per depth, float32 and clamped at LOGP_FLOOR, with their token ids.

    draft_logits float [R, L, V] -> (logp [R, L, k] sorted descending, token ids long [R, L, k]) and, with_lse,
    the rows' logsumexp float32 [R, L]. On the GPU one chunked Triton pass (kernels.vocab.draft_topk), else torch.
    """
    if draft_logits.is_cuda and chunk_width(draft_logits.shape[-1], k):
        return vocab.draft_log_probs(draft_logits, k, with_lse=with_lse)
    return vocab.draft_log_probs_ref(draft_logits, k, with_lse=with_lse)


def _is_capturing() -> bool:
    return torch.cuda.is_available() and torch.cuda.is_current_stream_capturing()


def build_ddtree(draft_logits: Tensor, root_tokens: Tensor, budget: int, *, validate: bool = True) -> DraftTree:
    """The top-`budget` prefixes of each request's draft marginals, as a DraftTree of N = budget + 1 nodes.

    draft_logits: float [R, L, V], drafter logits for depths 1..L. root_tokens: long [R].
    A prefix (t_1..t_d) scores sum_d log_softmax(draft_logits[r, d - 1])[t_d]; the tree holds the
    `budget` best prefixes (exact top-B), which is prefix-closed since no child outscores its parent.

    Algorithm (vectorised form of the reference's best-first heap): for each depth d, the top-B
    prefixes of length d are among the top-B length-(d-1) prefixes extended by the top-B tokens of
    depth d, and of those pairs only the ones with (i + 1)(j + 2) <= B can be in the global top B
    (`kernels.tree_build.naive.merge_pattern`, under B ln B pairs). So L sorts of those candidates
    give per-depth beams, and one sort of the L * B beam entries gives the global top B.

    Order and ties: nodes are numbered by descending score, ties by shallower depth first, then by
    the beam order (candidate pairs are sorted stably in (parent rank, token rank) order), so the
    numbering is topological and deterministic for a given input. Which of several equal-scoring
    tokens makes the top-B of one depth at its edge: the smallest token ids on the GPU (Triton
    vocabulary pass), torch.topk's choice on the CPU.

    With validate=True (the default) bad input raises ValueError; the NaN check reads one flag
    back to the host, and is skipped while a CUDA graph is being captured.
    """
    if draft_logits.dim() != 3 or not draft_logits.is_floating_point():
        raise ValueError(f"draft_logits must be a float tensor [R, L, V], got {draft_logits.dtype} {list(draft_logits.shape)}")
    R, L, V = draft_logits.shape
    if root_tokens.shape != (R,):
        raise ValueError(f"root_tokens must have shape [R] = [{R}], got {list(root_tokens.shape)}")
    if not isinstance(budget, int) or budget < 1:
        raise ValueError(f"budget must be a positive int, got {budget!r}")
    if L < 1 or V < 1:
        raise ValueError(f"draft_logits needs at least one depth and one token, got shape {list(draft_logits.shape)}")
    if budget > count_prefixes(V, L):
        raise ValueError(f"budget={budget} exceeds the {count_prefixes(V, L)} prefixes of {L} depths over {V} tokens")
    logp, top_ids = draft_log_probs(draft_logits, min(budget, V))
    if validate and not _is_capturing() and bool(torch.isnan(logp).any()):
        raise ValueError("draft_logits contains NaN (or +inf) in at least one row")
    return build_ddtree_from_top_k(logp, top_ids, root_tokens, budget)


def build_ddtree_from_top_k(logp: Tensor, top_ids: Tensor, root_tokens: Tensor, budget: int) -> DraftTree:
    """`build_ddtree` after its vocabulary pass: logp float32 [R, L, K] sorted descending per depth
    (`draft_log_probs`; K >= min(budget, V), only the first `budget` are used), top_ids long
    [R, L, K] their tokens.

    Split out so that a vocabulary-parallel drafter can merge per-shard top-K lists first. A NaN log-probability
    (a drafter that produced NaN or +inf) counts as LOGP_FLOOR, so the result is still a tree (which the target's
    verify then judges as any other); `build_ddtree` refuses such input unless validate=False. A log-probability
    above 0 (a GPU's rounding where the drafter is all but certain) counts as 0: a child then never outranks its
    parent, so the tree stays topological (with it, deeper nodes of a sure chain came first and a prefix of the tree
    named parents past its end).
    """
    if not isinstance(budget, int) or not 1 <= budget <= count_prefixes(logp.shape[2], logp.shape[1]):
        raise ValueError(f"budget={budget!r} must be in [1, number of prefixes of the {logp.shape[2]} tokens per depth given]")
    logp, top_ids = logp[..., :budget], top_ids[..., :budget]
    logp = torch.where(torch.isnan(logp), LOGP_FLOOR, logp).clamp(max=0.0)

    if logp.is_cuda and budget <= MAX_TRITON_BUDGET:
        fields = tree_build(logp, top_ids, root_tokens, budget)
        return DraftTree(**fields, max_depth=logp.shape[1])
    token_ids, parents = select_prefixes_ref(logp, top_ids, root_tokens, budget)
    return tree_from_parents(token_ids, parents, max_depth=logp.shape[1])


def _check_target_logits(tree: DraftTree, target_logits: Tensor) -> None:
    R, N = tree.token_ids.shape
    if target_logits.dim() != 3 or target_logits.shape[:2] != (R, N) or not target_logits.is_floating_point():
        raise ValueError(
            f"target_logits must be a float tensor [R, N, V] = [{R}, {N}, V], "
            f"got {target_logits.dtype} {list(target_logits.shape)}"
        )


def walk_tree(tree: DraftTree, target_tokens: Tensor) -> Acceptance:
    """Accept along the tree: from the root, descend to the child whose token is the target's token
    at the current node; stop where there is none. target_tokens: long [R, N], the target's token
    (argmax or sample) at every node. One Triton program per request on the GPU
    (kernels.tree_walk), else the vectorised torch rule."""
    walk = tree_walk if tree.parents.is_cuda else partial(walk_tree_ref, ancestor_mask=tree.ancestor_mask)
    accept_len, accepted_nodes, bonus = walk(
        token_ids=tree.token_ids, parents=tree.parents, depths=tree.depths, target_tokens=target_tokens, max_depth=tree.max_depth
    )
    return Acceptance(accept_len=accept_len, accepted_nodes=accepted_nodes, bonus_tokens=bonus)


# Verify rows (R * N) from which accept_greedy reads only the accepted path's rows. H200 (benchmarks/RESULTS.md), us,
# all rows against the path walk accepting 6 depths: 130-136 rows 27.5-28.0 against 20.4-26.2; 260-264 rows 46.3-46.8
# against 20.5-26.7; 17-68 rows 8.7-16.1 against 17.3-18.9. (At 15 depths all rows win up to 264 rows.)
PATH_WALK_ROWS = 128


def accept_greedy(tree: DraftTree, target_logits: Tensor) -> Acceptance:
    """Greedy verification: the target's argmax at each node drives `walk_tree`.
    target_logits: float [R, N, V] from the verify pass.

    On the GPU, two equal ways, chosen by size (H200, benchmarks/RESULTS.md, issue 2): for R * N >=
    PATH_WALK_ROWS, `kernels.tree_walk.greedy_walk` reads only the rows on the accepted path (at most
    L + 1 per request, in one launch, `LOOKAHEAD` = 8 rows a round: 17 / 24 / 41 us at R = 8, N = 65 when the walk
    stops at the root / goes 6 / 15 deep, against 95 us for all 520 rows); below, the argmax of every row
    (16 us at R = 1, N = 65, whatever the depth) and `walk_tree`. No host sync either way."""
    _check_target_logits(tree, target_logits)
    if not target_logits.is_cuda:
        return walk_tree(tree, target_logits.argmax(-1))
    R, N, _ = target_logits.shape
    if R * N < PATH_WALK_ROWS:
        return walk_tree(tree, vocab.argmax(target_logits))
    accept_len, accepted_nodes, bonus = greedy_walk(tree.token_ids, tree.parents, target_logits, tree.max_depth)
    return Acceptance(accept_len=accept_len, accepted_nodes=accepted_nodes, bonus_tokens=bonus)


def accept_sampling(
    tree: DraftTree,
    target_logits: Tensor,
    temperature: float | Tensor,
    top_p: float | Tensor = 1.0,
    top_k: int | Tensor = -1,
    generator: torch.Generator | None = None,
) -> Acceptance:
    """Lossless sampled verification by the sample-at-node walk.

    Every node draws one token from the target's own sampling distribution at that node
    (`sample_tokens`: temperature, then top-k, then top-p, as SGLang applies them), independently;
    the walk then descends while the drawn token is a child's token, and emits the first drawn
    token that is not. Why this is exact: the node reached after accepting t_1..t_j has exactly
    the context t_1..t_j, its draw is independent of everything that decided to reach it, so
    t_{j+1} ~ p(. | t_1..t_j) whether or not it matches a child; the tree only decides how many
    draws are used in one pass. Drafts are deterministic (top-B prefixes, no draft distribution
    to correct for), so multi-draft rejection sampling would accept a child with the same
    probability sum_c p(c), and this scheme needs no draft probabilities.

    temperature, top_p, top_k: scalars or [R] tensors; temperature <= 0 means greedy for that
    request, top_k <= 0 and top_p >= 1 disable those filters. generator seeds the draws.
    """
    _check_target_logits(tree, target_logits)
    return walk_tree(tree, sample_tokens(target_logits, temperature, top_p, top_k, generator))


def _per_request(value: float | Tensor, R: int, device: torch.device, dtype: torch.dtype, name: str) -> Tensor:
    value = torch.as_tensor(value, device=device, dtype=dtype)
    if value.dim() == 0:
        return value.expand(R)
    if value.shape != (R,):
        raise ValueError(f"{name} must be a scalar or have shape [R] = [{R}], got {list(value.shape)}")
    return value


def sample_tokens(
    logits: Tensor,
    temperature: float | Tensor,
    top_p: float | Tensor = 1.0,
    top_k: int | Tensor = -1,
    generator: torch.Generator | None = None,
) -> Tensor:
    """One independent sample per row of logits [R, N, V] -> long [R, N].

    p = softmax(logits / T); top-k keeps the k most likely tokens; top-p keeps the sorted tokens
    whose preceding cumulative probability is <= top_p (at least one); draw by the exponential
    race argmax(p / E), E ~ Exp(1) iid, which picks i with probability p_i / sum(p).
    """
    R, N, V = logits.shape
    device = logits.device
    no_filter = isinstance(top_k, int) and not 0 < top_k < V and isinstance(top_p, (int, float)) and top_p >= 1
    all_sampled = isinstance(temperature, (int, float)) and temperature > 0  # no greedy row: skip its argmax
    temperature = _per_request(temperature, R, device, torch.float32, "temperature")
    top_p = _per_request(top_p, R, device, torch.float32, "top_p")
    top_k = _per_request(top_k, R, device, torch.long, "top_k")
    logits = logits.float()
    greedy = temperature <= 0
    probs = torch.softmax(logits / torch.where(greedy, 1.0, temperature)[:, None, None], dim=-1)
    if no_filter:
        kept = probs
    else:
        sorted_probs, order = probs.sort(dim=-1, descending=True)
        rank = torch.arange(V, device=device)
        drop = (rank >= torch.where(top_k > 0, top_k, V)[:, None, None]) | (
            (top_p < 1)[:, None, None] & (sorted_probs.cumsum(-1) - sorted_probs > top_p[:, None, None])
        )
        kept = torch.zeros_like(probs).scatter_(-1, order, sorted_probs.masked_fill(drop, 0.0))
    race = torch.empty_like(kept).exponential_(generator=generator)
    sampled = (kept / race).argmax(-1)
    return sampled if all_sampled else torch.where(greedy[:, None], logits.argmax(-1), sampled)
