"""The whole generate loop: AR, DFLASH and DDTREE are one loop over draft trees.

Each step: the drafter proposes a tree rooted at every request's last token (AR: the root alone,
DFLASH: a chain of block_size - 1, DDTREE: the best `budget` prefixes), the target verifies it in
one pass without touching its caches, the walk accepts a path, and commit writes that path into
the target's caches and the drafter's context. A prompt is prefilled the same way, as chains
whose every node is accepted. With a `BudgetControl`, DDTREE verifies each step only the first N
nodes of its tree, N chosen from the previous step's trees and the acceptance so far (`budget.WidthController`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import Tensor
from tqdm import tqdm

from ..budget import BudgetControl, WidthController, tree_accept_probs
from ..cuda_graph import CapturedStep, sync_time
from ..ddtree import (
    DraftTree,
    accept_greedy,
    accept_sampling,
    build_ddtree_from_top_k,
    draft_log_probs,
    sample_tokens,
    tree_from_parents,
)
from ..dflash import chain_tree
from ..proposal import propose, uses_heads

ALGOS = ("ar", "dflash", "ddtree")
PREFILL_CHUNK = 64


@dataclass
class GenerationResult:
    """output_ids: the new tokens of each request; accept_lens: accepted draft tokens per step, per request;
    verify_nodes: the nodes each request verified, per step (the root included)."""

    output_ids: list[list[int]]
    accept_lens: list[list[int]] = field(default_factory=list)
    prefill_s: float = 0.0
    decode_s: float = 0.0
    verify_nodes: list[int] = field(default_factory=list)

    @property
    def num_tokens(self) -> int:
        return sum(len(o) for o in self.output_ids)

    @property
    def tokens_per_s(self) -> float:
        return self.num_tokens / self.decode_s if self.decode_s > 0 else float("nan")

    @property
    def mean_accept_len(self) -> float:
        """Tokens emitted per verify pass (accepted drafts + the bonus token), over all steps and requests."""
        steps = [a for per_request in self.accept_lens for a in per_request]
        return sum(a + 1 for a in steps) / len(steps) if steps else float("nan")


def root_only(roots: Tensor) -> DraftTree:
    return tree_from_parents(roots[:, None], torch.full_like(roots[:, None], -1), max_depth=0)


def check_args(prompts: list[list[int]], max_new_tokens: int, algo: str, drafter, scoring: str,
               budget_control: BudgetControl | None) -> None:  # fmt: skip
    """`generate`'s arguments, each refused with one line before any work."""
    if algo not in ALGOS:
        raise ValueError(f"algo must be one of {ALGOS}, got {algo!r}")
    if algo != "ar" and drafter is None:
        raise ValueError(f"algo {algo!r} needs a drafter")
    if not prompts or any(len(p) == 0 for p in prompts):
        raise ValueError("prompts must be non-empty token lists")
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    if budget_control is None:
        return
    if algo != "ddtree" or uses_heads(drafter.config, algo, scoring):
        raise ValueError("budget_control: DDTREE with trees of the drafter's marginals only (scoring='marginal' "
                         "for a DFlash2 or DSpark drafter)")  # fmt: skip
    if budget_control.cost.of(len(prompts) * budget_control.tiers[0]) is None:
        raise ValueError(
            f"budget_control: its cost table stops short of {len(prompts)} requests x {budget_control.tiers[0]} nodes"
        )


def prefill(target, tcache, commit, pick, prompts: list[list[int]], seq_lens: Tensor) -> Tensor:
    """Each prompt in chunks of PREFILL_CHUNK, as chains whose every node is accepted (`commit`), seq_lens [R] advanced;
    returns each request's first new token, `pick`ed from the target's last logits [R]."""
    device = seq_lens.device
    last = torch.empty(len(prompts), dtype=torch.long, device=device)
    for r, prompt in enumerate(prompts):
        slot = torch.tensor([r], device=device)
        for chunk in torch.tensor(prompt, dtype=torch.long, device=device).split(PREFILL_CHUNK):
            out = target.verify(tcache, chain_tree(chunk[None, 1:], chunk[:1]), slot, seq_lens[slot])
            commit(out, slot, seq_lens[slot], torch.arange(len(chunk), device=device)[None])
            seq_lens[slot] += len(chunk)
        last[r] = pick(target.logits(out.hidden[:, -1:]))[0, 0]
    return last


