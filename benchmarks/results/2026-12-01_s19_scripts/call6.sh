#!/usr/bin/env bash
# Session 19, call 6 (no carry; about 3 minutes): Nsight Compute on the build + accept kernels at R = 8, B = 64, 15
# deep (ddtree_once.py): the chunk statistics, the row top-k, the tree build and the path walk; per kernel the
# summary (ncu_sass_summary.py) and the SASS lines with the most stall samples (ncu_top_lines.py).
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s19_scripts
S=benchmarks/results/2026-12-01_s17_scripts
timeout 40 python3 $D/ddtree_once.py > $L/ddtree_once.log 2>&1; echo once rc $?
for k in _walk_kernel _row_topk_kernel _tree_build_kernel _chunk_stats_kernel; do
  timeout 60 ncu --set full --import-source yes -k regex:$k --launch-skip 1 -c 1 -o /tmp/$k python3 $D/ddtree_once.py > /dev/null 2>&1; echo ncu $k rc $?
  ncu --import /tmp/$k.ncu-rep --page source --print-source sass --csv > /tmp/$k.csv 2>/dev/null
  { ncu --import /tmp/$k.ncu-rep | grep -E "Duration|Registers Per|Achieved Occupancy|Waves Per|Memory Throughput|DRAM Throughput|Block Limit"
    python3 $S/ncu_sass_summary.py /tmp/$k.csv; python3 $D/ncu_top_lines.py /tmp/$k.csv 30; } > $L/ncu$k.txt 2>&1
done
echo "== summary"; cat $L/ddtree_once.log; for k in _walk_kernel _row_topk_kernel _tree_build_kernel _chunk_stats_kernel; do echo "== $k"; head -12 $L/ncu$k.txt; done
