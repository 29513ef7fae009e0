"""The blocked GDN verify at R = 8 x 64 (and R = 4 x 64) by V tile, warps and ptxas's register cap: whether more
programs an SM (fewer registers each) beat the default's 1.45 waves of 2 programs an SM (BV 64, 4 warps, 255 regs).
PYTHONPATH=$PWD python3 gdn_r8_tiles.py"""

from benchmarks.kernels.bench_tree_gdn import verify_inputs
from benchmarks.timing import graph_us
from sglang_dflash.kernels.tree_gdn.tree_gdn import tree_gdn_verify_triton

CONFIGS = [(None, None, None), (32, 4, 168), (32, 4, 128), (64, 4, 168), (64, 8, 128), (64, 8, 0), (128, 8, 0)]
for R, N, kind in ((8, 64, "ddtree"), (8, 64, "deep"), (4, 64, "ddtree")):
    inputs, anc, depth = verify_inputs(R, N, kind)
    ref, _ = tree_gdn_verify_triton(*inputs, ancestor_mask=anc, max_depth=depth)
    cols = []
    for bv, warps, cap in CONFIGS:
        kw = dict(ancestor_mask=anc, max_depth=depth, BV=bv, num_warps=warps, max_registers=cap)
        try:
            o, _ = tree_gdn_verify_triton(*inputs, **kw)
            d = ((o.float() - ref.float()).norm() / ref.float().norm()).item()
            t = graph_us(lambda kw=kw: tree_gdn_verify_triton(*inputs, **kw), reps=10)
            cols.append(f"BV {bv or 'def'} w{warps or 'def'} cap {cap}: {t:6.2f} (d {d:.0e})")
        except Exception as e:  # noqa: BLE001 - a configuration that does not build is a result
            cols.append(f"BV {bv} w{warps} cap {cap}: {type(e).__name__}")
        print(f"R={R} N={N} {kind} depth {depth} | {cols[-1]}", flush=True)
