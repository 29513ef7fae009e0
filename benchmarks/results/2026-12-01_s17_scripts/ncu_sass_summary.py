"""Session 17: a short summary of an Nsight Compute source page (`ncu --import X.ncu-rep --page source --print-source
sass --csv > X.csv`): warp-stall samples by reason, and samples / executed warp-instructions by opcode.

    python3 benchmarks/results/2026-12-01_s17_scripts/ncu_sass_summary.py X.csv
"""

import collections
import csv
import re
import sys


def number(x: str) -> float:
    return float(x) if x not in ("", "-") else 0.0


rows = list(csv.reader(open(sys.argv[1])))
header, data = rows[1], rows[2:]
col = {h: i for i, h in enumerate(header)}
stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]
by_reason = collections.Counter({s: sum(number(r[col[s]]) for r in data) for s in stalls})
total = sum(by_reason.values())
executed = sum(number(r[col["Instructions Executed"]]) for r in data)
print(f"{len(data)} SASS instructions, {executed:.0f} warp-instructions executed, {total:.0f} stall samples")
print("stall reasons: " + ", ".join(f"{s[6:]} {100 * v / total:.1f}%" for s, v in by_reason.most_common(10)))
samples, counts = collections.Counter(), collections.Counter()
for r in data:
    op = re.sub(r"^\s*@!?U?P\w+\s+", "", r[col["Source"]]).split()[0].split(".")[0]
    samples[op] += number(r[col["Warp Stall Sampling (All Samples)"]])
    counts[op] += number(r[col["Instructions Executed"]])
print("opcode: samples %, executed %")
for op, v in samples.most_common(20):
    print(f"  {op:10s} {100 * v / total:5.1f}  {100 * counts[op] / executed:5.1f}")
