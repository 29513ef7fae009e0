#!/usr/bin/env bash
# session 11, GPU call 4: the greedy walk with LA rows a round (ab_trees walk, main vs the working tree at LA 1-8),
# build + accept with LA 1 and 4 (bench_ddtree), the walk tests on the GPU
set -u
cd "$(dirname "$0")/.."
L=$OUT
echo "== ab walk"; timeout 150 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py walk main=ab/main la=ab/la --out $L > $L/ab_walk.log 2>&1; echo rc $?
echo "== tests"; timeout 90 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_triton_tree_kernels.py -k "greedy_walk" > $L/tests_walk.log 2>&1; echo rc $?
echo "== ddtree LA1"; timeout 100 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree_la1.log 2>&1; echo rc $?
mv $L/ddtree_bench.json $L/ddtree_la1.json 2>/dev/null
echo "== ddtree LA4"; timeout 100 env PYTHONPATH=$PWD/ab/la4:$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree_la4.log 2>&1; echo rc $?
mv $L/ddtree_bench.json $L/ddtree_la4.json 2>/dev/null
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -8 $L/ab_walk.log; tail -2 $L/tests_walk.log; tail -7 $L/ddtree_la1.log; tail -7 $L/ddtree_la4.log
