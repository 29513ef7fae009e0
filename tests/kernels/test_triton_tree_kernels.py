"""The Triton kernels behind build_ddtree / walk_tree / accept_greedy against their torch references
(on CPU through TRITON_INTERPRET=1, see conftest.py), outputs poisoned before each run."""

import math

import pytest
import torch
from tree_helpers import DEVICE, poisoned_outputs, root_path

from sglang_dflash.ddtree import DraftTree, build_ddtree, tree_from_parents
from sglang_dflash.dflash import chain_tree
from sglang_dflash.kernels.tree_build import (
    conditional_tree_build,
    select_conditional_prefixes_ref,
    select_prefixes_ref,
    tree_build,
)
from sglang_dflash.kernels.tree_walk import greedy_walk, tree_walk, walk_tree_ref
from sglang_dflash.kernels.vocab import argmax, draft_log_probs, draft_log_probs_ref


def random_top_k(R, L, V, K, gen, ties=False):
    """Sorted top-K log-probs and ids of random draft logits; ties: small integer logits; "peaked": one confident
    token per depth, so the trees hold a chain through every depth (deep paths for the ancestor mask)."""
    logits = torch.randint(0, 3, (R, L, V), generator=gen).float() if ties is True else torch.randn(R, L, V, generator=gen) * 3
    if ties == "peaked":
        logits.scatter_add_(2, torch.randint(0, V, (R, L, 1), generator=gen), torch.full((R, L, 1), 12.0))
    return draft_log_probs_ref(logits, K)


@pytest.mark.parametrize(
    "R,L,V,B,ties",
    [
        (1, 1, 5, 3, False),
        (2, 4, 3, 30, False),
        (3, 5, 40, 17, False),
        (1, 15, 50, 64, False),
        (2, 15, 50, 64, "peaked"),  # 15 deep
        (2, 6, 7, 100, True),
        (1, 4, 300, 130, False),
        (4, 3, 9, 1, True),
        (3, 5, 6, 3, False),  # fewer merge pairs than B: beams padded with no-prefix entries
        (2, 4, 5, 2, True),
    ],
)
def test_tree_build_matches_torch(R, L, V, B, ties):
    gen = torch.Generator().manual_seed(R * 100 + B)
    logp, ids = random_top_k(R, L, V, min(B, V), gen, ties)
    roots = torch.randint(0, V, (R,), generator=gen)
    token_ids, parents = select_prefixes_ref(logp, ids, roots, B)
    ref = tree_from_parents(token_ids, parents, max_depth=L)
    with poisoned_outputs():
        got = tree_build(logp.to(DEVICE), ids.to(DEVICE), roots.to(DEVICE), B)
    for name, value in got.items():
        assert torch.equal(value.cpu(), getattr(ref, name)), name


def dyadic_heads(R, L, K, gen, ties, masked=0.0):
    """Conditional scores that are multiples of 2^-4 (ties: of 2^-1, so many prefixes tie) and >= -16: every sum of
    up to 15 is exact in float32 and float64 alike, so the kernel and the float64 reference rank the same prefixes;
    `masked`: that share of step's entries -inf (candidates a head rules out)."""
    scale = 2 if ties else 16
    first = -torch.randint(0, 8 * scale, (R, K), generator=gen).float() / scale
    step = -torch.randint(0, 8 * scale, (R, L - 1, K, K), generator=gen).float() / scale
    if ties:  # zeros of both signs (negation gave -0.0): equal scores, as torch's sorts take them
        first[(first == 0) & (torch.rand(first.shape, generator=gen) < 0.5)] = 0.0
        step[(step == 0) & (torch.rand(step.shape, generator=gen) < 0.5)] = 0.0
    step[torch.rand(step.shape, generator=gen) < masked] = -math.inf
    cand_ids = torch.stack([torch.randperm(1000, generator=gen)[:K] for _ in range(R * L)]).view(R, L, K)
    return cand_ids, first, step