@torch.no_grad()
def generate(
    target,
    prompts: list[list[int]],
    max_new_tokens: int,
    algo: str = "ar",
    drafter=None,
    budget: int = 63,
    temperature: float = 0.0,
    top_p: float = 1.0,
    top_k: int = -1,
    eos_token_ids: tuple[int, ...] = (),
    seed: int = 0,
    progress: bool = False,
    cuda_graphs: bool | None = None,
    scoring: str = "conditional",
    budget_control: BudgetControl | None = None,
) -> GenerationResult:
    """Generate up to max_new_tokens after each prompt (batched). Greedy output is the target's own for
    every algo; with temperature > 0 it is distributed as the target's own sampling. cuda_graphs (default:
    on for CUDA models): greedy decode steps replay one CUDA graph per number of active requests and width.
    scoring: how a DFlash2 or DSpark drafter's DDTREE tree is scored (`proposal.propose`). budget_control (DDTREE
    from the drafter's marginals): the tree is drafted at the widest tier and each step verifies its first N nodes,
    N chosen by `WidthController` from the previous step's trees and each request's acceptance so far (the first
    step: the narrowest); `budget` unused."""
    check_args(prompts, max_new_tokens, algo, drafter, scoring, budget_control)
    drafter = drafter if algo != "ar" else None
    budget = budget_control.budget if budget_control is not None else budget
    device = target.embed_tokens.weight.device
    gen = torch.Generator(device=device).manual_seed(seed)
    R = len(prompts)
    block = drafter.config.num_depths + 1 if drafter is not None else 1  # a chain's nodes, the root included
    max_len = max(map(len, prompts)) + max_new_tokens + max(block, budget + 1) + 1
    tcache = target.new_cache(R, max_len)
    dcache = drafter.new_cache(R, max_len) if drafter is not None else None
    seq_lens = torch.zeros(R, dtype=torch.long, device=device)

    def pick(logits: Tensor) -> Tensor:  # [R, N, V] -> [R, N]
        return logits.argmax(-1) if temperature <= 0 else sample_tokens(logits, temperature, top_p, top_k, gen)

    def commit(out, slots: Tensor, lens: Tensor, nodes: Tensor) -> None:
        """Accepted paths (node indices [R, P], padded -1) into the target's caches and the drafter's context."""
        target.commit(tcache, out, slots, lens, nodes)
        if dcache is not None:
            drafter.append_context(dcache, out.taps, slots, lens, nodes)

    def decode_step(roots: Tensor, slots: Tensor, lens: Tensor, accept, nodes: int):
        """Draft, verify, accept, commit for requests in `slots` (roots, lens [R]) -> (path tokens [R, L + 1],
        accept_len [R], bonus [R], and with budget_control the drafted tree's node probabilities and depths [R, budget]).
        nodes: how many of the tree's nodes are verified (budget_control). No host sync: CUDA-graph capturable when
        `accept` is greedy."""
        drafted = None
        if drafter is None:
            tree = root_only(roots)
        elif budget_control is None:
            tree = propose(drafter, dcache, roots, slots, lens, target.embed_tokens, target.lm_head, algo, budget, scoring)
        else:
            logits = drafter(dcache, roots, slots, lens, target.embed_tokens, target.lm_head)
            logp, ids = draft_log_probs(logits, min(budget, logits.shape[-1]))  # build_ddtree's vocabulary pass
            full = build_ddtree_from_top_k(logp, ids, roots, budget)
            drafted, tree = (tree_accept_probs(full, logp, ids), full.depths[:, 1:]), full.prefix(nodes)
        out = target.verify(tcache, tree, slots, lens)
        acc = accept(tree, target.logits(out.hidden))
        commit(out, slots, lens, acc.accepted_nodes)
        return tree.token_ids.gather(1, acc.accepted_nodes.clamp(min=0)), acc.accept_len, acc.bonus_tokens, drafted

    if temperature <= 0:
        accept = accept_greedy
    else:
        accept = lambda tree, logits: accept_sampling(tree, logits, temperature, top_p, top_k, gen)  # noqa: E731
    graphed = temperature <= 0 and (cuda_graphs if cuda_graphs is not None else device.type == "cuda")
    graphs: dict[tuple[int, int], CapturedStep] = {}  # one captured step per number of active requests and width

    def step(roots: Tensor, slots: Tensor, lens: Tensor, nodes: int):
        if not graphed:
            return decode_step(roots, slots, lens, accept, nodes)
        key = (len(slots), nodes)
        if key not in graphs:
            graphs[key] = CapturedStep.for_requests(lambda *a: decode_step(*a, accept, nodes), len(slots), device)
        return graphs[key](roots, slots, lens)

    start = sync_time(device)
    last = prefill(target, tcache, commit, pick, prompts, seq_lens)
    prefill_s = sync_time(device) - start

    outputs = [[int(t)] for t in last.tolist()]
    accept_lens: list[list[int]] = [[] for _ in range(R)]
    verify_nodes: list[int] = []
    width = WidthController(drafter.config.num_depths) if budget_control is not None else None
    fixed_nodes = 1 if drafter is None else budget + 1 if algo == "ddtree" else block  # without budget_control
    done = [max_new_tokens <= 1 or int(last[r]) in eos_token_ids for r in range(R)]
    bar = tqdm(total=R * max_new_tokens, initial=R, disable=not progress, unit="tok", desc=f"generate ({algo})")
    start = sync_time(device)
    while not all(done):
        active = [r for r in range(R) if not done[r]]
        slots = torch.tensor(active, device=device)
        nodes = width.nodes(active, budget_control) if width is not None else fixed_nodes
        path_tokens, accept_len, bonus, drafted = step(last[slots], slots, seq_lens[slots], nodes)
        seq_lens[slots] += accept_len + 1
        verify_nodes.append(nodes)
        path_tokens, accept_len, bonus = path_tokens.tolist(), accept_len.tolist(), bonus.tolist()
        if width is not None:
            width.observe(active, *drafted, nodes, accept_len)
        for i, r in enumerate(active):
            n = accept_len[i]
            new = path_tokens[i][1 : n + 1] + [bonus[i]]
            accept_lens[r].append(n)
            for t in new:
                outputs[r].append(t)
                bar.update(1)
                if len(outputs[r]) >= max_new_tokens or t in eos_token_ids:
                    done[r] = True
                    break
            last[r] = bonus[i]
    decode_s = sync_time(device) - start - sum(g.capture_s for g in graphs.values())
    bar.close()
    return GenerationResult(outputs, accept_lens, prefill_s, decode_s, verify_nodes)
