"""A step's verify budget chosen by cost: how many draft nodes each request verifies (DDTREE, or a chain).

A verify forward's time grows with the batch's total verified tokens; a draft node's worth is the probability that
it is accepted. So per step, over the requests' candidate nodes pooled together, the planner picks the total budget B
whose expected committed tokens per second is largest: the B most probable nodes of the whole batch are verified,
each request its own share (possibly none: that request decodes plainly this step). B = 0 is stock decoding, so
under its own model the plan is never slower than that. This is SGLang 0.5.23's DSpark rule (one global budget from
a profiled cost table, slots to the highest-survival positions) for trees: a request's candidates are its DDTree
nodes best-first, so any prefix of them is a tree (no child outscores its parent).

`plan_nodes` is the same rule for a verify of one width for the whole batch ([R, N], as SGLang's target verify and
the standalone engine run it, so that a forward costs R x N tokens whatever each request would use): the tier N with
the most expected tokens per second. The standalone engine applies it each step (`generate(budget_control=...)`)
from the previous step's trees, verifying the first N nodes of a tree drafted at the widest tier (`DraftTree.prefix`).

Shapes: R requests, M candidate nodes per request (the root, always verified, is not a candidate).
Plain torch, on any device; the planners read their result on the host (planning, not a kernel).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import torch
from torch import Tensor

from .ddtree import DraftTree

__all__ = [
    "BudgetControl",
    "BudgetPlan",
    "VerifyCost",
    "WidthController",
    "plan_budget",
    "plan_nodes",
    "tree_accept_probs",
]


@dataclass(frozen=True)
class VerifyCost:
    """Seconds a verify forward takes by the batch's total verified tokens, measured at the sizes `tokens`
    (ascending; e.g. the captured CUDA-graph sizes). A forward of T tokens costs what the smallest measured size >= T
    costs (what a graph pads it to); past the largest it is not offered."""

    tokens: tuple[int, ...]
    seconds: tuple[float, ...]

    def __post_init__(self):
        if not self.tokens or len(self.tokens) != len(self.seconds):
            raise ValueError(f"VerifyCost: {len(self.tokens)} sizes and {len(self.seconds)} times")
        if any(b <= a for a, b in zip(self.tokens, self.tokens[1:])) or self.tokens[0] < 1:
            raise ValueError(f"VerifyCost: sizes must be positive and ascending, got {self.tokens}")
        if any(not s > 0 for s in self.seconds):
            raise ValueError(f"VerifyCost: times must be positive, got {self.seconds}")

    def of(self, total: int) -> float | None:
        """Seconds for a forward of `total` tokens, or None past the largest measured size."""
        i = bisect.bisect_left(self.tokens, total)
        return self.seconds[i] if i < len(self.tokens) else None


@dataclass(frozen=True)
class BudgetPlan:
    """budgets long [R]: draft nodes each request verifies this step (its first budgets[r] candidates; 0: none).
    expected_tokens: R + the chosen nodes' acceptance probabilities; tokens_per_second: that over the step's cost."""

    budgets: Tensor
    expected_tokens: float
    tokens_per_second: float

    @property
    def total(self) -> int:
        return int(self.budgets.sum())


def plan_budget(accept_probs: Tensor, cost: VerifyCost, max_total: int | None = None) -> BudgetPlan:
    """The budget with the most expected tokens per second under `cost`.

    accept_probs float [R, M]: each request's candidate nodes' acceptance probabilities in the order they would be
    added to its tree (DDTree's best-first order: a row is non-increasing). max_total caps B (default R * M).
    For each B the best B nodes are the B most probable of the batch (rows being non-increasing, that is a prefix of
    each row); ties keep row order. Among equal rates the smaller B wins.
    """
    if accept_probs.dim() != 2:
        raise ValueError(f"accept_probs must be [R, M], got shape {tuple(accept_probs.shape)}")
    R, M = accept_probs.shape
    p = accept_probs.detach().double().cpu()
    if R == 0:
        raise ValueError("plan_budget needs at least one request")
    if ((p < 0) | (p > 1)).any() or (p[:, 1:] > p[:, :-1]).any():
        raise ValueError("accept_probs must lie in [0, 1] and be non-increasing along each row (best-first)")
    flat = p.reshape(-1)
    order = torch.sort(flat, descending=True, stable=True).indices  # ties: row-major order, so prefixes per row
    gains = torch.cat([flat.new_zeros(1), flat[order].cumsum(0)])  # gains[B]: expected accepted drafts of the top B
    best_rate, best_b = -1.0, 0
    for b in range((R * M if max_total is None else min(R * M, max_total)) + 1):
        seconds = cost.of(R + b)
        if seconds is None:
            break
        rate = (R + float(gains[b])) / seconds
        if rate > best_rate:
            best_rate, best_b = rate, b
    if best_rate < 0:
        raise ValueError(f"VerifyCost measures at most {cost.tokens[-1]} tokens, fewer than the batch's {R} requests")
    budgets = torch.bincount(order[:best_b] // M, minlength=R) if M else torch.zeros(R, dtype=torch.long)
    return BudgetPlan(budgets=budgets, expected_tokens=R + float(gains[best_b]), tokens_per_second=best_rate)


@dataclass(frozen=True)
class BudgetControl:
    """A verify width chosen per step: every request verifies the first N nodes of its tree (root included; N = 1 is
    plain decoding), N from `tiers` by `plan_nodes` under `cost`, a step's seconds by the batch's R * N tokens (a
    padded [R, N] verify costs its full width, whatever each request would use)."""

    cost: VerifyCost
    tiers: tuple[int, ...]

    def __post_init__(self):
        if not self.tiers or self.tiers[0] < 1 or any(b <= a for a, b in zip(self.tiers, self.tiers[1:])):
            raise ValueError(f"BudgetControl: tiers must be node counts >= 1, ascending, got {self.tiers}")
        if self.tiers[-1] < 2:
            raise ValueError(f"BudgetControl: the widest tier drafts a tree, so it needs 2 nodes or more, got {self.tiers}")

    @property
    def budget(self) -> int:
        """The tree every step drafts: the widest tier's."""
        return self.tiers[-1] - 1


def plan_nodes(accept_probs: Tensor, control: BudgetControl) -> int:
    """The tier N with the most expected tokens per second, (R + the first N - 1 candidates' acceptance probabilities
    of every request) / control.cost.of(R * N); ties: the smaller N. accept_probs float [R, M >= the widest tier - 1],
    each row in its tree's node order (a tree's first N nodes are a tree). Tiers past the cost table are not
    offered."""
    R, M = accept_probs.shape
    if M < control.budget:
        raise ValueError(f"plan_nodes: {M} candidates a request, fewer than the widest tier's {control.budget}")
    gains = torch.cat([accept_probs.new_zeros(1), accept_probs.double().sum(0).cumsum(0)]).tolist()  # by N - 1
    best_rate, best = -1.0, None
    for n in control.tiers:
        seconds = control.cost.of(R * n)
        rate = -1.0 if seconds is None else (R + gains[n - 1]) / seconds
        if rate > best_rate:
            best_rate, best = rate, n
    if best is None:
        raise ValueError(
            f"plan_nodes: the cost table measures at most {control.cost.tokens[-1]} tokens, fewer than {R} x {control.tiers[0]}"
        )
    return best


class WidthController:
    """A width per step among a `BudgetControl`'s tiers, for the standalone engine and the server alike: each request's
    last drafted tree stands for its next one, its node probabilities scaled by how that request's drafts were accepted
    so far, depth by depth: factor[d] = (steps that accepted d or more + prior) / (the drafter's predicted P(accept >= d) +
    prior), the prediction being the sum of its verified depth-d nodes' probabilities (disjoint events). Both counts
    decay by `decay` a step, so a request that decodes plainly for a while is offered speculation again. A request
    that has drafted no tree yet counts as the mean of those that have (a server's batch gains requests any step), or
    where none has, as the last request observed (`recent`; a request's first observation comes LAG steps late, and
    at batch 1 that was a plain step for each new request); before any observation the narrowest tier (plain
    decoding where the tiers start at 1): nothing known, nothing spent. Requests are keys of any hashable kind
    (engine: its slots; server: request ids)."""

    def __init__(self, max_depth: int, prior: float = 1.0, decay: float = 0.95):
        self.max_depth, self.prior, self.decay = max_depth, prior, decay
        self.accepted: dict = {}  # key -> float64 [max_depth + 1], by depth (index 0 unused)
        self.predicted: dict = {}  # key -> the same
        self.drafted: dict = {}  # key -> its last tree's (probs, depths) [M]
        self.recent: Tensor | None = None  # the last observed request's calibrated node probabilities [M]

    def factors(self, keys: list) -> Tensor:
        """float64 [R, max_depth + 1]: the requests' depth factors (index 0 unused; a request not observed: all 1)."""
        zero = torch.zeros(self.max_depth + 1, dtype=torch.float64)
        accepted = torch.stack([self.accepted.get(k, zero) for k in keys])
        predicted = torch.stack([self.predicted.get(k, zero) for k in keys])
        return (accepted + self.prior) / (predicted + self.prior)

    def nodes(self, keys: list, control: BudgetControl) -> int:
        """The width with the most expected tokens per second under `control` (its tiers and their step costs)."""
        known = [k for k in keys if k in self.drafted]
        if not known:
            if self.recent is None:
                return control.tiers[0]
            return plan_nodes(self.recent.expand(len(keys), -1), control)
        probs = self.calibrated(known)
        if len(known) < len(keys):
            probs = torch.cat([probs, probs.mean(0, keepdim=True).expand(len(keys) - len(known), -1)])
        return plan_nodes(probs, control)

    def calibrated(self, keys: list) -> Tensor:
        """float64 [R, M]: the requests' last trees' node probabilities, each scaled by its depth's factor (at most 1)."""
        probs = torch.stack([self.drafted[k][0] for k in keys]).double()
        depths = torch.stack([self.drafted[k][1] for k in keys])
        return (probs * self.factors(keys).gather(1, depths)).clamp(max=1.0)

    def observe(self, keys: list, probs: Tensor, depths: Tensor, nodes: int, accept_len: list[int]) -> None:
        """A step of requests `keys` drafted trees of node probabilities and depths [R, M] (root excluded), verified
        their first `nodes` nodes and accepted accept_len[i] drafts of each."""
        if not keys:
            return
        probs, depths = probs.double().cpu(), depths.cpu()
        zero = torch.zeros(self.max_depth + 1, dtype=torch.float64)
        accepted = torch.stack([self.accepted.get(k, zero) for k in keys]) * self.decay
        predicted = torch.stack([self.predicted.get(k, zero) for k in keys]) * self.decay
        predicted.scatter_add_(1, depths[:, : nodes - 1], probs[:, : nodes - 1])
        depth = torch.arange(self.max_depth + 1)
        accepted += ((depth >= 1) & (depth <= torch.tensor(accept_len)[:, None])).double()
        for k, a, q, p, d in zip(keys, accepted.unbind(), predicted.unbind(), probs.unbind(), depths.unbind()):
            self.accepted[k], self.predicted[k], self.drafted[k] = a, q, (p, d)
        self.recent = self.calibrated(keys[-1:])[0]

    def retain(self, keys) -> None:
        """Forget every request but `keys` (the server's finished ones)."""
        keep = set(keys)
        for table in (self.accepted, self.predicted, self.drafted):
            for k in [k for k in table if k not in keep]:
                del table[k]


def tree_accept_probs(tree: DraftTree, logp: Tensor, top_ids: Tensor) -> Tensor:
    """float [R, N - 1]: each non-root node's path probability under the drafter (the product of its tokens'
    per-depth probabilities), the drafter's own estimate that verification accepts it, for a tree built from top-K
    lists (`build_ddtree_from_top_k`: logp float32 [R, L, K] sorted descending, their tokens top_ids [R, L, K], e.g.
    merged over tensor-parallel shards; each node's token is in its depth's list). In the tree's node order (descending
    score), so a row is non-increasing and `plan_budget` takes it as it is; a caller may calibrate it with the
    request's running acceptance first."""
    rows, depth = torch.arange(tree.num_requests, device=logp.device)[:, None], tree.depths[:, 1:] - 1
    ids, lp = top_ids[rows, depth], logp[rows, depth]  # [R, N - 1, K]: each node's depth's list
    k = (ids == tree.token_ids[:, 1:, None]).int().argmax(-1, keepdim=True)
    own = lp.gather(-1, k)[..., 0].float()  # [R, N - 1]: each node's own token's log-probability
    path = torch.bmm(tree.ancestor_mask[:, 1:, 1:].float(), own[..., None])[..., 0]  # summed over each node's path
    return path.exp()
