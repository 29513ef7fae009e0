"""BENCHMARK ONLY: DFLASH_CHAIN / DDTREE servers whose verify accepts by an acceptance model instead of the target's
choice. THEIR OUTPUTS ARE NOT THE TARGET'S: this exists so that a step at 27B shapes with dummy weights and a random
drafter (which accept nothing) runs at a realistic acceptance, KV, GDN state and drafter context commits included, for
tokens per second. Two models, named by SGLANG_DFLASH_BENCH_ACCEPTANCE:

- `depth:s1,...,sL` (`forced_acceptance`): each request accepts a depth drawn per step from the per-depth survival
  list along its tree's most probable path; the drafter's rows are `sharpen`ed so that path is a deep chain. Width
  beyond that chain accepts nothing, so this model cannot tell tree budgets apart.
- `marginal:p1,...,pK` (`marginal_acceptance`): the drafter's rows become one calibrated distribution
  (`calibrated_logits`: its argmax at p1, the next K - 1 tokens at p2..pK, the rest shared), and the target's token at
  each depth is drawn from that same distribution, independently: DDTree's own model, so a tree accepts what the
  product of its marginals predicts and a wider tree accepts more. `rank_probs` calibrates p from a chain's and a
  tree's published tokens per pass.

Nothing in the package reaches it. A benchmark puts this folder's entry point on the SGLang processes' path
(`install(work)`: a `sglang.srt.plugins` entry point in a dist-info of its own, which SGLang 0.5.11 and 0.5.23 load in
every process) and sets the variable; `load` then replaces the workers' greedy acceptance and the drafter's logits.
TP = 1 only (the drafter's logits are one rank's vocabulary).
"""

from __future__ import annotations

import heapq
import math
import os
import shutil
from pathlib import Path

import torch
from torch import Tensor

ENV = "SGLANG_DFLASH_BENCH_ACCEPTANCE"
ENTRY = "sglang_dflash_bench_forced_acceptance"
MODELS = ("depth", "marginal")
TREE_BUDGET = 511  # `rank_probs`: the tree whose tokens per pass are given (DDTree's best budgets are 256-512)
RANKS = 64  # `rank_probs`: the drafter's ranks given a probability of their own
VOCAB = 248_320  # `rank_probs`: the vocabulary the unranked mass is shared over (Qwen3.6-27B's)


def survival_from_tau(tau: float, max_depth: int) -> list[float]:
    """The constant per-depth survival a with mean tokens per pass (the bonus included) 1 + a + ... + a^L = tau."""
    if not 1 <= tau <= max_depth + 1:
        raise ValueError(f"tau {tau} is not in [1, {max_depth + 1}] (tokens per pass, the bonus included)")
    low, high = 0.0, 1.0
    for _ in range(60):
        a = (low + high) / 2
        low, high = (a, high) if sum(a**d for d in range(max_depth + 1)) < tau else (low, a)
    return [(low + high) / 2] * max_depth


def depth_probs(survival: list[float]) -> Tensor:
    """P(accept length = k) for k = 0 .. L from survival[d - 1] = P(length >= d | length >= d - 1); float64 [L + 1]."""
    reach = torch.cumprod(torch.tensor([1.0, *survival], dtype=torch.float64), 0)  # P(length >= k)
    return reach - torch.cat([reach[1:], reach.new_zeros(1)])


def expected_tau(probs: list[float], max_depth: int, budget: int) -> float:
    """Tokens a pass (the bonus included) of DDTree's best `budget` prefixes of up to max_depth tokens when the
    target's token at each depth is rank k of the drafter with probs[k - 1] (descending), independently: 1 + the sum
    of the prefixes' probabilities (a prefix is accepted when each of its tokens is the one drawn). Best first over
    the prefixes: a prefix's first child (rank 1 next) and next sibling (its last rank + 1) follow it."""
    total, heap = 1.0, [(-probs[0], 1, 0)]  # (-probability, depth, last rank)
    for _ in range(budget):
        if not heap:
            break
        q, d, k = heapq.heappop(heap)
        total -= q
        if d < max_depth:
            heapq.heappush(heap, (q * probs[0], d + 1, 0))
        if k + 1 < len(probs) and probs[k] > 0:
            heapq.heappush(heap, (q / probs[k] * probs[k + 1], d, k + 1))
    return total


