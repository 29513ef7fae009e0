"""Session 20: what one depth of the tree build's beam loop costs, by key width and sort size (H200, one program a
request as the build runs, R = 8).

Each kernel runs ITERS dependent steps of the build's loop body: the candidates' scores from the beam (a register
gather by the pairs' beam ranks, plus token log-probabilities), keys, one tl.topk / tl.sort, the beam back from the
winners. `64-bit` is the package's (order-preserving score bits << 32 | reversed pair index, PP = 256 -> 64); `32-bit`
packs the score's top 24 bits with an 8-bit reversed pair index (what an exact fast path with a near-tie fallback
would sort); `sort64` is a full sort of 64 int64 keys (the size a pruned depth would need). us per step = (time at
ITERS = 15 - time at ITERS = 1) / 14; the package's tree_build at the same shapes is the anchor.
"""

import torch
import triton
import triton.language as tl

from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_build.tree_build import _ordered, _pattern_i32, _unordered, tree_build


@triton.jit
def _steps(lp, pat_i, pat_j, out, P, ITERS, PP: tl.constexpr, BB: tl.constexpr, MODE: tl.constexpr):
    r = tl.program_id(0)
    p = tl.arange(0, PP)
    pm = p < P
    pi = tl.load(pat_i + p, mask=pm, other=0)
    pj = tl.load(pat_j + p, mask=pm, other=0)
    b = tl.arange(0, BB)
    beam = tl.load(lp + r * BB + b)
    low = (PP - 1 - p).to(tl.int64)
    for d in range(ITERS):
        tok = tl.load(lp + r * BB + pj, mask=pm, other=0.0) * (d + 1)
        cand = tl.where(pm, tl.gather(beam, pi, 0) + tok, float("-inf"))
        if MODE == 0:
            top = tl.topk((_ordered(cand).to(tl.int64) << 32) | low, BB)
            beam = _unordered((top >> 32).to(tl.int32))
        elif MODE == 1:
            top = tl.topk((_ordered(cand) & ~0xFF) | (PP - 1 - p), BB)
            beam = _unordered(top & ~0xFF)
        else:  # the first BB candidates only, fully sorted
            c = tl.gather(cand, b, 0)
            top = tl.sort((_ordered(c).to(tl.int64) << 32) | (BB - 1 - b).to(tl.int64), descending=True)
            beam = _unordered((top >> 32).to(tl.int32))
    tl.store(out + r * BB + b, beam)


def main() -> None:
    R, L, B = 8, 15, 64
    dev = "cuda"
    print(torch.cuda.get_device_name(), triton.__version__)
    lp = -torch.rand(R, L, B, device=dev).sort(-1, descending=True).values.cumsum(-1) * 0.1
    ids = torch.randint(0, 1000, (R, L, B), device=dev)
    roots = torch.zeros(R, dtype=torch.long, device=dev)
    pat_i, pat_j = _pattern_i32(B, B, torch.device(dev))
    P = pat_i.numel()
    out = torch.empty(R, B, device=dev)
    rows = [f"tree_build R={R} B={B} L={L}: {graph_us(lambda: tree_build(lp, ids, roots, B), reps=20):.1f} us"]
    for name, mode in (("64-bit", 0), ("32-bit", 1), ("sort64", 2)):
        for warps in (4, 8):
            t = {}
            for iters in (1, 15):
                t[iters] = graph_us(
                    lambda: _steps[(R,)](lp[:, 0], pat_i, pat_j, out, P, iters, PP=256, BB=B, MODE=mode, num_warps=warps),
                    reps=20,
                )
            rows.append(f"{name} {warps} warps: {(t[15] - t[1]) / 14:.2f} us a step (1 step {t[1]:.1f}, 15 steps {t[15]:.1f})")
    print("\n".join(rows))


if __name__ == "__main__":
    main()
