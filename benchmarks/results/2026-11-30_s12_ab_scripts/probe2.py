"""Session 12 probe 2: the row top-k's phases (new kernel), the old kernel beside it, at M = 120 and 15, k = 64."""
import sys, os, torch, triton
import triton.language as tl
sys.path.insert(0, os.getcwd())
from benchmarks.timing import graph_us
from sglang_dflash.kernels.vocab import draft_topk as dt
from sglang_dflash.kernels.vocab.draft_topk import _token_key, _merge_block
from sglang_dflash.kernels.tree_build.tree_build import _ordered, _unordered


@triton.jit
def _phased(x, cmax, csum, sel, cand, logp, ids, lse, V, C, K, FLOOR, CHUNK: tl.constexpr, CC: tl.constexpr,
            KC: tl.constexpr, G: tl.constexpr, CAP: tl.constexpr, PHASE: tl.constexpr, F32: tl.constexpr):
    m = tl.program_id(0).to(tl.int64)
    PAD: tl.constexpr = -9187343239835811840
    c = tl.arange(0, CC)
    cm = c < C
    mx = tl.load(cmax + m * C + c, mask=cm, other=float("-inf"))
    s = tl.load(csum + m * C + c, mask=cm, other=0.0)
    row_max = tl.max(mx, axis=0)
    row_lse = row_max + tl.log(tl.sum(tl.where(mx == float("-inf"), 0.0, s * tl.exp(mx - row_max)), axis=0))
    tl.store(lse + m, row_lse)
    t = tl.arange(0, KC)
    if PHASE >= 1:
        if F32:
            top = tl.topk(mx, KC)
            tl.store(sel + m * KC + t, top.to(tl.int32, bitcast=True))
        else:
            top = tl.topk((_ordered(mx).to(tl.int64) << 32) | tl.where(cm, CC - 1 - c, 0).to(tl.int64), KC)
            chunks = (CC - 1) - (top & 0x7FFFFFFF).to(tl.int32)
            tl.store(sel + m * KC + t, chunks, mask=t < K)
            tau = _unordered((tl.max(tl.where(t == K - 1, top, PAD), axis=0) >> 32).to(tl.int32))
    if PHASE >= 2:
        tl.debug_barrier()
        g = tl.arange(0, G)
        e = tl.arange(0, CHUNK)
        o = chunks[:, None].to(tl.int64) * CHUNK + e[None, :]
        ok = (t < K)[:, None] & (o < V)
        v = tl.load(x + m * V + o, mask=ok, other=float("-inf")).to(tl.float32)
        hit = (ok & (v >= tau)).to(tl.int32)
        per_chunk = tl.sum(hit, axis=1)
        pos = (tl.cumsum(per_chunk, axis=0) - per_chunk)[:, None] + tl.cumsum(hit, axis=1) - hit
        tl.store(cand + m * CAP + pos, _token_key(v, o), mask=(hit > 0) & (pos < CAP))
        count = tl.sum(per_chunk, axis=0)
        tl.store(ids + m * K, count)
    if PHASE >= 3:
        tl.debug_barrier()
        over = count > CAP
        n = tl.where(over, K * CHUNK, count)
        best = tl.topk(_merge_block(x, cand, sel, m, 0, n, over, V, CHUNK, KC, CAP), KC)
        lp = _unordered((best >> 32).to(tl.int32)) - row_lse
        tl.store(logp + m * K + t, tl.where(lp < FLOOR, FLOOR, lp), mask=t < K)
        tl.store(ids + m * K + t, tl.where(best == PAD, 0, 2147483647 - (best & 0x7FFFFFFF)), mask=t < K)


V = 248_320
for M in (120, 15):
    x = (torch.randn(M, V, device="cuda") * 4).bfloat16()
    CHUNK, k, KC = 256, 64, 64
    C = triton.cdiv(V, CHUNK)
    CAP = dt.CAP_BLOCKS * KC
    cmax = torch.empty(M, C, device="cuda"); csum = torch.empty_like(cmax)
    dt._chunk_stats_kernel[(M, triton.cdiv(C, 16))](x, cmax, csum, V, C, CHUNK=CHUNK, G=16, num_warps=8)
    bufs = [torch.empty(M, KC, device="cuda", dtype=torch.int32), torch.empty(M, CAP, device="cuda", dtype=torch.int64),
            torch.empty(M, k, device="cuda"), torch.empty(M, k, device="cuda", dtype=torch.long), torch.empty(M, device="cuda")]
    print(f"M={M}", end="")
    for phase, f32 in ((0, False), (1, True), (1, False), (2, False), (3, False)):
        for w in (8, 16):
            f = lambda: _phased[(M,)](x, cmax, csum, *bufs, V, C, k, -1e30, CHUNK=CHUNK, CC=1024, KC=KC, G=KC, CAP=CAP,
                                      PHASE=phase, F32=f32, num_warps=w)
            print(f"\n  phase {phase}{' f32' if f32 else ''} warps {w}: {graph_us(f, reps=10):6.1f}", end="")
    ref = dt.draft_log_probs(x, k)
    print(f"\n  new draft_log_probs: {graph_us(lambda: dt.draft_log_probs(x, k), reps=10):6.1f}")

from sglang_dflash.kernels.tree_build import tree_build
for R, B in ((8, 64), (1, 64), (8, 16)):
    logp = torch.randn(R, 15, B, device="cuda").abs().cumsum(-1).neg().contiguous()
    ids = torch.randint(0, V, (R, 15, B), device="cuda")
    roots = torch.zeros(R, dtype=torch.long, device="cuda")
    print(f"tree_build R={R} B={B}: " + "  ".join(
        f"w{w} {graph_us(lambda: tree_build(logp, ids, roots, B, num_warps=w), reps=10):.1f}" for w in (1, 2, 4, 8, 16)))
