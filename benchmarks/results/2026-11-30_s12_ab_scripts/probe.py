"""Session 12 probe: where the vocabulary pass and the tree build spend their time (R = 8, B = 64)."""
import torch, triton, sys, os
sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us
from benchmarks.bench_ddtree import copy_bandwidth
from sglang_dflash.kernels.vocab import draft_topk as dt
from sglang_dflash.kernels.tree_build import tree_build

V = 248_320
bw = copy_bandwidth()
print(f"copy bandwidth {bw/1e12:.2f} TB/s (read+write)")
for M in (120, 15):
    x = (torch.randn(M, V, device="cuda") * 4).bfloat16()
    floor = 2 * x.numel() / (bw / 2) * 1e6
    print(f"M={M}: read floor {floor:.1f} us; torch.amax {graph_us(lambda: torch.amax(x, -1)):.1f}")
    CHUNK = 256; C = triton.cdiv(V, CHUNK)
    cmax = torch.empty(M, C, device="cuda"); csum = torch.empty_like(cmax)
    for G in (16, 32, 64):
        for w in (4, 8, 16):
            f = lambda: dt._chunk_stats_kernel[(M, triton.cdiv(C, G))](x, cmax, csum, V, C, CHUNK=CHUNK, G=G, num_warps=w)
            print(f"  chunk_stats G={G:3d} warps={w:2d}: {graph_us(f):6.1f}")
    k = 64; KC = 64; CAP = dt.CAP_BLOCKS * KC
    args = [torch.empty(M, KC, device="cuda", dtype=torch.int32), torch.empty(M, CAP, device="cuda", dtype=torch.int64),
            torch.empty(M, k, device="cuda"), torch.empty(M, k, device="cuda", dtype=torch.long), torch.empty(M, device="cuda")]
    for w in (4, 8, 16):
        f = lambda: dt._row_topk_kernel[(M,)](x, cmax, csum, *args, V, C, k, -1e4, CHUNK=CHUNK, CC=1024, KC=KC, G=16, CAP=CAP, num_warps=w)
        print(f"  row_topk warps={w}: {graph_us(f):6.1f}")
    print(f"  draft_log_probs: {graph_us(lambda: dt.draft_log_probs(x, 64)):6.1f}")

for R, B in ((8, 64), (8, 16), (1, 64)):
    for L in (1, 2, 4, 8, 15):
        logp = torch.randn(R, L, 64, device="cuda").abs().cumsum(-1).neg()[..., :B].contiguous()
        ids = torch.randint(0, V, (R, L, B), device="cuda")
        roots = torch.zeros(R, dtype=torch.long, device="cuda")
        print(f"tree_build R={R} B={B} L={L:2d}: {graph_us(lambda: tree_build(logp, ids, roots, B)):6.1f}")
