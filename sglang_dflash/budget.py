"""A step's verify budget chosen by cost: how many draft nodes each request verifies (DDTREE, or a chain).

A verify forward's time grows with the batch's total verified tokens; a draft node's worth is the probability that
it is accepted. So per step, over the requests' candidate nodes pooled together, the planner picks the total budget B
whose expected committed tokens per second is largest: the B most probable nodes of the whole batch are verified,
each request its own share (possibly none: that request decodes plainly this step). B = 0 is stock decoding, so
under its own model the plan is never slower than that. This is SGLang 0.5.23's DSpark rule (one global budget from
a profiled cost table, slots to the highest-survival positions) for trees: a request's candidates are its DDTree
nodes best-first, so any prefix of them is a tree (no child outscores its parent).

Shapes: R requests, M candidate nodes per request (the root, always verified, is not a candidate).
Plain torch, on any device; `plan_budget` reads its result on the host (it is planning, not a kernel).
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass

import torch
from torch import Tensor

from .ddtree import DraftTree

__all__ = ["BudgetPlan", "VerifyCost", "plan_budget", "tree_accept_probs"]


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


def tree_accept_probs(tree: DraftTree, draft_logits: Tensor) -> Tensor:
    """float [R, N - 1]: each non-root node's path probability under the drafter (the product of its tokens'
    per-depth probabilities), the drafter's own estimate that verification accepts it. In `build_ddtree`'s node order
    (descending score), so a row is non-increasing and `plan_budget` takes it as it is; a caller may calibrate it with
    the request's running acceptance first. draft_logits float [R, L, V], as given to `build_ddtree`."""
    R, N = tree.token_ids.shape
    logp = torch.log_softmax(draft_logits.float(), dim=-1)
    own = logp[torch.arange(R, device=logp.device)[:, None], tree.depths[:, 1:] - 1, tree.token_ids[:, 1:]]  # [R, N - 1]
    path = torch.bmm(tree.ancestor_mask[:, 1:, 1:].float(), own[..., None])[..., 0]  # sum over each node's path
    return path.exp()