@pytest.mark.parametrize(
    "R,L,K,B,ties,masked",
    [
        (1, 1, 3, 2, False, 0.0),
        (2, 4, 3, 20, False, 0.0),
        (3, 5, 5, 17, True, 0.0),
        (1, 15, 16, 64, True, 0.0),  # DFlash2's released selector (top 16) at budget 64, 15 deep
        (2, 3, 6, 4, True, 0.0),  # more candidates than the budget
        (1, 3, 64, 64, False, 0.0),  # DSpark: K = budget
        (2, 4, 2, 30, True, 0.0),  # every prefix (2 + 4 + 8 + 16)
        (3, 5, 7, 33, False, 0.3),
    ],
)
def test_conditional_tree_build_matches_torch(R, L, K, B, ties, masked):
    gen = torch.Generator().manual_seed(R * 1000 + K * 10 + B)
    cand_ids, first, step = dyadic_heads(R, L, K, gen, ties, masked)
    roots = torch.randint(0, 1000, (R,), generator=gen)
    token_ids, parents, best = select_conditional_prefixes_ref(cand_ids, first, step, roots, B)
    assert torch.isfinite(best).all()  # the case's masking leaves at least B finite prefixes
    ref = tree_from_parents(token_ids, parents, max_depth=L)
    with poisoned_outputs():
        got, got_best = conditional_tree_build(first.to(DEVICE), step.to(DEVICE), cand_ids.to(DEVICE), roots.to(DEVICE), B)
    for name, value in got.items():
        assert torch.equal(value.cpu(), getattr(ref, name)), name
    assert torch.equal(got_best.cpu().double(), best)


@pytest.mark.parametrize("R,L,V,B", [(3, 4, 6, 20), (2, 15, 30, 64), (1, 1, 4, 2), (5, 6, 3, 50)])
def test_tree_walk_matches_torch(R, L, V, B):
    gen = torch.Generator().manual_seed(B)
    logp, ids = random_top_k(R, L, V, min(B, V), gen)
    token_ids, parents = select_prefixes_ref(logp, ids, torch.zeros(R, dtype=torch.long), B)
    tree = tree_from_parents(token_ids, parents, max_depth=L)
    for _ in range(5):
        # Targets that follow a random root path for a while, then disagree.
        target = torch.randint(0, V, (R, B + 1), generator=gen)
        follow = torch.rand(R, B + 1, generator=gen) < 0.8
        child_token = torch.full((R, B + 1), -1).scatter_(1, parents.clamp_min(0)[:, 1:], token_ids[:, 1:])
        target = torch.where(follow & (child_token >= 0), child_token, target)
        ref = walk_tree_ref(token_ids, parents, tree.depths, tree.ancestor_mask, target, L)
        with poisoned_outputs():
            got = tree_walk(token_ids.to(DEVICE), parents.to(DEVICE), tree.depths.to(DEVICE), target.to(DEVICE), L)
        for a, b in zip(got, ref):
            assert torch.equal(a.cpu(), b)
        assert ref[0].max() > 0


@pytest.mark.parametrize(
    "shape,dtype",
    [((3, 5, 20000), torch.float32), ((7, 8193), torch.bfloat16), ((1, 1, 3), torch.float32), ((6, 40000), torch.bfloat16)],
)
def test_argmax_matches_torch(shape, dtype):
    gen = torch.Generator().manual_seed(shape[-1])
    x = torch.randn(*shape, generator=gen).to(dtype)
    x.view(-1, shape[-1])[0, -1] = 100.0  # the maximum at the very end of a row
    if shape[-1] > 10:
        rows = x.view(-1, shape[-1])
        rows[1 % rows.shape[0], [5, 9000 % shape[-1]]] = 50.0  # a tie: first wins
        rows[-1, [shape[-1] - 3, (2 * 8192 + 7) % shape[-1], (8192 + 9) % shape[-1]]] = 60.0  # a tie across chunks
    with poisoned_outputs():
        got = argmax(x.to(DEVICE))
    assert torch.equal(got.cpu(), x.argmax(-1))