def rank_probs(chain_tau: float, tree_tau: float, max_depth: int, budget: int = TREE_BUDGET, ranks: int = RANKS,
               vocab: int = VOCAB):  # fmt: skip
    """The marginal model's probabilities [ranks] (the same at every depth): rank 1 at the survival with which a chain
    of max_depth drafts accepts chain_tau tokens a pass (`survival_from_tau`); ranks 2.. share the rest geometrically,
    (1 - a)(1 - r) r^(k - 2), r found (bisection) so that the best `budget` prefixes accept tree_tau (`expected_tau`).
    The mass past `ranks`, (1 - a) r^(ranks - 1), is shared by the vocab - ranks other tokens. ValueError where the
    figures cannot be reached, or where they put rank 1 below rank 2 or an unranked token above a ranked one."""
    a = survival_from_tau(chain_tau, max_depth)[0]

    def probs(r: float) -> list[float]:
        return [a] + [(1 - a) * (1 - r) * r**k for k in range(ranks - 1)]

    low, high = 1e-6, 1 - 1e-6  # tokens a pass fall as r rises: the rest spreads over more ranks
    reach = (expected_tau(probs(high), max_depth, budget), expected_tau(probs(low), max_depth, budget))
    if not reach[0] <= tree_tau <= reach[1]:
        raise ValueError(f"a tree of {budget} accepting {tree_tau} tokens a pass beside a chain accepting {chain_tau}: "
                         f"this model reaches {reach[0]:.2f} to {reach[1]:.2f}")  # fmt: skip
    for _ in range(60):
        r = (low + high) / 2
        low, high = (r, high) if expected_tau(probs(r), max_depth, budget) > tree_tau else (low, r)
    fitted = probs((low + high) / 2)
    share = (1 - sum(fitted)) / (vocab - ranks)  # each unranked token's
    if not (fitted[0] > fitted[1] and fitted[-1] > share):  # rank 1 first, every rank above an unranked token
        raise ValueError(f"chain {chain_tau} and tree {tree_tau} give ranks out of order: argmax {fitted[0]:.4f}, "
                         f"second {fitted[1]:.4f}, last ranked {fitted[-1]:.2e}, an unranked token {share:.2e}")  # fmt: skip
    return fitted


def calibrated_logits(logits: Tensor, log_probs: Tensor, rest: float) -> Tensor:
    """The drafter's logits [..., V] as the marginal model's log-probabilities: each row's argmax at log_probs[0]
    (float32 [K] on logits' device), the K - 1 tokens after it (mod V) at log_probs[1:], every other token an equal
    share of the mass `rest` (1 - the K probabilities). No host sync."""
    V, K = logits.shape[-1], log_probs.numel()
    ranked = (logits.argmax(-1, keepdim=True) + torch.arange(K, device=logits.device)) % V
    shared = math.log(max(rest, 1e-30)) - math.log(V - K)
    return torch.full_like(logits, shared).scatter_(-1, ranked, log_probs.to(logits.dtype).expand(ranked.shape))


def drawn_tokens(top: Tensor, cdf: Tensor, V: int, generator: torch.Generator) -> Tensor:
    """The target's tokens [R, L] under the marginal model, given the drafter's argmax at each depth top [R, L]: rank k
    (top + k - 1 mod V) with probability cdf[k - 1] - cdf[k - 2] (cdf [K] of probs), else, uniformly, a token ranked
    past K. No host sync."""
    K = cdf.numel()
    k = draws(cdf, top.shape, generator)
    past = K + (torch.rand(top.shape, device=top.device, generator=generator) * (V - K)).long().clamp(max=V - K - 1)
    return (top + torch.where(k < K, k, past)) % V


def first_child_chain(next_token: Tensor, length: int) -> Tensor:
    """[R, length + 1]: node 0, its first child, that one's, ... (next_token [R, N]: first children, -1 none), N
    where the chain has ended. By doubling: log2(length) rounds of gathers, not one a depth (a launch-bound loop)."""
    R, N = next_token.shape
    step = torch.cat([torch.where(next_token < 0, N, next_token), next_token.new_full((R, 1), N)], 1)  # N: stays N
    chain = next_token.new_zeros(R, length + 1)
    d = torch.arange(length + 1, device=next_token.device)
    for b in range(length.bit_length()):
        chain = torch.where(((d >> b) & 1).bool(), step.gather(1, chain), chain)  # chain[d] = step^(d's low bits)(0)
        step = step.gather(1, step)
    return chain


def forced_acceptance(tree, target_logits: Tensor, depths: Tensor):
    """Each request accepts its tree's first-child chain (node 0, its first child, that one's, ...: the most probable
    path in DDTree's numbering, the chain itself for DFLASH_CHAIN) to depth min(depths[r], the chain's depth); the
    bonus is the target's argmax at the last accepted node. No host read. Returns `ddtree.Acceptance`."""
    from sglang_dflash.ddtree import Acceptance

    R, N, L = tree.token_ids.shape[0], tree.token_ids.shape[1], tree.max_depth
    chain = first_child_chain(tree.next_token, L)
    d = torch.arange(L + 1, device=chain.device)
    nodes = torch.where((chain < N) & (d <= depths.to(chain.device)[:, None]), chain, -1)
    accept_len = (nodes[:, 1:] >= 0).sum(1)
    last = nodes.gather(1, accept_len[:, None])[:, 0]
    bonus = target_logits[torch.arange(R, device=chain.device), last].argmax(-1)
    return Acceptance(accept_len=accept_len, accepted_nodes=nodes, bonus_tokens=bonus)


