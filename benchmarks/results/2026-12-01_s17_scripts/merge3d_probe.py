"""Session 17: the tree attention's merge with every split's partial loaded at once ([S1, BR, BD] per program, small
column tiles, so many programs and all their loads in flight) against the launched merge (rounds of 8 splits), on
the same partials; then the whole attention with each. R = 1 x 16 / 64 and R = 8 x 64 nodes over 4096 tokens.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s17_scripts/merge3d_probe.py
"""

import importlib

import torch
import triton
import triton.language as tl

from benchmarks.kernels.bench_tree_attention import attention_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_attention import tree_attention

mod = importlib.import_module("sglang_dflash.kernels.tree_attention.tree_attention")


@triton.jit
def _merge3d_kernel(o_part, m, l, out, N, NS, S1: tl.constexpr, HQ: tl.constexpr, HKV: tl.constexpr,
                    DH: tl.constexpr, BR: tl.constexpr, BD: tl.constexpr):  # fmt: skip
    blk, rh, dblk = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    G: tl.constexpr = HQ // HKV
    r, hkv = (rh // HKV).to(tl.int64), rh % HKV
    rows = blk * BR + tl.arange(0, BR)
    live = rows < N * G
    dd = dblk * BD + tl.arange(0, BD)
    split = tl.arange(0, S1)
    part = (split[:, None] * tl.num_programs(1) + rh).to(tl.int64) * N * G + rows[None, :]  # [S1, BR]
    have = (split[:, None] < NS) & live[None, :]
    tiles = tl.load(o_part + part[:, :, None] * DH + dd[None, None, :], mask=have[:, :, None], other=0.0)
    ms = tl.load(m + part, mask=have, other=float("-inf"))
    mx = tl.max(ms, axis=0)
    w = mod._split_weight(ms, mx[None, :], tl.load(l + part, mask=have, other=0.0))  # [S1, BR]
    num = tl.sum(w[:, :, None] * tiles.to(tl.float32), axis=0)
    den = tl.where(live, tl.sum(w, axis=0), 1.0)
    node, head = rows // G, hkv * G + rows % G
    dst = ((r * N + node[:, None]) * HQ + head[:, None]) * DH + dd[None, :]
    tl.store(out + dst, (num / den[:, None]).to(out.dtype.element_ty), mask=live[:, None])


def merge3d(o_part, m, l, q, BR, BD, warps):
    R, N, HQ, DH = q.shape
    NS, RHKV = m.shape[:2]
    out = torch.empty_like(q)
    grid = (triton.cdiv(m.shape[2], BR), RHKV, DH // BD)
    _merge3d_kernel[grid](o_part, m, l, out, N, NS, S1=triton.next_power_of_2(NS), HQ=HQ, HKV=RHKV // R, DH=DH,
                          BR=BR, BD=BD, num_warps=warps)  # fmt: skip
    return out


CONFIGS = [(16, 16, 4), (16, 32, 4), (8, 32, 4), (8, 16, 4), (16, 16, 8), (32, 16, 4), (4, 64, 4), (16, 32, 8)]
merge = mod.merge_partials
for R, N in [(1, 16), (1, 64), (8, 64)]:
    args, _ = attention_inputs(R, N, torch.Generator(device="cuda").manual_seed(R * 100 + N))
    seen = {}
    mod.merge_partials = lambda o, m, l, q: seen.setdefault("p", (o, m, l, q)) and merge(o, m, l, q)
    ref = tree_attention(*args)
    mod.merge_partials = merge
    o_part, m, l, q = seen["p"]
    line = [f"launched {graph_us(lambda: merge(o_part, m, l, q), reps=10):.1f}"]
    whole = [f"launched {graph_us(lambda: tree_attention(*args), reps=10):.1f}"]
    for BR, BD, warps in CONFIGS:
        f = lambda BR=BR, BD=BD, warps=warps: merge3d(o_part, m, l, q, BR, BD, warps)  # noqa: E731
        try:
            d = (f().float() - ref.float()).abs().max().item()
            line.append(f"{BR}x{BD}/w{warps} {graph_us(f, reps=10):.1f} (d {d:.0e})")
            mod.merge_partials = lambda o, mm, ll, qq, BR=BR, BD=BD, warps=warps: merge3d(o, mm, ll, qq, BR, BD, warps)
            whole.append(f"{BR}x{BD}/w{warps} {graph_us(lambda: tree_attention(*args), reps=10):.1f}")
        except Exception as e:  # noqa: BLE001
            line.append(f"{BR}x{BD}/w{warps} fail {type(e).__name__}: {str(e)[:80]}")
        finally:
            mod.merge_partials = merge
    print(f"R={R} N={N} partials {tuple(m.shape)}: merge alone, us: " + "  ".join(line), flush=True)
    print(f"R={R} N={N} whole attention, us: " + "  ".join(whole), flush=True)
