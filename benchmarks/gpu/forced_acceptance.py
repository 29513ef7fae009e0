"""BENCHMARK ONLY: DFLASH_CHAIN / DDTREE servers whose verify accepts a depth drawn per request from an acceptance
profile instead of the target's choice. THEIR OUTPUTS ARE NOT THE TARGET'S: this exists so that a step at 27B shapes
with dummy weights and a random drafter (which accept nothing) runs at a realistic acceptance, KV, GDN state and
drafter context commits included, for tokens per second.

Nothing in the package reaches it. A benchmark puts this folder's entry point on the SGLang processes' path
(`install(work)`: a `sglang.srt.plugins` entry point in a dist-info of its own, which SGLang 0.5.11 and 0.5.23 load in
every process) and sets SGLANG_DFLASH_BENCH_ACCEPTANCE to the per-depth survival list; `load` then replaces the
workers' greedy acceptance (`forced_acceptance`) and raises each drafter row's argmax (`sharpen`), so that a DDTREE
tree holds a deep most-likely chain beside its branches, as a trained drafter's does. TP = 1 only (the drafter's
logits are one rank's vocabulary).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import torch
from torch import Tensor

ENV = "SGLANG_DFLASH_BENCH_ACCEPTANCE"
ENTRY = "sglang_dflash_bench_forced_acceptance"


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


def draw_depths(cdf: Tensor, R: int, generator: torch.Generator) -> Tensor:
    """R accept lengths drawn from a cumulative distribution cdf [L + 1] on their device, without a host sync
    (`torch.multinomial` checks its input on the host, and a host table's copy waits for the stream)."""
    u = torch.rand(R, device=cdf.device, generator=generator, dtype=cdf.dtype)
    return torch.searchsorted(cdf, u, right=True).clamp(max=cdf.numel() - 1)


def sharpen(logits: Tensor, peak: float = 30.0) -> Tensor:
    """The drafter's logits [..., V] with each row's argmax raised by `peak`."""
    return logits.scatter_add(-1, logits.argmax(-1, keepdim=True), torch.full_like(logits[..., :1], peak))


def load() -> None:
    """The entry point (every SGLang process): with ENV set, the workers accept by `forced_acceptance`, depths drawn
    from ENV's survival list (seeded), and draft from `sharpen`ed logits."""
    spec = os.environ.get(ENV)
    if not spec:
        return
    cdf = torch.cumsum(depth_probs([float(x) for x in spec.split(",")]), 0)
    drawn: dict[torch.device, tuple[Tensor, torch.Generator]] = {}  # per device: the cdf there and a seeded generator

    def accept(tree, target_logits: Tensor):
        device = target_logits.device
        if device not in drawn:
            drawn[device] = (cdf.to(device), torch.Generator(device=device).manual_seed(0))
        return forced_acceptance(tree, target_logits, draw_depths(drawn[device][0], tree.token_ids.shape[0], drawn[device][1]))

    from sglang_dflash.sglang import ddtree_worker_v2, worker_common

    ddtree_worker_v2.accept_greedy = accept
    run_drafter = worker_common.DDTreeWorkerBase._run_drafter

    def sharpened(self, *args):  # (hidden, logits) of the pass, its logits sharpened
        hidden, logits = run_drafter(self, *args)
        return hidden, sharpen(logits)

    worker_common.DDTreeWorkerBase._run_drafter = sharpened


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