@pytest.mark.parametrize(
    "M,V,k,chunk,ties",
    [
        (3, 5003, 16, None, False),
        (2, 4096 + 17, 64, None, False),
        (4, 999, 5, 16, False),
        (2, 3000, 1, None, False),
        (3, 2500, 20, 32, True),
        (1, 6500, 100, 64, False),
        (2, 30011, 100, None, False),  # K chunks of 256 above draft_topk.TILE: the compaction in two passes
    ],
)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_draft_top_k_matches_torch(M, V, k, chunk, ties, dtype):
    """fp32 and, as LM heads give them, bf16 / fp16 logits (many ties at 16 bits): the top-k values, and among equal
    values the smaller token ids (a stable sort's order)."""
    gen = torch.Generator().manual_seed(V + k)
    logits = torch.randint(0, 4, (M, V), generator=gen).float() if ties else torch.randn(M, V, generator=gen) * 3
    logits[0, :300] = -math.inf  # whole chunks of -inf
    logits[-1, -1] = 20.0  # the best token is the last one
    logits = logits.to(dtype)
    ref_logp, _ = draft_log_probs_ref(logits.float(), k)
    ref_ids = torch.sort(logits.float(), dim=-1, descending=True, stable=True).indices[:, :k]
    with poisoned_outputs():
        logp, ids, lse = draft_log_probs(logits.to(DEVICE), k, chunk=chunk, with_lse=True)
    logp, ids = logp.cpu(), ids.cpu()
    torch.testing.assert_close(logp, ref_logp, rtol=1e-6, atol=1e-5)
    torch.testing.assert_close(lse.cpu(), draft_log_probs_ref(logits.float(), k, with_lse=True)[2], rtol=1e-6, atol=1e-5)
    assert torch.equal(ids, ref_ids)


def test_draft_top_k_nan_row_is_nan():
    logits = torch.randn(2, 3000)
    logits[1, 17] = float("nan")
    logp, _ = draft_log_probs(logits.to(DEVICE), 8)
    assert not logp[0].isnan().any() and logp[1].isnan().all()


def greedy_reference(tree: DraftTree, logits: torch.Tensor):
    """accept_greedy's torch path: the argmax of every row, then the walk."""
    return walk_tree_ref(tree.token_ids, tree.parents, tree.depths, tree.ancestor_mask, logits.argmax(-1), tree.max_depth)


def check_greedy_walk(tree: DraftTree, logits: torch.Tensor, **tiling):
    ref = greedy_reference(tree, logits)
    with poisoned_outputs():
        got = greedy_walk(tree.token_ids.to(DEVICE), tree.parents.to(DEVICE), logits.to(DEVICE), tree.max_depth, **tiling)
    for name, a, b in zip(("accept_len", "accepted_nodes", "bonus_tokens"), got, ref):
        assert torch.equal(a.cpu(), b), name
    return ref[0]


def deep_tree(R, L, V, B, gen):
    """build_ddtree with one boosted token per depth: the top-B include a chain down to depth L (B >= L)."""
    draft = torch.randn(R, L, V, generator=gen) * 3
    draft.scatter_add_(2, torch.randint(0, V, (R, L, 1), generator=gen), torch.full((R, L, 1), 20.0))
    return build_ddtree(draft, torch.randint(0, V, (R,), generator=gen), B)


def forced_logits(tree: DraftTree, V: int, ends: list[int], gen, ties: bool = False) -> torch.Tensor:
    """Target logits [R, N, V] whose argmax leads from the root to node ends[r]; random below it.
    ties: integer logits (duplicate maxima everywhere) and each forced maximum repeated at a larger index."""
    R, N = tree.token_ids.shape
    logits = torch.randint(0, 3, (R, N, V), generator=gen).float() if ties else torch.randn(R, N, V, generator=gen)
    for r, end in enumerate(ends):
        path = root_path(tree.parents, r, end)
        for a, b in zip(path, path[1:]):
            token = tree.token_ids[r, b].item()
            logits[r, a, token] = 10.0
            if ties and token + 1 < V:
                logits[r, a, torch.randint(token + 1, V, (1,), generator=gen).item()] = 10.0
    return logits


