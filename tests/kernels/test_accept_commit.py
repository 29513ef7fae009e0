"""A spec-v2 step's commit (`kernels.accept_commit`): the Triton kernel (on the tests' device: Triton's interpreter
on the CPU) and the torch reference, each against the window and the tokens worked out by hand per request."""

import pytest
import torch
from tree_helpers import DEVICE, accepted_paths, poisoned_outputs, random_parents

from sglang_dflash.ddtree import accept_greedy, build_ddtree
from sglang_dflash.kernels.accept_commit import commit_accepted_kernel, commit_accepted_ref

COMMITS = {"kernel": (commit_accepted_kernel, DEVICE), "reference": (commit_accepted_ref, "cpu")}


def by_hand(window: list[int], path: list[int], token_ids: list[int], bonus: int, N: int):
    """(the window reordered, the N tokens emitted) for one request."""
    rest = [window[i] for i in range(N) if i not in path]
    tokens = [token_ids[i] for i in path[1:]] + [bonus]
    return [window[i] for i in path] + rest, tokens + [0] * (N - len(tokens))


@pytest.mark.parametrize("impl", COMMITS)
@pytest.mark.parametrize("index_dtype", [torch.int32, torch.int64])  # SGLang's req_to_token, slots and lengths
def test_commit_puts_the_path_first_and_emits_its_tokens(impl, index_dtype):
    """Random trees and paths, odd N and path widths (P > N too), windows anywhere in a shared table: the window's
    slots stay the request's, the path's come first; nothing outside the windows moves."""
    commit, device = COMMITS[impl]
    gen = torch.Generator().manual_seed(1)
    for trial in range(24):
        R, N, P = 1 + trial % 5, 3 + trial % 9, 1 + trial % 13
        parents = random_parents(R, N, gen, chain=trial % 3 == 0)
        accepted = accepted_paths(parents, P, gen)
        accept_len = (accepted >= 0).sum(1) - 1
        slots = torch.randperm(7, generator=gen)[:R].to(index_dtype)
        seq_lens = torch.randint(0, 9, (R,), generator=gen).to(index_dtype)  # a window may end at the row's end
        token_ids = torch.randint(100, 200, (R, N), generator=gen)
        bonus = torch.randint(200, 300, (R,), generator=gen)
        table = torch.randperm(7 * 20, generator=gen).view(7, 20).to(index_dtype)
        before = table.clone()
        on = table.to(device)
        with poisoned_outputs():
            tokens, accept_lens, new_lens = commit(on, *(t.to(device) for t in (slots, seq_lens, token_ids, accepted,
                                                                             accept_len, bonus)))  # fmt: skip
        table = on.cpu()
        for r in range(R):
            s, lo = int(slots[r]), int(seq_lens[r])
            path = [int(i) for i in accepted[r] if i >= 0]
            window, emitted = by_hand(before[s, lo : lo + N].tolist(), path, token_ids[r].tolist(), int(bonus[r]), N)
            assert table[s, lo : lo + N].tolist() == window
            assert tokens[r].tolist() == emitted
            assert int(accept_lens[r]) == len(path) and int(new_lens[r]) == lo + len(path)
            table[s, lo : lo + N] = before[s, lo : lo + N]
        assert torch.equal(table, before)  # every other entry untouched
        assert accept_lens.dtype == torch.int32 and tokens.dtype == new_lens.dtype == torch.long


@pytest.mark.parametrize("impl", COMMITS)
def test_commit_of_a_greedy_acceptance(impl):
    """On acceptances of DDTree's trees (paths padded past accept_len as `accept_greedy` leaves them): the tokens are
    the accepted drafts, each the target's argmax after the previous, then the argmax at the last."""
    commit, device = COMMITS[impl]
    gen = torch.Generator().manual_seed(2)
    for trial in range(12):
        R, V = 3, 11
        tree = build_ddtree(torch.randn(R, 5, V, generator=gen) * 3, torch.randint(V, (R,), generator=gen), 1 + trial % 12)
        N = tree.num_nodes
        target = torch.randn(R, N, V, generator=gen)
        child_tok = tree.token_ids.gather(1, tree.next_token.clamp(min=0))
        target.scatter_add_(2, child_tok[..., None], (tree.next_token >= 0).float()[..., None] * 20 * (trial % 2))
        acc = accept_greedy(tree, target)
        table = torch.arange(R * (N + 4), dtype=torch.int32).view(R, N + 4)
        tokens, accept_lens, _ = commit(
            table.to(device),
            *(
                t.to(device)
                for t in (
                    torch.arange(R),
                    torch.full((R,), 2),
                    tree.token_ids,
                    acc.accepted_nodes,
                    acc.accept_len,
                    acc.bonus_tokens,
                )
            ),
        )
        for r in range(R):
            path = [int(i) for i in acc.accepted_nodes[r] if i >= 0]
            expect = [int(tree.token_ids[r, i]) for i in path[1:]] + [int(target[r, path[-1]].argmax())]
            assert tokens[r, : len(expect)].tolist() == expect and int(accept_lens[r]) == len(expect)
            assert tokens[r, len(expect) :].eq(0).all()


def test_commit_of_no_request():
    empty = torch.zeros(0, dtype=torch.long, device=DEVICE)
    tokens, accept_lens, new_lens = commit_accepted_kernel(torch.zeros(2, 4, dtype=torch.int32, device=DEVICE), empty,
                                                           empty, empty.view(0, 3), empty.view(0, 2), empty, empty)  # fmt: skip
    assert tokens.shape == (0, 3) and accept_lens.shape == new_lens.shape == (0,)
