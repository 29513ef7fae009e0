"""Session 19: the blocked GDN verify (HEAD) with ptxas's register cap (Triton's `maxnreg` launch option) by V tile,
graph-timed. Why: at R = 8 x 64 (BV 64, 4 warps, 255 registers) two programs fit an SM, so 384 programs are 1.45
waves on 132 SMs; at 168 registers three fit (0.97 waves), at the price of spills (ptxas sm_90a, R = 8 x 64, BV 64:
232 registers 268 B of spill stores, 200 632 B, 168 1,244 B; BV 32: 200 44 B, 168 320 B, 128 1,176 B).

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s19_scripts/gdn_maxnreg.py
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-01_s18_scripts"))
import gdn_tiles  # noqa: E402

import sglang_dflash.kernels.tree_gdn.tree_gdn as tg  # noqa: E402

kernel, cap = tg._tree_gdn_fused_kernel, {"maxnreg": None}


class Capped:
    """The verify kernel, launched with the current register cap (none: as the package launches it)."""

    def __getitem__(self, grid):
        launch = kernel[grid]
        return lambda *a, **kw: launch(*a, **kw, **({"maxnreg": cap["maxnreg"]} if cap["maxnreg"] else {}))


def verify(*args, maxnreg=None, **kw):
    cap["maxnreg"] = maxnreg
    return tg.tree_gdn_verify_triton(*args, **kw)


tg._tree_gdn_fused_kernel = Capped()
gdn_tiles.tree_gdn_verify_triton = verify
cases = [(1, 64, "ddtree"), (4, 64, "ddtree"), (8, 64, "ddtree"), (8, 65, "ddtree"), (8, 65, "deep"), (8, 16, "chain")]
configs = [("default", {})] + [(f"cap{m}", dict(maxnreg=m)) for m in (232, 200, 168)]
configs += [(f"BV{bv} cap{m}", dict(BV=bv, maxnreg=m)) for bv, m in ((64, 168), (32, 200), (32, 168), (32, 128))]
gdn_tiles.sweep(cases, configs)
