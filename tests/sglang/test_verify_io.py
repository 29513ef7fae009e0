"""Our trees in SGLang's EAGLE verify tensors: walking the tree the way `sgl_kernel.verify_tree_greedy` does
(transcribed below from its documented CUDA kernel) over `eagle_verify_fields` accepts exactly the path and bonus
`accept_greedy` accepts."""

import torch
from tree_helpers import random_parents

from sglang_dflash.ddtree import accept_greedy, build_ddtree, tree_from_parents
from sglang_dflash.kernels.tree_build.naive import ancestors
from sglang_dflash.sglang.verify_io import eagle_verify_fields


def verify_tree_greedy(candidates, retrive_index, next_token, next_sibling, target_predict, spec_steps):
    """sgl_kernel's VerifyTreeGreedy, one request at a time on the host (flat indices throughout)."""
    R, N = candidates.shape
    predict = torch.zeros(R * N, dtype=torch.int32)
    accept_index = torch.full((R, spec_steps + 1), -1, dtype=torch.int32)
    accept_length = torch.zeros(R, dtype=torch.int32)
    flat_target = target_predict.reshape(-1)
    for b in range(R):
        last = int(retrive_index[b, 0])
        accept_index[b, 0] = last
        accepted, cur = 0, 0
        for _ in range(1, spec_steps + 1):
            cur = int(next_token[b, cur])
            while cur != -1:
                if int(candidates[b, cur]) == int(flat_target[last]):
                    predict[last] = int(flat_target[last])
                    accepted += 1
                    accept_index[b, accepted] = last = int(retrive_index[b, cur])
                    break
                cur = int(next_sibling[b, cur])
            if cur == -1:
                break
        accept_length[b] = accepted
        predict[last] = int(flat_target[last])
    return predict, accept_index, accept_length


def test_acceptance_matches_sglang_verify_tree_greedy():
    gen = torch.Generator().manual_seed(0)
    for trial in range(60):
        R, V = 3, 16
        if trial % 2:  # random shapes; sibling tokens distinct, as in every DraftTree we build
            parents = random_parents(R, 12, gen)
            rank = ((parents[:, :, None] == parents[:, None, :]) & torch.ones(12, 12, dtype=torch.bool).tril(-1)).sum(-1)
            tree = tree_from_parents((rank + torch.randint(V, (R, 1), generator=gen)) % V, parents, max_depth=11)
        else:
            tree = build_ddtree(torch.randn(R, 6, V, generator=gen) * 2, torch.randint(V, (R,), generator=gen), 20)
        N = tree.num_nodes
        # targets that often agree with a child, so paths go deep
        target = torch.randn(R, N, V, generator=gen)
        child_tok = tree.token_ids.gather(1, tree.next_token.clamp(min=0))
        agree = torch.rand(R, N, generator=gen) < 0.7
        target.scatter_add_(2, child_tok[..., None], (agree & (tree.next_token >= 0)).float()[..., None] * 20)
        seq_lens = torch.randint(0, 9, (R,), generator=gen)
        f = eagle_verify_fields(tree, seq_lens, int(seq_lens.sum()))
        acc = accept_greedy(tree, target)
        predict, accept_index, accept_length = verify_tree_greedy(
            f["draft_token"].view(R, N), f["retrieve_index"], f["retrieve_next_token"], f["retrieve_next_sibling"],
            target.argmax(-1), f["spec_steps"])  # fmt: skip
        assert accept_length.tolist() == acc.accept_len.tolist()
        for r in range(R):
            path = [int(i) - r * N for i in accept_index[r] if i >= 0]  # node indices within the tree
            assert path == acc.accepted_nodes[r, : len(path)].tolist() and (acc.accepted_nodes[r, len(path) :] == -1).all()
            emitted = [int(predict[r * N + n]) for n in path]  # the token after each path node, the bonus last
            assert emitted[:-1] == tree.token_ids[r, path[1:]].tolist() and emitted[-1] == int(acc.bonus_tokens[r])
        assert torch.equal(f["positions"].view(R, N), seq_lens[:, None] + tree.depths)
        assert f["custom_mask"].numel() == N * int(seq_lens.sum()) + R * N * N


def test_chain_fields_are_a_causal_block():
    tree = tree_from_parents(torch.arange(5)[None], torch.arange(-1, 4)[None], max_depth=4)
    f = eagle_verify_fields(tree, torch.tensor([3]), 3)
    block = f["custom_mask"].view(5, 8)[:, 3:]
    assert torch.equal(block, torch.tril(torch.ones(5, 5, dtype=torch.bool))) and f["custom_mask"].view(5, 8)[:, :3].all()
    assert torch.equal(ancestors(tree.parents, 4)[0], block)
