"""Session 31's deferred-commit prototype (`deferred_commit.patch`): a verify given the previous step's context and
accepted path starts from the committed state and writes it into the slots, so it must equal the commit, then the
verify, in outputs, u, G and pool. Random inputs; trees of one block; a slot -1 left untouched. Apply the patch first:
    git apply benchmarks/results/2026-12-04_s31_scripts/deferred_commit.patch
    TRITON_INTERPRET=1 python -m pytest benchmarks/results/2026-12-04_s31_scripts/check_deferred_commit.py   # CPU
"""

import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "tests"))
from test_tree_gdn_kernel import rel_err  # noqa: E402
from tree_helpers import DEVICE, accepted_paths, gdn_inputs, random_parents  # noqa: E402

from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_commit_triton, tree_gdn_verify_triton  # noqa: E402


@pytest.mark.parametrize(
    "R,N_prev,N,H,HV,K,V,dtype",
    [(2, 13, 16, 1, 2, 32, 32, torch.float32), (3, 9, 37, 2, 4, 16, 32, torch.bfloat16), (1, 1, 5, 1, 1, 16, 16, torch.float32)],
)
def test_deferred_commit_equals_commit_then_verify(R, N_prev, N, H, HV, K, V, dtype):
    gen = torch.Generator().manual_seed(R * 100 + N)
    slots = torch.arange(R, dtype=torch.int32) + 1
    slots[-1] = -1 if R > 1 else slots[-1]  # a padded request: its slot is neither read nor written
    prev = gdn_inputs(R, N_prev, H, HV, K, V, pool_size=R + 2, gen=gen, dtype=torch.float32)
    pool = prev.pop("state_pool").to(DEVICE)
    prev = {n: (t.to(dtype) if n in ("q", "k", "v") else t).to(DEVICE) for n, t in prev.items()}
    cur = gdn_inputs(R, N, H, HV, K, V, pool_size=1, gen=gen, dtype=torch.float32)
    cur.pop("state_pool")
    cur.update(A_log=prev["A_log"], dt_bias=prev["dt_bias"])  # the same layer
    cur = {n: (t.to(dtype) if n in ("q", "k", "v") else t).to(DEVICE) for n, t in cur.items()}
    p_prev, p_cur = random_parents(R, N_prev, gen).to(DEVICE), random_parents(R, N, gen).to(DEVICE)
    accepted = accepted_paths(p_prev.cpu(), 8, gen).to(DEVICE)
    slots = slots.to(DEVICE)
    _, ctx_prev = tree_gdn_verify_triton(**prev, state_pool=pool, slots=slots, parents=p_prev)

    committed = pool.clone()
    tree_gdn_commit_triton(committed, slots, ctx_prev, accepted)
    o_ref, ctx_ref = tree_gdn_verify_triton(**cur, state_pool=committed, slots=slots, parents=p_cur)
    deferred = pool.clone()
    o, ctx = tree_gdn_verify_triton(**cur, state_pool=deferred, slots=slots, parents=p_cur, pending=(ctx_prev, accepted))

    live = slots >= 0
    assert rel_err(deferred, committed) <= 1e-5 and not torch.equal(deferred[slots[live].long()], pool[slots[live].long()])
    assert torch.equal(deferred[0], pool[0]) and torch.equal(deferred[-1], pool[-1])  # slots no request holds
    assert rel_err(o[live].float(), o_ref[live].float()) <= (1e-5 if dtype == torch.float32 else 1e-2)
    assert rel_err(ctx.u[live], ctx_ref.u[live]) <= 1e-5 and torch.equal(ctx.G[live], ctx_ref.G[live])
