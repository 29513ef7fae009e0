#!/usr/bin/env bash
# Session 13, call 4: the one-launch ancestor tables and the walk at 8 warps, on the GPU: tests, engine end to end,
# the walk A/B (ab/: main = the working tree, w4b8k = 4 warps and spans loaded 8192 entries at a time, w8b8k = 8 warps
# and 8192), bench_tree_gdn (tables per step), bench_ddtree.
set -u
L=$OUT
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > $L/pip.log 2>&1
echo "== gpu tests"
timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_gdn_kernel.py -k "ancestor or gather" tests/test_triton_tree_kernels.py > $L/tests.log 2>&1; echo rc $?
timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_engine.py -k cuda_generate > $L/tests_engine.log 2>&1; echo rc $?
echo "== walk A/B"; timeout 150 env PYTHONPATH=$PWD python3 benchmarks/ab_trees.py walk main=ab/main w4b8k=ab/w4b8k w8b8k=ab/w8b8k --out $L > $L/ab_walk.log 2>&1; echo rc $?
echo "== bench_ddtree"; timeout 120 env PYTHONPATH=$PWD python3 benchmarks/bench_ddtree.py --out $L --requests 1,8 --budgets 16,64 > $L/ddtree.log 2>&1; echo rc $?
echo "== bench_tree_gdn"; timeout 240 env PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -2 $L/tests.log; tail -2 $L/tests_engine.log; grep "^R=" $L/ab_walk.log; tail -7 $L/ddtree.log; sed -n '/two verify kernels/,/chains against/p' $L/bench_tree_gdn.log
