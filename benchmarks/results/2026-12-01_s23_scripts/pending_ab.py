"""GPU A/B of the deferred commit (pending_commit.patch, pending_prologue.patch: trees ab/pend, ab/pend2) against
HEAD (ab/main), same process: verify + commit as today against one verify that applies the previous step's commit
to S0 (no commit launch). Qwen3.6-27B TP=2 GDN shapes (HV 24, H 8, K = V = 128, bf16), DDTree-shaped trees, a
5-node path. Run from the repository root: PYTHONPATH=$PWD python3 pending_ab.py ab/main ab/pend [ab/pend2 ...]"""

import sys

import torch

from benchmarks.ab_trees import load_tree
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import stack_contexts  # (the same in every tree)

SMOKE = not torch.cuda.is_available()  # CPU, TRITON_INTERPRET=1: one small case, no timing (a check of the script)
DEV = "cpu" if SMOKE else "cuda"
if SMOKE:
    graph_us = lambda fn, reps=1: (fn(), 0.0)[1]  # noqa: E731

main, pends = load_tree(sys.argv[1]).gdn, {t: load_tree(t).gdn for t in sys.argv[2:]}
LAYERS, PATH, P = 48, 5, 16
print(torch.cuda.get_device_name() if not SMOKE else "CPU smoke", torch.__version__)
print(
    "case                 | verify  commit x1  commit x48/layer  verify+commit48 | per tree: pending verify (out rel, pool rel)"
)
for R, N, kind in (
    [(1, 16, "chain")] if SMOKE else [(1, 64, "ddtree"), (8, 64, "ddtree"), (1, 16, "chain"), (8, 16, "chain"), (1, 32, "ddtree")]
):
    inputs, anc, depth = verify_inputs(R, N, kind, DEV)
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    o, ctx = main.tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)
    accepted = torch.full((R, 16), -1, device=DEV, dtype=torch.long)
    accepted[:, :PATH] = torch.arange(PATH, device=DEV)  # nodes 0..4 (parents need not be a path: timing only)
    # the pending update of a step: unit keys, weighted u, e^{G_l}
    gen = torch.Generator(device=DEV).manual_seed(R + N)
    pk = torch.nn.functional.normalize(torch.randn(R, P, 8, 128, device=DEV, generator=gen), dim=-1)
    pu = torch.randn(R, P, 24, 128, device=DEV, generator=gen) * 0.1
    pu[:, PATH:] = 0
    peg = torch.rand(R, 24, device=DEV, generator=gen) * 0.5 + 0.5
    # correctness: the pending verify == commit in torch, then HEAD's verify
    committed = pool.clone()
    kk = pk.repeat_interleave(3, dim=2)
    committed[slots.long()] = peg[:, :, None, None] * pool[slots.long()] + torch.einsum("rphv,rphk->rhvk", pu, kk)
    ref, _ = main.tree_gdn_verify_triton(*inputs[:7], committed.clone(), slots, parents, ancestor_mask=anc, max_depth=depth)
    # timing (pools change in place each replay: values stay bounded, e^{G_l} <= 1)
    t_verify = graph_us(lambda: main.tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth), reps=10)
    pc = pool.clone()
    t_commit = graph_us(lambda: main.tree_gdn_commit_triton(pc, slots, ctx, accepted), reps=10)
    pools = pool[None].repeat(LAYERS, 1, 1, 1, 1)
    ctxs = stack_contexts([ctx] * LAYERS)
    t_commit48 = graph_us(lambda: main.tree_gdn_commit_triton(pools, slots, ctxs, accepted), reps=2) / LAYERS
    cols = []
    for name, pend in pends.items():
        work = pool.clone()
        pending = dict(ancestor_mask=anc, max_depth=depth, pending=(pu, pk, peg), peel_root=False)
        out, _ = pend.tree_gdn_verify_triton(*inputs[:7], work, slots, parents, **pending)
        rel = ((out.float() - ref.float()).norm() / ref.float().norm()).item()
        prel = ((work - committed).norm() / committed.norm()).item()
        t = graph_us(
            lambda pend=pend, work=work: pend.tree_gdn_verify_triton(*inputs[:7], work, slots, parents, **pending), reps=10
        )
        cols.append(f"{name}: {t:6.2f} ({rel:.0e}, {prel:.0e})")
    print(
        f"R={R} N={N:3d} {kind:7s}    | {t_verify:6.2f}  {t_commit:6.2f}     {t_commit48:6.2f}          "
        f"{t_verify + t_commit48:6.2f}      | " + "  ".join(cols),
        flush=True,
    )
