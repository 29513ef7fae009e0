#!/usr/bin/env bash
# session 12, GPU call 7: the attention benchmark with the new default splits; GPU attention tests; the engine's
# greedy generate (it runs the tree attention with the new defaults)
set -u
L=$OUT
echo "== attention bench"; timeout 90 env PYTHONPATH=$PWD python3 benchmarks/kernels/bench_tree_attention.py > $L/bench_attention.log 2>&1; echo rc $?
echo "== tests"; timeout 60 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_attention.py > $L/tests_attention.log 2>&1; echo rc $?
echo "== engine"; timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -4 $L/bench_attention.log; tail -2 $L/tests_attention.log; tail -2 $L/tests_engine.log
