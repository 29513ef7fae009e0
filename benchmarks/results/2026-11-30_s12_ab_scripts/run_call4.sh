#!/usr/bin/env bash
# session 12, GPU call 4: build A/B with per-output checks; tree attention A/B (merge loads unrolled); GPU tests of
# the changed kernels and the engine's greedy generate
set -u
L=$OUT
echo "== ab build"; timeout 100 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py build main=ab/main s12=ab/s12 --out $L > $L/ab_build.log 2>&1; echo rc $?
echo "== ab attention"; timeout 100 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py attention main=ab/main s12=ab/s12 --out $L > $L/ab_attention.log 2>&1; echo rc $?
echo "== tests"; timeout 200 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_triton_tree_kernels.py tests/test_tree_attention.py tests/test_ddtree.py > $L/tests_kernels.log 2>&1; echo rc $?
echo "== engine"; timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; cat $L/ab_build.log; cat $L/ab_attention.log; tail -3 $L/tests_kernels.log; tail -3 $L/tests_engine.log
