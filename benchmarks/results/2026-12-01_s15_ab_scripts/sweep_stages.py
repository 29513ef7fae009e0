"""Session 15: the verify kernels' key loop, BK and num_stages swept (HEAD's fused kernel, the split's two parts)."""
import sys, os
sys.path.insert(0, os.getcwd())
import torch, triton
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import tree_gdn as tg
from abtmp.gdn_split import verify_split2

def fused(inputs, anc, depth, BK, stages, BV=None):
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    root, NB, blocks = tg.verify_blocks(N, q.device)
    BV = BV or min(V, tg._default_tile(q.device, R * HV * triton.cdiv(V, 32)))
    q, k, v, scale, raw, G, o, u = tg._verify_io(q, k, v, None)
    a2 = anc.view(torch.int8)[..., root:]
    tg._tree_gdn_fused_kernel[(V // BV, R * HV)](
        q, k, v, a, b, A_log, dt_bias, pool, slots, a2, G, o, u, N, a2.stride(1), scale, q.stride(1), v.stride(1),
        H=H, HV=HV, K=K, V=V, NB=NB, BV=BV, PRECISION="tf32x3", RAW_DOTS=raw, BK=BK, BLOCKS=blocks > 1,
        PAIRED=int(NB <= 32), ROOT=root, num_warps=4, num_stages=stages)
    return o

for R, N, kind in [(1, 64, "ddtree"), (1, 16, "chain"), (8, 64, "ddtree"), (8, 64, "deep"), (1, 65, "ddtree")]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref = tg.tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)[0].float()
    line = []
    for BK in (16, 32, 64):
        for st in (1, 2, 3, 4):
            try:
                o = fused(inputs, anc, depth, BK, st).float()
                assert ((o - ref).norm() / ref.norm()).item() < 1e-3
                line.append(f"BK{BK}/s{st} {graph_us(lambda: fused(inputs, anc, depth, BK, st), reps=10):.1f}")
            except Exception as ex:
                line.append(f"BK{BK}/s{st} FAIL {type(ex).__name__}")
    print(f"fused R={R} N={N} {kind}: " + "  ".join(line), flush=True)
    if N != 64 or kind == "chain":
        continue
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    BV = 32 if R == 1 else 64
    for part in ("r", "t"):
        line = []
        for BK in (16, 32, 64, 128):
            for st in (1, 2, 3):
                kw = dict(BK=BK, stages=st) if part == "r" else dict(tri_BK=BK, tri_stages=st)
                try:
                    line.append(f"BK{BK}/s{st} {graph_us(lambda: verify_split2(q, k, v, a, b, A_log, dt_bias, pool, slots, anc, BV=BV, parts=part, **kw), reps=10):.1f}")
                except Exception as ex:
                    line.append(f"BK{BK}/s{st} FAIL {type(ex).__name__}")
        print(f"split part {part} R={R} {kind}: " + "  ".join(line), flush=True)
