"""Prepared in session 25 (not run): the blocked GDN verify at R = 8 x 64 by V tile, default warps, no register cap,
for whichever `sglang_dflash` comes first on PYTHONPATH (run it once for ab/main, once for ab/new): whether
`nodes_constexpr.patch`'s build without spills at BV 32 (251 registers: 2 programs an SM, 768 programs) beats the
default BV 64 (1.45 waves of 384). PYTHONPATH=ab/new:$PWD python3 gdn_r8_bv.py"""

import sglang_dflash

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us, settle
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

print(sglang_dflash.__file__)
settle()
for R, N, kind in ((8, 64, "ddtree"), (8, 64, "deep"), (4, 64, "ddtree"), (8, 65, "ddtree")):
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref, _ = tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)
    for bv in (None, 32, 64):
        kw = dict(ancestor_mask=anc, max_depth=depth, BV=bv, max_registers=0)
        o, _ = tree_gdn_verify_triton(*inputs, **kw)
        d = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
        t = graph_us(lambda kw=kw: tree_gdn_verify_triton(*inputs, **kw), reps=10)
        print(f"R={R} N={N} {kind} depth {depth} | BV {bv or 'default'}: {t:6.2f} us (d {d:.0e})", flush=True)
