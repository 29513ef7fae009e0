#!/usr/bin/env bash
# Session 13, call 2: the ancestor-gather GDN verify dispatched (gather_tables): GPU tests, engine end to end, bench.
set -u
L=$OUT
python3 -m pip install -q --no-index --no-deps --target /tmp/site .whl/fla_core*.whl > $L/pip.log 2>&1
echo "== gpu tests"
timeout 150 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_tree_gdn_kernel.py -k "gather or dispatch" > $L/tests.log 2>&1; echo rc $?
echo "== engine"
timeout 200 env PYTHONPATH=$PWD python3 -m pytest -q -x tests/test_engine.py -k cuda_generate --durations=3 > $L/tests_engine.log 2>&1; echo rc $?
echo "== bench_tree_gdn"
timeout 300 env PYTHONPATH=$PWD:/tmp/site python3 benchmarks/kernels/bench_tree_gdn.py .whl/sglang-0.5.10.post1-py3-none-any.whl > $L/bench_tree_gdn.log 2>&1; echo rc $?
cd $L && tar czf logs.tgz *.log *.json 2>/dev/null
echo "== summary"; tail -3 $L/tests.log; tail -5 $L/tests_engine.log; sed -n '/^ R    N/,$p' $L/bench_tree_gdn.log