def walk_ends(tree: DraftTree, gen) -> list[int]:
    """Per request: the deepest node, a leaf above the deepest depth, the root, random nodes (in turn)."""
    ends = []
    for r in range(tree.token_ids.shape[0]):
        depths, parents = tree.depths[r], tree.parents[r]
        leaves = [i for i in range(len(parents)) if i not in parents.tolist() and depths[i] < depths.max()]
        choice = r % 4
        if choice == 0 or (choice == 1 and not leaves):
            ends.append(depths.argmax().item())
        elif choice == 1:
            ends.append(leaves[torch.randint(len(leaves), (1,), generator=gen).item()])
        else:
            ends.append(0 if choice == 2 else torch.randint(len(parents), (1,), generator=gen).item())
    return ends


@pytest.mark.parametrize(
    "R,L,V,B,dtype,block,chunk,ties",
    [
        (4, 4, 1000, 24, torch.float32, 64, 256, False),  # 4 chunks, the last one partial
        (4, 6, 4099, 40, torch.bfloat16, 512, 1024, False),  # 5 chunks, the last one of 3 entries
        (4, 5, 1000, 20, torch.float32, 128, 384, True),  # ties inside and across chunks
        (4, 5, 1000, 20, torch.bfloat16, 128, 384, True),  # the same in bf16: on the GPU, read as int32 pairs
        (3, 3, 700, 12, torch.bfloat16, None, None, False),  # the default tiling (6 chunks)
    ],
)
@pytest.mark.parametrize("lookahead", [1, 2, 4])
def test_greedy_walk_forced_paths(R, L, V, B, dtype, block, chunk, ties, lookahead):
    """Paths to the deepest node, to leaves, stopping at the root, to random nodes (on the first-child chains and off
    them), walked one row a round or LA rows (the current node's and its first-child chain's)."""
    gen = torch.Generator().manual_seed(V + B)
    tree = deep_tree(R, L, V, B, gen)
    assert tree.depths.max() == L
    logits = forced_logits(tree, V, walk_ends(tree, gen), gen, ties).to(dtype)
    accept_len = check_greedy_walk(tree, logits, block=block, chunk=chunk, lookahead=lookahead)
    assert accept_len.max() == L and len(set(accept_len.tolist())) > 1


def test_greedy_walk_calls_in_turn():
    """Walks one after another share the barrier's counters (kept between calls, P a round: on the GPU, where P > 1):
    different request counts and programs per request, interleaved, then a CUDA graph replayed; each equals the
    reference, and each counter stays a multiple of its P."""
    from sglang_dflash.kernels.tree_walk import path_argmax

    gen = torch.Generator().manual_seed(9)
    L, V, B = 5, 1000, 20
    cases = []
    for R, programs, lookahead in ((3, 2, 1), (1, 3, 2), (3, 3, 4), (2, 2, 2), (3, None, 4), (1, 5, 1)):
        tree = deep_tree(R, L, V, B, gen)
        cases.append(
            (
                tree,
                forced_logits(tree, V, walk_ends(tree, gen), gen).bfloat16(),
                dict(block=64, chunk=128, programs=programs, lookahead=lookahead),
            )
        )
    for tree, logits, tiling in cases + cases[::-1]:
        check_greedy_walk(tree, logits, **tiling)
    for (_, P), counters in path_argmax._COUNTERS.items():
        assert bool((counters % P == 0).all()), P
    if DEVICE == "cuda":
        tree, logits, tiling = cases[2]
        args = (tree.token_ids.cuda(), tree.parents.cuda(), logits.cuda(), tree.max_depth)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            got = greedy_walk(*args, **tiling)
        for _ in range(3):
            graph.replay()
            check_greedy_walk(*cases[0][:2], **cases[0][2])  # eager calls between the replays
        torch.cuda.synchronize()
        for a, b in zip(got, greedy_reference(tree, logits)):
            assert torch.equal(a.cpu(), b)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_walk_random_logits(dtype):
    """Random trees and logits (a slice: read in place): most walks stop at the root."""
    gen = torch.Generator().manual_seed(5)
    R, L, V, B = 3, 4, 1000, 30
    tree = build_ddtree(torch.randn(R, L, V, generator=gen) * 3, torch.randint(0, V, (R,), generator=gen), B)
    logits = torch.randn(R, B + 3, V, generator=gen).to(dtype)[:, :-2]  # strided over R, as a slice of N
    check_greedy_walk(tree, logits, block=128, chunk=256)


