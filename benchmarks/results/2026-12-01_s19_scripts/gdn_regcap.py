"""Session 19: the blocked GDN verify (working tree) by ptxas's register cap (`max_registers`; 255 is no cap, "rule"
is `register_cap`'s default), graph-timed, over batch sizes, for one-block trees of 16 and 17 nodes (where the rule
caps) and of 32, 33 nodes (where it does not: they spill at 168).

    PYTHONPATH=$PWD python3 benchmarks/results/2026-12-01_s19_scripts/gdn_regcap.py
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "2026-12-01_s18_scripts"))
from gdn_tiles import sweep  # noqa: E402

cases = [(r, 16, "chain") for r in (1, 2, 4, 8, 16, 32)]
cases += [(r, n, "ddtree") for n in (16, 17) for r in (4, 8, 16)] + [(r, n, "ddtree") for n in (32, 33) for r in (8, 16)]
sweep(
    cases,
    [("rule", {}), ("none", dict(max_registers=255)), ("cap168", dict(max_registers=168)), ("cap128", dict(max_registers=128))],
)
