"""Session 31, call 6: what reading the tree attention's partials costs, against the merge. At R = 1 x 64 nodes over
4096 tokens (12 / 2 heads, head dim 256, 22 splits) the merge reads 8.6 MB of bf16 partials, which the attention
kernel has just written (so from L2: graph replays keep them there, as in a step). Graph-timed medians, us:
- the package's merge on random partials (`merge_partials`);
- torch's sum over the splits of the same partials (reads them, writes one output);
- a Triton kernel that only streams the partials (each program sums a contiguous range; 1, 2, 4 or 8 programs an SM,
  4 or 8 warps, 8 to 32 KB a load) and stores one value a program: the cost of the read alone;
- an empty Triton kernel (the launch).
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s31_scripts/merge_floor_probe.py"""

import torch
import triton
import triton.language as tl

from benchmarks.timing import graph_us
from sglang_dflash.kernels import device as gpu
from sglang_dflash.kernels.tree_attention.tree_attention import merge_partials, partials


@triton.jit
def _stream(x, out, n, per, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    acc = tl.zeros([BLOCK], tl.float32)
    for i0 in range(pid * per, tl.minimum(pid * per + per, n), BLOCK):
        i = i0 + tl.arange(0, BLOCK)
        acc += tl.load(x + i, mask=i < n, other=0.0).to(tl.float32)
    tl.store(out + pid, tl.sum(acc, axis=0))


@triton.jit
def _empty(out):
    pass


R, N, HQ, HKV, DH, S = 1, 64, 12, 2, 256, 22


def random_partials():
    """(q, and `partials`' buffers filled at random, every split used) of R = 1 x 64 over 4096 tokens: S = 22 splits."""
    q = torch.randn(R, N, HQ, DH, device="cuda").bfloat16()
    o_part, m, l, used = partials(q, HKV, S)
    o_part.normal_()
    m.normal_()
    l.uniform_(1.0, 2.0)
    used.fill_(S)
    return q, o_part, m, l, used


def main() -> None:
    q, o_part, m, l, used = random_partials()
    flat = o_part.view(-1)
    sms = gpu.multiprocessor_count(q.device)
    print(f"partials {o_part.numel() * 2 / 1e6:.2f} MB, {sms} SMs")
    out = torch.empty(64 * sms, device="cuda")
    print(f"| merge_partials | {graph_us(lambda: merge_partials(o_part, m, l, used, q), reps=10):.2f} |", flush=True)
    print(f"| torch sum over the splits | {graph_us(lambda: o_part.sum(0), reps=10):.2f} |", flush=True)
    print(f"| empty Triton kernel | {graph_us(lambda: _empty[(sms,)](out), reps=10):.2f} |", flush=True)
    for k in (1, 2, 4, 8):
        for warps, block in ((4, 4096), (8, 8192), (8, 16384)):
            P = k * sms
            per = triton.cdiv(triton.cdiv(flat.numel(), P), block) * block
            t = graph_us(lambda: _stream[(P,)](flat, out, flat.numel(), per, BLOCK=block, num_warps=warps), reps=10)
            print(f"| stream, {k} programs an SM, {warps} warps, {block} a load | {t:.2f} | "
                  f"{flat.numel() * 2 / t / 1e6:.2f} TB/s |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
