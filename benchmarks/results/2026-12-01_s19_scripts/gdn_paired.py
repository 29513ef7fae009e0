"""For session 20: the blocked GDN verify in blocks of 64 with levels of two depths (`paired=True`) against one depth a
level (the default there since session 15, when pairing spilled registers), graph-timed. Since the 16-bit key loop
and the MUFU gates the build has fewer live values; ptxas (Triton 3.8, sm_90a) still spills with pairing: R = 1 x 64
284 B (16 unpaired), R = 8 x 64 544 B (80). At R = 1 the verify is latency-bound and a depth-4 tree takes 2 level
steps paired instead of 4.

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s19_scripts/gdn_paired.py
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-01_s18_scripts"))
from gdn_tiles import sweep  # noqa: E402

cases = [(1, 64, "ddtree"), (1, 64, "deep"), (1, 65, "ddtree"), (1, 65, "deep"), (8, 64, "ddtree"), (8, 64, "deep")]
sweep(cases, [("default", {}), ("paired", dict(paired=True))])
