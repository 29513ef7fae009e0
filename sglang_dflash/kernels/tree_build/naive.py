"""Pure-torch reference: select the top-B prefixes of per-depth marginals (DDTree's tree).

Each depth keeps a beam of B prefixes, built from the previous beam and the depth's top tokens,
holding every prefix of that depth in the global top B at its true rank (`merge_pattern`: only
pairs with (i + 1)(j + 2) <= B can be in it). One stable sort per depth, then one stable sort of
the L x B beam entries picks the global top B: nodes by descending score, ties by shallower depth,
then by beam order (parent rank, token rank), which is topological because no child outscores its
parent (log-probabilities are <= 0).
"""

from __future__ import annotations

import math
from functools import lru_cache

import torch
from torch import Tensor


@lru_cache(maxsize=64)
def merge_pattern(budget: int, width: int, device: torch.device) -> tuple[Tensor, Tensor]:
    """Pairs (i, j), lexicographic, with (i + 1) * (j + 2) <= budget and j < width: the (beam rank i of depth
    d - 1, token rank j of depth d) pairs that can be a depth-d prefix of the global top `budget`, d >= 2.

    Both lists being sorted descending, the pair (i, j) at score x comes after, in the global order: the
    (i + 1)(j + 1) - 1 pairs (i' <= i, j' <= j) of its depth (score >= x; on ties earlier in the stable
    lexicographic sort), the i + 1 beam entries i' <= i of depth d - 1 and the d - 2 ancestors of entry i
    (score >= x, shallower). So it is in the top `budget` only if (i + 1)(j + 2) + d - 2 <= budget. And every
    prefix ranked above a selected one is selected, so each beam holds the selected prefixes at their true
    ranks. (B = 64: 216 pairs, where the plain corner (i + 1)(j + 1) <= B has 280.)
    """
    pairs = [(i, j) for i in range(budget) for j in range(min(width, budget // (i + 1) - 1))]
    ij = torch.tensor(pairs, dtype=torch.long, device=device).view(-1, 2)
    return ij[:, 0], ij[:, 1]


def select_prefixes_ref(logp: Tensor, top_ids: Tensor, root_tokens: Tensor, budget: int) -> tuple[Tensor, Tensor]:
    """logp float32 [R, L, K] sorted descending per depth (K <= budget, log-probs <= 0), top_ids
    long [R, L, K], root_tokens long [R] -> (token_ids, parents), long [R, budget + 1], node 0 the root."""
    R, L, K = logp.shape
    B, device = budget, logp.device
    # Per-depth beams: scores [R, L, B] (-inf = no such prefix), the flat index of each entry's
    # parent entry (depth d - 1) and the rank of its last token among depth d's top-K.
    pad = torch.full((R, B - K), -math.inf, device=device)
    beam = torch.cat([logp[:, 0], pad], dim=1)
    scores, parent_entry, token_rank = [beam], [torch.full((R, B), -1, device=device, dtype=torch.long)], []
    token_rank.append(
        torch.cat([torch.arange(K, device=device), torch.zeros(B - K, device=device, dtype=torch.long)]).expand(R, B)
    )
    pi, pj = merge_pattern(B, K, device)
    fill = max(0, B - pi.numel())  # small budgets: fewer pairs than B, the beam padded with no-prefix entries
    pi, pj = (torch.cat([t, torch.zeros(fill, device=device, dtype=torch.long)]) for t in (pi, pj))
    for d in range(1, L):
        cand = beam[:, pi] + logp[:, d, pj]
        if fill:
            cand[:, -fill:] = -math.inf
        beam, order = torch.sort(cand, dim=1, descending=True, stable=True)
        beam, order = beam[:, :B], order[:, :B]
        scores.append(beam)
        parent_entry.append(pi[order] + (d - 1) * B)
        token_rank.append(pj[order])
    flat = (torch.stack(t, 1).flatten(1) for t in (scores, parent_entry, token_rank))
    token_ids, parents, _ = best_of_beams(*flat, top_ids, root_tokens, B)
    return token_ids, parents


def select_conditional_prefixes_ref(
    cand_ids: Tensor, first: Tensor, step: Tensor, root_tokens: Tensor, budget: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The best `budget` prefixes under conditional scores (`conditional_tree`'s contract): cand_ids long [R, L, K],
    first [R, K], step [R, L - 1, K, K] (<= 0, no NaN), root_tokens long [R] -> (token_ids, parents) long
    [R, budget + 1], node 0 the root, and the chosen prefixes' scores float64 [R, budget] in node order (-inf: fewer
    than `budget` finite prefixes; the tree is then unspecified). Scores are summed in float64.

    Per-depth beams of B entries: depth 1's the candidates sorted (stable), depth d + 1's the best B of every
    (beam entry i, candidate j) pair in (i, j) order (stable), a prefix among the best B having its parent among the
    best B of its depth; then the global best B as `best_of_beams` takes them."""
    R, L, K = cand_ids.shape
    B, device = budget, first.device
    first, step = first.double(), step.double()
    width = min(B, K)
    score, cand = torch.sort(first, dim=1, descending=True, stable=True)
    scores, cands = [_pad(score[:, :width], B, -math.inf)], [_pad(cand[:, :width], B, 0)]
    parents = [torch.full((R, B), -1, device=device, dtype=torch.long)]
    rows = torch.arange(R, device=device)[:, None, None]
    for d in range(1, L):
        ext = scores[-1][:, :, None] + step[rows, d - 1, cands[-1][:, :, None], torch.arange(K, device=device)]  # [R, B, K]
        score, flat = torch.sort(ext.flatten(1), dim=1, descending=True, stable=True)
        scores.append(score[:, :B])
        cands.append(flat[:, :B] % K)
        parents.append(flat[:, :B] // K + (d - 1) * B)  # the parent's entry in the flattened beams
    scores, cands, parents = (torch.stack(t, 1).flatten(1) for t in (scores, cands, parents))  # [R, L * B]
    return best_of_beams(scores, parents, cands, cand_ids, root_tokens, B)


def _pad(t: Tensor, width: int, value) -> Tensor:
    return torch.cat([t, t.new_full((t.shape[0], width - t.shape[1]), value)], dim=1) if t.shape[1] < width else t


def best_of_beams(
    scores: Tensor, parent_entry: Tensor, token_rank: Tensor, top_ids: Tensor, root_tokens: Tensor, budget: int
) -> tuple[Tensor, Tensor, Tensor]:
    """The global best `budget` entries of per-depth beams of B = budget entries each, as (token_ids, parents) long
    [R, budget + 1], node 0 the root, and their scores [R, budget] in node order. scores float [R, L * B] (flat index
    = depth_index * B + rank; -inf: no such prefix), parent_entry long [R, L * B] (the parent's flat index; < 0 at
    depth 1), token_rank long [R, L * B] (the last token's index among its depth's candidates top_ids long
    [R, L, K]). The stable sort puts shallower entries first on ties."""
    R, L, K = top_ids.shape
    B, device = budget, scores.device
    best, chosen = (t[:, :B] for t in torch.sort(scores, dim=1, descending=True, stable=True))  # [R, B]
    node_of_entry = torch.full((R, L * B), -1, device=device, dtype=torch.long)
    node_of_entry.scatter_(1, chosen, torch.arange(1, B + 1, device=device).expand(R, B))
    parent_of_chosen = parent_entry.gather(1, chosen)
    parent_node = torch.where(parent_of_chosen < 0, 0, node_of_entry.gather(1, parent_of_chosen.clamp_min(0)))
    tokens = top_ids.flatten(1).gather(1, (chosen // B) * K + token_rank.gather(1, chosen))
    token_ids = torch.cat([root_tokens.to(device=device, dtype=torch.long)[:, None], tokens], dim=1)
    parents = torch.cat([torch.full((R, 1), -1, device=device, dtype=torch.long), parent_node], dim=1)
    return token_ids, parents, best


def ancestors(parents: Tensor, max_depth: int) -> Tensor:
    """Ancestor mask bool [R, N, N] (row i: the ancestors of i and i itself) of trees given by
    parents long [R, N] (topological, -1 at the root), no node deeper than max_depth."""
    R, N = parents.shape
    device = parents.device
    # Pointer doubling: seen[i] = ancestors of i at distance < 2^s, jump[i] = the one at 2^s.
    # Index N is a sentinel "above the root" with an empty row.
    jump = torch.cat([torch.where(parents < 0, N, parents), torch.full((R, 1), N, device=device)], dim=1)
    seen = torch.eye(N + 1, dtype=torch.bool, device=device).expand(R, N + 1, N + 1).clone()
    seen[:, N, N] = False
    for _ in range(math.ceil(math.log2(max_depth + 1))):
        seen |= seen.gather(1, jump[:, :, None].expand(R, N + 1, N + 1))
        jump = jump.gather(1, jump)
    return seen[:, :N, :N]
