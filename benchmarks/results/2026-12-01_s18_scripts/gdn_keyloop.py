"""For session 19: the blocked GDN verify (HEAD) by its key loop's BK and num_stages, graph-timed, at R = 1 and 8;
`once R N` instead: a few eager calls, for Nsight Compute.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s18_scripts/gdn_keyloop.py [once R N]

Why: with the 16-bit key-loop dots (session 18) ptxas spills far less at small BK. sm_90a, R = 8 x 64: BK 64 / 1
stage (the default) 296 B of spill stores, about 6,570 instructions executed a thread (static count plus the loops'
extra iterations: key loop 780 x 2, level loop 259 x 5 at depth 6); BK 32 260 B, about 6,480; BK 16 24 B, about
6,190. R = 1 x 64: BK 64 40 B, BK 16 8 B. With gdn_fast_gates.patch, R = 8 x 64: BK 64 80 B, about 6,040; BK 16 28 B,
about 5,710.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gdn_tiles import once, sweep  # noqa: E402

if sys.argv[1:2] == ["once"]:
    sys.exit(once(int(sys.argv[2]), int(sys.argv[3])))
configs = [(None, None), (64, 2), (32, 1), (32, 2), (16, 1), (16, 2)]
cases = [(1, 33, "ddtree"), (1, 64, "ddtree"), (1, 65, "ddtree"), (8, 64, "ddtree"), (8, 65, "ddtree"), (8, 65, "deep")]
sweep(cases, [("default" if bk is None else f"BK{bk} s{st}", dict(BK=bk, num_stages=st)) for bk, st in configs])
