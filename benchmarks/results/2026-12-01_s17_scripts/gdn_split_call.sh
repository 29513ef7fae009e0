#!/usr/bin/env bash
# Session 17: the split GDN verify against one launch; the GDN and attention kernels' GPU tests; the attention bench.
set -u
L=$OUT
export PYTHONPATH=$PWD
D=benchmarks/results/2026-12-01_s17_scripts
timeout 200 python3 $D/gdn_split_ab.py > $L/gdn_split_ab.log 2>&1; echo rc $?
timeout 150 python3 -m pytest -q tests/test_tree_gdn_kernel.py -k "split or wide_tiles or key_loop" > $L/tests_gdn.log 2>&1; echo rc $?
timeout 60 python3 -m pytest -q tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
timeout 90 python3 benchmarks/kernels/bench_tree_attention.py > $L/bench_tree_attention.log 2>&1; echo rc $?
echo "== summary"; cat $L/gdn_split_ab.log | cut -c1-200; tail -1 $L/tests_gdn.log; tail -1 $L/tests_attention.log
grep -E '^\{' $L/bench_tree_attention.log | cut -c1-200
