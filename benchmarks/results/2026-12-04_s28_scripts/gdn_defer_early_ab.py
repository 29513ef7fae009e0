"""Session 28 A/B, one process: the blocked GDN verify with W and the q.S0 part of o parked in memory across the level
solve (GDN_DEFER=1: fewer registers live in the loop), default tiles and BV 32 at 168 registers (3 programs an SM);
the 48-layer commit with every load issued before the slot's branch (GDN_EARLY=1), by V tile and warps.
Sides alternate (0, 1, 0, 1); medians of each side's two timings. PYTHONPATH=$PWD python3 gdn_defer_early_ab.py"""

import os
import statistics

import torch

from benchmarks.kernels.bench_tree_gdn import LAYERS, verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import stack_contexts
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_commit_triton, tree_gdn_verify_triton


def ab(var: str, values: tuple[str, ...], fn) -> list[float]:
    times = {v: [] for v in values}
    for _ in range(2):
        for v in values:
            os.environ[var] = v
            times[v].append(fn())
    os.environ[var] = values[0]
    return [statistics.median(times[v]) for v in values]


if os.environ.get("SKIP_VERIFY") != "1":
    print("verify, us: DEFER 0 / 1 (max |o diff|)")
    for R, N, kind in (
        (1, 64, "ddtree"),
        (1, 64, "deep"),
        (1, 16, "chain"),
        (4, 64, "ddtree"),
        (8, 64, "ddtree"),
        (8, 64, "deep"),
        (8, 16, "chain"),
    ):
        inputs, anc, depth = verify_inputs(R, N, kind)
        for cfg in (dict(), dict(BV=32, max_registers=168)) if R == 8 and N == 64 else (dict(),):
            kw = dict(ancestor_mask=anc, max_depth=depth, **cfg)
            outs = {}
            for d in ("0", "1"):
                os.environ["GDN_DEFER"] = d
                outs[d] = tree_gdn_verify_triton(*inputs, **kw)[0].float()
            diff = (outs["0"] - outs["1"]).abs().max().item()
            t = ab("GDN_DEFER", ("0", "1"), lambda kw=kw: graph_us(lambda: tree_gdn_verify_triton(*inputs, **kw), reps=10))
            print(
                f"R={R} N={N} {kind:6s} depth {depth:2d} {cfg or 'default'}: {t[0]:6.2f} / {t[1]:6.2f}  ({diff:.1e})", flush=True
            )

print("commit per layer of 48, us: EARLY 0 / 1, by (BV, warps)")
for R, N in ((1, 64), (8, 64)):
    inputs, anc, depth = verify_inputs(R, N, "ddtree")
    pool, slots = inputs[7], inputs[8]
    _, ctx = tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)
    accepted = torch.full((R, 16), -1, dtype=torch.long, device="cuda")
    accepted[:, 0] = 0
    pools, ctxs = pool[None].repeat(LAYERS, 1, 1, 1, 1), stack_contexts([ctx] * LAYERS)
    ref = pools.clone()
    tree_gdn_commit_triton(ref, slots, ctxs, accepted)
    timed = pools.clone()  # the timing commits again and again in place: pools stays the inputs
    for bv, warps in ((32, 4), (64, 4), (64, 8), (16, 4), (128, 8)):
        os.environ["GDN_COMMIT_BV"], os.environ["GDN_COMMIT_WARPS"] = str(bv), str(warps)
        for e in ("0", "1"):
            os.environ["GDN_EARLY"] = e
            p = pools.clone()
            tree_gdn_commit_triton(p, slots, ctxs, accepted)
            rel = ((p - ref).norm() / ref.norm()).item()
            assert rel < 1e-6, (bv, warps, e, rel)
        t = ab(
            "GDN_EARLY",
            ("0", "1"),
            lambda: graph_us(lambda: tree_gdn_commit_triton(timed, slots, ctxs, accepted), reps=2) / LAYERS,
        )
        print(f"R={R} N={N} BV {bv:3d} warps {warps}: {t[0]:5.2f} / {t[1]:5.2f}", flush=True)
    os.environ["GDN_COMMIT_BV"], os.environ["GDN_COMMIT_WARPS"] = "32", "4"
