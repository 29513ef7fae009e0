"""DDTree's best-first heap (Algorithm 1 of arXiv 2604.12989), written from its description:
the peer that build_ddtree is checked against (tests) and timed against (benchmarks)."""

import heapq

import numpy as np
import torch

from sglang_dflash.ddtree import draft_log_probs


def heap_reference(logits: torch.Tensor, budget: int) -> list[tuple[int, ...]]:
    """Token paths of the nodes of one request's tree, in pop order. logits: [L, V]."""
    L = logits.shape[0]
    K = min(budget, logits.shape[1])
    lp, ids = draft_log_probs(logits[None], K)
    lp, ids = lp[0].double().cpu().tolist(), ids[0].cpu().tolist()
    heap = [(-lp[0][0], (0,), (), 1, 0, lp[0][0])]
    out = []
    while heap and len(out) < budget:
        _, ranks, path, depth, rank, logw = heapq.heappop(heap)
        path = path + (ids[depth - 1][rank],)
        out.append(path)
        if rank + 1 < K:  # next sibling: same parent, next-ranked token
            w = logw - lp[depth - 1][rank] + lp[depth - 1][rank + 1]
            heapq.heappush(heap, (-w, ranks[:-1] + (rank + 1,), path[:-1], depth, rank + 1, w))
        if depth < L:  # first child: the best token one depth down
            w = logw + lp[depth][0]
            heapq.heappush(heap, (-w, ranks + (0,), path, depth + 1, 0, w))
    return out


def heap_tree_tensors(logits: torch.Tensor, budget: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The whole host-side build as the reference does it: heap, parents, visibility matrix row by
    row, then back to the logits' device. Returns (token_ids [N - 1], parents [N], visibility [N, N])."""
    paths = heap_reference(logits, budget)
    index = {(): 0}
    parents = np.full(budget + 1, -1)
    vis = np.zeros((budget + 1, budget + 1), dtype=bool)
    vis[0, 0] = True
    for n, path in enumerate(paths, start=1):
        index[path] = n
        parents[n] = index[path[:-1]]
        vis[n, :n] = vis[parents[n], :n]
        vis[n, n] = True
    device = logits.device
    tokens = torch.tensor([p[-1] for p in paths], device=device)
    return tokens, torch.from_numpy(parents).to(device), torch.from_numpy(vis).to(device)
