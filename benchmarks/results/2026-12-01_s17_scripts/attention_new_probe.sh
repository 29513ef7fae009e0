#!/usr/bin/env bash
# Session 17, after attention_ab_call.sh: the A/B again (noise), the bench's sweep and the kernel-alone decomposition
# with the working tree's kernel, and its Nsight Compute stall profile at R = 1 x 64 nodes.
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s17_scripts
timeout 150 python3 benchmarks/ab_trees.py attention main=ab/main new=ab/new --out $L > $L/ab_attention2.log 2>&1; echo rc $?
timeout 120 python3 benchmarks/kernels/bench_tree_attention.py --sweep > $L/sweep.log 2>&1; echo rc $?
timeout 120 python3 $D/attention_decompose.py > $L/decompose.log 2>&1; echo rc $?
timeout 120 ncu --set full --import-source yes -k regex:_tree_attention_kernel --launch-skip 2 -c 1 -o $L/attn64 python3 $D/attention_once.py 64 > $L/ncu_run.txt 2>&1; echo rc $?
ncu --import $L/attn64.ncu-rep --page source --print-source sass --csv > $L/attn64_sass.csv 2>/dev/null; echo rc $?
ncu --import $L/attn64.ncu-rep > $L/ncu_details.txt 2>/dev/null; rm -f $L/attn64.ncu-rep
echo "== summary"; tail -3 $L/ab_attention2.log | cut -c1-200; grep sweep $L/sweep.log | cut -c1-150; cat $L/decompose.log
grep -E "Duration|Registers Per|Spilling Requests " $L/ncu_details.txt
