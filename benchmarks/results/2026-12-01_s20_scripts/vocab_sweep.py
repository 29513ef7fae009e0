"""Session 20: the chunk statistics (draft_topk's first launch) by entries a program and warps, CUDA-graph timed.

Rows M = R * 15 of bf16 logits, V = 248,320, CHUNK 256 (the package's for k = 64). `G` is chunks a program in one
load (the package: 16, i.e. GROUP 4096, 8 warps); `SUB` > 1 loops over SUB such loads a program. Each variant's
maxima must equal the package's and its sums agree to 1e-5; the whole draft_log_probs is timed last as the anchor.
"""

import torch
import triton
import triton.language as tl

from benchmarks.timing import graph_us
from sglang_dflash.kernels.vocab import draft_topk


@triton.jit
def _stats_sub(x, cmax, csum, V, C, CHUNK: tl.constexpr, G: tl.constexpr, SUB: tl.constexpr):
    m, g = tl.program_id(0).to(tl.int64), tl.program_id(1)
    for s in tl.static_range(SUB):
        c = (g * SUB + s) * G + tl.arange(0, G)
        o = c[:, None] * CHUNK + tl.arange(0, CHUNK)[None, :]
        v = tl.load(x + m * V + o, mask=o < V, other=float("-inf")).to(tl.float32)
        mx = tl.max(v, axis=1)
        e = tl.math.exp2(v * 1.4426950408889634 - (mx * 1.4426950408889634)[:, None])
        tl.store(cmax + m * C + c, mx, mask=c < C)
        tl.store(csum + m * C + c, tl.sum(e, axis=1), mask=c < C)


def main() -> None:
    V, CHUNK, k = 248_320, 256, 64
    C = triton.cdiv(V, CHUNK)
    print(torch.cuda.get_device_name(), triton.__version__)
    for R in (8, 1):
        M = R * 15
        x = (torch.randn(M, V, device="cuda") * 4).bfloat16()
        ref_m, ref_s = torch.empty(M, C, device="cuda"), torch.empty(M, C, device="cuda")
        draft_topk._chunk_stats_kernel[(M, triton.cdiv(C, 16))](x, ref_m, ref_s, V, C, CHUNK=CHUNK, G=16, num_warps=8)
        row = []
        for G, SUB, warps in [(16, 1, 8), (16, 1, 4), (8, 1, 4), (32, 1, 8), (32, 1, 4), (64, 1, 8), (16, 2, 8),
                              (16, 4, 8), (16, 4, 4), (8, 4, 4), (32, 2, 8), (16, 8, 8)]:  # fmt: skip
            cm, cs = torch.empty_like(ref_m), torch.empty_like(ref_s)
            grid = (M, triton.cdiv(C, G * SUB))
            fn = lambda: _stats_sub[grid](x, cm, cs, V, C, CHUNK=CHUNK, G=G, SUB=SUB, num_warps=warps)  # noqa: E731
            us = graph_us(fn, reps=20)
            ok = torch.equal(cm, ref_m) and ((cs - ref_s).abs() / ref_s.abs()).max().item() < 1e-5
            row.append(f"G{G}xS{SUB}/w{warps} {us:5.1f}{'' if ok else ' BAD'}")
        whole = graph_us(lambda: draft_topk.draft_log_probs(x, k), reps=10)
        print(f"R={R} M={M}: whole draft_log_probs {whole:.1f} | chunk stats: " + "  ".join(row), flush=True)


if __name__ == "__main__":
    main()
