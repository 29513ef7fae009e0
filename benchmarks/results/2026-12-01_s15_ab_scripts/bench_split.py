"""Session 15 prototype timing: blocked verify (HEAD) against the split verify, two launches or one."""
import sys, os
sys.path.insert(0, os.getcwd())
import torch
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton
from abtmp.gdn_split import verify_split1, verify_split2

rows = []
for R, N, kind in [(1, 64, "ddtree"), (1, 64, "deep"), (4, 64, "ddtree"), (8, 64, "ddtree"), (8, 64, "deep"), (16, 64, "ddtree")]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    head = lambda: tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)  # noqa: E731
    ref = head()[0].float()
    res = {"head": graph_us(head, reps=10)}
    sync = torch.zeros(1 + R * 24, device="cuda", dtype=torch.int32)
    for BV in (32, 64):
        for name, f, kw in (("s2 t4", verify_split2, {}), ("s2 t8", verify_split2, {"tri_warps": 8}), ("s1", verify_split1, {"sync": sync})):
            run = lambda: f(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, BV=BV, **kw)  # noqa: E731
            o = run()[0].float()
            err = ((o - ref).norm() / ref.norm()).item()
            if err > 1e-3:
                print("MISMATCH", R, N, kind, name, BV, err, flush=True)
            res[f"{name} BV{BV}"] = graph_us(run, reps=10)
    for parts in ("t", "r"):
        run = lambda: verify_split2(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, BV=32 if R == 1 else 64, parts=parts, tri_warps=8)  # noqa: E731
        res[f"part {parts}"] = graph_us(run, reps=10)
    best = min((t, n) for n, t in res.items() if n != "head" and not n.startswith("part"))
    print(f"R={R} N={N} {kind} d{depth}: head {res['head']:.1f}  | " + "  ".join(f"{n} {t:.1f}" for n, t in res.items() if n != "head"), flush=True)
    rows.append((R, N, kind, depth, res["head"], best))
print("== summary")
for R, N, kind, depth, h, (t, n) in rows:
    print(f"R={R:<2d} N={N:<3d} {kind:6s} d{depth:<2d} head {h:6.1f}  split best {t:6.1f} ({n})")