@pytest.mark.parametrize("lookahead", [1, 4])
def test_greedy_walk_chain_to_max_depth(lookahead):
    """DFlash chains with L = 15: full acceptance, a stop halfway, a stop at the root."""
    gen = torch.Generator().manual_seed(15)
    R, L, V = 3, 15, 1000
    tree = chain_tree(torch.randint(0, V, (R, L), generator=gen), torch.randint(0, V, (R,), generator=gen))
    logits = forced_logits(tree, V, [L, 7, 0], gen).to(torch.bfloat16)
    assert check_greedy_walk(tree, logits, block=1024, chunk=1024, lookahead=lookahead).tolist() == [L, 7, 0]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_walk_signed_zero_maximum(dtype):
    """A row whose maximum is zero, -0 first and +0 later (one block, one pair, and across blocks): its argmax is the
    first of them, as torch's (-0 == +0), whichever zero a packed max returns."""
    tree = chain_tree(torch.tensor([[20, 7], [41, 7], [21, 7]]), torch.tensor([1, 2, 3]))
    logits = -1.0 - torch.rand(3, 3, 256, generator=torch.Generator().manual_seed(0))
    logits[0, 0, [20, 100]] = torch.tensor([-0.0, 0.0])  # across blocks of 64
    logits[1, 0, [40, 41]] = torch.tensor([-0.0, 0.0])  # one int32 pair: the walk must stop (argmax 40, not 41)
    logits[2, 0, [21, 22, 200]] = torch.tensor([-0.0, 0.0, 0.0])
    accept_len = check_greedy_walk(tree, logits.to(dtype), block=64, chunk=256)
    assert accept_len.tolist() == [1, 0, 1]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("lookahead", [1, 2])
def test_greedy_walk_single_node_and_degenerate_rows(lookahead, dtype):
    """N = 1 (L = 0); rows all -inf (index 0, as torch) and with NaNs (skipped), in fp32 and in bf16."""
    gen = torch.Generator().manual_seed(1)
    tree = chain_tree(torch.zeros(2, 0, dtype=torch.long), torch.tensor([3, 4]))
    check_greedy_walk(tree, torch.randn(2, 1, 300, generator=gen).to(dtype), block=64, chunk=64, lookahead=lookahead)
    tree = chain_tree(torch.tensor([[5, 6], [7, 8]]), torch.tensor([1, 2]))
    logits = torch.full((2, 3, 300), -math.inf)
    logits[0, 0, 5] = 1.0  # request 0 accepts node 1, whose row is all -inf: bonus 0
    check_greedy_walk(tree, logits.to(dtype), block=64, chunk=128, lookahead=lookahead)
    logits[1, 0] = torch.randn(300, generator=gen)
    logits[1, 0, [3, 70, 299]] = math.nan
    logits[1, 0, 9] = 5.0  # not the child's token 7: the walk stops at the root
    logits = logits.to(dtype)
    clean = logits.nan_to_num(nan=-math.inf)
    with poisoned_outputs():
        got = greedy_walk(
            tree.token_ids.to(DEVICE), tree.parents.to(DEVICE), logits.to(DEVICE), 2, block=64, chunk=128, lookahead=lookahead
        )
    assert torch.equal(got[2].cpu(), greedy_reference(tree, clean)[2])
    assert got[2].tolist() == [0, 9]
