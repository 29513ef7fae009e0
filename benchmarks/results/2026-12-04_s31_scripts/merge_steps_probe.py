"""Session 31, call 9: where the merge's time goes over a plain read of its partials (call 6: 6.28 against 3.61 us).
One kernel, the merge's grid and tiles (rows BR x columns BD, a program per tile and request x KV head, the splits in
rounds of UNROLL), with the merge's steps switched on one at a time, on call 6's partials (R = 1 x 64 over 4096 tokens,
22 splits, 8.65 MB of bf16, in L2 across graph replays). Graph-timed medians, us:
- STEP 0: the tiles summed, unweighted, stored to contiguous rows;
- STEP 1: + each split's weight e^m from its m (no row max);
- STEP 2: + the row max and the denominator over all splits first (the [splits, BR] loads of m and l), as the merge;
- STEP 3: + the output's rows scattered to (node, head), as the merge;
- STEP 4: + the loop bounded by the request's loaded split count, as the merge (the package's merge: `merge_partials`);
each at the merge's tile (16 x 64, 8 in flight, 4 warps) and at 8 warps with 16 in flight (bytes in flight as call 6's
best plain read).
    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-04_s31_scripts/merge_steps_probe.py"""

import torch
import triton
import triton.language as tl
from merge_floor_probe import random_partials

from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_attention.tree_attention import _split_weight, merge_partials


@triton.jit
def _steps_kernel(o_part, m, l, used_splits, out, N, NS, S1: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr,
                  DH: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr, UNROLL: tl.constexpr, STEP: tl.constexpr):  # fmt: skip
    blk, rh, dblk = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = blk * BR + tl.arange(0, BR)
    live = rows < N * G
    dd = dblk * BD + tl.arange(0, BD)
    mx = tl.zeros([BR], tl.float32)
    den = tl.full([BR], 1.0, tl.float32)
    if STEP >= 2:
        split = tl.arange(0, S1)
        part = (split[:, None] * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows[None, :]
        have = (split[:, None] < NS) & live[None, :]
        ms = tl.load(m + part, mask=have, other=float("-inf"))
        mx = tl.max(ms, axis=0)
        den = tl.sum(_split_weight(ms, mx[None, :]) * tl.load(l + part, mask=have, other=0.0), axis=0)
    bound = NS
    if STEP >= 4:
        bound = tl.load(used_splits + r)
    num = tl.zeros([BR, BD], tl.float32)
    for s0 in range(0, bound, UNROLL):
        for j in tl.static_range(UNROLL):
            p = ((s0 + j) * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows
            ok = live & (s0 + j < bound)
            tile = tl.load(o_part + p[:, None] * DH + dd[None, :], mask=ok[:, None], other=0.0).to(tl.float32)
            if STEP >= 1:
                tile *= _split_weight(tl.load(m + p, mask=ok, other=float("-inf")), mx)[:, None]
            num += tile
    if STEP >= 3:
        node, head = rows // G, hkv * G + rows % G
        dst = ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :]
    else:
        dst = (rh * N * G + rows[:, None]) * DH + dd[None, :]
    tl.store(out + dst, (num / tl.where(live, den, 1.0)[:, None]).to(out.dtype.element_ty), mask=live[:, None])


q, o_part, m, l, used = random_partials()
R, N, HQ, DH = q.shape
HKV, S = m.shape[1] // R, m.shape[0]
out = torch.empty_like(q)
ref = merge_partials(o_part, m, l, used, q)
print(f"| merge_partials | {graph_us(lambda: merge_partials(o_part, m, l, used, q), reps=10):.2f} |", flush=True)
for BR, BD, unroll, warps in ((16, 64, 8, 4), (16, 64, 16, 8), (8, 128, 16, 8)):
    grid = (triton.cdiv(m.shape[2], BR), R * HKV, DH // BD)
    for step in range(5):

        def run(step=step, BR=BR, BD=BD, unroll=unroll, warps=warps, grid=grid):  # noqa: E731
            _steps_kernel[grid](o_part, m, l, used, out, N, S, S1=32, HQ=HQ, HKV=HKV, DH=DH, BR=BR, BD=BD, UNROLL=unroll,
                                STEP=step, num_warps=warps)  # fmt: skip

        run()
        check = f", max |diff| to the merge {(out.float() - ref.float()).abs().max().item():.1e}" if step >= 3 else ""
        print(f"| {BR} x {BD}, {unroll} in flight, {warps} warps | step {step} | {graph_us(run, reps=10):.2f} |{check}",
              flush=True)  # fmt: skip