def marginal_acceptance(tree, V: int, cdf: Tensor, generator: torch.Generator):
    """The marginal model's acceptance: the target's token at each depth drawn (`drawn_tokens`) around the drafter's
    argmax there, which is the token of the tree's first-child chain (DDTree numbers a node's children by score:
    the first is rank 1; DFLASH_CHAIN's chain is the argmax), then the tree walked with them (`ddtree.walk_tree`: the
    longest drawn prefix the tree holds, the bonus the drawn token after it). V: the drafter's vocabulary, as
    `calibrated_logits` ranked it. No host read."""
    from sglang_dflash.ddtree import walk_tree

    N, L = tree.token_ids.shape[1], tree.max_depth
    chain = first_child_chain(tree.next_token, L)[:, 1:]  # [R, L]: the node at each depth (N: the chain has ended)
    top = tree.token_ids.gather(1, chain.clamp(max=N - 1))  # past the chain's end: nodes there do not exist
    drawn = drawn_tokens(torch.cat([top, top[:, :1]], 1), cdf, V, generator)  # [R, L + 1]
    return walk_tree(tree, drawn.gather(1, tree.depths))  # a node's target token: the drawn one a depth below it


def draws(cdf: Tensor, shape, generator: torch.Generator) -> Tensor:
    """Indices [shape] drawn from a cumulative distribution cdf [K] on its device (K: past its last bin, where cdf[-1]
    < 1), without a host sync (`torch.multinomial` checks its input on the host, and a host table's copy waits for the
    stream)."""
    return torch.searchsorted(cdf, torch.rand(shape, device=cdf.device, generator=generator, dtype=cdf.dtype), right=True)


def draw_depths(cdf: Tensor, R: int, generator: torch.Generator) -> Tensor:
    """R accept lengths drawn from a cumulative distribution cdf [L + 1] (`draws`; rounding's past-the-end is L)."""
    return draws(cdf, (R,), generator).clamp(max=cdf.numel() - 1)


def sharpen(logits: Tensor, peak: float = 30.0) -> Tensor:
    """The drafter's logits [..., V] with each row's argmax raised by `peak`."""
    return logits.scatter_add(-1, logits.argmax(-1, keepdim=True), torch.full_like(logits[..., :1], peak))


def load() -> None:
    """The entry point (every SGLang process): with ENV set, the workers accept by its model (seeded draws, a
    generator per device) and draft from logits it shapes: `sharpen` for `depth`, `calibrated_logits` for `marginal`."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    model, _, values = spec.partition(":")
    if model not in MODELS:
        raise ValueError(f"{ENV}={spec!r}: expected one of {MODELS}, a colon, then comma-separated numbers")
    values = torch.tensor([float(x) for x in values.split(",")], dtype=torch.float64)
    cdf = torch.cumsum(depth_probs(values.tolist()) if model == "depth" else values, 0)
    rest = 1.0 - values.sum().item()  # the marginal model's mass past its ranks
    vocab = [0]  # the drafter's vocabulary, as its logits are shaped (the target's logits may be padded wider)
    state: dict[torch.device, tuple] = {}  # per device: the cdf, a seeded generator and the log-probabilities there

    def on(device: torch.device) -> tuple[Tensor, torch.Generator, Tensor]:
        if device not in state:
            state[device] = (cdf.to(device), torch.Generator(device=device).manual_seed(0), values.log().float().to(device))
        return state[device]

    def accept(tree, target_logits: Tensor):
        device_cdf, generator, _ = on(target_logits.device)
        if model == "marginal":
            return marginal_acceptance(tree, vocab[0], device_cdf, generator)
        return forced_acceptance(tree, target_logits, draw_depths(device_cdf, tree.token_ids.shape[0], generator))

    from sglang_dflash.sglang import ddtree_worker_v2, worker_common

    ddtree_worker_v2.accept_greedy = accept
    run_drafter = worker_common.DDTreeWorkerBase._run_drafter

    def shaped(self, *args):  # (hidden, logits) of the pass, its logits as the model wants them
        hidden, logits = run_drafter(self, *args)
        if model == "depth":
            return hidden, sharpen(logits)
        vocab[0] = logits.shape[-1]
        return hidden, calibrated_logits(logits, on(logits.device)[2], rest)

    worker_common.DDTreeWorkerBase._run_drafter = shaped


def install(work: Path) -> Path:
    """This module and a dist-info naming `load` as a `sglang.srt.plugins` entry point, under work/forced_acceptance;
    returns that folder, to go first on the SGLang processes' PYTHONPATH."""
    root = work / "forced_acceptance"
    dist = root / f"{ENTRY}-0.0.dist-info"
    dist.mkdir(parents=True, exist_ok=True)
    shutil.copy(Path(__file__), root / "forced_acceptance.py")
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {ENTRY}\nVersion: 0.0\n")
    (dist / "entry_points.txt").write_text(f"[sglang.srt.plugins]\n{ENTRY} = forced_acceptance:load\n")
    return root
