#!/usr/bin/env bash
# session 12, GPU call 5: tree attention (merge unrolled for small grids) benchmark with its SDPA peer, prefix-split
# sweep; build + accept (final code); GPU attention tests
set -u
L=$OUT
echo "== attention bench"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_attention.py > $L/bench_attention.log 2>&1; echo rc $?
echo "== splits"; timeout 120 env PYTHONPATH=$PWD python3 ab/attn_splits.py > $L/attn_splits.log 2>&1; echo rc $?
echo "== ddtree"; timeout 100 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree.log 2>&1; echo rc $?
echo "== tests"; timeout 60 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -12 $L/bench_attention.log; cat $L/attn_splits.log; tail -7 $L/ddtree.log; tail -2 $L/tests_attention.log
