"""Session 19: the SASS lines of an Nsight Compute source page (`--page source --print-source sass --csv`) with the
most warp-stall samples, each with its two largest stall reasons.

    python3 benchmarks/results/2026-12-01_s19_scripts/ncu_top_lines.py X.csv [lines]
"""

import csv
import sys

rows = list(csv.reader(open(sys.argv[1])))
header, data = rows[1], rows[2:]
col = {h: i for i, h in enumerate(header)}
stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
num = lambda x: float(x) if x not in ("", "-") else 0.0  # noqa: E731
total = sum(num(r[col["Warp Stall Sampling (All Samples)"]]) for r in data) or 1.0
ranked = sorted(range(len(data)), key=lambda k: -num(data[k][col["Warp Stall Sampling (All Samples)"]]))
for k in ranked[: int(sys.argv[2]) if len(sys.argv) > 2 else 25]:
    r = data[k]
    top = sorted(stalls, key=lambda s: -num(r[col[s]]))[:2]
    reasons = ", ".join(f"{s[6:]} {num(r[col[s]]):.0f}" for s in top)
    share = 100 * num(r[col["Warp Stall Sampling (All Samples)"]]) / total
    print(f"{k:5d} {share:5.1f}%  {r[col['Source']].strip()[:70]:70s} {reasons}")
