#!/usr/bin/env bash
# Session 20, call 8 (no carry; about 3 minutes): the working tree with the pair-reading walk and LOOKAHEAD = 8:
# bench_ddtree's table for README, the walk tests on the GPU.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
timeout 100 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "walk or greedy" > $L/tests_walk.log 2>&1; echo tests rc $?
echo "== summary"; tail -7 $L/ddtree.log; tail -1 $L/tests_walk.log
