#!/usr/bin/env bash
# Session 18, call 2: with both patches applied in the working tree (gdn_exp2, attention_unnormalised): their GPU
# tests, the GDN verify by V tile and warps (gdn_tiles.py), the GDN A/B again (ab/main against ab/exp2: noise on the
# 16-node chain), and Nsight Compute's profile of the GDN verify at R = 1 x 64.
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s18_scripts
timeout 150 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "triton_matches or wide_tiles or key_loop or stacked or in_place" > $L/tests_gdn.log 2>&1; echo rc $?
timeout 60 python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
timeout 150 python3 $D/gdn_tiles.py > $L/gdn_tiles.log 2>&1; echo rc $?
timeout 120 python3 benchmarks/ab_trees.py gdn main=ab/main exp2=ab/exp2 > $L/ab_gdn2.log 2>&1; echo rc $?
timeout 100 ncu --set full --import-source yes -k regex:_tree_gdn_fused_kernel --launch-skip 2 -c 1 -o $L/gdn64 python3 $D/gdn_tiles.py once > $L/ncu_run.txt 2>&1; echo rc $?
ncu --import $L/gdn64.ncu-rep --page source --print-source sass --csv > $L/gdn64_sass.csv 2>/dev/null
ncu --import $L/gdn64.ncu-rep > $L/ncu_details.txt 2>/dev/null; rm -f $L/gdn64.ncu-rep $L/ncu_run.txt
echo "== summary"; tail -1 $L/tests_gdn.log; tail -1 $L/tests_attention.log; cat $L/gdn_tiles.log; tail -11 $L/ab_gdn2.log | cut -c1-200
grep -E "Duration|Registers Per|Spilling Requests |Achieved Occupancy|Waves Per" $L/ncu_details.txt
