#!/usr/bin/env bash
# session 12, GPU call 6: the one-wave split rule against the old one; the attention benchmark; GPU attention tests
set -u
L=$OUT
echo "== splits"; timeout 150 env PYTHONPATH=$PWD python3 ab/attn_splits2.py > $L/attn_splits2.log 2>&1; echo rc $?
echo "== attention bench"; timeout 100 env PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_attention.py > $L/bench_attention.log 2>&1; echo rc $?
echo "== tests"; timeout 60 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; cat $L/attn_splits2.log; tail -4 $L/bench_attention.log; tail -2 $L/tests_attention.log
