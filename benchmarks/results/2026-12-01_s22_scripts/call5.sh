#!/usr/bin/env bash
# Session 22, call 5 (ab/ travels as untracked files): bench_ddtree with the working tree (the barrier counters kept
# between calls, call 4's `ctr`), then the vocabulary pass's row top-k by warps (`ab_trees.py build`):
#   ab/main  the working tree (16 warps);  ab/rt8, ab/rt32  the row top-k at 8 / 32 warps
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
timeout 200 python3 benchmarks/ab_trees.py build main=ab/main rt8=ab/rt8 rt32=ab/rt32 --out $L > $L/ab_build.log 2>&1; echo build rc $?
echo "== summary"
tail -3 $L/ddtree.log; grep -v "^\s*$" $L/ab_build.log | tail -12
