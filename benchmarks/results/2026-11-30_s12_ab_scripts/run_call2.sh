#!/usr/bin/env bash
# session 12, GPU call 2: row top-k phases; vocabulary pass + tree build A/B (one-pass compaction); walk A/B (packed
# span keys) with the mid case; build + accept
set -u
L=$OUT
echo "== probe2"; timeout 100 env PYTHONPATH=$PWD python3 ab/probe2.py > $L/probe2.log 2>&1; echo rc $?
echo "== ab build"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py build main=ab/main s12=ab/s12 --out $L > $L/ab_build.log 2>&1; echo rc $?
echo "== ab walk"; timeout 180 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py walk main=ab/main s12=ab/s12 --out $L > $L/ab_walk.log 2>&1; echo rc $?
echo "== ddtree"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; cat $L/probe2.log; cat $L/ab_build.log; cat $L/ab_walk.log; tail -8 $L/ddtree.log
