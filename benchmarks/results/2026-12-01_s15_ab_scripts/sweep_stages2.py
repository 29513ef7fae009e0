"""Session 15, call 5: BK and num_stages of the blocked verify (all its paths) and of the gather verify's launches."""
import sys, os
sys.path.insert(0, os.getcwd())
import torch, triton
from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn import tree_gdn as tg, tree_gdn_gather as tgg, gather_tables
from sglang_dflash.kernels.tree_build.naive import ancestors

def fused(inputs, anc, BK, stages, block_nodes=None):
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    root, NB, blocks = tg.verify_blocks(N, q.device, block_nodes)
    BV = min(V, 32 if blocks > 1 else tg._default_tile(q.device, R * HV * triton.cdiv(V, 32)))
    q, k, v, scale, raw, G, o, u = tg._verify_io(q, k, v, None)
    a2 = anc.view(torch.int8)[..., root:]
    tg._tree_gdn_fused_kernel[(V // BV, R * HV)](
        q, k, v, a, b, A_log, dt_bias, pool, slots, a2, G, o, u, N, a2.stride(1), scale, q.stride(1), v.stride(1),
        H=H, HV=HV, K=K, V=V, NB=NB, BV=BV, PRECISION="tf32x3", RAW_DOTS=raw, BK=BK, BLOCKS=blocks > 1,
        PAIRED=int(NB <= 32), ROOT=root, num_warps=4, num_stages=stages)
    return o

CONFIGS = [(32, 3), (32, 1), (64, 1), (64, 2), (128, 1)]
for R, N, kind, bn in [(1, 16, "chain", None), (1, 16, "ddtree", None), (1, 33, "ddtree", None), (1, 64, "ddtree", None),
                       (1, 64, "deep", None), (1, 65, "ddtree", None), (1, 65, "deep", None), (1, 100, "chain", None),
                       (4, 64, "ddtree", None), (4, 65, "ddtree", None), (8, 64, "ddtree", None), (8, 64, "deep", None),
                       (8, 65, "ddtree", None), (8, 16, "chain", None), (16, 64, "ddtree", None), (1, 65, "ddtree", 16),
                       (8, 65, "ddtree", 16), (1, 16, "chain", 16)]:
    inputs, anc, depth = verify_inputs(R, N, kind)
    if bn:
        anc = tg.aligned_ancestor_mask(ancestors(inputs[-1], depth), first=tg.verify_blocks(N, anc.device, bn)[0])
    ref = fused(inputs, anc, 32, 3, bn).float()
    line = []
    for BK, st in CONFIGS:
        o = fused(inputs, anc, BK, st, bn).float()
        d = ((o - ref).norm() / ref.norm()).item()
        line.append(f"BK{BK}/s{st} {graph_us(lambda: fused(inputs, anc, BK, st, bn), reps=10):.1f}" + (f" (d {d:.0e})" if d > 1e-4 else ""))
    print(f"blocked R={R} N={N} {kind} d{depth}{' NB ' + str(bn) if bn else ''}: " + "  ".join(line), flush=True)

def gather(inputs, tables, BK, stages):
    q, k, v, a, b, A_log, dt_bias, pool, slots, parents = inputs
    R, N, H, K = q.shape
    HV, V = v.shape[2], v.shape[3]
    BV, NC = 32, 16
    table, order, items, step_nodes = tables
    T, D = items.shape[1] - 1, table.shape[2]
    q, k, v, scale, raw, G, o, u = tg._verify_io(q, k, v, None)
    f32 = dict(device=q.device, dtype=torch.float32)
    gs, ck, cq = torch.empty(R, HV, N, 4, **f32), torch.empty(R, HV, N, D, **f32), torch.empty(R, HV, N, D, **f32)
    common = dict(H=H, HV=HV, K=K, D=D, BK=BK)
    chunks = triton.cdiv(N, NC)
    hpp = HV // H if chunks * R * H >= 2 * 132 else 1
    tgg._coeffs_kernel[(chunks, R * HV // hpp)](
        q, k, v, a, b, A_log, dt_bias, pool, slots, table, G, gs, ck, cq, u, N, scale,
        q.stride(1), v.stride(1), V=V, NC=NC, BVR=min(V, 64), RAW_DOTS=raw, HVB=hpp, num_warps=4, num_stages=stages, **common)
    tgg._solve_kernel[(V // BV, R * HV)](table, order, items, ck, u, N, T, HV=HV, V=V, D=D, NC=step_nodes, BV=BV,
                                         num_warps=8 if step_nodes >= 32 else 4)
    tgg._output_kernel[(chunks, V // BV, R * HV)](q, pool, slots, table, gs, cq, u, o, N, q.stride(1), V=V, NC=NC, BV=BV,
                                                  RAW_DOTS=raw, num_warps=4, num_stages=stages, **common)
    return o

for R, N in [(1, 129), (1, 257), (8, 129), (4, 257)]:
    inputs, anc, depth = verify_inputs(R, N, "ddtree")
    tables = gather_tables(anc, 15)
    ref = gather(inputs, tables, 32, 3).float()
    line = []
    for BK, st in CONFIGS:
        o = gather(inputs, tables, BK, st).float()
        d = ((o - ref).norm() / ref.norm()).item()
        line.append(f"BK{BK}/s{st} {graph_us(lambda: gather(inputs, tables, BK, st), reps=10):.1f}" + (f" (d {d:.0e})" if d > 1e-4 else ""))
    print(f"gather R={R} N={N}: " + "  ".join(line), flush=True)
