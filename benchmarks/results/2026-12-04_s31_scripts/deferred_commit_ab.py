"""Session 31, call 7: the deferred-commit prototype (`deferred_commit.patch`, applied in the working tree) on the
H200. Each verify starts from the committed state: the previous step's path is applied to the slot's state as the key
loop reads it, and the result written back, so no commit launch runs between steps. Against today's verify + its
share of the 48-layer commit launch (issue 3's figure), Qwen3.6-27B at TP = 2 (HV 24, H 8, K = V = 128), bf16, DDTree
trees as `bench_tree_gdn` makes them, a one-node accepted path as there. First the deferred form against commit then
verify (relative errors); then graph-timed medians, alternated three times, us per layer.
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s31_scripts/deferred_commit_ab.py"""

import torch

from benchmarks.kernels.bench_tree_gdn import LAYERS, verify_inputs
from benchmarks.timing import alternating_us, graph_us
from sglang_dflash.kernels.tree_gdn import stack_contexts
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_commit_triton, tree_gdn_verify_triton

rel = lambda x, ref: ((x.double() - ref.double()).norm() / ref.double().norm()).item()  # noqa: E731
print("| R x N | verify | commit (48-layer launch, per layer) | verify + commit | deferred verify | change |")
print("|---|---|---|---|---|---|", flush=True)
for R, N, kind in ((1, 64, "ddtree"), (8, 64, "ddtree"), (1, 16, "chain")):
    inputs, anc, depth = verify_inputs(R, N, kind)
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    kw = dict(ancestor_mask=anc, max_depth=depth)
    accepted = torch.full((R, 16), -1, device="cuda", dtype=torch.long)
    accepted[:, 0] = 0
    _, ctx_prev = tree_gdn_verify_triton(*inputs, **kw)  # the previous step's context: the same tree, for the timing
    committed = pool.clone()
    tree_gdn_commit_triton(committed, slots, ctx_prev, accepted)
    o_ref, ctx_ref = tree_gdn_verify_triton(q, k, v, a, b, A_log, dt_bias, committed, slots, parents, **kw)
    deferred = pool.clone()
    o, ctx = tree_gdn_verify_triton(q, k, v, a, b, A_log, dt_bias, deferred, slots, parents, **kw,
                                    pending=(ctx_prev, accepted))  # fmt: skip
    print(f"R={R} N={N}: pool {rel(deferred, committed):.1e}, o {rel(o, o_ref):.1e}, u {rel(ctx.u, ctx_ref.u):.1e}",
          flush=True)  # fmt: skip
    pools, ctxs = pool[None].repeat(LAYERS, 1, 1, 1, 1), stack_contexts([ctx_prev] * LAYERS)
    work = pool.clone()  # the deferred verify rewrites its slots at every call
    fns = {
        "verify": lambda: tree_gdn_verify_triton(*inputs, **kw),
        "deferred": lambda: tree_gdn_verify_triton(
            q, k, v, a, b, A_log, dt_bias, work, slots, parents, **kw, pending=(ctx_prev, accepted)
        ),  # fmt: skip
    }
    graph_us(fns["verify"], reps=10)  # discarded: the first timing in a process runs fast
    t = alternating_us(fns)
    commit = graph_us(lambda: tree_gdn_commit_triton(pools, slots, ctxs, accepted), reps=2) / LAYERS
    total = t["verify"] + commit
    print(f"| {R} x {N} {kind} | {t['verify']:.2f} | {commit:.2f} | {total:.2f} | {t['deferred']:.2f} | "
          f"{t['deferred'] - total:+.2f} |", flush=True)  # fmt: skip
