#!/usr/bin/env bash
# Session 22, call 6 (ab/ travels as untracked files). The tree build (`kernels/tree_build`):
#   ab/main  HEAD (4e7a28b)
#   ab/tail  first child and next sibling as [FB, NN] reductions (FB = 64 nodes a step, each against every node),
#            instead of a global atomic_min, a sort of NN keys and two barriers with their store / load round trips
#            (ptxas sm_90a: 114 -> 106 registers at B = 64, 218 -> 200 at B = 256, no spills)
# Then, with the working tree (= ab/tail): the GPU tests of the tree build and the DDTree API, and bench_ddtree.
set -u
L=$OUT
export PYTHONPATH=$PWD
timeout 200 python3 benchmarks/ab_trees.py build main=ab/main tail=ab/tail --out $L > $L/ab_build.log 2>&1; echo build rc $?
timeout 150 python3 -m pytest -q tests/test_triton_tree_kernels.py tests/test_ddtree.py -k "build or tree or ddtree" > $L/tests_build.log 2>&1; echo tests rc $?
timeout 150 python3 benchmarks/bench_ddtree.py --requests 1,8 --budgets 16,64 --out $L > $L/ddtree.log 2>&1; echo ddtree rc $?
echo "== summary"
grep -v "^\s*$" $L/ab_build.log | tail -8; tail -1 $L/tests_build.log; tail -5 $L/ddtree.log
